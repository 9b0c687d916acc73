#!/usr/bin/env bash
# A new queue's first flush with the copy kernel made per queue (`base`, 91161ff) and per device
# (`new`, a984912), on lavapipe: `tls_pipeline` makes a new queue for each run of a tokio front, so
# a traced process of 7 runs (1 untimed) shows 7 first flushes after the device's first. Three
# processes per build, alternating. Usage: run.sh BASE_BINARY NEW_BINARY
set -u
out=$(cd "$(dirname "$0")" && pwd)
tools=$out/../tools
for round in 1 2 3; do
    for spec in base=$1 new=$2; do
        name=${spec%%=*}
        VKASYNC_TRACE=/tmp/first-flush.json "${spec#*=}" --connections 300 --records 1 --record-size 1024 \
            --reps 6 --warmup 1 --modes staged-shares --workers 2 > /dev/null 2>&1
        echo "## $name, round $round"
        python3 "$tools/first_flush.py" /tmp/first-flush.json
    done
done
