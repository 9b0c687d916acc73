#!/bin/bash
# Session 15, run T2: the integration tests with validation (synchronisation validation on),
# transfer queue on and off, after fixing the transfer queue's wait stages.
for f in .gl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
mkdir -p /opt/vl && dpkg -x .gpu/vl/*.deb /opt/vl
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VK_LAYER_PATH=/opt/vl/usr/share/vulkan/explicit_layer.d LD_LIBRARY_PATH=/opt/vl/usr/lib/x86_64-linux-gnu
mkdir -p /tmp/r2
for tq in 1 0; do for t in .gpu/t/*; do
  n=$(basename $t)
  VKASYNC_VALIDATION=1 VKASYNC_TRANSFER_QUEUE=$tq PROPTEST_CASES=16 timeout 100 $t --test-threads=4 --skip device_loss > /tmp/r2/test-$tq-$n.log 2>&1; rc=$?
  echo "tq=$tq $n rc=$rc $(grep -E '^test result' /tmp/r2/test-$tq-$n.log | tail -1)" >> /tmp/r2/tests.txt
done; done
cd /tmp/r2 && tar czf $OUT/run15t2.tgz . && cat tests.txt
