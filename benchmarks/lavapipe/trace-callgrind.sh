#!/bin/bash
# Instructions a trace adds per task of the mix workload, counted by callgrind on lavapipe
# (deterministic, unlike lavapipe's timings). Usage: callgrind.sh BENCH_TASKS_BINARY OUT_DIR
# The binary: `bench_tasks` built with CARGO_PROFILE_RELEASE_DEBUG=line-tables-only (function
# names for the toggle and the breakdown). Flushes of about 30 jobs (--max-pending-ops 30, as on
# the H200, where a flush carries 22–42 jobs) and no spin before waits (spinning would add a
# varying count). 1,000 tasks: one untimed round and three timed ones, so 4,000 jobs.
# Prints, per mode, the instructions on the executor's thread inside `Executor::run` and on its
# driver thread inside `QueueCore::drive`, per job; then traced minus plain.
set -e
bin=$1; out=$2; mkdir -p "$out"
for m in executor executor-traced; do
  valgrind --tool=callgrind --separate-threads=yes --callgrind-out-file="$out/cg.$m.%p" \
    --toggle-collect='vkasync::executor::Executor::run*' --toggle-collect='*QueueCore*::drive*' \
    "$bin" --modes $m --tasks 1000 --reps 3 --max-pending-ops 30 --no-spin --out "$out/bench-$m" > "$out/log.$m.txt" 2>&1
done
for m in executor executor-traced; do
  # Counted only inside the loop and the driver: the main thread's file (-01) is the loop's.
  run=$(grep -h totals "$out"/cg.$m.*-01 | awk '{print $2}')
  drive=$(cat "$out"/cg.$m.*-* | grep totals | awk '{s += $2} END {print s}')
  drive=$((drive - run))
  echo "$m run_per_job=$((run / 4000)) drive_per_job=$((drive / 4000))"
done | tee "$out/summary.txt"
awk '{split($2,a,"="); split($3,b,"="); r[NR]=a[2]; d[NR]=b[2]} END {print "traced - plain: run " r[2]-r[1] ", drive " d[2]-d[1] " instructions per job"}' "$out/summary.txt" | tee -a "$out/summary.txt"
