//! Benchmark 1: what a sweep measures, next to the server's own clock.
//!
//! The client is a sweep, run as `llmprobe sweep` runs one: the config is
//! loaded by the daemon's loader, the clients are the daemon's `Clients`,
//! and `sweep::run` does the rest (server discovery, the output-limit check,
//! warm-up, and per level the pass that opens `concurrency` connections
//! before the counted requests). An observer keeps the counted requests'
//! samples, which the sweep hands to the metrics in the daemon; the level
//! summaries are the sweep's own report. Each sample carries the serial
//! number the truth server gave the request (as `usage.prompt_tokens`), which
//! names the server's record of it: the comparison is per request, on the
//! counted requests only.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use llmprobe::config::{Target, Workload};
use llmprobe::probe::tls::Clients;
use llmprobe::schedule::endpoint;
use llmprobe::stats::report::LevelSummary;
use llmprobe::stats::sample::{Outcome, Sample};
use llmprobe::sweep::{self, Observer, SweepEnv};
use tokio_util::sync::CancellationToken;

use crate::truth::{self, Pace, Truth};
use crate::{check, ms, os, p50_p99, take_truth, Server};

/// The levels swept, as the earlier benchmark measured them.
const LEVELS: [u32; 5] = [1, 16, 64, 256, 512];

/// The counted requests of one level, as the sweep handed them over.
struct Counted {
    concurrency: u32,
    /// The 1-minute load when the level started.
    load: f64,
    samples: Vec<Sample>,
    /// When the sweep announced the level (its connection-opening pass
    /// done) and when its last counted request ended, on the monotonic clock.
    span_ns: (u64, u64),
}

/// Keeps the samples of counted requests, level by level: a sweep announces
/// a level (after its connection-opening pass) and then reports each of its
/// counted requests, and nothing else, until the next level.
#[derive(Default)]
struct Collect(Mutex<Vec<Counted>>);

impl Collect {
    fn take(&self) -> Vec<Counted> {
        std::mem::take(&mut *self.0.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

impl Observer for Collect {
    fn request(&self, _: &Target, _: &Workload, sample: &Sample, _: Option<u32>) {
        let mut levels = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(level) = levels.last_mut() {
            level.samples.push(sample.clone());
            level.span_ns.1 = os::monotonic_ns();
        }
    }

    fn level_started(&self, _: &Target, _: &Workload, concurrency: u32, requests: u64) {
        let now = os::monotonic_ns();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(Counted {
                concurrency,
                load: os::load1(),
                samples: Vec::with_capacity(requests as usize),
                span_ns: (now, now),
            });
    }
}

/// The sweep's config: the truth server as its one target, `per` x the
/// concurrency requests per level (at least `min`), a generous SLO so that
/// every level is measured, everything else as shipped.
fn config_yaml(base_url: &str, tokens: u32, per: usize, min: usize) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ max_in_flight_total: {max}, sweep_timeout: 10m }}
defaults:
  workload: haiku
  levels: {levels:?}
  requests_per_level: {per}x
  min_requests_per_level: {min}
  slo: {{ p95_latency: 60s }}
workloads:
  haiku:
    max_completion_tokens: {tokens}
    prompts: ["Write a haiku about capacity planning."]
targets:
  - name: truth
    base_url: {base_url}
    model: bench-model
"#,
        max = LEVELS[LEVELS.len() - 1],
        levels = LEVELS,
    )
}

/// One level's counted requests against the server's records of them, in ms.
#[derive(Default)]
struct Errors {
    /// |sweep TTFT - server TTFT| per request.
    ttft: Vec<f64>,
    /// |sweep gap - server gap| per inter-token gap.
    itl: Vec<f64>,
    /// |sweep latency - server latency| per request (to the last content chunk).
    latency: Vec<f64>,
    /// The server's own TTFT (request arrival to first content chunk written).
    server_ttft: Vec<f64>,
    /// Request arrival at the server's socket to the server reading it.
    read_delay: Vec<f64>,
    /// Requests whose output tokens or content chunks differ from the chunks written.
    token_mismatches: usize,
    /// Output tokens the server wrote for the paired requests.
    server_tokens: u64,
    /// Paired requests that were the first on their connection.
    first_on_connection: usize,
    /// The connections the paired requests came on.
    connections: BTreeSet<u64>,
    /// First arrival and last content chunk written of the paired requests.
    span_ns: Option<(u64, u64)>,
    /// Paired requests.
    paired: usize,
    /// Counted requests that failed or have no record at the server.
    unpaired: usize,
}

