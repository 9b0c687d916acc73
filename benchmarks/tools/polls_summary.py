#!/usr/bin/env python3
"""Sums the share tasks' poll log of a `tls_pipeline --modes staged-shares` run built from the
`dbg-polls` branch (`VKASYNC_BENCH_POLLS=FILE`: one line per poll of a share's task: the
repetition's wall time in µs, share, thread, start and duration in µs, records completed in the
poll, the thread's CPU µs in it, voluntary and involuntary context switches in it). Per
repetition: the polls that completed records, their wall and CPU time in all, and the voluntary
switches (a thread that blocked, on a lock or a page, during the poll); with -v, each share's
polls. Usage: polls_summary.py FILE [-v]"""
import collections
import sys

rows = [l.strip().split(",") for l in open(sys.argv[1]) if l.strip()]
reps = collections.OrderedDict()
for r in rows:
    reps.setdefault(r[0], []).append(r)
for rep, rs in reps.items():
    t0 = min(float(r[3]) for r in rs)
    done = [r for r in rs if int(r[5]) > 0]
    wall = sum(float(r[4]) for r in done)
    cpu = sum(float(r[6]) for r in done)
    vcs = sum(int(r[7]) for r in done)
    first = min(float(r[3]) for r in done) - t0
    last = max(float(r[3]) + float(r[4]) for r in done) - t0
    print(f"repetition of {rep} µs: {len(done)} polls completed records, wall {wall:.0f} µs, "
          f"CPU {cpu:.0f} µs, {vcs} voluntary switches; completions from {first:.0f} to {last:.0f} µs")
    if "-v" in sys.argv:
        by_share = collections.defaultdict(list)
        for r in done:
            by_share[int(r[1])].append(r)
        for s, v in sorted(by_share.items()):
            polls = " ".join(f"[{float(r[3]) - t0:.0f}+{float(r[4]):.0f} n={r[5]} cpu={float(r[6]):.0f} "
                             f"vcs={r[7]}]" for r in v)
            print(f"  share {s:2}: {polls}")
