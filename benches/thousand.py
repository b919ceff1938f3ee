#!/usr/bin/env python3
"""Benchmark (not a test): one llmprobe instance holding a large fleet for a
long time, while the fleet changes and the configuration is reloaded.

  benches/thousand.py                          # 1000 targets, 60 s interval, one hour
  N=200 DURATION=300 benches/thousand.py       # the short variant
  LLMPROBE=target/release/llmprobe OUT=/tmp/run benches/thousand.py

Targets come from file_sd files, spread over built-in simulated engines on
loopback: most healthy (stub), some shedding (one place, levels of 2), some
timing out (decode steps longer than request_timeout), some resetting every
stream, and a few unreachable (a closed port). Every minute a share of the
targets is removed and as many new ones added; every five minutes the
configuration is rewritten, alternately valid (interval unchanged) and
invalid (an unknown key), and reloaded with POST /-/reload.

Every minute it records: RSS, open file descriptors, threads, series count
and scrape time of /metrics, sweeps finished per minute against targets
present, healthy targets swept not at all / more than once in the last full
interval, and stale series of targets removed more than one interval ago
(must be 0). At the end: a table per minute (also written as CSV to OUT) and
a verdict per target of issue 14. Needs python3 and a release build.
"""

import json
import os
import re
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter, defaultdict

N = int(os.environ.get("N", "1000"))
DURATION = int(os.environ.get("DURATION", "3600"))
INTERVAL = int(os.environ.get("INTERVAL", "60"))
CHURN = float(os.environ.get("CHURN", "0.02"))  # share of targets replaced per minute
RELOAD_EVERY = int(os.environ.get("RELOAD_EVERY", "300"))
SAMPLE_EVERY = int(os.environ.get("SAMPLE_EVERY", "60"))

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.environ.get("LLMPROBE") or os.path.join(
    os.environ.get("CARGO_TARGET_DIR", os.path.join(REPO, "target")), "release", "llmprobe")
WORK = os.environ.get("OUT") or tempfile.mkdtemp(prefix="llmprobe-thousand-")
os.makedirs(WORK, exist_ok=True)

# Share of the fleet per kind of engine; the rest is healthy.
KINDS = [("shedding", 0.05), ("timeout", 0.03), ("reset", 0.03), ("unreachable", 0.02)]


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


procs = []


def start(args, log):
    p = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=open(os.path.join(WORK, log), "w"))
    procs.append(p)
    return p


def stop_all():
    for p in procs:
        if p.poll() is None:
            p.send_signal(signal.SIGTERM)
    for p in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()


def engines():
    """Four healthy stub engines and one engine per broken kind."""
    ports = {}
    for i in range(4):
        port = free_port()
        start([BIN, "simulate", "--profile", "stub", "--listen", f"127.0.0.1:{port}"], f"healthy-{i}.log")
        ports.setdefault("healthy", []).append(port)
    port = free_port()
    start([BIN, "simulate", "--profile", "stub", "--max-in-flight", "1", "--listen", f"127.0.0.1:{port}"],
          "shedding.log")
    ports["shedding"] = [port]
    port = free_port()
    start([BIN, "simulate", "--profile", "stub", "--step-base", "3s", "--listen", f"127.0.0.1:{port}"],
          "timeout.log")
    ports["timeout"] = [port]
    port = free_port()
    start([BIN, "simulate", "--profile", "stub", "--reset-ratio", "1", "--listen", f"127.0.0.1:{port}"],
          "reset.log")
    ports["reset"] = [port]
    ports["unreachable"] = [free_port()]  # nothing listens there
    return ports


def kind_of(i):
    """The engine kind of target number i (stable, so a name keeps its kind)."""
    x = (i * 2654435761 % 1000) / 1000.0
    acc = 0.0
    for kind, share in KINDS:
        acc += share
        if x < acc:
            return kind
    return "healthy"


def write_file_sd(ids, ports):
    groups = defaultdict(list)
    for i in ids:
        kind = kind_of(i)
        port = ports[kind][i % len(ports[kind])]
        groups[(kind, port)].append(i)
    # One group per target: each needs its own name label.
    doc = [(i, {"targets": [f"127.0.0.1:{port}"], "labels": {"name": f"t{i:05d}", "kind": kind}})
           for (kind, port), members in sorted(groups.items()) for i in members]
    # Half the targets in each of two files (by number, so that a target
    # stays in its file), so a change rewrites both. A target moving between
    # files could vanish for one refresh: the daemon may read one file
    # rewritten and the other not yet, as Prometheus' file_sd would.
    for part in (0, 1):
        path = os.path.join(WORK, f"targets-{part}.json")
        tmp = path + ".tmp"
        with open(tmp, "w") as f:
            json.dump([group for i, group in doc if i % 2 == part], f)
        os.replace(tmp, path)


