#!/bin/bash
# Session 19, run C (nvidia-h200): a timestamp per command (VKASYNC_TRACE_DETAIL=commands) for
# the executor and the tokio front at T = 10,000 (branch pipeline); the main example on its
# defaults with pipeline depth 2 and 1.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
B=./.gpu/bench_tasks_pipe
for m in executor tokio; do
  VKASYNC_TRACE_DETAIL=commands VKASYNC_TRACE=$R/cmds-$m.json $B --modes $m --tasks 10000 --reps 1 --out /tmp > $R/tr_cmds_$m.txt 2>&1
done
for d in 2 1 1 2; do
  VKASYNC_PIPELINE_DEPTH=$d ./.gpu/tls_pipeline_pipe >> $R/example-d$d.txt 2>&1
done
gzip $R/*.json
cd $OUT && tar czf r.tgz r && rm -rf r
