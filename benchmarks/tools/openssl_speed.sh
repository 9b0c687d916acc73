#!/usr/bin/env bash
# OpenSSL's AES-256-CTR and HMAC-SHA256 on this host at each record size given: one core, then
# one process per core at once (the sum is all cores). Prints one line per size and algorithm.
#
#   benchmarks/tools/openssl_speed.sh 16384 1024
set -u
openssl version
for b in "$@"; do
    for a in "-evp aes-256-ctr" "-hmac sha256"; do
        one=$(openssl speed -seconds 1 $a -bytes $b 2>/dev/null | tail -1)
        all=$(for p in $(seq "$(nproc)"); do openssl speed -seconds 1 $a -bytes $b 2>/dev/null | tail -1 & done; wait)
        sum=$(awk '{gsub("k", "", $NF); s += $NF} END {printf "%.2f", s * 1000 / 1e9}' <<< "$all")
        echo "$b B, $a: one core: $one; $(nproc) processes at once: $sum GB/s in all"
    done
done
