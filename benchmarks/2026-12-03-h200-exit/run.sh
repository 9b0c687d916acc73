#!/bin/bash
# 2026-12-03, one NVIDIA H200: with devices now destroyed when their last handle goes (Kernel::new
# had leaked a handle of its device), does a process with many validated devices still crash at
# exit? Release test binaries of 0d5c7e1 ("old", the leak) and b10282e ("new"), the Khronos
# validation layer 1.3.239 and VKASYNC_VALIDATION=1, alternating: the probe of
# benchmarks/2026-12-02-exit-h200/probe_devices.rs (built as tests/zz_probe.rs; 49 devices, each
# with one kernel, dropped) and tests/task_combinations.rs. Exit code per process in summary.txt
# (139: SIGSEGV). Usage (device tool, carry .gl and .gpu; .gpu/vl holds the layer's deb):
# bash run.sh PAIRS
PAIRS=${1:-6}
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 & D=$!
for i in $(seq $PAIRS); do
  for b in old new; do
    timeout 120 ./.gpu/$b/zz_probe devices_only --test-threads=1 > $R/probe-$b-$i.log 2>&1
    echo "probe devices_only $b $i rc=$?" >> $R/summary.txt
    timeout 120 ./.gpu/$b/task_combinations > $R/tc-$b-$i.log 2>&1
    echo "task_combinations $b $i rc=$?" >> $R/summary.txt
  done
done
kill $D
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
