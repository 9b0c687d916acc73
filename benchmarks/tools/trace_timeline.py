#!/usr/bin/env python3
"""One repetition of a vkasync trace (VKASYNC_TRACE) as a timeline, and its flushes one by one.

Timeline, in bins of BIN µs from the first await of the repetition: how many tasks began
awaiting (`await_b`), the fraction of the bin spent in flushes on the host, with a submission
running on the GPU, in the driver's waits and in its wakes, and how many awaits ended. Then per
flush: its waiters, when the host flushed it and for how long, when the GPU ran it and for how
long, and its commands' GPU times (copies show their bytes and regions in the trace itself).
Usage: trace_timeline.py trace.json[.gz] QUEUE [BIN]; QUEUE is the trace's queue number (the
timed repetitions' queues are the last ones, see trace_summary.py)."""
import collections, gzip, json, sys

path, q = sys.argv[1], int(sys.argv[2])
B = float(sys.argv[3]) if len(sys.argv) > 3 else 500.0
opener = gzip.open if path.endswith(".gz") else open
with opener(path, "rt") as f:
    d = json.load(f)
ev = d["traceEvents"] if isinstance(d, dict) else d
fl = sorted((e for e in ev if e.get("name") == "flush" and e.get("args", {}).get("queue") == q), key=lambda e: e["ts"])
gpu = sorted((e for e in ev if e.get("pid") == 2 and e.get("tid") == q and e["name"].startswith("submission")), key=lambda e: e["ts"])
t0, t1 = fl[0]["ts"], max(e["ts"] + e["dur"] for e in gpu)
lo, hi = t0 - 15000, t1 + 8000
ab = [e for e in ev if e.get("name") == "await" and e["ph"] == "b" and lo <= e["ts"] <= hi]
ae = [e for e in ev if e.get("name") == "await" and e["ph"] == "e" and lo <= e["ts"] <= hi]
start = min([e["ts"] for e in ab] + [t0])
n = int((max([e["ts"] for e in ae] + [t1]) - start) // B) + 1
cols = collections.defaultdict(lambda: [0.0] * n)


def add(name, s, dur):
    """Spreads a span's time over the bins it covers, as a fraction of each bin."""
    while dur > 0:
        i = int((s - start) // B)
        take = min(dur, start + (i + 1) * B - s)
        if 0 <= i < n:
            cols[name][i] += take / B
        s, dur = s + take, dur - take


for e in ab:
    cols["await_b"][int((e["ts"] - start) // B)] += 1
for e in ae:
    cols["await_e"][int((e["ts"] - start) // B)] += 1
for e in fl:
    add("flush", e["ts"], e["dur"])
for e in gpu:
    add("gpu", e["ts"], e["dur"])
for e in ev:
    if e.get("ph") == "X" and e.get("pid") == 1 and e["name"] in ("wake", "wait") and lo <= e["ts"] <= hi:
        add(e["name"], e["ts"], e["dur"])
names = ["await_b", "flush", "gpu", "wait", "wake", "await_e"]
print("ms     " + " ".join(f"{x:>8}" for x in names))
for i in range(n):
    print(f"{i * B / 1000:6.1f} " + " ".join(f"{cols[x][i]:8.2f}" for x in names))
cmds = collections.defaultdict(list)
for e in ev:
    if e.get("pid") == 2 and e.get("tid") == q and e.get("ph") == "X" and not e["name"].startswith(("submission", "phase")):
        cmds[e["args"].get("value")].append(e)
print("waiters  flush at (µs)  host µs |  GPU at (µs)  GPU µs | commands (µs)")
for f, s in zip(fl, gpu):
    inner = " ".join(f"{c['name'].split(' ')[0]}:{c['dur']:.0f}" for c in cmds[s["args"]["value"]])
    print(f"{f['args'].get('waiters', 0):7} {f['ts'] - t0:13.1f} {f['dur']:8.1f} | {s['ts'] - t0:11.1f} {s['dur']:7.1f} | {inner}")
