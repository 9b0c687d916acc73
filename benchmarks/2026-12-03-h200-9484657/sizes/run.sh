#!/bin/bash
# Record sizes and the first Offload::Auto model, 2026-12-03, tls_pipeline built from a51a87d
# plus the one-line executor change of 9484657 (the queue's handle cloned before its lock).
set -u
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 &
dm=$!
T=./.gpu/tls_pipeline
$T --connections 4000 --records 4 --record-size 16384 --reps 5 --modes coalesced,coalesced-tokio,auto,cpu-all > $R/s16k.txt 2>&1
$T --connections 1000 --records 4 --record-size 65536 --reps 5 --modes coalesced,coalesced-tokio,auto,cpu-all > $R/s64k.txt 2>&1
$T --connections 250 --records 4 --record-size 262144 --reps 5 --modes coalesced,coalesced-tokio,auto,cpu-all > $R/s256k.txt 2>&1
$T --connections 10000 --records 1 --record-size 65536 --reps 5 --modes coalesced,coalesced-tokio,auto,cpu-all > $R/c10k-64k.txt 2>&1
for c in 1 10 100; do $T --connections $c --records 4 --record-size 16384 --reps 7 --modes auto,host,coalesced > $R/auto-$c-16k.txt 2>&1; done
$T --connections 100 --records 4 --record-size 1024 --reps 7 --modes auto,host,coalesced > $R/auto-100-1k.txt 2>&1
kill $dm
cd $OUT && tar czf r.tgz r && rm -rf r
