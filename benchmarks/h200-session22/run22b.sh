#!/bin/bash
# Session 22, runs B and C (one H200): every test binary of the suite (release builds of this
# session's portable-tests change), with the Khronos validation layer (Debian's 1.3.239 deb)
# and VKASYNC_VALIDATION=1, as the suite runs on lavapipe; two passes, 150 s per binary, then
# executor and any_runtime one test at a time.
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
(nproc; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
cd /tmp && tar xJf $OLDPWD/.gpu/t22.txz && cd $OLDPWD
for pass in 1 2; do
  for t in /tmp/t22/*; do
    n=$(basename $t)
    start=$(date +%s.%N)
    timeout 150 $t > $R/$n-$pass.log 2>&1; rc=$?
    end=$(date +%s.%N)
    echo "pass $pass $n rc=$rc $(grep -h 'test result' $R/$n-$pass.log | tr '\n' ' ') $(awk "BEGIN{print $end-$start}")s" >> $R/summary.txt
  done
done
for n in executor any_runtime; do
  timeout 200 /tmp/t22/$n --test-threads=1 > $R/$n-serial.log 2>&1; echo "$n serial rc=$? $(grep -h 'test result' $R/$n-serial.log)" >> $R/summary.txt
done
grep -v "rc=0" $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
