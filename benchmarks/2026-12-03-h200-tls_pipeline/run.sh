#!/bin/bash
# The main example (examples/tls_pipeline.rs) on its defaults and on 10,000 connections x one
# 16 KiB record, on one NVIDIA H200 through the device tool (see shared/GPU.md for the setup of
# .gl/ and .gpu/), with the GPU clocks. Binary: `cargo build --release --example tls_pipeline`
# at 123a271, copied to .gpu/. Also `openssl speed` (one core and -multi 16) on the same host.
set -u
for f in .gl/*.deb; do dpkg -x $f /; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p $OUT/r; cd $OUT/r
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.mem --format=csv > gpu.txt 2>&1
nproc > host.txt; lscpu | grep "Model name" >> host.txt
nvidia-smi dmon -s pc -d 2 > clocks.txt 2>&1 &
dm=$!
cd - >/dev/null
./.gpu/tls_pipeline --csv $OUT/r/defaults.csv > $OUT/r/defaults.txt 2>&1; echo "rc=$?" >> $OUT/r/defaults.txt
./.gpu/tls_pipeline --connections 10000 --records 1 --record-size 16384 --csv $OUT/r/c10k-16k.csv > $OUT/r/c10k-16k.txt 2>&1; echo "rc=$?" >> $OUT/r/c10k-16k.txt
for m in "" "-multi 16"; do
  openssl speed -seconds 2 $m -evp aes-256-ctr -bytes 16384 2>/dev/null | tail -2
  openssl speed -seconds 2 $m -hmac sha256 -bytes 16384 2>/dev/null | tail -2
done > $OUT/r/openssl.txt 2>&1
kill $dm
cd $OUT && tar czf r.tgz r && rm -rf r
