"""How fast the health test's error-ratio change split (src/stats/limit.rs,
`since_change` at `ERRORS_CHANGE_ALPHA`) shows a rise from 2% to 10% of
errors, and how often it misreads a server steady at 4%, simulated on
binomial counts (no engine): per sweep N requests over every level, 8
sweeps before the change; a split is the last 1, 2 or 3 sweeps against
the rest (Fisher's exact test, both sides), the recent side then tested
against a 5% limit at 95% (Clopper-Pearson). Seeded; prints one line per
(N, alpha).

    python3 benches/sim/errors_change.py

Then the same at 40 requests a sweep as 5 levels of 8, without and with
extra passes in doubt (`verdict::pass_in_doubt`): a level whose own
errors are over 5% sends 8 more, up to 4 times 8 (`verdict_ceiling`),
until they are not. Here at every level; the daemon leaves out the lowest
one (BENCHMARKS.md, "a pass on the pool in doubt sends more"): these
binomial counts have no per-level pools or verdicts, and the daemon's loop
with the rule at level 1 too misread a steady 4% server more often, which
they do not show.
"""
import random, math
from functools import lru_cache
def lnC(n,k): return math.lgamma(n+1)-math.lgamma(k+1)-math.lgamma(n-k+1)
def fisher(k1,n1,k2,n2):
    N=n1+n2; K=k1+k2
    if n1==0 or n2==0 or K==0 or K==N: return (1.0,1.0)
    lo=max(0,n1-(N-K)); hi=min(n1,K)
    pm=lambda x: math.exp(lnC(K,x)+lnC(N-K,n1-x)-lnC(N,n1))
    low=sum(pm(x) for x in range(lo,k1+1)); high=sum(pm(x) for x in range(k1,hi+1))
    return (min(1,low),min(1,high))
def lower_bound(k,n,alpha):
    # Clopper-Pearson lower
    if k==0: return 0.0
    lo,hi=0.0,1.0
    for _ in range(60):
        m=(lo+hi)/2
        # P(X>=k | m)
        p=sum(math.exp(lnC(n,x)+x*math.log(m)+(n-x)*math.log(1-m)) for x in range(k,n+1))
        if p>alpha: hi=m
        else: lo=m
    return lo
def over(k,n,limit=0.05,alpha=0.05): return lower_bound(k,n,alpha)>limit
def since(byr,alpha=0.001):
    best=None
    for s in range(1,len(byr)):
        rk=sum(c[0] for c in byr[:s]); rn=sum(c[1] for c in byr[:s])
        ok=sum(c[0] for c in byr[s:]); on=sum(c[1] for c in byr[s:])
        l,h=fisher(rk,rn,ok,on); p=min(l,h)
        if p<alpha and (best is None or p<best[0]): best=(p,(rk,rn))
    return best
import random, sys
from collections import Counter
def binom(n,p): return sum(random.random()<p for _ in range(n))
for N in [40,80]:
  for alpha in [0.001,0.003,0.01]:
    random.seed(5)
    cnt=Counter()
    for t in range(300):
        hist=[binom(N,0.02) for _ in range(8)]
        for k in range(1,10):
            hist.append(binom(N,0.10))
            w=hist[-9:]
            byr=[(w[8],N),(w[7],N),(w[6],N),(sum(w[:6]),6*N)]
            b=since(byr,alpha)
            e=b[1] if b else (sum(w),9*N)
            if over(*e): cnt[k]+=1; break
        else: cnt['never']+=1
    within3=sum(v for k,v in cnt.items() if k!='never' and k<=3)
    wrong=0; trials=3000
    for t in range(trials):
        sw=[binom(N,0.04) for _ in range(9)]
        byr=[(sw[8],N),(sw[7],N),(sw[6],N),(sum(sw[:6]),6*N)]
        b=since(byr,alpha)
        if b and over(*b[1]): wrong+=1
    print(N, alpha, "2->10 within 3:", within3,"/300", "4% false over:", wrong, "/", trials, flush=True)

def level(p, n=8, ceiling=4, extend=True):
    k=binom(n,p); m=n
    while extend and m<ceiling*n and k/m>0.05:
        k+=binom(n,p); m+=n
    return k,m
def sweep(p, extend, levels=5):
    ks=[level(p,extend=extend) for _ in range(levels)]
    return sum(k for k,_ in ks), sum(m for _,m in ks)
def split(w):
    return [w[8],w[7],w[6],(sum(x[0] for x in w[:6]),sum(x[1] for x in w[:6]))]
for extend in [False,True]:
    random.seed(5)
    cnt=Counter(); sent=[]
    for t in range(300):
        hist=[sweep(0.02,extend) for _ in range(8)]
        for k in range(1,10):
            hist.append(sweep(0.10,extend)); sent.append(hist[-1][1])
            w=hist[-9:]
            b=since(split(w))
            e=b[1] if b else (sum(x[0] for x in w),sum(x[1] for x in w))
            if over(*e): cnt[k]+=1; break
        else: cnt['never']+=1
    within3=sum(v for k,v in cnt.items() if k!='never' and k<=3)
    wrong=0; trials=3000; steady=[]
    for t in range(trials):
        w=[sweep(0.04,extend) for _ in range(9)]; steady.append(w[-1][1])
        b=since(split(w))
        if b and over(*b[1]): wrong+=1
    print("levels of 8, extra passes in doubt" if extend else "levels of 8, no extra passes",
          "2->10 within 3:", within3, "/300", "requests a sweep at 10%%: %.1f" % (sum(sent)/len(sent)),
          "4%% false over: %d / %d" % (wrong, trials), "requests a sweep at 4%%: %.1f" % (sum(steady)/len(steady)), flush=True)
