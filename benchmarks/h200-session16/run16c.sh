#!/bin/bash
# Session 16, run C (one H200): sealing for many connections and the trace's cost, old
# (83a09f4) against new (flushes without the lock), interleaved, two rounds.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
nproc > $R/host.txt
for round in 1 2; do
  for v in old new; do
    d=$R/$v-$round; mkdir -p $d
    ./.gpu/tls_pipeline_$v --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes coalesced,coalesced-tokio --csv $d/seal16.csv > $d/seal16.txt 2>&1
    ./.gpu/bench_tasks_$v --modes executor,executor-timed,executor-traced --tasks 1000,10000 --reps 11 --out $d/trace > $d/trace.txt 2>&1
  done
done
./.gpu/tls_pipeline_new --connections 10000 --records 1 --record-size 16384 --reps 3 --workers 16 --modes cpu-1,cpu-all --csv $R/cpu.csv > $R/cpu.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
