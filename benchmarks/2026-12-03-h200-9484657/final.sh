#!/bin/bash
# One run on one NVIDIA H200 (see shared GPU.md for .gl/ and .gpu/): the main example on its
# defaults, 10,000 connections x one record of 16 KiB and of 1 KiB, the Offload::Auto sweep, the
# lone job and the mix at T = 1,000, the SHA-256 kernel before and after its prefetch
# (alternating), OpenSSL on one core and on 16, and the GPU clocks throughout.
# Binaries: cargo build --release --example tls_pipeline --example bench_tasks --example
# bench_crypto at the commit in commits.txt, copied to .gpu/; bench_crypto_old built at 2d03cc1.
set -u
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R/csv; cp .gpu/commits.txt .gpu/final.sh $R/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt 2>&1
(nproc; lscpu | grep -E "Model name|Thread|Core|Socket"; grep -o -w -m1 sha_ni /proc/cpuinfo) > $R/host.txt 2>&1
nvidia-smi dmon -s pc -d 1 > $R/clocks.txt 2>&1 &
dm=$!
T=./.gpu/tls_pipeline
M=coalesced,coalesced-tokio,auto,cpu-1,cpu-all
$T --csv $R/csv/defaults.csv > $R/defaults.txt 2>&1
$T --connections 10000 --records 1 --record-size 16384 --reps 9 --modes $M --csv $R/csv/c10k-16k.csv > $R/c10k-16k.txt 2>&1
$T --connections 10000 --records 1 --record-size 1024 --reps 9 --modes $M --csv $R/csv/c10k-1k.csv > $R/c10k-1k.txt 2>&1
for c in 1 10 100 1000 10000; do
  for s in 1024 16384; do
    r=7; [ $c -le 100 ] && r=21
    $T --connections $c --records 4 --record-size $s --reps $r --modes auto,host,coalesced,cpu-1 --csv $R/csv/auto-$c-$s.csv > $R/auto-$c-$s.txt 2>&1
  done
done
./.gpu/bench_tasks --tasks 1,1000 --modes executor,tokio,raw-batch --reps 11 --out $R/bench_tasks > $R/bench_tasks.txt 2>&1
for i in 1 2; do
  ./.gpu/bench_crypto_old --warmup 30 --reps 7 --e2e-reps 1 --cpu-reps 1 --out $R/bench_crypto_old-$i > $R/bench_crypto_old-$i.txt 2>&1
  ./.gpu/bench_crypto --warmup 30 --reps 7 --e2e-reps 1 --cpu-reps 1 --out $R/bench_crypto-$i > $R/bench_crypto-$i.txt 2>&1
done
kill $dm
for b in 16384 1024; do
  echo "== $b B, one core"; openssl speed -seconds 2 -evp aes-256-ctr -bytes $b 2>/dev/null | tail -1
  openssl speed -seconds 2 -hmac sha256 -bytes $b 2>/dev/null | tail -1
  for a in "-evp aes-256-ctr" "-hmac sha256"; do
    echo "== $b B, $a, 16 processes at once (k bytes/s each)"
    for p in $(seq 16); do openssl speed -seconds 2 $a -bytes $b 2>/dev/null | tail -1 & done; wait
  done
done > $R/openssl.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
