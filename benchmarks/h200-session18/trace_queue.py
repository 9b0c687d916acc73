#!/usr/bin/env python3
"""Per GPU track of a VKASYNC_TRACE file (gzipped), over the last 45% of the run: GPU busy time,
and the host flush, encode, submit and wait spans by thread name. Usage: trace_queue.py t.json.gz"""
import json,gzip,collections,sys
ev=json.load(gzip.open(sys.argv[1]))
ev=ev['traceEvents'] if isinstance(ev,dict) else ev
names={(e['pid'],e['tid']):e['args']['name'] for e in ev if e.get('ph')=='M' and e['name']=='thread_name'}
X=[e for e in ev if e.get('ph')=='X']
# per GPU track (pid 2, tid) -> phases
gpu=collections.defaultdict(list)
for e in X:
    if e['pid']==2 and e['name']=='phase': gpu[e['tid']].append((e['ts'],e['ts']+e['dur']))
fl=[e for e in X if e['pid']==1 and e['name'] in('flush','encode','submit','encode_batches','wait')]
t0=min(e['ts'] for e in X); t1=max(e['ts']+e.get('dur',0) for e in X)
# take last 40% of the run window as steady state
ws=t0+(t1-t0)*0.55; we=t1
print('window us',round(we-ws))
for tid,ph in gpu.items():
    ph=sorted(p for p in ph if p[0]>=ws and p[1]<=we)
    if not ph: continue
    # merge
    m=[];
    for a,b in ph:
        if m and a<=m[-1][1]: m[-1][1]=max(m[-1][1],b)
        else: m.append([a,b])
    busy=sum(b-a for a,b in m)
    print('gpu',names.get((2,tid)),'busy %.0f us of %.0f (%.0f%%), %d spans'%(busy,we-ws,100*busy/(we-ws),len(m)))
by=collections.defaultdict(lambda: collections.Counter())
for e in fl:
    if e['ts']>=ws and e['ts']+e['dur']<=we:
        by[e['name']][names.get((1,e['tid']),e['tid'])]+=e['dur']
for k,v in by.items(): print(k, {a:round(b) for a,b in v.items()}, 'total', round(sum(v.values())))
n=collections.Counter(e['name'] for e in fl if e['ts']>=ws and e['ts']+e['dur']<=we)
print(n)
