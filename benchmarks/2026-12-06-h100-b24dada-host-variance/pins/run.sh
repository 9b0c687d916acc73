#!/bin/bash
# Host diagnostics: the native front pinned to each CPU (two passes), glibc malloc tunables,
# the in-place key build A/B pinned, T = 1,000 pinned. `.gpu/tls` and `.gpu/bt` built at
# b24dada, `.gpu/tls-new` at 4715b14 (the connection's AES key expanded in place).
set -u
cd "$(dirname "$0")/.."
. benchmarks/tools/gpu_env.sh
export R=$OUT/r9
mkdir -p $R/runs
{ host_describe; ldd --version | head -1; nvidia-smi -L; } > $R/host.txt 2>&1
clocks_start $R/clocks-50ms.csv
T=".gpu/tls --connections 10000 --records 1 --record-size 16384 --warmup 1 --modes staged"
one() { name=$1; shift; timeout 30 "$@" --runs-csv $R/runs/$name.csv > $R/$name.txt 2>&1; }
# 1. Pinned to each CPU, two passes (second in reverse order), unpinned between passes.
for pass in 1 2; do
  cpus=$(seq 0 15); [ $pass = 2 ] && cpus=$(seq 15 -1 0)
  for c in $cpus; do one pin-$c-$pass taskset -c $c $T --reps 5; done
  one free-$pass $T --reps 5
done
echo "pins done $(date -u)" >> $R/log.txt
# 2. In-place keys A/B, alternating, pinned to CPU 4 and to CPU 11.
for round in 1 2 3 4; do
  for c in 4 11; do
    one ab-base-$c-$round taskset -c $c $T --reps 5
    one ab-new-$c-$round taskset -c $c ${T/.gpu\/tls/.gpu\/tls-new} --reps 5
  done
done
echo "ab done $(date -u)" >> $R/log.txt
# 3. glibc malloc tunables, pinned to CPU 4, alternating.
for round in 1 2 3; do
  one tun-none-$round taskset -c 4 $T --reps 5
  one tun-thp-$round env GLIBC_TUNABLES=glibc.malloc.hugetlb=1 taskset -c 4 $T --reps 5
  one tun-tcache-$round env GLIBC_TUNABLES=glibc.malloc.tcache_count=1000 taskset -c 4 $T --reps 5
done
echo "tunables done $(date -u)" >> $R/log.txt
# 4. T = 1,000 (executor, raw-batch) pinned to 4 CPUs, then unpinned.
for c in 0 5 10 15 free; do
  p="taskset -c $c"; [ $c = free ] && p=""
  timeout 40 $p .gpu/bt --modes raw-batch,executor --tasks 1000 --reps 9 --out $R/bt-$c > $R/bt-$c.txt 2>&1
done
echo "bt done $(date -u)" >> $R/log.txt
[ -n "$clocks" ] && kill $clocks
cd $OUT && tar czf r9.tgz r9 && rm -rf r9
