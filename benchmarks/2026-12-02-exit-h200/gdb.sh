#!/bin/bash
# 2026-12-02, one NVIDIA H200: where task_combinations crashes at exit (new build), under gdb
# if the machine has it, else with glibc's backtrace-on-crash preload if present.
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
which gdb catchsegv > $R/tools.txt 2>&1; ls /usr/lib/x86_64-linux-gnu/libSegFault.so >> $R/tools.txt 2>&1
for i in $(seq ${1:-8}); do
  if command -v gdb >/dev/null; then
    timeout 100 gdb -q -batch -ex "handle SIGPIPE nostop" -ex run -ex "info threads" -ex "thread apply all bt 25" --args ./.gpu/new/task_combinations > $R/gdb-$i.log 2>&1
    grep -q "SIGSEGV" $R/gdb-$i.log && { echo "crash in run $i" >> $R/summary.txt; break; }
  else
    timeout 100 ./.gpu/new/task_combinations > $R/plain-$i.log 2>&1; echo "run $i rc=$?" >> $R/summary.txt
  fi
done
echo done >> $R/summary.txt
cat $R/tools.txt $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
