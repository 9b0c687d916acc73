#!/bin/bash
# Every target in one call (targets_gpu.sh) at e729b85, on a second loan.
set -u
OUT=$OUT bash benchmarks/tools/targets_gpu.sh
ls -la $OUT
