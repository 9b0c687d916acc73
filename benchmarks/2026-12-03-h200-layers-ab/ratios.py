#!/usr/bin/env python3
"""Pair-wise ratios new/old from run.sh's results folder (argument: the unpacked r/ folder).
Mix: median µs per task (lower is better), ratio new/old. Sealing: GB/s (higher is better),
ratio old/new, so that below 1 means the new code is faster in both."""
import csv, glob, os, re, statistics, sys
r = sys.argv[1]
# The run's folder (tasks-B-I/bench_tasks.csv, seal-B-I.csv) or the committed one (csv/).
flat = os.path.isdir(f'{r}/csv')
tasks = (lambda b, i: f'{r}/csv/tasks-{b}-{i}.csv') if flat else (lambda b, i: f'{r}/tasks-{b}-{i}/bench_tasks.csv')
seal = (lambda b, i: f'{r}/csv/seal-{b}-{i}.csv') if flat else (lambda b, i: f'{r}/seal-{b}-{i}.csv')
pairs = sorted({int(m.group(1)) for f in os.listdir(f'{r}/csv' if flat else r) for m in [re.match(r'tasks-old-(\d+)(\.csv)?$', f)] if m})
rows = {}
for i in pairs:
    for b in ('old', 'new'):
        for row in csv.DictReader(open(tasks(b, i))):
            rows.setdefault((f"mix {row['mode']} T={row['T']}", b, i), float(row['median_us_per_task']))
        p = seal(b, i)
        if os.path.exists(p):
            for row in csv.DictReader(open(p)):
                rows[(f"seal {row['mode']} 10,000 x 16 KiB", b, i)] = 1.0 / float(row['gb_per_s'])
print('| case | pairs | median new/old | min | max | old median | new median |')
print('| --- | --- | --- | --- | --- | --- | --- |')
for case in sorted({k[0] for k in rows}):
    rs = [rows[(case, 'new', i)] / rows[(case, 'old', i)] for i in pairs if (case, 'new', i) in rows and (case, 'old', i) in rows]
    old = [rows[(case, 'old', i)] for i in pairs if (case, 'old', i) in rows]
    new = [rows[(case, 'new', i)] for i in pairs if (case, 'new', i) in rows]
    unit = (lambda v: f'{1/v:.3f} GB/s') if case.startswith('seal') else (lambda v: f'{v:.2f} µs')
    print(f'| {case} | {len(rs)} | {statistics.median(rs):.3f} | {min(rs):.3f} | {max(rs):.3f} | {unit(statistics.median(old))} | {unit(statistics.median(new))} |')
