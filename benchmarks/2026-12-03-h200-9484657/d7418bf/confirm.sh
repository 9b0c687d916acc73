#!/bin/bash
# The SHA-256 kernel at the commit in commits2.txt against 2d03cc1 (alternating, warm clocks),
# and three more processes of the tokio front at 10,000 x 16 KiB beside RustCrypto on 16 cores.
set -u
for f in .gl/*.deb; do dpkg -x $f / ; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
R=$OUT/r2; mkdir -p $R; cp .gpu/commits2.txt .gpu/confirm.sh $R/
nvidia-smi dmon -s pc -d 1 > $R/clocks.txt 2>&1 &
dm=$!
for i in 1 2; do
  ./.gpu/bench_crypto_old --warmup 30 --reps 7 --e2e-reps 1 --cpu-reps 1 --out $R/bench_crypto_old-$i > /dev/null 2>&1
  ./.gpu/bench_crypto --warmup 30 --reps 7 --e2e-reps 1 --cpu-reps 1 --out $R/bench_crypto-$i > /dev/null 2>&1
done
for i in 1 2 3; do
  ./.gpu/tls_pipeline --connections 10000 --records 1 --record-size 16384 --reps 9 --modes coalesced-tokio,cpu-all --csv $R/c10k-16k-$i.csv > $R/c10k-16k-$i.txt 2>&1
done
kill $dm
cd $OUT && tar czf r2.tgz r2 && rm -rf r2
