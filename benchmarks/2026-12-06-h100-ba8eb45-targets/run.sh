#!/bin/bash
# The device call of 2026-12-06 (run from the repository root with .gpu/tls and .gpu/bt built at
# ba8eb45, carrying .gl and .gpu): every target.
set -u
cd "$(dirname "$0")/.."
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu-before.txt 2>&1
OUT=$OUT timeout 380 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
