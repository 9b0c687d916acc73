#!/bin/bash
# lavapipe (2-core VM), Offload::Auto and Offload::Host on the native executor against
# RustCrypto on one core, before (a51a87d: every record through a flush) and after (8282eff:
# records the host takes at once), alternating processes. BEFORE and AFTER: the two builds of
# `cargo build --release --example tls_pipeline`.
set -u
for i in 1 2; do for b in before:$BEFORE after:$AFTER; do for s in 1024 16384; do
  "${b#*:}" --connections 1000 --records 4 --record-size $s --reps 9 --modes auto,host,cpu-1 \
    --csv ${b%%:*}-$s-$i.csv > /dev/null
done; done; done
