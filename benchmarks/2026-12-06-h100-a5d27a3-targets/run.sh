#!/bin/bash
# Every target on a5d27a3 (staged-cores added; run from the repository root, carrying .gl and .gpu).
set -u
cd "$(dirname "$0")/.."
cp .gpu/commits.txt $OUT/
nvidia-smi -L > $OUT/gpu.txt 2>&1
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
OUT=$OUT timeout 560 bash benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
