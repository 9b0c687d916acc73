#!/usr/bin/env python3
"""The first flush of every queue in a vkasync trace (VKASYNC_TRACE): its host time and, inside
it, the time spent in `encode_batches` and `encode`, one line per queue in order.
Usage: first_flush.py trace.json[.gz]"""
import gzip, json, sys

path = sys.argv[1]
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt") as f:
    d = json.load(f)
ev = sorted(d["traceEvents"] if isinstance(d, dict) else d, key=lambda e: e.get("ts", 0))
seen = set()
for f in (e for e in ev if e.get("pid") == 1 and e.get("name") == "flush"):
    q = f["args"]["queue"]
    if q in seen:
        continue
    seen.add(q)
    inner = {e["name"]: e["dur"] for e in ev if e.get("pid") == 1 and e.get("tid") == f["tid"]
             and e.get("name") in ("encode_batches", "encode") and f["ts"] <= e["ts"] <= f["ts"] + f["dur"]}
    print(f"queue {q}: flush {f['dur']:.0f} µs, encode_batches {inner.get('encode_batches', 0):.0f}, "
          f"encode {inner.get('encode', 0):.0f}")
