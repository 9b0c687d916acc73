#!/usr/bin/env bash
# The main example's defaults on a GPU host, as a newcomer runs them, with what every run must
# record: `tls_pipeline` with no arguments (copy queues on for the coalesced fronts, the
# default) and with `--copy-queues off`, alternating, ROUNDS (2) of each, every process alone;
# the SM clock sampled every 50 ms beside every timed run's host clock (`--runs-csv`);
# OpenSSL's AES-256-CTR and HMAC-SHA256 on one core and on every core, at 16 KiB and 1 KiB.
# Everything goes to `$OUT/defaults.tgz`.
#
# Run on the device machine from the repository root, with the binary built here and carried
# there (see `../shared/GPU.md`):
#
#   benchmarks/tools/defaults_gpu.sh .gpu/tls
set -u
[ $# -eq 1 ] || { echo "usage: $0 TLS_PIPELINE_BINARY" >&2; exit 2; }
bin=$1
OUT=${OUT:-/tmp/defaults-out}
R=$OUT/defaults
mkdir -p "$R"
# shellcheck source=gpu_env.sh
. "$(dirname "$0")/gpu_env.sh"
{ host_describe; nvidia-smi -L 2>&1; } > "$R/host.txt"
clocks_start "$R/clocks-50ms.csv"
for round in $(seq 1 "${ROUNDS:-2}"); do
    for cq in on off; do
        "$bin" --copy-queues $cq --csv "$R/cq-$cq-$round.csv" --runs-csv "$R/cq-$cq-$round-runs.csv" \
            > "$R/cq-$cq-$round.txt" 2>&1
    done
done
[ -n "$clocks" ] && kill "$clocks"
"$(dirname "$0")/openssl_speed.sh" 16384 1024 > "$R/openssl.txt" 2>&1
(cd "$OUT" && tar czf defaults.tgz defaults && rm -rf defaults)
