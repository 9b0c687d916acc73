#!/usr/bin/env bash
# One loan's comparison of `tls_pipeline` builds on the H200, with everything a run must record:
# each configuration alone in its process, the builds alternating round by round, every timed
# run logged with the host's clock (`--runs-csv`) beside the SM clock sampled every 50 ms and
# matched with it (`clock_join.py`); RustCrypto on all cores (`cpu-all`) in every round; OpenSSL's
# AES-256-CTR and HMAC-SHA256 on one core and on every core at each record size. Everything
# goes to one archive, `$OUT/ab.tgz`.
#
# Run on the device machine from the repository root, with the binaries built here and carried
# there (see `../shared/GPU.md`):
#
#   benchmarks/tools/ab_h200.sh base=.gpu/tls-base new=.gpu/tls-new
#
# Settings (environment): ROUNDS (3), SIZES ("16384 1024"), MODES ("staged-tokio"),
# CONNECTIONS (10000), REPS (9), BUDGET (seconds for the timed part, 400), TRACE (1: then each
# build also runs once per size traced, `VKASYNC_TRACE`, its first mode, 3 runs; `traces.txt`
# summarises each trace per queue: flushes, the GPU's busy time by kind of command, the host's
# time in the flushes). ORDER (`given`: builds are run in the order given in every round;
# `alternate`: in the reverse order in even rounds, so that neither build always runs first);
# the first build given also runs `cpu-all` and the warm-up. A build's stats line (flushes,
# flush_ms, ...) is in its process's `.txt`; `ab_summary.sh` writes `summary.csv` (one row per
# process), `clocks-by-run.txt` and `traces.txt`. Each process's `/proc/stat` CPU lines before
# and after it are in `stat/`: the share of the host's time the hypervisor gave to others while
# it ran (steal) is in the summary.
# Carry `.gl` and `.gpu` (see `../shared/GPU.md`).
set -u
[ $# -ge 1 ] || { echo "usage: $0 NAME=BINARY [NAME=BINARY ...]" >&2; exit 2; }
OUT=${OUT:-/tmp/ab-out}
R=$OUT/ab
mkdir -p "$R/csv" "$R/runs" "$R/stat"
tools=$(cd "$(dirname "$0")" && pwd)

# The Vulkan loader and the NVIDIA ICD, as GPU.md describes (skipped where absent).
# shellcheck source=gpu_env.sh
. "$tools/gpu_env.sh"

printf '%s\n' "$@" > "$R/builds.txt"
host_describe > "$R/host.txt"
command -v nvidia-smi > /dev/null && nvidia-smi -L > "$R/gpu.txt" 2>&1
clocks_start "$R/clocks-50ms.csv"

first=${1#*=}
export R first
export ROUNDS=${ROUNDS:-3} SIZES=${SIZES:-"16384 1024"} MODES=${MODES:-staged-tokio}
export CONNECTIONS=${CONNECTIONS:-10000} REPS=${REPS:-9} ORDER=${ORDER:-given}
timeout "${BUDGET:-400}" bash -c '
one() { # name binary mode size
    grep "^cpu" /proc/stat > $R/stat/$1.txt
    "$2" --connections $CONNECTIONS --records 1 --record-size $4 --reps $REPS --modes $3 \
        --csv $R/csv/$1.csv --runs-csv $R/runs/$1.csv > $R/$1.txt 2>&1
    grep "^cpu" /proc/stat >> $R/stat/$1.txt
}
one warm "$first" staged-tokio 1024
for round in $(seq 1 $ROUNDS); do
    specs=("$@")
    if [ "$ORDER" = alternate ] && [ $((round % 2)) = 0 ]; then
        specs=(); for spec in "$@"; do specs=("$spec" "${specs[@]}"); done
    fi
    for size in $SIZES; do
        for spec in "${specs[@]}"; do
            for mode in $MODES; do
                one "s$size-$mode-${spec%%=*}-$round" "${spec#*=}" $mode $size
            done
        done
        one "s$size-cpu-all-$round" "$first" cpu-all $size
    done
done
' _ "$@"
echo "timed part: exit $?" > "$R/exit.txt"
if [ "${TRACE:-0}" = 1 ]; then
    mkdir -p "$R/traces"
    mode=${MODES%% *}
    for size in $SIZES; do
        for spec in "$@"; do
            t=$R/traces/s$size-$mode-${spec%%=*}
            VKASYNC_TRACE=$t.json timeout 120 "${spec#*=}" --connections "$CONNECTIONS" --records 1 \
                --record-size "$size" --reps 3 --modes "$mode" > "$t.txt" 2>&1
        done
    done
fi
[ -n "$clocks" ] && kill "$clocks"

# OpenSSL on this host: one core, then one process per core at once (the sum is all cores).
"$tools/openssl_speed.sh" $SIZES > "$R/openssl.txt" 2>&1

# The summaries (`ab_summary.sh`), where this machine has Python; else run that script on the
# unpacked archive.
[ -d "$R/traces" ] && gzip "$R"/traces/*.json
command -v python3 > /dev/null && "$tools/ab_summary.sh" "$R"
cd "$OUT" && tar czf ab.tgz ab && rm -rf ab
