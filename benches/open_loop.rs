//! The sustained rate, checked (issue 32 item 5): `llmprobe sweep`'s
//! open-loop search against built-in engines that shed (8 places, no queue:
//! an Erlang B loss system) and that queue (4 at once, the rest wait), on
//! several seeds; then each reported rate is checked by an independent
//! open-loop client (its own Poisson schedule and HTTP calls, not
//! llmprobe's dispatcher) at that rate and at 1.25 times it.
//!
//! ```text
//! cargo bench --bench open_loop                                # 4 seeds, 1000-request checks
//! cargo bench --bench open_loop -- --seeds 8 --check 1000 --engine shed
//! cargo bench --bench open_loop -- --first-seed 8 --seeds 1       # one seed; an unconfirmed rate prints its reason and steps
//! OPEN_LOOP_STEPS=1 cargo bench --bench open_loop -- --check 0 --seeds 24 --engine shed   # searches only, every step printed
//! ```
//!
//! Per engine: the share of checks at the reported rate where the SLO held
//! (target: at least 95%), at 1.25 times it where it broke (at least 80%),
//! the reported rate against the Erlang B value of the shedding engine's
//! model (within 10%), and the search's requests against the ladder's (at
//! most 3x). A benchmark, not a test: it prints a table and asserts nothing.

#[path = "common/args.rs"]
mod args;

use std::sync::Arc;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use llmprobe::config;
use llmprobe::probe::tls::Clients;
use llmprobe::schedule::endpoint;
use llmprobe::stats::erlang;
use llmprobe::stats::sustained::SustainedStatus;
use llmprobe::sweep::{NoObserver, SweepEnv};
use tokio_util::sync::CancellationToken;

/// An engine and the SLO it is judged by.
struct Engine {
    name: &'static str,
    /// The `simulator:` block.
    sim: &'static str,
    /// p95 latency limit, seconds.
    p95: f64,
    /// The Erlang B reference's places, for a loss system (the time a
    /// request holds one is the engine's own model of a lone request).
    erlang: Option<u32>,
}

const TOKENS: u32 = 16;

const ENGINES: &[Engine] = &[
    // 8 sequences decoded together at 15 ms a token whatever the batch, 503
    // above 8 in flight: 16 tokens and the step a request waits to join
    // take 0.255 s, an M/D/8/8 loss system.
    Engine {
        name: "shed",
        sim: "{ profile: tiny, max_batch: 8, max_in_flight: 8, step_base: 15ms, step_per_sequence: 0us }",
        p95: 5.0,
        erlang: Some(8),
    },
    // 4 sequences at once at 10 ms a token (0.16 s each), no admission
    // limit: the rest wait. The p95 limit binds.
    Engine {
        name: "queue",
        sim: "{ profile: tiny, max_batch: 4, max_in_flight: 0, step_base: 10ms, step_per_sequence: 0us }",
        p95: 0.5,
        erlang: None,
    },
];

fn yaml(e: &Engine, seed: u64) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ sweep_timeout: 10m }}
defaults:
  workload: w
  slo: {{ p95_latency: {p95}s }}
  sustained: {{ seed: {seed} }}
workloads:
  w:
    max_completion_tokens: {TOKENS}
    prompts: ["Summarise the benefits of a private AI server.", "Write a haiku about capacity."]
targets:
  - name: sim
    simulator: {sim}
"#,
        p95 = e.p95,
        sim = e.sim,
    )
}

/// What one independent check saw.
struct Check {
    shed: f64,
    errors: f64,
    p95: f64,
}

impl Check {
    fn held(&self, p95_limit: f64) -> bool {
        self.shed <= 0.05 && self.errors <= 0.05 && self.p95 <= p95_limit
    }
}

/// `n` Poisson arrivals at `rate` to `base_url`, each a streamed chat
/// request read to its end; latency from the scheduled send.
async fn check(base_url: &str, rate: f64, n: usize, seed: u64) -> Check {
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let mut rng = fastrand::Rng::with_seed(seed ^ 0x5eed);
    let url = format!("{base_url}/chat/completions");
    let start = Instant::now();
    let mut at = 0.0;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..n {
        at += -(1.0 - rng.f64()).ln() / rate;
        let due = start + Duration::from_secs_f64(at);
        tokio::time::sleep_until(due.into()).await;
        let (client, url) = (client.clone(), url.clone());
        tasks.spawn(async move {
            let body = format!(
                r#"{{"model":"sim-tiny","messages":[{{"role":"user","content":"check {seed} {i}: Summarise the benefits of a private AI server."}}],"max_tokens":{TOKENS},"stream":true}}"#
            );
            let r = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await;
            let status = match r {
                Ok(resp) => {
                    let status = resp.status().as_u16();
                    let mut s = resp.bytes_stream();
                    while let Some(chunk) = s.next().await {
                        if chunk.is_err() {
                            return (599, due.elapsed().as_secs_f64());
                        }
                    }
                    status
                }
                Err(_) => 599,
            };
            (status, due.elapsed().as_secs_f64())
        });
    }
    let (mut shed, mut errors, mut lat) = (0usize, 0usize, Vec::new());
    while let Some(Ok((status, l))) = tasks.join_next().await {
        match status {
            200 => lat.push(l),
            503 | 429 => shed += 1,
            _ => {
                errors += 1;
                lat.push(l);
            }
        }
    }
    lat.sort_by(f64::total_cmp);
    let p95 = lat
        .get(((lat.len() as f64) * 0.95).ceil() as usize - 1)
        .copied()
        .unwrap_or(f64::INFINITY);
    Check {
        shed: shed as f64 / n as f64,
        errors: errors as f64 / n as f64,
        p95,
    }
}