impl Errors {
    /// Output tokens per second over the paired requests, on the server's clock.
    fn server_throughput(&self) -> f64 {
        match self.span_ns {
            Some((first, last)) if last > first => {
                self.server_tokens as f64 / ((last - first) as f64 / 1e9)
            }
            _ => f64::NAN,
        }
    }
}

fn compare(samples: &[Sample], truth: &HashMap<String, Truth>) -> Errors {
    let mut e = Errors::default();
    for s in samples {
        let record = s
            .prompt_tokens
            .filter(|_| s.outcome == Outcome::Ok)
            .and_then(|n| truth.get(&truth::serial_key(n)));
        let (Some(t), Some(ttft), Some(latency)) = (record, s.ttft, s.latency) else {
            e.unpaired += 1;
            continue;
        };
        let (Some(server_ttft), Some(server_latency)) = (t.ttft(), t.latency()) else {
            e.unpaired += 1;
            continue;
        };
        e.paired += 1;
        e.ttft.push((ms(ttft) - ms(server_ttft)).abs());
        e.latency.push((ms(latency) - ms(server_latency)).abs());
        e.server_ttft.push(ms(server_ttft));
        e.read_delay.push(t.read_delay_ns as f64 / 1e6);
        let written = t.writes_ns.len() as u64;
        e.server_tokens += written;
        if s.output_tokens != written || s.content_chunks != written {
            e.token_mismatches += 1;
        } else {
            for (c, g) in s.inter_token.iter().zip(t.gaps()) {
                e.itl.push((ms(*c) - ms(g)).abs());
            }
        }
        e.first_on_connection += usize::from(t.fresh_connection);
        e.connections.insert(t.connection);
        let (first, last) = e.span_ns.unwrap_or((u64::MAX, 0));
        e.span_ns = Some((first.min(t.arrived_ns), last.max(t.ended_ns())));
    }
    e
}

