#!/bin/bash
# lavapipe (2-core VM), 79e87fa: Offload::Auto against Offload::Host and RustCrypto on one core,
# C connections x 4 records. On a CPU device Auto is the host rule, so `auto` and `host` take the
# same path (records sealed at once in the calling task); `cpu-1` is the plain RustCrypto loop.
set -u
T=${T:-./target/release/examples/tls_pipeline}
D=benchmarks/lavapipe/2026-12-04-auto/final
for c in 1 10 100 1000 10000; do
  for s in 1024 16384; do
    r=5; [ $c -le 100 ] && r=15
    $T --connections $c --records 4 --record-size $s --reps $r --modes auto,host,cpu-1 --csv $D/auto-$c-$s.csv > $D/auto-$c-$s.txt 2>&1
  done
done
