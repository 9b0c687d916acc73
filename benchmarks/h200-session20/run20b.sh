#!/bin/bash
# Session 20, run B (one H200): perf profiles with frame pointers (release builds with
# -C force-frame-pointers=yes): the executor, one queue under tokio, three lanes under tokio
# (mix, T = 100,000), and sealing under tokio.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
P="env LD_LIBRARY_PATH=$PWD/.gpu/perf/lib $PWD/.gpu/perf/perf"
B=./.gpu/bench_tasks_fp; S=./.gpu/tls_pipeline_fp
R=$OUT/r; mkdir -p $R
(nvidia-smi --query-gpu=name --format=csv; nproc; lscpu | grep 'Model name') > $R/host.txt 2>&1
prof() { # name, command...
  n=$1; shift
  $P record -F 2000 -g -o /tmp/$n.data -- "$@" > $R/$n-log.txt 2>&1
  $P report -i /tmp/$n.data --no-children --sort sym --stdio -g none --percent-limit 0.3 2>/dev/null | grep -v "^$" | head -120 > $R/$n-flat.txt
  $P report -i /tmp/$n.data --children --sort sym --stdio -g none --percent-limit 1 2>/dev/null | grep -v "^$" | head -150 > $R/$n-children.txt
  $P report -i /tmp/$n.data --no-children --sort sym --stdio -g caller,0.5,callee,function,percent --percent-limit 2 2>/dev/null | grep -v "^$" | head -400 > $R/$n-callers.txt
}
prof exec $B --modes executor --tasks 100000 --reps 3 --out /tmp
prof tokio $B --modes tokio --tasks 100000 --reps 3 --out /tmp
prof lanes3 $B --modes tokio-set --gpus 1 --lanes 3 --tasks 100000 --reps 3 --out /tmp
prof seal $S --connections 10000 --records 1 --record-size 16384 --reps 5 --workers 16 --modes coalesced-tokio
cd $OUT && tar czf r.tgz r && rm -rf r