def config(listen, valid):
    # A top-level unknown key (indented, it was a YAML syntax error instead).
    bad = "not_a_key: 1\n" if not valid else ""
    return f"""listen: "{listen}"
schedule: {{ interval: {INTERVAL}s, jitter: 10%, max_in_flight_total: 256, sweep_timeout: 50s }}
{bad}defaults:
  workload: chat
  warmup_requests: 1
  levels: [1, 2]
  requests_per_level: 2x
  min_requests_per_level: 2
  request_timeout: 2s
  slo: {{ p95_latency: 1s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }}
workloads:
  chat:
    max_completion_tokens: 8
    prompts: ["Summarise the benefits of a private AI server in 150 words."]
file_sd:
  files: [targets-*.json]
  refresh_interval: 10s
target_template:
  name_label: name
  model: sim-stub
  labels: [kind]
"""


def metrics(port):
    t0 = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30).read().decode()
    return body, time.perf_counter() - t0


def proc_status(pid):
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            k, _, v = line.partition(":")
            out[k] = v.strip()
    return out


SERIES = re.compile(r'^([a-z_:]+)(\{[^}]*\})? (\S+)$')
TARGET = re.compile(r'target="([^"]*)"')


def main():
    if not os.path.exists(BIN):
        subprocess.run(["cargo", "build", "--release", "--quiet"], cwd=REPO, check=True)
    ports = engines()
    port = free_port()
    listen = f"127.0.0.1:{port}"
    cfg = os.path.join(WORK, "llmprobe.yaml")
    open(cfg, "w").write(config(listen, True))
    next_id = N
    ids = list(range(N))
    write_file_sd(ids, ports)
    time.sleep(1)
    daemon = start([BIN, "run", "--config", cfg, "--log-format", "json"], "llmprobe.log")
    for _ in range(100):
        try:
            metrics(port)
            break
        except OSError:
            time.sleep(0.2)
    t_start = time.time()
    print(f"llmprobe {subprocess.run([BIN, '--version'], capture_output=True, text=True).stdout.split()[-1]}: "
          f"{N} targets, interval {INTERVAL}s, {DURATION}s, churn {CHURN:.0%}/min, reload every {RELOAD_EVERY}s; "
          f"work dir {WORK}", file=sys.stderr)

    removed_at = {}  # target name -> time it left the files
    present_since = {f"t{i:05d}": t_start for i in ids}
    rows = []
    reloads = []  # (time, valid, http status, reload_successful gauge after)
    last_sweeps = None
    next_churn = t_start + 60
    next_reload = t_start + RELOAD_EVERY
    next_sample = t_start + SAMPLE_EVERY
    reload_valid = False  # the first reload is invalid, then they alternate
    while time.time() - t_start < DURATION:
        now = time.time()
        if daemon.poll() is not None:
            print("daemon exited", file=sys.stderr)
            break
        if now >= next_churn:
            k = max(1, int(len(ids) * CHURN))
            gone, ids = ids[:k], ids[k:] + list(range(next_id, next_id + k))
            next_id += k
            for i in gone:
                removed_at[f"t{i:05d}"] = now
                present_since.pop(f"t{i:05d}", None)
            for i in ids[-k:]:
                present_since[f"t{i:05d}"] = now
            write_file_sd(ids, ports)
            next_churn += 60
        if now >= next_reload:
            open(cfg, "w").write(config(listen, reload_valid))
            req = urllib.request.Request(f"http://{listen}/-/reload", method="POST")
            try:
                status = urllib.request.urlopen(req, timeout=30).status
            except urllib.error.HTTPError as e:
                status = e.code
            try:
                body, _ = metrics(port)
                ok = next((l.split()[-1] for l in body.splitlines()
                           if l.startswith("llmprobe_config_last_reload_successful")), "?")
            except OSError:
                ok = "?"
            reloads.append((now - t_start, reload_valid, status, ok))
            if not reload_valid:
                # Put the valid file back so that a restart would work.
                open(cfg, "w").write(config(listen, True))
            reload_valid = not reload_valid
            next_reload += RELOAD_EVERY
        if now >= next_sample:
            st = proc_status(daemon.pid)
            fds = len(os.listdir(f"/proc/{daemon.pid}/fd"))
            times = []
            for _ in range(5):
                body, dt = metrics(port)
                times.append(dt)
            series, stale, sweeps = 0, set(), Counter()
            for line in body.splitlines():
                if not line or line.startswith("#"):
                    continue
                series += 1
                m = SERIES.match(line)
                if not m:
                    continue
                t = TARGET.search(m.group(2) or "")
                if m.group(1) == "llmprobe_sweeps_total" and t:
                    sweeps[t.group(1)] += float(m.group(3))
                if t and t.group(1) in removed_at and now - removed_at[t.group(1)] > INTERVAL * 1.2:
                    stale.add(t.group(1))
            rows.append({
                "minute": round((now - t_start) / 60, 1),
                "rss_mib": int(st["VmRSS"].split()[0]) / 1024,
                "hwm_mib": int(st["VmHWM"].split()[0]) / 1024,
                "fds": fds,
                "threads": int(st["Threads"]),
                "series": series,
                "exposition_kib": len(body) / 1024,
                "scrape_ms_median": 1000 * statistics.median(times),
                "scrape_ms_max": 1000 * max(times),
                # Over the targets present at both samples: a removed
                # target's counter leaves the sum, an added one starts at 0.
                "sweeps_since_last_sample": None if last_sweeps is None else
                int(sum(n - last_sweeps[t] for t, n in sweeps.items() if t in last_sweeps)),
                "targets_present": len(present_since),
                "stale_targets": len(stale),
                # The machine may be shared: scrape times and sweep delays depend on it.
                "load1": os.getloadavg()[0],
            })
            last_sweeps = sweeps
            r = rows[-1]
            print(f"{r['minute']:6.1f} min  rss {r['rss_mib']:6.1f} MiB  fds {r['fds']:5d}  threads {r['threads']:3d}  "
                  f"series {r['series']:7d}  scrape {r['scrape_ms_median']:6.1f}/{r['scrape_ms_max']:6.1f} ms  "
                  f"sweeps {r['sweeps_since_last_sample'] if r['sweeps_since_last_sample'] is not None else '-':>6}  "
                  f"stale {r['stale_targets']}  load {r['load1']:.1f}", file=sys.stderr)
            next_sample += SAMPLE_EVERY
        time.sleep(0.5)

    end = time.time()
    daemon.send_signal(signal.SIGTERM)
    daemon.wait(timeout=30)
    stop_all()
    report(rows, reloads, present_since, removed_at, t_start, end)


