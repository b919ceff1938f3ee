#!/usr/bin/env python3
"""How often "no single sweep makes a pooled break" withholds a break.

Per scenario, 20,000 simulated levels (seeded): earlier sweeps of a given
size and this sweep's, each request failing at a true error rate. A level
breaks on the pool as `stats::verdict::decide` does: the exact one-sided
binomial test of the pooled count against the 5% limit at 95%, with this
sweep's own ratio over the limit (the change test that drops a pool is
left out: every sweep here draws from the same rate). Of those breaks, the script counts how
many each form of the rule withholds: "over" (the rest of the pool, without
the sweep with the most errors, observes a ratio over the limit; the rule
before `REST_ALPHA`) and "shown" (the rest is over the limit at the exact
test's significance 0.25, `verdict::REST_ALPHA`).

    python3 benches/sim/one_sweep.py
"""
import math
import random

LIMIT, ALPHA, REST_ALPHA, LEVELS = 0.05, 0.05, 0.25, 20_000


def upper_tail(n, p, k):
    """P(X >= k) for X ~ Binomial(n, p)."""
    if k <= 0:
        return 1.0
    return sum(math.comb(n, i) * p**i * (1 - p) ** (n - i) for i in range(k, n + 1))


def over_limit(k, n, alpha):
    return k > 0 and upper_tail(n, LIMIT, k) < alpha


def run(rate, earlier, size, current, rng):
    breaks = over = shown = 0
    sizes = [size] * earlier + [current]
    for _ in range(LEVELS):
        sweeps = [sum(rng.random() < rate for _ in range(n)) for n in sizes]
        k, n = sum(sweeps), sum(sizes)
        if not (over_limit(k, n, ALPHA) and sweeps[-1] / current > LIMIT):
            continue
        breaks += 1
        worst = max(range(len(sweeps)), key=lambda i: sweeps[i])
        rk, rn = k - sweeps[worst], n - sizes[worst]
        over += not (rn > 0 and rk / rn > LIMIT)
        shown += not over_limit(rk, rn, REST_ALPHA)
    return breaks, over, shown


def main():
    rng = random.Random(28)
    print("rate  earlier x size + this sweep   breaks  withheld (over)  withheld (shown)")
    for rate in (0.02, 0.04, 0.10, 0.15):
        for earlier, size, current in ((8, 8, 8), (8, 24, 24), (1, 12, 36), (4, 12, 36), (8, 12, 36), (1, 32, 8), (2, 24, 24)):
            b, o, s = run(rate, earlier, size, current, rng)
            print(f"{rate:4.0%}  {earlier} x {size:2} + {current:2}{'':16}{b:6}  {o:15}  {s:16}")


if __name__ == "__main__":
    main()
