#!/bin/bash
# The device call's script (run from the repository root with `.gpu/tls` and `.gpu/bt` built at
# b24dada, carrying `.gl` and `.gpu`).
set -u
nvidia-smi -q -d CLOCK,PERFORMANCE > $OUT/smi-before.txt 2>&1
OUT=$OUT timeout 420 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
