//! Gentle sweeps, measured: the same daemon schedule of sweeps against the
//! built-in simulated engine, fixed (every level in full, a full climb every
//! time: llmprobe before issue 13) versus gentle (the defaults: early
//! verdict, warm start with a full climb every 6 sweeps; then with
//! refinement to 25% and to 1),
//! on several engine profiles and a noisy one. Per sweep: requests sent,
//! server busy time (some request in flight), time above the knee (the wall
//! time of levels offering more concurrency than the engine's capacity:
//! while they run, the server sheds or queues its real users' requests), and
//! the knee reported.
//!
//! ```text
//! cargo bench --bench gentle                 # every profile, 12 sweeps each
//! cargo bench --bench gentle -- --sweeps 24 --profile noisy
//! ```
//!
//! A benchmark, not a test: it prints a table and asserts nothing.

#[path = "common/args.rs"]
mod args;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::config::gentle::Resolution;
use llmprobe::config::{self, Target, Workload};
use llmprobe::probe::tls::Clients;
use llmprobe::schedule::endpoint;
use llmprobe::schedule::warm_start::{self, Kind, Planner};
use llmprobe::stats::sample::Sample;
use llmprobe::sweep::{self, Observer, SweepEnv};
use tokio_util::sync::CancellationToken;

/// An engine to measure and the capacity it was built with.
struct Profile {
    name: &'static str,
    /// What limits it, for the table.
    about: &'static str,
    /// The `simulator:` of the target.
    simulator: &'static str,
    /// The `slo:` of the target.
    slo: &'static str,
    /// The highest concurrency within the SLO, by construction.
    capacity: u32,
}

const PROFILES: &[Profile] = &[
    Profile {
        name: "tiny",
        about: "sheds above 8 in flight",
        simulator: "{ profile: tiny }",
        slo: "{ p95_latency: 2s }",
        capacity: 8,
    },
    Profile {
        name: "small-gpu-12",
        about: "sheds above 12 in flight",
        simulator: "{ profile: small-gpu, step_base: 3ms, step_per_sequence: 200us, max_in_flight: 12 }",
        slo: "{ p95_latency: 2s }",
        capacity: 12,
    },
    Profile {
        name: "large-gpu-24",
        about: "batch of 24: queueing beyond it doubles latency past the SLO",
        simulator: "{ profile: large-gpu, step_base: 4ms, step_per_sequence: 100us, max_batch: 24, max_in_flight: 400, kv_cache_tokens: 0 }",
        slo: "{ p95_latency: 150ms }",
        capacity: 24,
    },
    Profile {
        name: "noisy",
        about: "sheds above 12; 3% of requests fail at random, 2% cut mid-stream",
        simulator: "{ profile: small-gpu, step_base: 3ms, step_per_sequence: 200us, max_in_flight: 12, fail_ratio: 0.03, reset_ratio: 0.02, seed: 7 }",
        slo: "{ p95_latency: 2s, max_error_ratio: 0.2 }",
        capacity: 12,
    },
];

/// How the daemon sweeps.
#[derive(Clone, Copy)]
struct Mode {
    name: &'static str,
    early_stop: bool,
    refine: Resolution,
    /// None: a full climb every sweep.
    full_every: Option<u32>,
}

const MODES: &[Mode] = &[
    Mode {
        name: "fixed",
        early_stop: false,
        refine: Resolution::Off,
        full_every: None,
    },
    Mode {
        name: "gentle",
        early_stop: true,
        refine: Resolution::Off,
        full_every: Some(6),
    },
    Mode {
        name: "gentle+refine25%",
        early_stop: true,
        refine: Resolution::Share(0.25),
        full_every: Some(6),
    },
    Mode {
        name: "gentle+refine1",
        early_stop: true,
        refine: Resolution::Count(1),
        full_every: Some(6),
    },
];

/// Requests and time in flight, from the client's side: every request
/// takes its place when sent and gives it back when it ends.
#[derive(Default)]
struct Load {
    in_flight: u32,
    since: Option<Instant>,
    sent: u64,
    busy: Duration,
}

impl Load {
    fn change(&mut self, delta: i32) {
        let now = Instant::now();
        if let Some(since) = self.since {
            let span = now - since;
            if self.in_flight > 0 {
                self.busy += span;
            }
        }
        self.since = Some(now);
        self.in_flight = self.in_flight.saturating_add_signed(delta);
    }
}

#[derive(Clone)]
struct Meter(Arc<Mutex<Load>>);

struct Place(Arc<Mutex<Load>>);
impl Drop for Place {
    fn drop(&mut self) {
        self.0.lock().unwrap().change(-1);
    }
}

impl Observer for Meter {
    fn request(&self, _: &Target, _: &Workload, _: &Sample, _: Option<u32>) {}
    fn in_flight(&self) -> Option<Box<dyn Send>> {
        let mut load = self.0.lock().unwrap();
        load.sent += 1;
        load.change(1);
        Some(Box::new(Place(self.0.clone())))
    }
}

