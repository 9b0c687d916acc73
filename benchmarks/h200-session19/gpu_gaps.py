#!/usr/bin/env python3
"""Where a GPU's idle time goes, from a VKASYNC_TRACE file (plain or gzipped), per GPU track, over
the last 45 % of the run. For each submission: the GPU's idle gap before it, split into
  late:   the previous submission ended, and the flush of this one had not started yet;
  encode: the flush ran (encode, submit) while the GPU was idle;
  launch: from the end of vkQueueSubmit to the GPU's first timestamp.
Also: busy fraction, commands per submission, who flushed. Usage: gpu_gaps.py t.json[.gz]"""
import json, gzip, collections, sys, statistics as S

path = sys.argv[1]
ev = json.load(gzip.open(path) if path.endswith('.gz') else open(path))
ev = ev['traceEvents'] if isinstance(ev, dict) else ev
names = {(e['pid'], e['tid']): e['args']['name'] for e in ev if e.get('ph') == 'M' and e['name'] == 'thread_name'}
X = [e for e in ev if e.get('ph') == 'X']
t0 = min(e['ts'] for e in X); t1 = max(e['ts'] + e.get('dur', 0) for e in X)
ws = t0 + (t1 - t0) * 0.55
flush = {}  # value -> (start, end, thread, submit_end)
subs_host = [e for e in X if e['pid'] == 1 and e['name'] == 'submit']
for e in X:
    if e['pid'] == 1 and e['name'] == 'flush' and e['args'].get('value'):
        flush[(e['args']['value'], e['tid'])] = e
# submit spans by thread, sorted, to find the one inside each flush
by_tid = collections.defaultdict(list)
for e in subs_host: by_tid[e['tid']].append(e)
for l in by_tid.values(): l.sort(key=lambda e: e['ts'])
def submit_end(f):
    for s in by_tid.get(f['tid'], []):
        if s['ts'] >= f['ts'] and s['ts'] + s['dur'] <= f['ts'] + f['dur'] + 1e-3: return s['ts'] + s['dur']
    return f['ts'] + f['dur']
flushes_by_value = collections.defaultdict(list)
for (v, tid), f in flush.items(): flushes_by_value[v].append(f)
gpu = collections.defaultdict(list)
for e in X:
    if e['pid'] == 2 and e['name'].startswith('submission'): gpu[e['tid']].append(e)
for tid, subs in sorted(gpu.items()):
    subs.sort(key=lambda e: e['ts'])
    subs = [s for s in subs if s['ts'] >= ws]
    if len(subs) < 3: continue
    win = subs[-1]['ts'] + subs[-1]['dur'] - subs[0]['ts']
    busy = sum(s['dur'] for s in subs)
    late = enc = launch = 0.0; overlapped = 0; who = collections.Counter(); cmds = []
    for p, s in zip(subs, subs[1:]):
        cmds.append(s['args'].get('commands', 0))
        gap = max(0.0, s['ts'] - (p['ts'] + p['dur']))
        # the flush of s: same value; on a set the value is per device, so take the one nearest before s
        cands = [f for f in flushes_by_value.get(s['args']['value'], []) if f['ts'] <= s['ts']]
        if not cands or gap <= 0:
            if cands and cands[-1]['ts'] < p['ts'] + p['dur']: overlapped += 1
            continue
        f = max(cands, key=lambda f: f['ts'])
        who[names.get((1, f['tid']), str(f['tid'])).split('-')[0]] += 1
        pend = p['ts'] + p['dur']
        fs, se = f['ts'], submit_end(f)
        if fs < pend: overlapped += 1
        l = max(0.0, min(fs, s['ts']) - pend); late += l
        e_ = max(0.0, min(se, s['ts']) - max(fs, pend)); enc += e_
        launch += max(0.0, s['ts'] - max(se, pend))
    n = len(subs)
    print(f"gpu {names.get((2, tid), tid)}: {n} submissions over {win/1e3:.1f} ms, busy {100*busy/win:.0f} %, "
          f"idle {100*(win-busy)/win:.0f} % = late {100*late/win:.0f} % + encode/submit {100*enc/win:.0f} % + launch {100*launch/win:.0f} %; "
          f"commands/submission median {S.median(cmds) if cmds else 0} mean {S.mean(cmds) if cmds else 0:.1f}; "
          f"submission median {S.median(s['dur'] for s in subs):.1f} us; flush began before the previous ended: {overlapped}/{n-1}; "
          f"flushed by {dict(who)}")
fl = [e for e in X if e['pid'] == 1 and e['name'] in ('flush', 'encode', 'submit', 'wait') and e['ts'] >= ws]
agg = collections.defaultdict(collections.Counter)
for e in fl: agg[e['name']][names.get((1, e['tid']), str(e['tid'])).split('-')[0]] += e['dur']
enc = [e for e in fl if e['name'] == 'encode' and e['args'].get('ops')]
if enc: print('encode us per op: median %.2f' % S.median(e['dur'] / e['args']['ops'] for e in enc))
for k, v in agg.items(): print(k, {a: round(b) for a, b in v.items()})
