#!/bin/bash
# 2026-12-02, one NVIDIA H200: does a test process still crash at exit? Release test binaries of
# a938dde ("old": a dropped Queue's driver thread destroyed its device on its own, an exit
# handler waited for it) and of the shutdown protocol ("new": closing joins the driver thread),
# with the Khronos validation layer (1.3.239) and VKASYNC_VALIDATION=1, alternating, then the
# new shutdown tests on the GPU. Usage (device tool, carry .gl and .gpu): bash run.sh PAIRS [QS]
PAIRS=${1:-7}; QS=${2:-3}
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 & D=$!
for i in $(seq $PAIRS); do
  for b in old new; do
    timeout 120 ./.gpu/$b/task_combinations > $R/tc-$b-$i.log 2>&1
    echo "task_combinations $b $i rc=$?" >> $R/summary.txt
  done
done
for t in queue_set; do for i in $(seq $QS); do for b in old new; do
  timeout 60 ./.gpu/$b/$t > $R/$t-$b-$i.log 2>&1; echo "$t $b $i rc=$?" >> $R/summary.txt
done; done; done
for t in shutdown; do for i in 1 2; do
  timeout 200 ./.gpu/new/$t --nocapture > $R/$t-new-$i.log 2>&1; echo "$t new $i rc=$?" >> $R/summary.txt
done; done
kill $D
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
