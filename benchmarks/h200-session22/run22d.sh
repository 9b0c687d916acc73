#!/bin/bash
# Session 22, run D (one H200): task_combinations' crash at exit against the number of lost
# (simulated) devices it leaves: TMP_LOSS_LIMIT = 0, 6, 12, 24, 48 (a temporary build).
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1 RUST_BACKTRACE=1
R=$OUT/r; mkdir -p $R
for l in 0 6 12 24 48; do
  TMP_LOSS_LIMIT=$l timeout 120 ./.gpu/tc_probe --nocapture > $R/tc-$l.log 2>&1; echo "limit $l rc=$?" >> $R/summary.txt
done
# Without the validation layer's messages being fatal, and without the layer at all.
VKASYNC_VALIDATION= timeout 120 ./.gpu/tc_probe > $R/tc-noval.log 2>&1; echo "no VKASYNC_VALIDATION rc=$?" >> $R/summary.txt
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
