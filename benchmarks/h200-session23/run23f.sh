#!/bin/bash
# Session 23, run F (one H200): tests/panics hung in run E (150 s, two of five tests done).
# The test binary of main before this session (92c01cb, old) and of 91c1f10 (new), with
# validation, alternating, 15 s each; a hung process's threads are listed (name, kernel wait
# channel, kernel stack) before it is killed. Run F's second call (runF/more/) ran the same
# loop with `for i in $(seq 5 34)`.
for f in .gl/*.deb .gpu/vl/*.deb; do dpkg -x $f / 2>/dev/null; done; ldconfig
export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
export VKASYNC_VALIDATION=1
R=$OUT/r; mkdir -p $R
cd /tmp && tar xJf $OLDPWD/.gpu/pp.txz && cd $OLDPWD
for i in 1 2 3 4; do
  for v in new old; do
    /tmp/pp/panics_$v > $R/$v-$i.log 2>&1 &
    pid=$!
    for s in $(seq 1 30); do kill -0 $pid 2>/dev/null || break; sleep 0.5; done
    if kill -0 $pid 2>/dev/null; then
      echo "$v $i HUNG" >> $R/summary.txt
      for t in /proc/$pid/task/*; do
        echo "== $(cat $t/comm) $(cat $t/wchan) syscall: $(cat $t/syscall 2>/dev/null | cut -d' ' -f1-3)"
        cat $t/stack 2>/dev/null | head -8
      done > $R/$v-$i-threads.txt 2>&1
      kill -9 $pid
    else
      wait $pid; echo "$v $i rc=$? $(grep -h 'test result' $R/$v-$i.log)" >> $R/summary.txt
    fi
  done
done
cat $R/summary.txt
cd $OUT && tar czf r.tgz r && rm -rf r
