#!/usr/bin/env python3
"""Bytes a heaptrack recording still held at its end, grouped by squadd's
call sites (the innermost five of its own frames).

Usage: top.py DIR [N]   (DIR holds heaptrack.out.zst; N divides the totals)
"""
import collections
import re
import subprocess
import sys

d = sys.argv[1]
n = int(sys.argv[2]) if len(sys.argv) > 2 else 1
stacks = f"{d}/stacks.txt"
subprocess.run(
    ["heaptrack_print", "-f", f"{d}/heaptrack.out.zst",
     "--flamegraph-cost-type", "leaked", "-F", stacks],
    stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
ours = re.compile(r"\((index|session|routing|timers|intake|validate|core|answers|hooks|"
                  r"notices|writer|upkeep|mod|squadd)\.rs\)")
held = collections.Counter()
total = 0
for line in open(stacks):
    stack, _, size = line.rstrip().rpartition(" ")
    size = int(size)
    total += size
    frames = [f for f in stack.split(";") if ours.search(f) and "alloc" not in f]
    held[" <- ".join(reversed(frames[-5:])) or "(elsewhere)"] += size
print(f"held at the end: {total} B ({total / n:.0f} B per message)")
for site, size in held.most_common(25):
    print(f"{size / n:8.0f} B  {site[:200]}")
