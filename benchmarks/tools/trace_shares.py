#!/usr/bin/env python3
"""Per repetition of a traced `tls_pipeline --modes staged-shares` run (VKASYNC_TRACE): when each
share's records completed (their `await` spans' ends, grouped by context: one context per share),
on which threads, and the driver's flushes, waits, wakes and releases around them, in µs from the
repetition's first await. Shows whether the shares' completions ran at once or one after another.
Usage: trace_shares.py trace.json[.gz] [REPS] (the last REPS repetitions of 1,000 awaits or more;
default 2)."""
import collections
import gzip
import json
import sys

path = sys.argv[1]
last = int(sys.argv[2]) if len(sys.argv) > 2 else 2
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt") as f:
    d = json.load(f)
ev = d["traceEvents"] if isinstance(d, dict) else d
names = {e["tid"]: e["args"]["name"] for e in ev if e.get("ph") == "M" and e.get("name") == "thread_name"}
aw = [e for e in ev if e.get("name") == "await" and "ts" in e]
begins = {e["id"]: e for e in aw if e["ph"] == "b"}
ends = {e["id"]: e for e in aw if e["ph"] == "e"}
starts = sorted(e["ts"] for e in begins.values())
reps = [[starts[0], starts[0], 0]]
for t in starts[1:]:
    if t - reps[-1][1] > 20000:
        reps.append([t, t, 0])
    reps[-1][1] = t
    reps[-1][2] += 1
reps = [r for r in reps if r[2] >= 1000][-last:]
for a, b, n in reps:
    by_ctx = collections.defaultdict(list)
    for i, e in begins.items():
        if a - 1 <= e["ts"] <= b + 1 and i in ends:
            by_ctx[e["args"]["ctx"]].append((ends[i]["ts"] - a, ends[i]["tid"]))
    end = max(t for v in by_ctx.values() for t, _ in v)
    print(f"repetition at {a:.0f} µs: {n + 1} awaits, the last done {end:.0f} µs after the first began")
    for e in sorted((e for e in ev if e.get("ph") == "X" and "ts" in e and e.get("name") in
                     ("flush", "wait", "wake", "release", "sleep") and a - 10 <= e["ts"] <= a + end),
                    key=lambda e: e["ts"]):
        who = names.get(e["tid"], e["tid"])
        print(f"  {e['name']:8} {who:16} at {e['ts'] - a:9.0f} for {e.get('dur', 0):7.0f}  {e.get('args')}")
    print("  share (ctx): records, first done, 10th/50th/90th percentile, last; threads")
    for c, v in sorted(by_ctx.items(), key=lambda kv: sorted(t for t, _ in kv[1])[len(kv[1]) // 2]):
        t = sorted(x for x, _ in v)
        tids = collections.Counter(tid for _, tid in v).most_common(3)
        print(f"  {c:5} {len(t):5} {t[0]:8.0f} {t[len(t) // 10]:8.0f} {t[len(t) // 2]:8.0f} "
              f"{t[9 * len(t) // 10]:8.0f} {t[-1]:8.0f}  {tids}")
