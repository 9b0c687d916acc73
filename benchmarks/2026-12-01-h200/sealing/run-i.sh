#!/bin/bash
# 2026-12-01, run I (one H200): branch seal-one-hold (tls_pipeline_h20) against main
# (tls_pipeline_s20), three rounds alternating: sealing 10,000 records of 1 KiB and 16 KiB,
# through one Queue under tokio (16 workers) and through the executor; then the main example
# on its defaults with each build.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3; do
  order="h20 s20"; [ $((round % 2)) = 0 ] && order="s20 h20"
  for b in $order; do
    for sz in 1024 16384; do
      ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size $sz --reps 5 --workers 16 --modes coalesced-tokio,coalesced --csv $R/$b-s$sz-r$round.csv > $R/$b-s$sz-r$round.txt 2>&1
    done
  done
done
for b in s20 h20; do ./.gpu/tls_pipeline_$b > $R/$b-defaults.txt 2>&1; done
cd $OUT && tar czf r.tgz r && rm -rf r
