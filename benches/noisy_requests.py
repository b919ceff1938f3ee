#!/usr/bin/env python3
"""Requests a sweep in each phase of `noisy_knee --change` runs.

Reads the per-sweep lines that `NOISY_DEBUG=1` prints ("seed S Kind knee
K ... | L:Verdict k/n slow ... |"), adds up each sweep's `n` over its
levels (the requests that ended there), and prints the mean per phase:
sweeps 1 to P of each loop, then P+1 to 2P, and so on (`--phase P`, as
the run was given). Usage:

    python3 benches/noisy_requests.py --phase 10 RUN.txt [RUN.txt ...]
"""

import argparse
import re
from collections import defaultdict

SWEEP = re.compile(r"seed (\d+) \w+ knee ")
LEVEL = re.compile(r"\d+:[A-Za-z][^|]*? \d+/(\d+) slow")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--phase", type=int, required=True)
    ap.add_argument("runs", nargs="+")
    args = ap.parse_args()
    per_phase = defaultdict(list)
    for path in args.runs:
        sweeps = defaultdict(list)
        with open(path) as f:
            for line in f:
                m = SWEEP.match(line)
                if m:
                    total = sum(int(n) for n in LEVEL.findall(line))
                    sweeps[(path, m.group(1))].append(total)
        for counts in sweeps.values():
            for i, total in enumerate(counts):
                per_phase[i // args.phase].append(total)
    for phase in sorted(per_phase):
        got = per_phase[phase]
        print(f"phase {phase + 1}: {sum(got) / len(got):.1f} requests a sweep over {len(got)} sweeps")


if __name__ == "__main__":
    main()
