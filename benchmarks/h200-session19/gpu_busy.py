#!/usr/bin/env python3
"""GPU busy time of a VKASYNC_TRACE file per GPU track, over the stretches where it has work:
submissions are split into runs at idle gaps over 1 ms (a repetition's end), and each run's
busy share (union of submission spans) and the gaps inside it are reported. Usage: gpu_busy.py t.json[.gz]"""
import json, gzip, collections, sys, statistics as S
path = sys.argv[1]
ev = json.load(gzip.open(path) if path.endswith('.gz') else open(path))
ev = ev['traceEvents'] if isinstance(ev, dict) else ev
names = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e.get('ph') == 'M' and e['name'] == 'thread_name'}
gpu = collections.defaultdict(list)
for e in ev:
    if e.get('ph') == 'X' and e['pid'] == 2: gpu[e['tid']].append(e)
for tid, es in sorted(gpu.items()):
    subs = sorted((e for e in es if e['name'].startswith('submission')), key=lambda e: e['ts'])
    runs = [[subs[0]]]
    for p, s in zip(subs, subs[1:]):
        (runs[-1].append(s) if s['ts'] - (p['ts'] + p['dur']) < 1000 else runs.append([s]))
    print(f"gpu {names.get((2, tid), tid)}")
    for r in runs:
        if len(r) < 5: continue
        a, b = r[0]['ts'], max(s['ts'] + s['dur'] for s in r)
        m = []
        for s in r:
            x, y = s['ts'], s['ts'] + s['dur']
            if m and x <= m[-1][1]: m[-1][1] = max(m[-1][1], y)
            else: m.append([x, y])
        busy = sum(y - x for x, y in m)
        gaps = [q[0] - p[1] for p, q in zip(m, m[1:])]
        cmds = [s['args'].get('commands', 0) for s in r]
        print(f"  run {(b-a)/1e3:7.1f} ms: {len(r):4d} submissions, busy {100*busy/(b-a):3.0f} %, "
              f"gap median {S.median(gaps) if gaps else 0:6.1f} us mean {S.mean(gaps) if gaps else 0:6.1f}, "
              f"commands/submission median {S.median(cmds)}")
