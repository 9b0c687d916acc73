#!/usr/bin/env python3
"""Per queue of a vkasync trace (VKASYNC_TRACE): flushes, records waited for, the span from the
first flush to the GPU's last submission end, the GPU's busy time (the union of its submissions'
spans) and, where submissions ran at once, how much of their time overlapped, the time by kind
of command, and the host's time in flushes (encode_batches: the batch kinds' tables; encode: the
command buffer; submit). Usage: trace_summary.py trace.json [...]"""
import collections, gzip, json, sys


def union(spans):
    """The total length of the union of (start, duration) spans."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if a + b > end:
            total += a + b - max(a, end)
            end = a + b
    return total


for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    gpu, flushes = collections.defaultdict(list), collections.defaultdict(list)
    kinds = collections.defaultdict(float)
    for e in ev:
        if e.get("ph") != "X":
            continue
        if e["pid"] == 2 and e["name"].startswith("submission"):
            gpu[e["tid"]].append((e["ts"], e["dur"]))
        elif e["pid"] == 2 and e["name"] != "phase":
            kinds[(e["tid"], e["name"].split(" ")[0])] += e["dur"]
        elif e["name"] == "flush":
            flushes[e["args"].get("queue")].append(e)
    print(f"## {path}")
    for q in sorted(flushes):
        fl, g = flushes[q], gpu.get(q, [])
        if not g:
            continue
        t0 = min(e["ts"] for e in fl)
        t1 = max(a + b for a, b in g)
        host = collections.Counter()
        for e in ev:
            if e.get("ph") == "X" and e["pid"] == 1 and t0 <= e["ts"] <= t1 and e["name"] in ("encode_batches", "encode", "submit"):
                host[e["name"]] += e["dur"]
        busy, summed = union(g), sum(b for _, b in g)
        by_kind = {k[1]: round(v / 1000, 2) for k, v in kinds.items() if k[0] == q}
        print(
            f"queue {q}: {len(fl)} flushes, {sum(e['args'].get('waiters', 0) for e in fl)} waiters, "
            f"span {(t1 - t0) / 1000:.2f} ms, GPU busy {busy / 1000:.2f} ms (overlapped {(summed - busy) / 1000:.2f}) {by_kind}, "
            f"host in flushes {sum(e['dur'] for e in fl) / 1000:.2f} ms "
            f"{ {k: round(v / 1000, 2) for k, v in host.items()} }"
        )
