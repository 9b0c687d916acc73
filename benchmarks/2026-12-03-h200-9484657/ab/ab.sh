#!/bin/bash
# tls_pipeline at a51a87d (tls_a51) against d7418bf (tls_pipeline), alternating processes,
# 10,000 connections x 16 KiB, the tokio front beside RustCrypto on 16 cores.
set -u
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r3; mkdir -p $R; cp .gpu/ab.sh $R/
for i in 1 2 3; do for b in tls_a51 tls_pipeline; do
  ./.gpu/$b --connections 10000 --records 1 --record-size 16384 --reps 9 --modes coalesced-tokio,cpu-all --csv $R/$b-$i.csv > /dev/null 2>&1
done; done
cd $OUT && tar czf r3.tgz r3 && rm -rf r3
