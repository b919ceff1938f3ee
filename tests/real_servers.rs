//! Conditions of real deployments that used to make the knee and the
//! percentiles wrong without any sign (issue 17): a level throttled by the
//! global cap, cold connections, prefix caches, servers that ignore
//! `max_completion_tokens`, failures left out of the SLO, connect timeouts,
//! untrustworthy usage, bodies held open after `[DONE]`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use llmprobe::probe::tls::Clients;
use llmprobe::schedule::endpoint;
use llmprobe::stats::report::{FoundIn, LevelSummary, SweepReport};
use llmprobe::sweep::{NoObserver, SweepEnv};
use llmprobe::{config, sweep};
use support::config::write_config;
use support::exposition::metric;
use support::raw::{self, content, finish, good_stream, usage, DONE, SSE_HEAD};
use support::server::{start, Behavior};
use tokio_util::sync::CancellationToken;

/// A sweep that takes longer than this is hung.
const SWEEP_BOUND: Duration = Duration::from_secs(60);

/// One target `t1` at `base_url`: `levels`, `per_level` requests each, no
/// warm-up, and `extra` target keys (indented as a target's).
fn yaml(base_url: &str, levels: &str, per_level: u32, slo: &str, extra: &str) -> String {
    format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 64, sweep_timeout: 50s }}
defaults:
  workload: chat
  warmup_requests: 0
  levels: {levels}
  requests_per_level: {per_level}
  min_requests_per_level: 1
  request_timeout: 2s
  # Whole levels: the cases count every request of a failing level.
  early_stop: false
  slo: {slo}
workloads:
  chat:
    max_completion_tokens: 8
    prompts: ["hello there"]
targets:
  - name: t1
    base_url: {base_url}
    model: m
{extra}
"#
    )
}

const LOOSE_SLO: &str = "{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }";

/// One sweep of the config's first target with `env`.
async fn sweep_with(env: &SweepEnv, yaml: &str) -> SweepReport {
    let cfg = config::load(&write_config(yaml)).unwrap_or_else(|e| panic!("{e}"));
    let target = &cfg.targets[0];
    let reachable = endpoint::reach(target).await.unwrap();
    let run = sweep::run(
        env,
        target,
        &reachable.base_url,
        cfg.schedule.sweep_timeout,
        None,
    );
    tokio::time::timeout(SWEEP_BOUND, run)
        .await
        .expect("the sweep ends in bounded time")
}

fn env_with(clients: Clients, cap: u32) -> SweepEnv {
    SweepEnv::new(clients, cap, CancellationToken::new(), Arc::new(NoObserver))
}

async fn sweep(yaml: &str) -> SweepReport {
    sweep_with(
        &env_with(
            Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT).unwrap(),
            64,
        ),
        yaml,
    )
    .await
}

fn levels(r: &SweepReport) -> &[LevelSummary] {
    &r.workloads[0].levels
}

// --- Achieved concurrency and the global cap ---------------------------------

