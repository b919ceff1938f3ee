#!/usr/bin/env bash
# Benchmark (not a test): one llmprobe instance measuring a fleet of targets
# discovered from a file_sd file, all served by one simulated stub engine
# (no model time, so only llmprobe's own cost shows). Reports
#   - resident memory (VmRSS, and the peak VmHWM) and CPU time used,
#   - /metrics size and scrape time (median and p95 of 50 scrapes),
#   - how the sweeps spread over the interval: how long the first round took
#     to start every target, and in the last full interval how many sweeps
#     finished in each tenth of it, and the most sweeps running at once.
#
#   benches/fleet.sh                      # 200 targets, 60s interval, 3 intervals
#   N=500 INTERVAL=120 ROUNDS=2 benches/fleet.sh
#   LLMPROBE=/usr/local/bin/llmprobe benches/fleet.sh
#
# Needs bash, python3, and a release build (built when missing).
set -euo pipefail

N=${N:-200}
INTERVAL=${INTERVAL:-60}
ROUNDS=${ROUNDS:-3}
repo=$(cd "$(dirname "$0")/.." && pwd)
bin=${LLMPROBE:-${CARGO_TARGET_DIR:-$repo/target}/release/llmprobe}
if [ ! -x "$bin" ]; then
    (cd "$repo" && cargo build --release)
fi

work=$(mktemp -d)
pids=()
cleanup() {
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
stub_port=$(free_port)
port=$(free_port)

"$bin" simulate --profile stub --listen "127.0.0.1:$stub_port" 2>"$work/stub.log" &
pids+=($!)

python3 - "$N" "$stub_port" >"$work/targets.json" <<'PY'
import json, sys
n, port = int(sys.argv[1]), sys.argv[2]
print(json.dumps([{"targets": [f"127.0.0.1:{port}"],
                   "labels": {"name": f"bench-{i:04d}", "gpu": "sim"}} for i in range(n)]))
PY

cat >"$work/llmprobe.yaml" <<YAML
listen: "127.0.0.1:$port"
schedule: { interval: ${INTERVAL}s, jitter: 10%, max_in_flight_total: 64, sweep_timeout: 60s }
defaults:
  workload: chat
  warmup_requests: 1
  levels: [1, 2, 4, 8]
  requests_per_level: 2x
  min_requests_per_level: 4
  request_timeout: 10s
workloads:
  chat:
    max_completion_tokens: 16
    prompts: ["Summarise the benefits of a private AI server in 150 words."]
file_sd:
  files: [targets.json]
  refresh_interval: 30s
target_template:
  name_label: name
  model: sim-stub
YAML

echo "llmprobe $("$bin" --version | awk '{print $2}'): $N targets, interval ${INTERVAL}s (+ up to 10% jitter), levels [1, 2, 4, 8], $ROUNDS intervals" >&2
start=$(date +%s.%N)
"$bin" run --config "$work/llmprobe.yaml" --log-format json 2>"$work/llmprobe.log" &
pid=$!
pids+=("$pid")
sleep $((INTERVAL * ROUNDS))

python3 - "$pid" "$port" "$work/llmprobe.log" "$start" "$INTERVAL" "$N" <<'PY'
import json, statistics, sys, time, urllib.request
from datetime import datetime

pid, port, log, start, interval, n = sys.argv[1], sys.argv[2], sys.argv[3], float(sys.argv[4]), float(sys.argv[5]), int(sys.argv[6])

def status(key):
    for line in open(f"/proc/{pid}/status"):
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
ticks = 100  # USER_HZ on Linux
stat = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
cpu = (int(stat[11]) + int(stat[12])) / ticks
elapsed = time.time() - start
print(f"memory: VmRSS {status('VmRSS'):.1f} MiB, peak VmHWM {status('VmHWM'):.1f} MiB")
print(f"cpu: {cpu:.1f} s over {elapsed:.0f} s ({100 * cpu / elapsed:.1f}% of one core)")

times, size, series = [], 0, 0
for _ in range(50):
    t0 = time.perf_counter()
    body = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics").read()
    times.append(time.perf_counter() - t0)
    size = len(body)
    series = sum(1 for l in body.decode().splitlines() if l and not l.startswith("#"))
times.sort()
print(f"/metrics: {size / 1024:.0f} KiB, {series} series; scrape median {1000 * statistics.median(times):.1f} ms, "
      f"p95 {1000 * times[int(0.95 * len(times)) - 1]:.1f} ms, max {1000 * times[-1]:.1f} ms")

done = []  # (finish unix time, duration s, target)
for line in open(log):
    try:
        e = json.loads(line)
    except ValueError:
        continue
    f = e.get("fields", {})
    if f.get("message") == "sweep finished":
        ts = datetime.fromisoformat(e["timestamp"].replace("Z", "+00:00")).timestamp()
        done.append((ts, float(f.get("duration_s", 0)), f.get("target_name")))
done.sort()
first = {}
for ts, d, t in done:
    first.setdefault(t, ts - d)
starts = sorted(first.values())
print(f"sweeps finished: {len(done)} in all, {len(first)} of {n} targets measured")
if starts:
    print(f"first round: first sweep started {starts[0] - start:.1f} s after launch, "
          f"the last target's first sweep {starts[-1] - start:.1f} s after launch")
end = done[-1][0] if done else start
window = [x for x in done if end - interval <= x[0] < end]
buckets = [0] * 10
for ts, _, _ in window:
    buckets[min(9, int(10 * (ts - (end - interval)) / interval))] += 1
print(f"last full interval ({interval:.0f} s): {len(window)} sweeps finished; per tenth of the interval: {buckets}")
# Durations from /metrics (exact; the log rounds them to 0.1 s).
durs = sorted(float(l.rsplit(" ", 1)[1]) for l in body.decode().splitlines()
              if l.startswith("llmprobe_sweep_duration_seconds{"))
if durs:
    print(f"sweep duration (latest of each target): median {1000 * statistics.median(durs):.0f} ms, "
          f"p95 {1000 * durs[int(0.95 * len(durs)) - 1]:.0f} ms, max {1000 * durs[-1]:.0f} ms")
# Sweeps running at once, from the log (start = finish - rounded duration;
# a start sorts before a finish at the same instant).
events = sorted([(ts - d, 0) for ts, d, _ in done] + [(ts, 1) for ts, _, _ in done])
running = peak = 0
for _, kind in events:
    running += 1 if kind == 0 else -1
    peak = max(peak, running)
print(f"at most {peak} sweeps running at once (to the log's 0.1 s resolution)")
PY