/// Benchmark 1: one sweep against the truth server, level by level.
pub async fn accuracy(scale: usize) {
    let (ttft, gap, tokens) = (Duration::from_millis(20), Duration::from_millis(10), 16);
    println!("## 1. Timing accuracy: a sweep vs the server's own clock\n");
    let server = Server::truth(Pace::Paced { ttft, gap });
    let dir = std::env::temp_dir().join(format!("llmprobe-accuracy-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let path = dir.join("accuracy.yaml");
    // As the earlier benchmark: 4 x concurrency requests, at least 100; a
    // quarter with --quick.
    let (per, min) = (4 / scale.clamp(1, 4), 100 / scale.max(1));
    std::fs::write(&path, config_yaml(&server.base_url(), tokens, per, min)).expect("write config");
    let config = llmprobe::load_config(&path).unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    let target = config.targets.first().expect("one target").clone();
    let collect = Arc::new(Collect::default());
    let env = SweepEnv::new(
        Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT)
            .and_then(|c| c.for_config(&config))
            .expect("clients"),
        config.schedule.max_in_flight_total,
        CancellationToken::new(),
        collect.clone(),
    );
    let reachable = endpoint::reach(&target).await.expect("a URL target");
    let report = sweep::run(
        &env,
        &target,
        &reachable.base_url,
        config.schedule.sweep_timeout,
        None,
    )
    .await;
    let truth = take_truth(&server).await;
    let levels = collect.take();
    let summaries: &[LevelSummary] = report.workloads.first().map_or(&[], |w| &w.levels);

    println!(
        "One `sweep::run` of levels {LEVELS:?} ({per} x concurrency counted requests per level, at least {min}), config loaded by the daemon's loader, the daemon's `Clients`. Truth server: first content chunk {} ms after the request, then one every {} ms, {tokens} content chunks. Per counted request (warm-up, output-limit check and the pass that opens each level's connections excluded): errors are |sweep - server| in ms, TTFT and latency (to the last content chunk) from the kernel's receive timestamp of the request's last byte; the server's read delay (arrival to read, its own queueing) is shown apart. Throughput is the level's `throughput_tokens_per_second` from the sweep's report next to the paired requests' tokens over their span on the server's clock (first arrival to last content chunk written). Connections: new ones by the sweep's count (`new_connections`: counted requests that opened a connection) / accepted by the server while the counted requests ran (from the level's start, announced to the sweep's observer, to its last counted request's end, on the monotonic clock both processes read); counted requests that were the first request on their connection (opened before the level by its connection-opening pass, which then sent nothing on it, or during the level as counted before); distinct connections the counted requests came on.\n",
        ttft.as_millis(),
        gap.as_millis()
    );
    println!("| concurrency | requests counted / paired | TTFT error p50 / p99 | ITL error p50 / p99 | latency error p50 / p99 | output tokens sweep / server (requests differing) | throughput sweep / server, tok/s | server TTFT p50 | server jitter (p99-p50) | server read delay p50 / p99 | new connections sweep / server; first on a connection; connections used | TTFT target met | load |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|---|---|");
    let mut counted_total = 0;
    for level in &levels {
        let c = level.concurrency;
        let Some(summary) = summaries.iter().find(|l| l.concurrency == c) else {
            println!(
                "| {c} | {} | level missing from the sweep's report |||||||||||",
                level.samples.len()
            );
            continue;
        };
        counted_total += level.samples.len();
        if let Some(s) = level.samples.iter().find(|s| s.outcome != Outcome::Ok) {
            eprintln!(
                "  concurrency {c}: failed requests, e.g. {:?}: {:?}",
                s.outcome, s.error
            );
        }
        let mut e = compare(&level.samples, &truth.requests);
        let (t50, t99) = p50_p99(&mut e.ttft);
        let (i50, i99) = p50_p99(&mut e.itl);
        let (l50, l99) = p50_p99(&mut e.latency);
        let (s50, s99) = p50_p99(&mut e.server_ttft);
        let jitter = s99 - s50;
        let (r50, r99) = p50_p99(&mut e.read_delay);
        // Literal reading of the target: above 64, p99 within the server's
        // own jitter, even when that jitter is under 1.5 ms.
        let met = t50 <= 0.3 && if c <= 64 { t99 <= 1.5 } else { t99 <= jitter };
        let (swept, truly) = (summary.throughput_tokens_per_second, e.server_throughput());
        println!(
            "| {c} | {} / {} | {t50:.3} / {t99:.3} | {i50:.3} / {i99:.3} | {l50:.3} / {l99:.3} | {} / {} ({}) | {swept:.1} / {truly:.1} ({:+.2}%) | {s50:.3} | {jitter:.3} | {r50:.3} / {r99:.3} | {} / {}; {}; {} | {} | {:.2} |",
            level.samples.len(),
            e.paired,
            summary.output_tokens,
            e.server_tokens,
            e.token_mismatches,
            (swept / truly - 1.0) * 100.0,
            summary.new_connections,
            truth
                .accepted_ns
                .iter()
                .filter(|&&t| (level.span_ns.0..=level.span_ns.1).contains(&t))
                .count(),
            e.first_on_connection,
            e.connections.len(),
            check(met && e.unpaired == 0),
            level.load
        );
    }
    println!();
    let workload = report.workloads.first();
    println!(
        "The server answered {} chat requests during the sweep, {counted_total} of them counted; it accepted {} connections in all. Sweep: {}; knee {}{}.\n",
        truth.requests.len(),
        truth.connections,
        if report.success {
            "succeeded".to_string()
        } else {
            format!("failed: {}", report.error.as_deref().unwrap_or("?"))
        },
        workload.map_or(0, |w| w.capacity.knee_concurrency),
        workload
            .and_then(|w| w.capacity.stopped_because.as_deref())
            .map_or(String::new(), |why| format!(", stopped because {why}")),
    );
}
