#!/usr/bin/env python3
"""Traced ÷ plain executor per process (median µs per task, from bench_tasks.csv), summarised per
build and T. Usage: ratios.py RUN_DIR [traced-mode] (directories BUILD-N/ with bench_tasks.csv)."""
import csv, glob, os, statistics, sys

run = sys.argv[1]
traced = sys.argv[2] if len(sys.argv) > 2 else "executor-traced"
rows = {}
for d in sorted(glob.glob(os.path.join(run, "*-*"))):
    f = os.path.join(d, "bench_tasks.csv")
    if not os.path.exists(f):
        continue
    build = os.path.basename(d).rsplit("-", 1)[0]
    med = {}
    for r in csv.DictReader(open(f)):
        med[(r["mode"], int(r["T"]))] = float(r["median_us_per_task"])
    for (mode, t), v in med.items():
        if mode == traced and ("executor", t) in med:
            rows.setdefault((build, t), []).append((v / med[("executor", t)], med[("executor", t)], v))
print("build,T,processes,median,mean,q1,q3,min,max,le_1.10,plain_median_us,traced_median_us")
for (build, t), xs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    r = sorted(x[0] for x in xs)
    q = statistics.quantiles(r, n=4) if len(r) > 1 else [r[0]] * 3
    print(f"{build},{t},{len(r)},{statistics.median(r):.3f},{statistics.mean(r):.3f},{q[0]:.3f},{q[2]:.3f},"
          f"{r[0]:.3f},{r[-1]:.3f},{sum(x <= 1.10 for x in r)},{statistics.median(x[1] for x in xs):.2f},"
          f"{statistics.median(x[2] for x in xs):.2f}")
