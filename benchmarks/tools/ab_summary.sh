#!/usr/bin/env bash
# The summaries of an `ab_h200.sh` folder DIR (run there at its end where the machine has Python,
# or here on the unpacked archive): `summary.csv`, one row per process (its median run, host
# time per record, flush count, `flush_ms`, and the steal time while it ran, of all CPUs and of
# the most robbed one); `clocks-by-run.txt`, every timed run matched
# with the SM clock (`clock_join.py`); with traces, `traces.txt`: per queue the flushes, the
# GPU's busy time and the host's time in flushes, and per trace the wakes of the tasks.
#   benchmarks/tools/ab_summary.sh DIR
set -u
R=${1:?usage: ab_summary.sh DIR}
tools=$(cd "$(dirname "$0")" && pwd)
python3 - "$R" "$tools" > "$R/summary.csv" << 'EOF'
import csv, glob, os, re, sys
r = sys.argv[1]

sys.path.insert(0, sys.argv[2])
from steal import steal as steal_of


def steal(name):
    """Steal time while the process ran (`steal.py`), of all CPUs and of the most robbed one."""
    path = os.path.join(r, "stat", name + ".txt")
    s = steal_of(path) if os.path.exists(path) else None
    return ("", "") if s is None else (f"{s[0]:.1f}", f"{s[1]:.1f}")


print("process,mode,record_bytes,gb_per_s,gb_per_s_min,gb_per_s_max,cpu_us_per_record,flushes,flush_ms,"
      "steal_pct,steal_pct_worst_cpu")
for path in sorted(glob.glob(os.path.join(r, "csv", "*.csv"))):
    name = os.path.basename(path)[:-4]
    log = os.path.join(r, name + ".txt")
    stats = dict(re.findall(r"(flushes|flush_ms)=([0-9.]+)", open(log).read())) if os.path.exists(log) else {}
    for row in csv.DictReader(open(path)):
        print(",".join([name, row["mode"], row["record_bytes"], row["gb_per_s"], row["gb_per_s_min"],
                        row["gb_per_s_max"], row["cpu_us_per_record"], stats.get("flushes", ""),
                        stats.get("flush_ms", ""), *steal(name)]))
EOF
if [ -s "$R/clocks-50ms.csv" ]; then
    python3 "$tools/clock_join.py" "$R/clocks-50ms.csv" "$R"/runs/*.csv > "$R/clocks-by-run.txt" 2>&1
fi
if ls "$R"/traces/*.json.gz > /dev/null 2>&1; then
    python3 "$tools/trace_summary.py" "$R"/traces/*.json.gz > "$R/traces.txt" 2>&1
    # The host's wakes of the tasks whose work completed (`wake` spans), per trace.
    python3 - "$R"/traces/*.json.gz >> "$R/traces.txt" 2>&1 << 'EOF'
import gzip, json, sys
for path in sys.argv[1:]:
    d = json.load(gzip.open(path, "rt"))
    ev = d["traceEvents"] if isinstance(d, dict) else d
    w = [e for e in ev if e.get("ph") == "X" and e.get("name") == "wake"]
    n, ms = sum(e["args"].get("wakers", 0) for e in w), sum(e["dur"] for e in w) / 1e3
    print(f"{path}: {len(w)} wakes of {n} tasks, {ms:.2f} ms in all, {1e3 * ms / max(n, 1):.3f} us a task")
EOF
fi
