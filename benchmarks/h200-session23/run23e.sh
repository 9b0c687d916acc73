#!/bin/bash
# Session 23, run E (one H200): every test binary of the suite (release builds of main at
# 91c1f10: this session's trace changes and the new trace test), with the Khronos validation
# layer (Debian's 1.3.239 deb) and VKASYNC_VALIDATION=1, as on lavapipe; one pass of all, then
# trace and executor twice more.
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
(nproc; nvidia-smi --query-gpu=name,driver_version --format=csv) > $R/host.txt 2>&1
cd /tmp && tar xJf $OLDPWD/.gpu/t23.txz && cd $OLDPWD
run() { # binary pass
  local t=/tmp/t23/$1 start end rc
  start=$(date +%s.%N)
  timeout 150 $t > $R/$1-$2.log 2>&1; rc=$?
  end=$(date +%s.%N)
  echo "pass $2 $1 rc=$rc $(grep -h 'test result' $R/$1-$2.log | tr '\n' ' ') $(awk "BEGIN{print $end-$start}")s" >> $R/summary.txt
}
for t in /tmp/t23/*; do run $(basename $t) 1; done
for p in 2 3; do run trace $p; run executor $p; done
grep -v "rc=0" $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
