#!/bin/bash
# Session 20, run H (one H200): sealing under tokio with pipeline depth 1 and 2
# (VKASYNC_PIPELINE_DEPTH), records of 1, 16 and 64 KiB, three rounds alternating, main build.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
S=./.gpu/tls_pipeline_s20
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  order="1 2"; [ $((round % 2)) = 0 ] && order="2 1"
  for d in $order; do
    for sz in 1024 16384 65536; do
      n=10000; [ $sz = 65536 ] && n=4000
      VKASYNC_PIPELINE_DEPTH=$d $S --connections $n --records 1 --record-size $sz --reps 5 --workers 16 --modes coalesced-tokio > $R/d$d-s$sz-r$round.txt 2>&1
    done
  done
done
cd $OUT && tar czf r.tgz r && rm -rf r
