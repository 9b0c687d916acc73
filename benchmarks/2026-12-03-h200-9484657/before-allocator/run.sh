#!/bin/bash
# One run on the H200 (see shared GPU.md): the main example's cases, the Offload::Auto sweep, the
# lone job and the mix at T = 1,000, the SHA-256 kernel old against new, OpenSSL, GPU clocks.
set -u
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r; mkdir -p $R/csv; cp .gpu/commits.txt .gpu/run.sh $R/
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > $R/gpu.txt 2>&1
nproc > $R/host.txt; lscpu | grep -E "Model name|Flags" | sed 's/Flags:.*\(sha_ni\).*/Flags: ... sha_ni .../' >> $R/host.txt
grep -o -m1 -w "sha_ni\|aes" /proc/cpuinfo | sort -u >> $R/host.txt
nvidia-smi dmon -s pc -d 2 > $R/clocks.txt 2>&1 &
dm=$!
T=./.gpu/tls_pipeline
M=coalesced,coalesced-tokio,auto,cpu-1,cpu-all
# 1, 2: 10,000 connections x one record, 16 KiB and 1 KiB
$T --connections 10000 --records 1 --record-size 16384 --reps 9 --modes $M --csv $R/csv/c10k-16k.csv > $R/c10k-16k.txt 2>&1
$T --connections 10000 --records 1 --record-size 1024 --reps 9 --modes $M --csv $R/csv/c10k-1k.csv > $R/c10k-1k.txt 2>&1
# 3: the main example on its defaults
$T --csv $R/csv/defaults.csv > $R/defaults.txt 2>&1
# old (2d03cc1) against new, alternating processes, the tokio front
for i in 1 2 3; do
  for b in tls_old tls_pipeline; do
    for s in 16384 1024; do
      ./.gpu/$b --connections 10000 --records 1 --record-size $s --reps 5 --modes coalesced-tokio,coalesced --csv $R/csv/ab-$b-$s-$i.csv > /dev/null 2>&1
    done
  done
done
# 4: Offload::Auto against both of its choices
for c in 1 10 100 1000 10000; do
  for s in 1024 16384; do
    $T --connections $c --records 4 --record-size $s --reps 7 --modes auto,host,coalesced,cpu-1 --csv $R/csv/auto-$c-$s.csv > $R/auto-$c-$s.txt 2>&1
  done
done
# 5, 6: lone job and mix at T = 1,000
./.gpu/bench_tasks --tasks 1,1000 --modes executor,tokio,raw-batch --reps 11 --out $R/bt > $R/bench_tasks.txt 2>&1
# the SHA-256 kernel before and after the prefetch, alternating
for i in 1 2; do
  ./.gpu/bench_crypto_old --reps 5 --e2e-reps 1 --cpu-reps 1 --out $R/bc-old-$i > $R/bc-old-$i.txt 2>&1
  ./.gpu/bench_crypto --reps 5 --e2e-reps 1 --cpu-reps 1 --out $R/bc-new-$i > $R/bc-new-$i.txt 2>&1
done
kill $dm
# 7: OpenSSL on the same host: one core, and 16 processes at once (summed)
for b in 16384 1024; do
  echo "== $b B, one core"; openssl speed -seconds 2 -evp aes-256-ctr -bytes $b 2>/dev/null | tail -1
  openssl speed -seconds 2 -hmac sha256 -bytes $b 2>/dev/null | tail -1
  for a in "-evp aes-256-ctr" "-hmac sha256"; do
    echo "== $b B, $a, 16 processes (k bytes/s each)"
    for p in $(seq 16); do openssl speed -seconds 2 $a -bytes $b 2>/dev/null | tail -1 & done; wait
  done
done > $R/openssl.txt 2>&1
cd $OUT && tar czf r.tgz r && rm -rf r
