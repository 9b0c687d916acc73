#!/bin/bash
# The device call of 2026-12-06 (run from the repository root with the binaries built here and
# carried in .gpu, with .gl): every target on 504233d, a second host.
set -u
cd "$(dirname "$0")/.."
OUT=$OUT timeout 360 benchmarks/tools/targets_gpu.sh > $OUT/targets.log 2>&1
echo "targets exit $?" >> $OUT/targets.log
