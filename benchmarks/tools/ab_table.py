#!/usr/bin/env python3
"""An `ab_h200.sh` folder's `summary.csv` as one line per record size, mode and build: each
round's process median GB/s, its slowest and fastest runs, host CPU µs per record, and (where
recorded) the steal time of all CPUs while it ran.
Usage: ab_table.py DIR/summary.csv"""
import csv,collections,sys
rows=[r for r in csv.DictReader(open(sys.argv[1])) if r['process']!='warm']
d=collections.defaultdict(dict)
for r in rows:
    p=r['process']; rnd=p.rsplit('-',1)[1]
    build='cpu' if r['mode']=='cpu-all' else p.rsplit('-',2)[1]
    st=r.get('steal_pct') or ''
    d[(int(r['record_bytes']),r['mode'],build)][rnd]=(float(r['gb_per_s']),float(r['cpu_us_per_record'] or 0),r['flushes'],float(r['gb_per_s_min']),float(r['gb_per_s_max']),f" st {st}%" if st else "")
for k in sorted(d):
    v=d[k]; print(f"{k[0]:6} {k[1]:14} {k[2]:5} "+"  ".join(f"r{x}: {v[x][0]:6.2f} [{v[x][3]:.2f}-{v[x][4]:.2f}] {v[x][1]:5.1f}us{v[x][5]}" for x in sorted(v)))