def report(rows, reloads, present_since, removed_at, t_start, end):
    with open(os.path.join(WORK, "minutes.csv"), "w") as f:
        keys = list(rows[0].keys()) if rows else []
        f.write(",".join(keys) + "\n")
        for r in rows:
            f.write(",".join(f"{r[k]:.2f}" if isinstance(r[k], float) else str(r[k]) for k in keys) + "\n")
    # Sweeps per target from the log, over the last full interval that
    # every target present at its start should have been swept in.
    finished = defaultdict(list)
    errors_healthy = []
    panics = 0
    for line in open(os.path.join(WORK, "llmprobe.log")):
        if "panicked" in line:
            panics += 1
        try:
            e = json.loads(line)
        except ValueError:
            continue
        f = e.get("fields", {})
        name = f.get("target_name") or f.get("target")
        if f.get("message") in ("sweep finished", "sweep failed") and name:
            ts = time.mktime(time.strptime(e["timestamp"][:19], "%Y-%m-%dT%H:%M:%S")) - time.timezone
            finished[name].append(ts)
        if e.get("level") == "ERROR" and name and kind_of(int(name[1:])) == "healthy":
            errors_healthy.append(line.strip())
    # Windows of one interval (+ jitter) over the second half of the run.
    w = INTERVAL * 1.1
    starved, doubled, checked = 0, 0, 0
    t = t_start + DURATION / 2
    while t + w <= end - 1:
        for name, since in present_since.items():
            if since > t - 2 * INTERVAL or kind_of(int(name[1:])) != "healthy":
                continue
            n = sum(1 for ts in finished.get(name, []) if t <= ts < t + w)
            checked += 1
            starved += n == 0
            # Two sweeps inside 1.1 intervals can happen with jitter; three cannot.
            doubled += n > 2
        t += w
    print()
    if rows:
        half = [r for r in rows if r["minute"] >= rows[-1]["minute"] / 2]
        rss = [r["rss_mib"] for r in half]
        print(f"RSS: end {rows[-1]['rss_mib']:.1f} MiB, peak VmHWM {rows[-1]['hwm_mib']:.1f} MiB, "
              f"second half {min(rss):.1f}-{max(rss):.1f} MiB")
        print(f"scrape of /metrics: median of medians {statistics.median(r['scrape_ms_median'] for r in rows):.1f} ms, "
              f"max {max(r['scrape_ms_max'] for r in rows):.1f} ms; exposition {rows[-1]['exposition_kib']:.0f} KiB, "
              f"{rows[-1]['series']} series")
        print(f"fds {min(r['fds'] for r in half)}-{max(r['fds'] for r in half)}, "
              f"threads {min(r['threads'] for r in half)}-{max(r['threads'] for r in half)} (second half)")
        print(f"stale series of removed targets: at most {max(r['stale_targets'] for r in rows)} targets at any sample")
    print(f"healthy targets over the second half, per window of {w:.0f} s: {checked} checks, "
          f"{starved} not swept, {doubled} swept more than twice")
    print(f"reloads: " + ", ".join(f"{t:.0f}s {'valid' if v else 'invalid'} -> {s} (reload_successful {ok})"
                                   for t, v, s, ok in reloads))
    if rows:
        print(f"load average (1 min) of the machine: {min(r['load1'] for r in rows):.1f}-"
              f"{max(r['load1'] for r in rows):.1f}, median {statistics.median(r['load1'] for r in rows):.1f}")
    print(f"panics in the log: {panics}; ERROR lines for healthy targets: {len(errors_healthy)}")
    for line in errors_healthy[:5]:
        print("  " + line[:300])
    print(f"per-minute table: {os.path.join(WORK, 'minutes.csv')}")


if __name__ == "__main__":
    try:
        main()
    finally:
        stop_all()
