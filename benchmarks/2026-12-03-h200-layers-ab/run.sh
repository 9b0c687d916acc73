#!/bin/bash
# A/B of the layered code against the code before it, on one NVIDIA H200 through the device tool
# (see shared/GPU.md for .gl/): 10 alternating process pairs (old then new, new then old, ...)
# of the mix workload (bench_tasks, executor and tokio fronts, T = 1,000 and 10,000) and of
# sealing 10,000 connections x one 16 KiB record (tls_pipeline, coalesced-tokio and coalesced),
# with the GPU clocks. Binaries: `cargo build --release --example bench_tasks --example
# tls_pipeline` at each commit, copied to .gpu/old/ and .gpu/new/. ratios.py makes the table.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R
cp .gpu/commits.txt $R/ 2>/dev/null
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt 2>&1
nproc > $R/host.txt; lscpu | grep "Model name" >> $R/host.txt
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 &
dm=$!
PAIRS=${PAIRS:-10}
# Warm-up (clocks up, driver caches), not counted.
./.gpu/new/bench_tasks --modes executor --tasks 1000 --reps 3 --out $R/warm > $R/warm.txt 2>&1
for i in $(seq 1 $PAIRS); do
  if [ $((i % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for b in $order; do
    ./.gpu/$b/bench_tasks --modes executor,tokio --tasks 1000,10000 --reps 15 --out $R/tasks-$b-$i > $R/tasks-$b-$i.txt 2>&1
    echo "rc=$?" >> $R/tasks-$b-$i.txt
    ./.gpu/$b/tls_pipeline --connections ${CONNS:-10000} --records 1 --record-size 16384 --modes coalesced-tokio,coalesced --reps 5 --csv $R/seal-$b-$i.csv > $R/seal-$b-$i.txt 2>&1
    echo "rc=$?" >> $R/seal-$b-$i.txt
  done
done
kill $dm
cd $OUT && tar czf r.tgz r && rm -rf r
