#!/usr/bin/env bash
# The tokio fronts' host cost per record on lavapipe (2 host cores): `staged-tokio` (a task per
# connection) against `staged-shares` (a task per worker, each connection a future of it) and the
# native executor (`staged`), 10,000 connections x one record of 64 B (where lavapipe's own work
# per record is small) and 1 KiB, modes interleaved in each process, three processes per size.
# From the repository root: benchmarks/lavapipe/2026-12-05-shares/run.sh
set -eu
cargo build --release --example tls_pipeline
d=benchmarks/lavapipe/2026-12-05-shares
for p in 1 2 3; do
    for s in 64 1024; do
        target/release/examples/tls_pipeline --connections 10000 --records 1 --record-size $s --reps 7 \
            --modes staged-tokio,staged-shares,staged --csv $d/s$s-$p.csv > $d/s$s-$p.txt 2>&1
    done
done
