#!/usr/bin/env python3
"""The median GB/s of each process in `runs/` (10,000 connections x one 16 KiB record, the
native executor's `staged` front), grouped as `run.sh` ran them. Usage: table.py [DIR]"""
import csv, glob, os, statistics, sys
d = sys.argv[1] if len(sys.argv) > 1 else os.path.dirname(os.path.abspath(__file__))
med = {os.path.basename(p)[:-4]: statistics.median(float(r["gb_per_s"]) for r in csv.DictReader(open(p)))
       for p in glob.glob(os.path.join(d, "runs", "*.csv"))}
print("pinned to CPU c, pass 1 then pass 2 (GB/s)")
for c in range(16):
    print(f"  cpu {c:2}: {med.get(f'pin-{c}-1', 0):5.2f} {med.get(f'pin-{c}-2', 0):5.2f}")
print(f"  unpinned after each pass: {med.get('free-1', 0):.2f} {med.get('free-2', 0):.2f}")
print("in-place keys (4715b14) against b24dada, pinned, alternating")
for r in range(1, 5):
    for c in (4, 11):
        b, n = med.get(f"ab-base-{c}-{r}", 0), med.get(f"ab-new-{c}-{r}", 0)
        print(f"  round {r} cpu {c:2}: base {b:5.2f} new {n:5.2f} ({n / b if b else 0:.2f}x)")
print("glibc malloc tunables, pinned to CPU 4")
for r in range(1, 4):
    print(f"  round {r}: none {med.get(f'tun-none-{r}', 0):5.2f} hugetlb=1 {med.get(f'tun-thp-{r}', 0):5.2f}"
          f" tcache_count=1000 {med.get(f'tun-tcache-{r}', 0):5.2f}")
