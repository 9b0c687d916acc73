#!/usr/bin/env python3
"""Per repetition of a traced run of the native executor (VKASYNC_TRACE, `tls_pipeline --modes
staged`): how many tasks were polled twice, and the mean time of a task's first poll (it records
its record's work) and of its second (it reads its tag once the flush completed), in µs. A
repetition is a run of consecutive task ids. Usage: trace_polls.py trace.json[.gz] [...]"""
import collections
import gzip
import json
import statistics
import sys

for path in sys.argv[1:]:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        d = json.load(f)
    ev = d["traceEvents"] if isinstance(d, dict) else d
    polls = collections.defaultdict(list)
    for e in sorted((e for e in ev if e.get("name") == "poll" and e.get("ph") == "X"), key=lambda e: e["ts"]):
        polls[e["args"]["task"]].append(e["dur"])
    ids = sorted(polls)
    runs = [[ids[0]]]
    for i in ids[1:]:
        if i - runs[-1][-1] > 3:
            runs.append([])
        runs[-1].append(i)
    out = []
    for r in runs:
        two = [t for t in r if len(polls[t]) == 2]
        if len(two) < 1000:
            continue
        first = statistics.mean(polls[t][0] for t in two)
        second = statistics.mean(polls[t][1] for t in two)
        out.append((len(two), round(first, 3), round(second, 3)))
    print(path.split("/")[-1], "(tasks, first poll µs, second poll µs)", out)