/// The seconds a lone request holds a place by the simulated engine's own
/// model (`SimParams::predicted_latency`: a step to join, prefill, a step
/// per token); the prompts are a dozen tokens.
fn model_hold(endpoint: &config::Endpoint) -> Option<f64> {
    match endpoint {
        config::Endpoint::Simulator(p) => {
            Some(p.predicted_latency(1, 12, u64::from(TOKENS)).as_secs_f64())
        }
        config::Endpoint::Url(_) => None,
    }
}

fn main() {
    let seeds: u64 = args::parsed("--seeds", 4);
    let first: u64 = args::parsed("--first-seed", 1);
    let n: usize = args::parsed("--check", 1000);
    let only = args::value("--engine");
    // Every search's steps, not only those of a rate left unconfirmed.
    let steps_wanted = std::env::var_os("OPEN_LOOP_STEPS").is_some();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    println!("open loop: `sweep`'s search, then independent {n}-request Poisson checks at the rate and 1.25x\n");
    println!(
        "{:<6} {:>4} {:>9} {:>9} {:>8} {:>12} {:>6} {:>14} {:>14} {:>8}",
        "engine",
        "seed",
        "closed/s",
        "sust/s",
        "status",
        "erlang B/s",
        "steps",
        "at 1x shed/p95",
        "1.25x shed/p95",
        "cost"
    );
    let dir = std::env::temp_dir().join(format!("llmprobe-open-loop-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    for e in ENGINES {
        if only.as_deref().is_some_and(|o| o != e.name) {
            continue;
        }
        let (mut held, mut broke, mut checked, mut within) = (0, 0, 0, 0);
        for seed in first..first + seeds {
            let path = dir.join(format!("{}-{seed}.yaml", e.name));
            std::fs::write(&path, yaml(e, seed)).unwrap();
            let cfg = config::load(&path).unwrap_or_else(|err| panic!("{err}"));
            let target = cfg.targets[0].clone();
            rt.block_on(async {
                let reach = endpoint::reach(&target).await.unwrap();
                let env = SweepEnv::new(
                    Clients::new(Duration::from_secs(5)).unwrap(),
                    cfg.schedule.max_in_flight_total,
                    CancellationToken::new(),
                    Arc::new(NoObserver),
                );
                let report = llmprobe::sweep::run(
                    &env,
                    &target,
                    &reach.base_url,
                    cfg.schedule.sweep_timeout,
                    None,
                )
                .await;
                let w = &report.workloads[0];
                let ladder: u64 = w.levels.iter().map(|l| l.requests).sum();
                let Some(s) = &w.capacity.sustained else {
                    println!(
                        "{:<6} {seed:>4} no search (knee {})",
                        e.name, w.capacity.knee_concurrency
                    );
                    return;
                };
                let reference = e
                    .erlang
                    .zip(model_hold(&target.endpoint))
                    .map(|(places, hold)| erlang::load_for(places, 0.05) / hold);
                let rate = s.requests_per_second.unwrap_or(0.0);
                let (c1, c2) = if n > 0 && rate > 0.0 && s.status != SustainedStatus::NotMeasured {
                    let a = check(&reach.base_url, rate, n, seed).await;
                    tokio::time::sleep(Duration::from_secs(1)).await;
                    let b = check(&reach.base_url, rate * 1.25, n, seed + 1000).await;
                    (Some(a), Some(b))
                } else {
                    (None, None)
                };
                if let (Some(a), Some(b)) = (&c1, &c2) {
                    checked += 1;
                    held += usize::from(a.held(e.p95));
                    broke += usize::from(!b.held(e.p95));
                }
                if let Some(r) = reference {
                    within += usize::from((rate / r - 1.0).abs() <= 0.1);
                }
                let cell = |c: &Option<Check>| {
                    c.as_ref().map_or("-".to_string(), |c| {
                        format!(
                            "{:.1}%/{:.2}s{}",
                            c.shed * 100.0,
                            c.p95,
                            if c.held(e.p95) { "" } else { "!" }
                        )
                    })
                };
                println!(
                    "{:<6} {seed:>4} {:>9.2} {:>9.2} {:>8} {:>12} {:>6} {:>14} {:>14} {:>7.1}x",
                    e.name,
                    s.closed_loop_requests_per_second,
                    rate,
                    s.status.as_str(),
                    reference.map_or("-".into(), |r| format!("{r:.2}")),
                    s.steps.len(),
                    cell(&c1),
                    cell(&c2),
                    s.requests as f64 / ladder.max(1) as f64,
                );
                if steps_wanted
                    || matches!(
                        s.status,
                        SustainedStatus::NotMeasured | SustainedStatus::Unconfirmed
                    )
                {
                    println!("       {}", s.why);
                    for st in &s.steps {
                        println!(
                            "       step {:.2} confirmation {} {:?} scheduled {} uncounted {} sent {} shed {}/{}",
                            st.offered_requests_per_second,
                            st.confirmation,
                            st.result,
                            st.scheduled,
                            st.uncounted,
                            st.sent,
                            st.verdict.counts.shed,
                            st.verdict.counts.ended
                        );
                    }
                    println!("       ladder {ladder}");
                }
            });
        }
        println!(
            "{:<6} SLO held at the rate in {held}/{checked}, broke at 1.25x in {broke}/{checked}{}\n",
            e.name,
            if e.erlang.is_some() {
                format!(", within 10% of Erlang B in {within}/{seeds}")
            } else {
                String::new()
            }
        );
    }
}
