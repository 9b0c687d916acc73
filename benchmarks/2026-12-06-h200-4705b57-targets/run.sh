#!/bin/bash
cd "$(dirname "$0")/.."
nvidia-smi -q -d CLOCK > $OUT/clocks-before.txt 2>&1
OUT=$OUT bash benchmarks/tools/targets_gpu.sh
