#!/bin/bash
# Session 15, run T: the transfer queue on the H200. First the integration tests with the
# Khronos validation layer (synchronisation validation on) and the transfer queue on; then
# the 256 MiB AES-CTR end-to-end case and the mix workload at T = 10,000, without and with it,
# alternating.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
mkdir -p /opt/vl && dpkg -x .gpu/vl/*.deb /opt/vl
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
mkdir -p /tmp/r
(export VK_LAYER_PATH=/opt/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/opt/vl/usr/lib/x86_64-linux-gnu
 for t in .gpu/t/*; do
   VKASYNC_VALIDATION=1 VKASYNC_TRANSFER_QUEUE=1 PROPTEST_CASES=16 timeout 200 $t --test-threads=4 > /tmp/r/test-$(basename $t).log 2>&1
   echo "$(basename $t) rc=$? $(grep -E '^test result' /tmp/r/test-$(basename $t).log | tail -1)" >> /tmp/r/tests.txt
 done)
cd .gpu
for r in 1 2; do for tq in 0 1; do
  VKASYNC_TRANSFER_QUEUE=$tq timeout 120 ./bench_tasks --modes executor,tokio --tasks 10000 --reps 5 --out /tmp/r/tasks-$tq-$r > /tmp/r/tasks-$tq-$r.log 2>&1
  VKASYNC_TRANSFER_QUEUE=$tq timeout 200 ./bench_crypto --scale 1 --reps 5 --e2e-reps 3 --cpu-reps 1 --warmup 1 --out /tmp/r/crypto-$tq-$r > /tmp/r/crypto-$tq-$r.log 2>&1
done; done
cd /tmp/r && rm -f */*.svg && tar czf $OUT/run15t.tgz . && cat tests.txt && grep -h "executor\|tokio" tasks-*/bench_tasks.csv; grep -h "aes\|AES" crypto-*/bench_crypto.csv | grep -E "async|copy|end-to-end" | head -20
