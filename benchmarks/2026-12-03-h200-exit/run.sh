#!/bin/bash
# 2026-12-03, one NVIDIA H200 (driver 580.159.04), validation layer 1.3.239 from .gpu/vl/. Release
# test binaries: "old" = 0d5c7e1 (tests/zz_probe.rs = ../2026-12-02-exit-h200/probe_devices.rs,
# tests/task_combinations.rs); "fix2" = b10282e with the loader kept loaded and one pinned
# instance per loader (src/vk/instance.rs of e408d22+1), and probe_instances.rs built as
# tests/zz_probe3.rs. Usage (device tool, carry .gl and .gpu): bash run.sh
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 & D=$!
for t in a_validated_kernel b_plain_kernel c_validated_no_kernel d_adapters_only; do
  echo "== $t" >> $R/summary.txt
  PROBE_N=100 timeout 150 ./.gpu/fix2/zz_probe3 $t --exact --test-threads=1 --nocapture 2>&1 | grep -E "PROBE|panicked|finished" >> $R/summary.txt
done
export VKASYNC_VALIDATION=1
for i in 1 2 3; do
  for b in old fix2; do
    timeout 120 ./.gpu/$b/zz_probe devices_only --test-threads=1 > $R/probe-$b-$i.log 2>&1
    echo "probe devices_only $b $i rc=$?" >> $R/summary.txt
    timeout 120 ./.gpu/$b/task_combinations > $R/tc-$b-$i.log 2>&1
    echo "task_combinations $b $i rc=$?" >> $R/summary.txt
  done
done
kill $D
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
