#!/usr/bin/env python3
"""The `Offload::Auto` sweep of `targets_gpu.sh` (`r/auto/csv/auto-C-SIZE.csv`): per record size
and connection count, `auto` ÷ the better of `host` and `coalesced` (throughput; the target is
at least 0.9), and the host path's time per record ÷ a plain RustCrypto loop's (`cpu-1`) at
10,000 connections. Usage: auto_table.py DIR/r/auto/csv"""
import csv, glob, os, re, sys

d = sys.argv[1]
rows = {}
for p in glob.glob(os.path.join(d, "auto-*-*.csv")):
    c, s = map(int, re.match(r"auto-(\d+)-(\d+)\.csv", os.path.basename(p)).groups())
    rows[(s, c)] = {r["mode"]: float(r["gb_per_s"]) for r in csv.DictReader(open(p))}
for s in sorted({k[0] for k in rows}):
    ratios = []
    for c in sorted(k[1] for k in rows if k[0] == s):
        m = rows[(s, c)]
        ratios.append(f"{c}: {m['auto'] / max(m['host'], m['coalesced']):.2f}")
    print(f"{s:6} B  auto / better of host and coalesced  " + ", ".join(ratios))
    top = rows.get((s, 10000))
    if top:
        print(f"{s:6} B  host path time per record / plain loop's at 10,000 connections  {top['cpu-1'] / top['host']:.2f}")
