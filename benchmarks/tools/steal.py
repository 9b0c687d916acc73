#!/usr/bin/env python3
"""Steal time (the share of a virtual machine's CPU time its hypervisor gave to others) while a
process ran, from two snapshots of the `cpu` lines of `/proc/stat`, taken before and after it
and written one after the other into one file. Prints, per file, the steal share of all CPUs
and of the most robbed CPU, in %.
Usage: steal.py FILE..."""
import sys


def steal(path):
    """(all CPUs, most robbed CPU) in %, or None where the file is not two equal snapshots."""
    lines = [l.split() for l in open(path) if l.startswith("cpu")]
    half = len(lines) // 2
    if half == 0 or len(lines) != 2 * half:
        return None
    shares = {}
    for a, b in zip(lines[:half], lines[half:]):
        # user nice system idle iowait irq softirq steal
        d = [int(y) - int(x) for x, y in zip(a[1:9], b[1:9])]
        shares[a[0]] = 100.0 * d[7] / max(sum(d), 1)
    worst = max((v for k, v in shares.items() if k != "cpu"), default=0.0)
    return shares.get("cpu", 0.0), worst


if __name__ == "__main__":
    for p in sys.argv[1:]:
        s = steal(p)
        print(f"{p}: " + ("not two snapshots" if s is None else f"steal {s[0]:.1f}% of all CPUs, {s[1]:.1f}% of the most robbed"))