#[test]
fn check_config_rejects_a_level_above_the_global_cap() {
    // Static targets (through the defaults and their own levels) and the
    // template every discovered target is made from.
    let path = write_config(
        r#"
schedule: { max_in_flight_total: 4 }
defaults:
  workload: chat
  levels: [1, 2, 4, 8, 16]
workloads:
  chat: { prompts: ["hi"] }
targets:
  - name: sim
    simulator: { profile: tiny }
  - name: own
    base_url: http://127.0.0.1:9/v1
    model: m
    levels: [2, 6]
  - name: capped
    base_url: http://127.0.0.1:9/v1
    model: m
    max_concurrency: 4
file_sd:
  files: [discovered/*.json]
target_template:
  model: m
  levels: [1, 32]
"#,
    );
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_llmprobe"))
        .args(["check-config", "--config"])
        .arg(&path)
        .env("RUST_LOG", "off")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let file = path.display().to_string();
    for (key, level) in [
        ("defaults.levels", 8),
        ("targets[1] (own).levels", 6),
        ("target_template.levels", 32),
    ] {
        let want =
            format!("{file}: {key}: level {level} is above schedule.max_in_flight_total (4)");
        assert!(stderr.contains(&want), "missing `{want}` in:\n{stderr}");
    }
    assert_eq!(
        stderr.matches("defaults.levels").count(),
        1,
        "said once for every target inheriting it, and not for `capped`:\n{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_the_global_cap_cannot_hold_does_not_raise_the_knee() {
    // Sheds above 4 in flight: the knee is 4. Another target holds 4 of the
    // 8 places throughout, so level 8 cannot have its places: it must not
    // run with 4 in flight and pass for a level of 8.
    let server = start(Behavior {
        ttft: Duration::from_millis(20),
        gap: Duration::from_millis(2),
        tokens: 4,
        shed_above: Some(4),
        ..Default::default()
    })
    .await;
    let env = env_with(
        Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT).unwrap(),
        8,
    );
    let _other_target = env.in_flight.clone().acquire_many_owned(4).await.unwrap();
    let r = sweep_with(
        &env,
        &yaml(
            &server.base_url(),
            "[1, 2, 4, 8]",
            8,
            LOOSE_SLO,
            "    request_timeout: 1s\n    max_tokens_field: max_completion_tokens",
        ),
    )
    .await;
    let w = &r.workloads[0];
    assert_eq!(w.capacity.knee_concurrency, 4, "{:?}", w.capacity);
    // Nothing broke the SLO, but level 8 was not measured: that is no
    // lower bound, and it says so.
    assert!(!w.capacity.knee_is_lower_bound, "{:?}", w.capacity);
    assert_eq!(w.capacity.levels_not_measured, vec![8]);
    assert!(!w.capacity.knee_carried_over, "nothing measured it before");
    let why = w.capacity.stopped_because.as_deref().unwrap_or("");
    assert!(
        why.contains("concurrency 8 not measured") && why.contains("global cap"),
        "{why}"
    );
    assert!(server.max_in_flight() <= 4, "nothing was shed");
    for l in &w.levels {
        assert!(l.kept_concurrency, "level {}", l.concurrency);
        assert!(
            l.achieved_concurrency >= 0.9 * f64::from(l.concurrency)
                && l.achieved_concurrency <= f64::from(l.concurrency) + 1e-9,
            "level {}: achieved {}",
            l.concurrency,
            l.achieved_concurrency
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counted_requests_find_their_connections_open() {
    let server = start(Behavior {
        ttft: Duration::from_millis(10),
        ..Default::default()
    })
    .await;
    let r = sweep(&yaml(&server.base_url(), "[1, 4]", 8, LOOSE_SLO, "")).await;
    assert!(r.success, "{:?}", r.error);
    for l in levels(&r) {
        assert_eq!(l.outcomes["ok"], 8);
        // The level's connections were opened before it, uncounted.
        assert_eq!(l.new_connections, 0, "level {}", l.concurrency);
        assert_eq!(l.connect_seconds.count, 0);
        assert!(l.littles_law_concurrency > 0.0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_is_timed_apart() {
    // `connection: close`: every request opens its own connection.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write(format!("{SSE_HEAD}{}", good_stream(3))).await;
        }
    })
    .await;
    let r = sweep(&yaml(&s.base_url(), "[2]", 6, LOOSE_SLO, "")).await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["ok"], 6, "{:?}", l.error_examples);
    assert_eq!(l.new_connections, 6);
    assert_eq!(l.connect_seconds.count, 6);
    let p50 = l.connect_seconds.p50.unwrap();
    assert!(p50 > 0.0 && p50 < 1.0, "{p50}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_level_starved_of_its_places_by_another_target_is_not_measured() {
    // The engine sheds above 4 in flight: knee 4, recommended 3.
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1s, jitter: 0%, max_in_flight_total: 8, sweep_timeout: 50s }}
defaults:
  workload: chat
  warmup_requests: 1
  levels: [1, 2, 4, 8]
  requests_per_level: 2x
  min_requests_per_level: 4
  # Also the longest wait for a level's places.
  request_timeout: 1s
  refine_resolution: off
  slo: {LOOSE_SLO}
workloads:
  chat:
    max_completion_tokens: 8
    prompts: ["hello there"]
targets:
  - name: sim
    simulator: {{ profile: tiny, max_in_flight: 4 }}
"#
    );
    let cfg = config::load(&write_config(&yaml)).unwrap_or_else(|e| panic!("{e}"));
    let target = &cfg.targets[0];
    let reachable = endpoint::reach(target).await.unwrap();
    let env = env_with(
        Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT).unwrap(),
        8,
    );
    let limit = cfg.schedule.sweep_timeout;
    let run = sweep::run(&env, target, &reachable.base_url, limit, None);
    let first = tokio::time::timeout(SWEEP_BOUND, run).await.unwrap();
    assert!(first.success, "{:?}", first.error);
    let before = &first.workloads[0];
    assert_eq!(before.capacity.knee_concurrency, 4);
    assert_eq!(before.capacity.recommended_max_in_flight, 3);
    assert!(before.capacity.levels_not_measured.is_empty());

    // Another target holds 6 of the 8 places: levels 1 and 2 have theirs,
    // level 4 waits its bounded wait in vain.
    let held = env.in_flight.clone().acquire_many_owned(6).await.unwrap();
    let prior = sweep::Prior {
        warm: None,
        latest: Some(&first),
        good: Some(&first),
        evidence: None,
    };
    let run = sweep::run_after(&env, target, &reachable.base_url, limit, prior);
    let second = tokio::time::timeout(SWEEP_BOUND, run).await.unwrap();
    drop(held);
    assert!(second.success, "{:?}", second.error);
    let w = &second.workloads[0];
    let measured: Vec<u32> = w.levels.iter().map(|l| l.concurrency).collect();
    assert_eq!(measured, vec![1, 2]);
    let c = &w.capacity;
    assert_eq!(
        c.levels_not_measured,
        vec![4, 8],
        "recorded as not measured"
    );
    assert_eq!(c.knee_concurrency, 4, "the knee unchanged");
    assert_eq!(
        c.recommended_max_in_flight, 3,
        "the recommendation unchanged"
    );
    assert!(c.knee_carried_over);
    assert!(!c.knee_is_lower_bound, "8 broke when it was measured");
    let at4 = before.levels[2].measured_at_unix_seconds;
    assert_eq!(c.knee_measured_at_unix_seconds, Some(at4), "with its age");
    let carried: Vec<(u32, f64)> = w
        .carried_levels
        .iter()
        .map(|l| (l.concurrency, l.measured_at_unix_seconds))
        .collect();
    assert_eq!(
        carried,
        vec![(4, at4), (8, before.levels[3].measured_at_unix_seconds)]
    );
    let why = c.stopped_because.as_deref().unwrap_or("");
    assert!(why.contains("concurrency 4 not measured"), "{why}");
    assert!(why.contains("other targets held them"), "{why}");
    assert!(why.contains("keep what an earlier sweep measured"), "{why}");

    let registry = prometheus::Registry::new();
    let metrics = llmprobe::metrics::Metrics::new(&registry).unwrap();
    metrics.publish_sweep(&second);
    let text = metrics.encode();
    let value = |name: &str| metric(&text, name, &[("target", "sim")]);
    assert_eq!(value("llmprobe_sweep_levels_not_measured"), Some(2.0));
    assert_eq!(value("llmprobe_capacity_knee_carried_over"), Some(1.0));
    assert_eq!(value("llmprobe_capacity_knee_concurrency"), Some(4.0));
    assert_eq!(value("llmprobe_recommended_max_in_flight"), Some(3.0));
    assert_eq!(value("llmprobe_capacity_knee_lower_bound"), Some(0.0));
    assert_eq!(
        value("llmprobe_capacity_knee_measured_timestamp_seconds"),
        Some(at4)
    );
}

// --- Body held open after the end of the stream -----------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_held_open_after_done_does_not_hold_the_place() {
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            c.write(format!("{SSE_HEAD}{}", good_stream(4))).await;
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
    })
    .await;
    let r = sweep(&yaml(&s.base_url(), "[4]", 12, LOOSE_SLO, "")).await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["ok"], 12, "{:?}", l.error_examples);
    assert!(l.kept_concurrency, "achieved {}", l.achieved_concurrency);
    assert!(
        l.achieved_concurrency > 3.0,
        "achieved {}",
        l.achieved_concurrency
    );
    assert_eq!(r.workloads[0].capacity.knee_concurrency, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn finish_reason_and_usage_end_a_stream_without_done() {
    // No [DONE], and the body stays open: the stream has said all it will.
    let s = raw::start(|mut c| async move {
        if c.read_request().await.is_some() {
            let stream = format!("{SSE_HEAD}{}{}{}", content("a"), finish(), usage(1));
            c.write(stream).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    })
    .await;
    let r = sweep(&yaml(&s.base_url(), "[2]", 4, LOOSE_SLO, "")).await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["ok"], 4, "{:?}", l.error_examples);
    assert!(l.decision_latency_seconds.p95.unwrap() < 1.0);
}

// --- Failures inside the SLO -------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_percent_timeouts_break_a_tight_latency_slo() {
    // Of every 25 requests: one stalls past the 600 ms limit, one answers in
    // 400 ms, the rest at once. Ok-only p95 is fast; counting the timeouts
    // (4%, under the 5% error limit) moves p95 onto the slow answers.
    let n = Arc::new(AtomicUsize::new(0));
    let counter = n.clone();
    let s = raw::start(move |mut c| {
        let counter = counter.clone();
        async move {
            let Some(head) = c.read_request().await else {
                return;
            };
            if !head.starts_with("POST") {
                c.write(raw::response("404 Not Found", &[], "")).await;
                return;
            }
            match counter.fetch_add(1, Ordering::SeqCst) % 25 {
                0 => tokio::time::sleep(Duration::from_secs(3)).await,
                1 => {
                    tokio::time::sleep(Duration::from_millis(400)).await;
                    c.write(format!("{SSE_HEAD}{}", good_stream(2))).await;
                }
                _ => {
                    c.write(format!("{SSE_HEAD}{}", good_stream(2))).await;
                }
            }
        }
    })
    .await;
    let slo = "{ p95_latency: 300ms, max_shed_ratio: 0.05, max_error_ratio: 0.05 }";
    // 4 slow of 50 (8%) are over 5% but no evidence at 95%: undecided; at
    // a ceiling of 1 (no more requests), never decided before (a one-shot
    // sweep), it neither raises nor lowers the knee (issue 28): the knee
    // stays 0 for want of a level that passed, and says it is undecided.
    let extra = "    request_timeout: 600ms\n    max_tokens_field: max_completion_tokens\n    verdict_ceiling: 1";
    let r = sweep(&yaml(&s.base_url(), "[1]", 50, slo, extra)).await;
    let l = &levels(&r)[0];
    let v = l.verdict.as_ref().unwrap();
    assert_eq!(
        (v.decision, v.counted_as),
        (
            llmprobe::stats::decision::Decision::Undecided,
            llmprobe::stats::decision::Decision::Undecided
        )
    );
    assert_eq!(l.outcomes["timeout"], 2, "{:?}", l.outcomes);
    assert_eq!(l.outcomes["ok"], 48);
    assert!(l.error_ratio <= 0.05);
    assert!(l.latency_seconds.p95.unwrap() < 0.3, "ok-only p95 is fast");
    assert_eq!(l.decision_latency_seconds.count, 50);
    assert!(
        l.decision_latency_seconds.p99.unwrap() >= 0.6,
        "a timeout counts its limit"
    );
    assert!(l.decision_latency_seconds.p95.unwrap() > 0.3);
    assert!(!l.within_slo);
    let c = &r.workloads[0].capacity;
    assert_eq!(c.knee_concurrency, 0);
    assert!(c.knee_undecided);
    // Nothing broke: what was measured is a floor, and an undecided one.
    assert!(c.knee_is_lower_bound);
    assert_eq!(c.limit, Some(llmprobe::stats::report::Limit::NotReached));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connect_timeout_is_a_connect_error() {
    // A listening socket that never accepts, its backlog full: the
    // handshake of a new connection never completes.
    let socket = tokio::net::TcpSocket::new_v4().unwrap();
    socket.bind("127.0.0.1:0".parse().unwrap()).unwrap();
    let listener = socket.listen(0).unwrap();
    let addr = listener.local_addr().unwrap();
    let _fills_the_backlog = std::net::TcpStream::connect(addr).unwrap();
    let env = env_with(Clients::new(Duration::from_millis(300)).unwrap(), 8);
    let extra = "    max_tokens_field: max_completion_tokens\n    early_stop: false";
    let r = sweep_with(
        &env,
        &yaml(&format!("http://{addr}/v1"), "[1]", 2, LOOSE_SLO, extra),
    )
    .await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["connect_error"], 2, "{:?}", l.outcomes);
    assert_eq!(l.outcomes["timeout"], 0);
    drop(listener);
}

// --- Usage that cannot be trusted, streams cut off ---------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn zero_completion_tokens_with_content_is_not_trusted() {
    let stream = format!(
        "{SSE_HEAD}{}{}{}{}{}",
        content("a"),
        content("b"),
        content("c"),
        finish(),
        usage(0)
    );
    let s = raw::fixed(format!("{stream}{DONE}")).await;
    let r = sweep(&yaml(&s.base_url(), "[1]", 4, LOOSE_SLO, "")).await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["ok"], 4, "{:?}", l.error_examples);
    assert_eq!(l.output_tokens, 12, "three chunks each, not the reported 0");
    assert_eq!(l.token_source, "chunks");
    assert_eq!(l.usage_disagreements, 4);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_cut_off_says_after_how_many_chunks() {
    let s = raw::fixed(format!(
        "{SSE_HEAD}{}{}{}",
        content("a"),
        content("b"),
        content("c")
    ))
    .await;
    let r = sweep(&yaml(
        &s.base_url(),
        "[1]",
        2,
        LOOSE_SLO,
        "    early_stop: false",
    ))
    .await;
    let l = &levels(&r)[0];
    assert_eq!(l.outcomes["protocol_error"], 2);
    let e = &l.error_examples["protocol_error"];
    assert!(e.contains("after 3 content chunks"), "{e}");
}

// --- The output-limit field --------------------------------------------------

/// The JSON body of a POST (what is not JSON reads as null); any other
/// request gets a 404 and None.
async fn posted_json(c: &mut raw::Conn) -> Option<serde_json::Value> {
    let (head, body) = c.read_request_and_body().await?;
    if !head.starts_with("POST") {
        c.write(raw::response("404 Not Found", &[], "")).await;
        return None;
    }
    Some(serde_json::from_slice(&body).unwrap_or_default())
}

/// A server like llama-cpp-python: it honours `max_tokens` only; without it
/// it generates until its context (40 tokens) is full and the stream breaks.
async fn ignores_max_completion_tokens(honours_max_tokens: bool) -> raw::RawServer {
    raw::start(move |mut c| async move {
        let Some(body) = posted_json(&mut c).await else {
            return;
        };
        match body["max_tokens"].as_u64() {
            Some(n) if honours_max_tokens => {
                let mut s = SSE_HEAD.to_string();
                for _ in 0..n {
                    s.push_str(&content("tok"));
                }
                s.push_str(&finish());
                s.push_str(DONE);
                c.write(s).await;
            }
            _ => {
                let mut s = SSE_HEAD.to_string();
                for _ in 0..40 {
                    s.push_str(&content("tok"));
                }
                c.write(s).await;
                c.reset();
            }
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_switches_to_max_tokens_when_max_completion_tokens_is_ignored() {
    let s = ignores_max_completion_tokens(true).await;
    let r = sweep(&yaml(&s.base_url(), "[1, 2]", 4, LOOSE_SLO, "")).await;
    assert!(r.success, "{:?}", r.error);
    for l in levels(&r) {
        assert_eq!(l.outcomes["ok"], 4, "{:?}", l.error_examples);
        assert_eq!(l.output_tokens, 4 * 8, "8 tokens each, as asked");
    }
    assert_eq!(r.output_limit.field, "max_tokens");
    assert_eq!(r.output_limit.source, "detected");
    let note = r.output_limit.note.as_deref().unwrap_or("");
    assert!(note.contains("max_completion_tokens"), "{note}");
    // No warm-up here: the request opening level 1's connection ran away.
    assert_eq!(r.output_limit.found_in, Some(FoundIn::Pool));
    let table = llmprobe::faces::text::table(std::slice::from_ref(&r));
    assert!(
        table.contains(
            "output limit sent as `max_tokens` (found by a request opening a level's connections: with"
        ),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_nothing_bounds_fails_the_sweep_saying_so() {
    let s = ignores_max_completion_tokens(false).await;
    let r = sweep(&yaml(&s.base_url(), "[1]", 2, LOOSE_SLO, "")).await;
    assert!(!r.success);
    let e = r.error.as_deref().unwrap_or("");
    assert!(e.starts_with("nothing bounds the server's output"), "{e}");
    assert!(r.workloads.is_empty(), "no level is measured");
}

/// Two prompts, one warm-up request (prompt 0), levels 1 and 2 of four
/// requests each: prompts 0, 1, 0, 1.
fn two_prompts(base_url: &str) -> String {
    yaml(base_url, "[1, 2]", 4, LOOSE_SLO, "")
        .replace("  warmup_requests: 0\n", "  warmup_requests: 1\n")
        .replace(
            r#"prompts: ["hello there"]"#,
            r#"prompts: ["brief: say hi", "tell me a long story"]"#,
        )
}

/// The answers of a server that honours only `max_tokens`: `n` tokens.
fn honoured(n: u64) -> String {
    let mut s = SSE_HEAD.to_string();
    for _ in 0..n {
        s.push_str(&content("tok"));
    }
    s.push_str(&finish());
    s.push_str(DONE);
    s
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_honouring_only_max_tokens_that_answers_the_first_prompt_briefly() {
    // Without `max_tokens` the brief prompt still ends after 2 tokens (the
    // warm-up sees nothing wrong); the other runs until its context is full.
    let s = raw::start(|mut c| async move {
        let Some(body) = posted_json(&mut c).await else {
            return;
        };
        if let Some(n) = body["max_tokens"].as_u64() {
            c.write(honoured(n)).await;
        } else if body.to_string().contains("brief") {
            c.write(honoured(2)).await;
        } else {
            let mut s = SSE_HEAD.to_string();
            for _ in 0..40 {
                s.push_str(&content("tok"));
            }
            c.write(s).await;
            c.reset();
        }
    })
    .await;
    let r = sweep(&two_prompts(&s.base_url())).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.output_limit.field, "max_tokens");
    assert_eq!(r.output_limit.source, "detected");
    let note = r.output_limit.note.as_deref().unwrap_or("");
    assert!(note.contains("with `max_completion_tokens`"), "{note}");
    // The warm-up's brief answer passed: a later one found the field.
    assert!(
        matches!(
            r.output_limit.found_in,
            Some(FoundIn::Pool | FoundIn::Counted)
        ),
        "{:?}",
        r.output_limit.found_in
    );
    let table = llmprobe::faces::text::table(std::slice::from_ref(&r));
    assert!(!table.contains("found at warm-up"), "{table}");
    for l in levels(&r) {
        assert_eq!(l.outcomes["ok"], 4, "{:?}", l.error_examples);
        assert_eq!(l.outcomes["protocol_error"], 0);
    }
    assert_eq!(r.workloads[0].capacity.knee_concurrency, 2);
}

/// FastAPI/pydantic: an unknown field is a 422 that names it in `loc`;
/// `max_tokens` is honoured.
async fn rejects_max_completion_tokens() -> raw::RawServer {
    raw::start(|mut c| async move {
        let Some(body) = posted_json(&mut c).await else {
            return;
        };
        if body.get("max_completion_tokens").is_some() {
            let detail = r#"{"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted","input":8}]}"#;
            let headers = [("content-type", "application/json")];
            c.write(raw::response("422 Unprocessable Entity", &headers, detail))
                .await;
        } else {
            c.write(honoured(body["max_tokens"].as_u64().unwrap_or(100)))
                .await;
        }
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_422_naming_max_completion_tokens_switches_to_max_tokens() {
    let s = rejects_max_completion_tokens().await;
    let r = sweep(&two_prompts(&s.base_url())).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.output_limit.field, "max_tokens");
    assert_eq!(r.output_limit.source, "detected");
    let note = r.output_limit.note.as_deref().unwrap_or("");
    assert!(note.contains("extra_forbidden"), "{note}");
    for l in levels(&r) {
        assert_eq!(l.outcomes["ok"], 4, "{:?}", l.error_examples);
    }
    assert_eq!(r.workloads[0].capacity.knee_concurrency, 2);
}

/// A client that burns its CPU between two requests now and then, as its
/// own bookkeeping does when a loaded host takes its cores away (this
/// file's 422 case once read knee 0 so in CI): the end of every `every`-th
/// counted request holds its loop `burn` before the next is sent, past the
/// turnaround a level is forgiven. A companion task that holds the
/// runtime's workers only lengthens requests in flight (a loop's turnaround
/// has no await for it to land in); a thread kept from its CPU between two
/// requests, as here, is what leaves a level short of its concurrency.
struct BurnsBetweenRequests {
    seen: AtomicUsize,
    every: usize,
    burn: Duration,
}

impl llmprobe::sweep::Observer for BurnsBetweenRequests {
    fn request(
        &self,
        _: &llmprobe::config::Target,
        _: &llmprobe::config::Workload,
        _: &llmprobe::stats::sample::Sample,
        _: Option<u32>,
    ) {
        if self.seen.fetch_add(1, Ordering::Relaxed) % self.every == self.every - 1 {
            let until = std::time::Instant::now() + self.burn;
            while std::time::Instant::now() < until {
                std::hint::spin_loop();
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_422_case_with_a_client_burning_its_cpu_never_reads_a_lower_knee() {
    // Issue 28: the client's own limits are never the server's. Each sweep
    // gives the true knee (2), or leaves the levels the client could not
    // keep up with "not measured (client)", flagged; never a break, never a
    // plain lower knee.
    let s = rejects_max_completion_tokens().await;
    let yaml = two_prompts(&s.base_url());
    let burning = Arc::new(BurnsBetweenRequests {
        seen: AtomicUsize::new(0),
        every: 5,
        burn: Duration::from_millis(8),
    });
    let clients = Clients::new(llmprobe::probe::tls::CONNECT_TIMEOUT).unwrap();
    let env = SweepEnv::new(clients, 64, CancellationToken::new(), burning.clone());
    for _ in 0..4 {
        let r = sweep_with(&env, &yaml).await;
        assert!(r.success, "{:?}", r.error);
        assert_eq!(r.output_limit.field, "max_tokens");
        let (w, cap) = (&r.workloads[0], &r.workloads[0].capacity);
        let levels: Vec<_> = w
            .levels
            .iter()
            .map(|l| (l.concurrency, l.achieved_concurrency, l.kept_concurrency))
            .collect();
        assert!(
            w.levels.iter().all(|l| !l.stops_knee()),
            "a measured level broke: {levels:?}"
        );
        if cap.knee_concurrency == 2 {
            assert!(cap.levels_not_measured.is_empty(), "{cap:?}");
            continue;
        }
        let why = cap.not_measured_client.as_deref().unwrap_or_else(|| {
            panic!(
                "knee {} without 'not measured (client)': {:?}, levels {levels:?}",
                cap.knee_concurrency, cap.stopped_because
            )
        });
        assert!(why.contains("could not keep up"), "{why}");
        // The knee stops where measuring stopped, not where a level broke.
        let next = if cap.knee_concurrency == 0 { 1 } else { 2 };
        assert_eq!(cap.levels_not_measured.first(), Some(&next), "{cap:?}");
        let stopped = cap.stopped_because.as_deref().unwrap_or("");
        assert!(stopped.contains("not measured (client)"), "{stopped}");
    }
    // The client did burn between requests, levels' included.
    assert!(burning.seen.load(Ordering::Relaxed) >= 16);
}

// --- Prefix caches -----------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn prefix_cache_on_the_simulated_engine_in_both_modes() {
    // One 2,000-token prompt, prefilled at 20,000 tokens/s: 100 ms of
    // prefill, unless the engine has the prefix cached.
    let system = "You answer questions about capacity planning. ".repeat(170);
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
defaults:
  warmup_requests: 1
  levels: [1]
  requests_per_level: 6
  min_requests_per_level: 1
workloads:
  fresh:
    max_completion_tokens: 4
    synthetic: {{ prompt_tokens: 2000, count: 1 }}
  repeated:
    max_completion_tokens: 4
    synthetic: {{ prompt_tokens: 2000, count: 1 }}
    prefix_cache: shared
  system:
    max_completion_tokens: 4
    system_prompt: "{system}"
    prompts: ["What limits throughput?", "Why does TTFT grow?"]
    prefix_cache: shared_system_prompt
targets:
  - name: sim
    workloads: [fresh, repeated, system]
    simulator: {{ profile: tiny, prefill_tokens_per_second: 20000, step_base: 2ms, step_per_sequence: 100us }}
"#
    );
    let cfg = config::load(&write_config(&yaml)).unwrap_or_else(|e| panic!("{e}"));
    let r = llmprobe::schedule::once::sweep(
        &cfg,
        &[],
        std::sync::Arc::new(llmprobe::sweep::NoObserver),
    )
    .await
    .unwrap()
    .remove(0);
    assert!(r.success, "{:?}", r.error);
    let level = |w: usize| &r.workloads[w].levels[0];
    let (fresh, repeated, system) = (level(0), level(1), level(2));
    for l in [fresh, repeated, system] {
        assert_eq!(l.outcomes["ok"], 6, "{:?}", l.error_examples);
    }
    // Unique (the default): every request pays the whole prefill.
    assert_eq!(fresh.cached_prompt_tokens, 0);
    let ttft = |l: &LevelSummary| l.ttft_seconds.p50.unwrap();
    assert!(ttft(fresh) >= 0.09, "fresh TTFT {}", ttft(fresh));
    // Shared: every request but none (warm-up came first) hits the cache.
    assert!(
        repeated.cached_prompt_tokens >= 6 * 1900,
        "{}",
        repeated.cached_prompt_tokens
    );
    assert!(
        ttft(repeated) < ttft(fresh) / 2.0,
        "repeated {} vs fresh {}",
        ttft(repeated),
        ttft(fresh)
    );
    // A shared system prompt, then new user text: the system prompt is cached.
    assert!(system.cached_prompt_tokens >= 6 * 1900);
    assert!(system.cached_prompt_tokens < system.prompt_tokens);
}

// --- What the knee is --------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_knee_no_level_broke_is_a_lower_bound_and_says_why_the_climb_ended() {
    // The tiny engine sheds above 8; max_concurrency stops the climb at 2.
    let yaml = r#"
listen: "127.0.0.1:0"
defaults:
  workload: chat
  warmup_requests: 1
  levels: [1, 2, 4, 8]
  requests_per_level: 4
  min_requests_per_level: 1
workloads:
  chat: { max_completion_tokens: 8, prompts: ["hi"] }
targets:
  - name: sim
    simulator: { profile: tiny }
    max_concurrency: 2
"#;
    let cfg = config::load(&write_config(yaml)).unwrap_or_else(|e| panic!("{e}"));
    let r = llmprobe::schedule::once::sweep(
        &cfg,
        &[],
        std::sync::Arc::new(llmprobe::sweep::NoObserver),
    )
    .await
    .unwrap()
    .remove(0);
    let c = &r.workloads[0].capacity;
    assert_eq!(c.knee_concurrency, 2);
    assert!(c.knee_is_lower_bound);
    let why = c.stopped_because.as_deref().unwrap_or("");
    assert!(why.contains("max_concurrency (2)"), "{why}");
    let table = llmprobe::faces::text::table(std::slice::from_ref(&r));
    assert!(table.contains("knee: ≥ 2 "), "{table}");
    let json: serde_json::Value = serde_json::from_str(&llmprobe::faces::json::json(&[r])).unwrap();
    let capacity = &json["targets"][0]["workloads"][0]["capacity"];
    assert_eq!(capacity["knee_is_lower_bound"], true);
    let level = &json["targets"][0]["workloads"][0]["levels"][1];
    for field in [
        "achieved_concurrency",
        "littles_law_concurrency",
        "kept_concurrency",
        "decision_latency_seconds",
        "new_connections",
        "connect_seconds",
        "usage_disagreements",
        "cached_prompt_tokens",
    ] {
        assert!(!level[field].is_null(), "{field} in the JSON");
    }
    assert_eq!(
        json["targets"][0]["output_limit"]["field"],
        "max_completion_tokens"
    );
}
