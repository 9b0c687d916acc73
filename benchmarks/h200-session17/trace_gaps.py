#!/usr/bin/env python3
"""Per repetition of a `bench_tasks --modes executor-traced --tasks 1000` trace: wall time,
time in task polls, GPU busy time, submissions, the gaps between them, and which threads flushed."""
import collections, json, sys

ev = json.load(open(sys.argv[1]))
ev = ev['traceEvents'] if isinstance(ev, dict) else ev
names = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e.get('ph') == 'M' and e['name'] == 'thread_name'}
ev = [e for e in ev if 'ts' in e]
for e in ev:
    e.setdefault('dur', 0)
tasks = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
spawns = sorted(e['ts'] for e in ev if e['name'] == 'spawn')
reps = [spawns[i * tasks] for i in range(len(spawns) // tasks)]
for r, start in enumerate(reps):
    end_lim = reps[r + 1] if r + 1 < len(reps) else 1e30
    E = [e for e in ev if start <= e['ts'] < end_lim]
    polls = [e for e in E if e['name'] == 'poll']
    end = max(e['ts'] + e['dur'] for e in polls)
    subs = sorted([e for e in E if e['pid'] == 2 and e['name'].startswith('submission')], key=lambda e: e['ts'])
    flushers = collections.Counter(names.get((1, e['tid']), e['tid']) for e in E if e['name'] == 'flush')
    gaps = [round(subs[i + 1]['ts'] - (subs[i]['ts'] + subs[i]['dur'])) for i in range(len(subs) - 1)]
    print(f"rep {r}: wall {end - start:.0f} us, polls {sum(e['dur'] for e in polls):.0f} us, "
          f"GPU busy {sum(e['dur'] for e in subs):.0f} us in {len(subs)} submissions, flushes by {dict(flushers)}")
    print(f"  submission us: {[round(e['dur']) for e in subs]}")
    print(f"  gaps us: {gaps}")
