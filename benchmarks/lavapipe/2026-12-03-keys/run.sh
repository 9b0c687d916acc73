#!/bin/bash
# lavapipe (2-core VM): the native executor's `auto` mode (records of 1 KiB sealed at once on the
# host) with one record per connection, before (2a8b01e: every connection's task also expanded
# the waits-only mode's AES and HMAC keys inside the timed run) and after (the coalesced modes
# use only the connection's RecordKeys, expanded before the clock like the CPU modes' keys),
# alternating processes. BEFORE and AFTER: the two builds of
# `cargo build --release --example tls_pipeline`.
set -u
for i in 1 2 3; do for b in before:$BEFORE after:$AFTER; do
  "${b#*:}" --connections 10000 --records 1 --record-size 1024 --reps 9 --modes auto,cpu-1 --csv ${b%%:*}-$i.csv > /dev/null
done; done
