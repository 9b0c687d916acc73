#!/usr/bin/env python3
"""GPU submissions of a vkasync trace (VKASYNC_TRACE) overlapping in time: their count, the sum
of their GPU durations, the union of their intervals (the GPU time when at least one ran), how
many started before the previous one ended, and the GPU time by kind of command.
Usage: trace_overlap.py trace.json[.gz] [...]"""
import gzip, json, sys

for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    subs = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in ev
        if e.get("ph") == "X" and e["pid"] == 2 and e["name"].startswith("submission")
    )
    total = sum(b - a for a, b in subs)
    union, cur, overlapping = 0, None, 0
    for a, b in subs:
        if cur and a < cur[1]:
            overlapping += 1
            cur = (cur[0], max(cur[1], b))
        else:
            if cur:
                union += cur[1] - cur[0]
            cur = (a, b)
    if cur:
        union += cur[1] - cur[0]
    kinds = {}
    for e in ev:
        if e.get("ph") == "X" and e["pid"] == 2 and not e["name"].startswith("submission") and e["name"] != "phase":
            k = e["name"].split(" ")[0]
            kinds[k] = kinds.get(k, 0) + e["dur"]
    print(
        f"{path}: {len(subs)} submissions; GPU time summed {total / 1e3:.1f} ms, as a union "
        f"{union / 1e3:.1f} ms; {overlapping} started before the previous ended; "
        f"{ {k: round(v / 1e3, 1) for k, v in kinds.items() if v > 0} }"
    )
