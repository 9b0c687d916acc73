#!/bin/bash
# Session 20, run G (one H200): where sealing's time goes under tokio. perf of a frame-pointer
# build of main (tls_pipeline_fp), coalesced-tokio, 10,000 connections x 16 KiB and x 1 KiB,
# with a trace of the 16 KiB case for the flushes' spans.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
S=./.gpu/tls_pipeline_fp
R=$OUT/r; mkdir -p $R
for sz in 16384 1024; do
  $P record -F 4000 -g -o /tmp/s$sz.data -- $S --connections 10000 --records 1 --record-size $sz --reps 10 --workers 16 --modes coalesced-tokio > $R/seal-$sz-log.txt 2>&1
  $P report -i /tmp/s$sz.data --children --sort sym --stdio -g none --percent-limit 0.5 2>/dev/null | grep -v "^$" | head -150 > $R/seal-$sz-children.txt
  $P report -i /tmp/s$sz.data --no-children --sort comm,sym --stdio -g none --percent-limit 0.3 2>/dev/null | grep -v "^$" | head -120 > $R/seal-$sz-flat.txt
done
VKASYNC_TRACE=$R/seal.json $S --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced-tokio > $R/trace-log.txt 2>&1
python3 - $R/seal.json > $R/spans.txt <<'PY'
import json,sys,collections
t=json.load(open(sys.argv[1])); ev=t['traceEvents'] if isinstance(t,dict) else t
c=collections.defaultdict(list)
for e in ev:
    if e.get('ph')=='X': c[e['name']].append(e.get('dur',0))
for k,v in sorted(c.items(), key=lambda kv:-sum(kv[1]))[:30]:
    print(f"{k[:40]:40} n={len(v):6} total={sum(v)/1000:9.1f} ms mean={sum(v)/len(v):9.1f} us")
PY
gzip $R/seal.json
cd $OUT && tar czf r.tgz r && rm -rf r
