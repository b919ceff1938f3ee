"""The rule that sends a level in doubt more requests
(`verdict::in_doubt`, `sweep::level_run`), simulated on binomial counts
(no engine), on sweeps shaped as the daemon's against the built-in engine
with knee 8: a warm sweep sends 8 requests at level 1 and 24 at level 8;
every sixth sweep is full (8 at levels 1 and 2, 12 at level 4, 24 at
level 8). Levels above the lowest send their planned count again while
they are in doubt. The health test is `stats::limit`'s, as in
`errors_change.py`: the errors of every level, this sweep and the 8
before, split at the most likely change of the last 1, 2 or 3 sweeps
(Fisher's exact test at 0.001), then the recent side (or, with no split,
the whole) over a 5% limit at 95%.

Two rules, each on the same seeds:
  before: in doubt while the level's own requests observe over 5%, up to
          4 times its planned count;
  now:    a level whose pass is fine (one error of it within 5%: 24
          requests, level 8) is in doubt after its first pass over half
          the limit (2.5%), after more over 5%, up to 8 times its planned
          count; a coarser one (8 or 12 requests) as before.

Prints per rule: loops (of LOOPS) in which a rise from 2% to 10% of
errors read over the limit within 3 sweeps; sweeps of a server steady at
4% read over it (false), and their longest run; requests a sweep at 2%,
4% and 10%.

    python3 benches/sim/doubt_rule.py [LOOPS]
"""
import math, random, sys
from functools import lru_cache

LIMIT, CHANGE_ALPHA = 0.05, 0.001


def lnC(n, k):
    return math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)


@lru_cache(maxsize=None)
def fisher(k1, n1, k2, n2):
    N, K = n1 + n2, k1 + k2
    if n1 == 0 or n2 == 0 or K == 0 or K == N:
        return 1.0
    lo, hi = max(0, n1 - (N - K)), min(n1, K)
    pm = lambda x: math.exp(lnC(K, x) + lnC(N - K, n1 - x) - lnC(N, n1))
    return min(sum(pm(x) for x in range(lo, k1 + 1)), sum(pm(x) for x in range(k1, hi + 1)))


@lru_cache(maxsize=None)
def upper_tail(n, p, k):
    return sum(math.exp(lnC(n, x) + x * math.log(p) + (n - x) * math.log(1 - p)) for x in range(k, n + 1))


def over(k, n):
    return n > 0 and k > 0 and upper_tail(n, LIMIT, k) < 0.05


def binom(n, p):
    return sum(random.random() < p for _ in range(n))


def reads_over(earlier, this):
    w = earlier[-8:]
    pad = [(0, 0)] * (2 - min(2, len(w)))
    recent = [this] + list(reversed(w[-2:])) + pad
    older = w[:-2]
    by_recency = recent + [(sum(k for k, _ in older), sum(n for _, n in older))]
    best = None
    for s in range(1, len(by_recency)):
        r = (sum(k for k, _ in by_recency[:s]), sum(n for _, n in by_recency[:s]))
        o = (sum(k for k, _ in by_recency[s:]), sum(n for _, n in by_recency[s:]))
        p = fisher(r[0], r[1], o[0], o[1])
        if p < CHANGE_ALPHA and (best is None or p < best[0]):
            best = (p, r)
    judged = best[1] if best else (sum(k for k, _ in by_recency), sum(n for _, n in by_recency))
    return over(*judged)


def level(p, n, extend, rule):
    k, m = binom(n, p), n
    fine = rule == "now" and 1 / n <= LIMIT
    ceiling = (8 if fine else 4) * n
    while extend and m < ceiling:
        part = 0.5 if (fine and m == n) else 1.0
        if k / m <= LIMIT * part:
            break
        k, m = k + binom(n, p), m + n
    return k, m


def sweep(p, full, rule):
    plan = [(8, False), (8, True), (12, True), (24, True)] if full else [(8, False), (24, True)]
    ks = [level(p, n, ext, rule) for n, ext in plan]
    return sum(k for k, _ in ks), sum(m for _, m in ks)


def run(rule, loops):
    random.seed(3)
    within, sent = 0, {0.02: [], 0.04: [], 0.10: []}
    for _ in range(loops):
        hist = [sweep(0.02, i % 6 == 0, rule) for i in range(10)]
        sent[0.02].extend(m for _, m in hist)
        for i in range(10, 13):
            s = sweep(0.10, i % 6 == 0, rule)
            sent[0.10].append(s[1])
            if reads_over(hist, s):
                within += 1
                break
            hist.append(s)
    false = sweeps = run_ = longest = 0
    for _ in range(loops // 4):
        hist = []
        for i in range(40):
            s = sweep(0.04, i % 6 == 0, rule)
            sent[0.04].append(s[1])
            if i >= 8:
                sweeps += 1
                run_ = run_ + 1 if reads_over(hist, s) else 0
                false += run_ > 0
                longest = max(longest, run_)
            hist.append(s)
    mean = lambda v: sum(v) / len(v)
    print(f"{rule:6} rise 2%->10% within 3: {within}/{loops}  steady 4% read over: {false}/{sweeps}"
          f" (longest run {longest})  requests a sweep at 2%: {mean(sent[0.02]):.0f},"
          f" 4%: {mean(sent[0.04]):.0f}, 10%: {mean(sent[0.10]):.0f}", flush=True)


loops = int(sys.argv[1]) if len(sys.argv) > 1 else 300
for rule in ["before", "now"]:
    run(rule, loops)
