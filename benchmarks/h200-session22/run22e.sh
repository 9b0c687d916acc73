#!/bin/bash
# Session 22, run E (one H200): task_combinations' crash at exit, again: the suite's build
# (tc_orig) and the probe build, with and without RUST_BACKTRACE, three times each.
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
for i in 1 2 3; do
  for b in tc_orig tc_probe; do
    timeout 120 ./.gpu/$b > $R/$b-$i.log 2>&1; echo "$b $i rc=$?" >> $R/summary.txt
    RUST_BACKTRACE=1 timeout 120 ./.gpu/$b > $R/$b-bt-$i.log 2>&1; echo "$b RUST_BACKTRACE=1 $i rc=$?" >> $R/summary.txt
  done
done
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