/// What one mode did on one profile, per sweep.
struct Row {
    requests: Vec<f64>,
    busy: Vec<f64>,
    above: Vec<f64>,
    knees: Vec<u32>,
    kinds: String,
}

fn mean(v: &[f64]) -> f64 {
    v.iter().sum::<f64>() / v.len().max(1) as f64
}

fn config_yaml(p: &Profile) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ max_in_flight_total: 256, sweep_timeout: 5m }}
defaults:
  workload: w
  warmup_requests: 2
  levels: [1, 2, 4, 8, 16, 32, 64]
  requests_per_level: 3x
  min_requests_per_level: 8
  request_timeout: 30s
  slo: {slo}
workloads:
  w:
    max_completion_tokens: 16
    prompts: ["Summarise the benefits of a private AI server.", "Write a haiku about capacity."]
targets:
  - name: sim
    simulator: {sim}
"#,
        slo = p.slo,
        sim = p.simulator
    )
}

async fn run_mode(p: &Profile, mode: Mode, sweeps: usize) -> Row {
    let dir = std::env::temp_dir().join(format!("llmprobe-gentle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{}.yaml", p.name));
    std::fs::write(&path, config_yaml(p)).unwrap();
    let cfg = config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut target = (*cfg.targets[0]).clone();
    target.early_stop = mode.early_stop;
    target.refine_resolution = mode.refine;
    target.full_sweep_every = mode.full_every.unwrap_or(1);
    let target = Arc::new(target);
    // A fresh engine per mode: no state carried from one to the other.
    let reachable = endpoint::reach(&target).await.unwrap();
    let load = Arc::new(Mutex::new(Load::default()));
    let env = SweepEnv::new(
        Clients::new(Duration::from_secs(5)).unwrap(),
        256,
        CancellationToken::new(),
        Arc::new(Meter(load.clone())),
    );
    let mut planner = Planner::new(target.full_sweep_every, target.refine_resolution);
    let mut row = Row {
        requests: vec![],
        busy: vec![],
        above: vec![],
        knees: vec![],
        kinds: String::new(),
    };
    for _ in 0..sweeps {
        let plan = planner.plan();
        let warm = (plan.kind == Kind::Warm).then_some(&plan.warm);
        let before = {
            let l = load.lock().unwrap();
            (l.sent, l.busy)
        };
        let report = sweep::run(
            &env,
            &target,
            &reachable.base_url,
            cfg.schedule.sweep_timeout,
            warm,
        )
        .await;
        planner.record(plan.kind, warm_start::found_in(&report));
        let l = load.lock().unwrap();
        row.requests.push((l.sent - before.0) as f64);
        row.busy.push((l.busy - before.1).as_secs_f64());
        let above: f64 = report
            .workloads
            .iter()
            .flat_map(|w| &w.levels)
            .filter(|l| l.concurrency > p.capacity)
            .map(|l| l.wall_seconds)
            .sum();
        row.above.push(above);
        row.knees.push(
            report
                .workloads
                .first()
                .map_or(0, |w| w.capacity.knee_concurrency),
        );
        row.kinds
            .push(if plan.kind == Kind::Full { 'F' } else { 'w' });
    }
    row
}

/// The 1-minute load average (the machine may be shared): a row measured
/// under a load above the core count is suspect.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn knees(k: &[u32]) -> String {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for x in k {
        *counts.entry(*x).or_default() += 1;
    }
    counts
        .iter()
        .map(|(k, n)| {
            if *n == 1 {
                format!("{k}")
            } else {
                format!("{k}x{n}")
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let sweeps: usize = args::parsed("--sweeps", 12);
    let only = args::value("--profile");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("gentle sweeps: {sweeps} sweeps per mode, levels 1..64 (3x requests, at least 8)\n");
    for p in PROFILES {
        if only.as_deref().is_some_and(|o| o != p.name) {
            continue;
        }
        println!(
            "profile {} (capacity {}: {}); load {}",
            p.name,
            p.capacity,
            p.about,
            load()
        );
        println!(
            "  {:<16} {:>9} {:>9} {:>9} {:>9} {:>9}  {:<14} kinds",
            "mode", "req/sweep", "vs fixed", "busy s", "above s", "vs fixed", "knees"
        );
        let mut fixed: Option<(f64, f64)> = None;
        for mode in MODES {
            let row = rt.block_on(run_mode(p, *mode, sweeps));
            let (req, above) = (mean(&row.requests), mean(&row.above));
            let base = *fixed.get_or_insert((req, above));
            let ratio = |a: f64, b: f64| {
                if b > 0.0 {
                    format!("{:.2}", a / b)
                } else {
                    "-".into()
                }
            };
            println!(
                "  {:<16} {:>9.1} {:>9} {:>9.3} {:>9.3} {:>9}  {:<14} {}",
                mode.name,
                req,
                ratio(req, base.0),
                mean(&row.busy),
                above,
                ratio(above, base.1),
                knees(&row.knees),
                row.kinds
            );
        }
        println!();
    }
}
