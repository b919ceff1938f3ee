"""How often the sustained search keeps the rate it starts from, by the
true shed ratio at that rate: the operating characteristic of its step
and confirmation (src/sweep/sustained.rs, src/stats/sustained.rs,
src/stats/verdict.rs), computed exactly on binomial counts (no engine).

The path: a step of N1 counted requests breaks when its sheds are over a
5% limit at 95% (exact one-sided binomial test) and is otherwise a pass
or undecided; either way the rate is then confirmed by N2 more requests,
pooled with the step's. The confirmation holds when the pool is not over
the limit at 95%, observes at most 5%, is within 5% by the pass rule (the
Clopper-Pearson bound at 50%, PASS_CONFIDENCE), and the confirmation's own
N2 requests observe at most 5%. Beside it, the rule that keeps only "the
pool observes at most 5%".

N1 = 35 and N2 = 70 are the sizes at 16.6 req/s with a 0.26 s hold
(`the_least_budget_holds_one_step_and_its_confirmation`); the shedding
engine of `cargo bench --bench open_loop` sheds about 3.3% at its model's
start. Prints one line per true shed ratio; then, for any rule that keeps the
rate when at most t of n counted requests at it were shed (n = 105, the
start's step and confirmation, and 219, the whole 3x-ladder budget), the
lowest t that keeps a true 3.3% in at least 95% of searches, and how
often that t keeps a rate at 4%, 5%, 6% and 8%.

    python3 benches/sim/confirmation_oc.py
"""
from math import comb

LIMIT = 0.05


def pmf(n, p):
    return [comb(n, k) * p**k * (1 - p) ** (n - k) for k in range(n + 1)]


def over(k, n, alpha=0.05):
    """k of n is evidence at `alpha` that the true ratio is over LIMIT."""
    return k > 0 and sum(pmf(n, LIMIT)[k:]) < alpha


def within_by_pass_rule(k, n):
    """The Clopper-Pearson upper bound at 50% is at most LIMIT."""
    return sum(pmf(n, LIMIT)[: k + 1]) <= 0.5


def keeps(p, rule, n1=35, n2=70):
    step, conf = pmf(n1, p), pmf(n2, p)
    total = 0.0
    for k1, a in enumerate(step):
        if over(k1, n1):
            continue
        for k2, b in enumerate(conf):
            if rule(k2, k1 + k2, n1 + n2, n2):
                total += a * b
    return total


def shipped(own, k, n, n2):
    return not over(k, n) and k <= LIMIT * n and within_by_pass_rule(k, n) and own <= LIMIT * n2


def pool_observed(own, k, n, n2):
    return k <= LIMIT * n


if __name__ == "__main__":
    print("true shed  kept (shipped rule)  kept (pool observes <= 5% only)")
    for p in [0.02, 0.027, 0.033, 0.039, 0.045, 0.05, 0.06, 0.08]:
        print(f"{p:9.1%}  {keeps(p, shipped):19.3f}  {keeps(p, pool_observed):31.3f}")

    print()
    print("n    t   kept at: 3.3%   4%     5%     6%     8%")
    for n in (105, 219):
        t = next(t for t in range(n) if sum(pmf(n, 0.033)[: t + 1]) >= 0.95)
        kept = [sum(pmf(n, p)[: t + 1]) for p in (0.033, 0.04, 0.05, 0.06, 0.08)]
        print(f"{n:<4} {t:<3}         " + "  ".join(f"{k:.3f}" for k in kept))
