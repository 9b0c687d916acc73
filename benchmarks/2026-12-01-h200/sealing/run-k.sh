#!/bin/bash
# 2026-12-01, run K (one H200): seal-one-hold with the executor on two steps (h20, as merged in 2bf0e1b) against main
# (s20), four rounds alternating, 10,000 records of 1 KiB through the executor and one Queue
# under tokio (--reps 9), then the main example on its defaults, alternating, twice each.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
for round in 1 2 3 4; do
  order="h20 s20"; [ $((round % 2)) = 0 ] && order="s20 h20"
  for b in $order; do
    ./.gpu/tls_pipeline_$b --connections 10000 --records 1 --record-size 1024 --reps 9 --workers 16 --modes coalesced,coalesced-tokio --csv $R/$b-r$round.csv > $R/$b-r$round.txt 2>&1
  done
done
for round in 1 2; do
  order="h20 s20"; [ $round = 2 ] && order="s20 h20"
  for b in $order; do ./.gpu/tls_pipeline_$b > $R/$b-defaults-$round.txt 2>&1; done
done
cd $OUT && tar czf r.tgz r && rm -rf r
