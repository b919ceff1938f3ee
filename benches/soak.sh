#!/usr/bin/env bash
# Soak benchmark (not a test): runs the release daemon with a one-second
# interval against the built-in simulated engine (benches/soak.yaml) for
# DURATION seconds (default 600), samples its resident memory from /proc and
# the number of finished sweeps from /metrics every 10 s, and prints both at
# start and end. Memory must not grow with the number of sweeps.
#
#   benches/soak.sh [DURATION_SECONDS]
#
# Environment: SOAK_PORT (default 19775), CARGO_TARGET_DIR (as cargo uses it).
set -euo pipefail

duration=${1:-600}
port=${SOAK_PORT:-19775}
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

cargo build --release --quiet
bin=${CARGO_TARGET_DIR:-$root/target}/release/llmprobe
log=$(mktemp -t llmprobe-soak.XXXXXX.log)

LLMPROBE__LISTEN=127.0.0.1:$port "$bin" run --config benches/soak.yaml 2>"$log" &
pid=$!
trap 'kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true' EXIT

rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$pid/status"; }
sweeps() {
    curl -fsS "http://127.0.0.1:$port/metrics" |
        awk '/^llmprobe_sweeps_total\{/ {n += $NF} END {printf "%d\n", n}'
}

for _ in $(seq 50); do
    curl -fsS -o /dev/null "http://127.0.0.1:$port/metrics" 2>/dev/null && break
    sleep 0.2
done
kill -0 "$pid" || { cat "$log"; exit 1; }

start_rss=$(rss_kib)
echo "llmprobe $("$bin" --version | awk '{print $2}'), pid $pid, ${duration}s, log $log"
printf '%8s %10s %8s\n' elapsed_s rss_kib sweeps
printf '%8d %10d %8d\n' 0 "$start_rss" "$(sweeps)"
min_rss=$start_rss max_rss=$start_rss
rss_at_60=""
sweeps_at_60=""
rss_at_half=""
sweeps_at_half=""
started=$SECONDS
while ((SECONDS - started < duration)); do
    sleep 10
    kill -0 "$pid" || { echo "daemon exited"; cat "$log"; exit 1; }
    rss=$(rss_kib) n=$(sweeps) elapsed=$((SECONDS - started))
    printf '%8d %10d %8d\n' "$elapsed" "$rss" "$n"
    ((rss > max_rss)) && max_rss=$rss
    ((rss < min_rss)) && min_rss=$rss
    if [[ -z $rss_at_60 && $elapsed -ge 60 ]]; then
        rss_at_60=$rss sweeps_at_60=$n
    fi
    if [[ -z $rss_at_half && $elapsed -ge $((duration / 2)) ]]; then
        rss_at_half=$rss sweeps_at_half=$n
    fi
done
end_rss=$(rss_kib)
end_sweeps=$(sweeps)
echo
echo "start RSS: ${start_rss} KiB; end RSS: ${end_rss} KiB (min ${min_rss}, max ${max_rss})"
echo "sweeps: ${end_sweeps} in ${duration}s"
if [[ -n $rss_at_60 && $end_sweeps -gt $sweeps_at_60 ]]; then
    # After the first minute (allocator and pools warmed up) memory should be flat.
    echo "after 60 s: RSS ${rss_at_60} KiB at ${sweeps_at_60} sweeps -> ${end_rss} KiB at ${end_sweeps} sweeps" \
        "($(((end_rss - rss_at_60) * 1000 / (end_sweeps - sweeps_at_60))) KiB per 1000 sweeps)"
fi
if [[ -n $rss_at_half && $end_sweeps -gt $sweeps_at_half ]]; then
    echo "second half: RSS ${rss_at_half} KiB at ${sweeps_at_half} sweeps -> ${end_rss} KiB at ${end_sweeps} sweeps"
fi
echo "log lines: $(wc -l <"$log") ($(grep -c 'sweep finished\|sweep failed' "$log") sweep lines)"
