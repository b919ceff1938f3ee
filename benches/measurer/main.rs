//! Measures the measurer: how close llmprobe's timings are to the server's
//! own, what llmprobe costs per streamed chunk (next to the reference Python
//! method), its memory and scrape footprint, and how fast the simulated
//! engine streams. Prints one markdown table per benchmark; BENCHMARKS.md
//! says how to read them.
//!
//! ```text
//! cargo bench --bench measurer                       # everything, ~3 minutes
//! cargo bench --bench measurer -- --only accuracy,cost
//! cargo bench --bench measurer -- --quick            # fewer requests, a smoke run
//! cargo bench --bench measurer -- --only flood       # issue 29, ~7 minutes, not in "everything"
//! ```
//!
//! Servers run in child processes (this binary in `serve-truth` mode, or
//! `llmprobe simulate`), so that the client's CPU, read from the OS for this
//! whole process, is the client's alone. The accuracy benchmark's client is
//! a sweep (`sweep::run`, see [`accuracy`]); the others drive llmprobe's own
//! `probe::measure` on llmprobe's `Client` in a closed loop of their own
//! ([`level`]), which keeps a level's concurrency as a sweep's does.

mod accuracy;
mod flood;
mod os;
mod truth;

#[path = "../common/fixtures.rs"]
mod fixtures;

use std::collections::HashMap;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use llmprobe::config::Slo;
use llmprobe::probe::client::Client;
use llmprobe::probe::exchange::{self as probe, RequestSpec};
use llmprobe::stats::level;
use llmprobe::stats::sample::{Outcome, Sample};
use tokio_util::sync::CancellationToken;

use truth::{Pace, Truth};

/// The llmprobe binary built alongside this bench (same profile).
const LLMPROBE: &str = env!("CARGO_BIN_EXE_llmprobe");
const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.first().map(String::as_str) == Some("serve-truth") {
        serve_truth(&args[1..]);
        return;
    }
    let mut only: Option<Vec<String>> = None;
    let mut quick = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--only" => {
                only = it
                    .next()
                    .map(|s| s.split(',').map(str::to_string).collect())
            }
            "--quick" => quick = true,
            // `cargo bench` passes --bench; filters and other flags mean nothing here.
            _ => {}
        }
    }
    let wants = |name: &str| only.as_ref().map_or(true, |o| o.iter().any(|x| x == name));
    // The same runtime as llmprobe's main: multi-threaded, one worker per
    // core. MEASURER_RUNTIME=current tries a single-threaded one instead.
    let runtime = if std::env::var("MEASURER_RUNTIME").as_deref() == Ok("current") {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    }
    .enable_all()
    .build()
    .expect("tokio runtime");
    println!(
        "# llmprobe measurer: {} CPUs, load {:.2} at start, llmprobe {}{}\n",
        os::cpus(),
        os::load1(),
        env!("CARGO_PKG_VERSION"),
        if quick { " (--quick)" } else { "" }
    );
    let scale = if quick { 4 } else { 1 };
    runtime.block_on(async {
        let client = Client::new(Duration::from_secs(10)).expect("client");
        if wants("accuracy") {
            accuracy::accuracy(scale).await;
        }
        if wants("cost") {
            cost(&client, scale).await;
        }
        if wants("reference") {
            reference(&client, scale).await;
        }
        if wants("footprint") {
            footprint().await;
        }
        if wants("engine") {
            engine(&client, scale).await;
        }
        // Seven minutes and a daemon of 150 targets: only when asked.
        if only
            .as_ref()
            .is_some_and(|o| o.iter().any(|x| x == "flood"))
        {
            flood::flood(scale).await;
        }
    });
}

/// Child mode: `serve-truth paced TTFT_MS GAP_MS` or `serve-truth saturate`.
fn serve_truth(args: &[String]) {
    let ms =
        |i: usize| Duration::from_millis(args.get(i).and_then(|s| s.parse().ok()).unwrap_or(10));
    let pace = match args.first().map(String::as_str) {
        Some("saturate") => Pace::Saturate,
        _ => Pace::Paced {
            ttft: ms(1),
            gap: ms(2),
        },
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    if let Err(e) = runtime.block_on(truth::serve(pace)) {
        eprintln!("truth server: {e}");
        std::process::exit(1);
    }
}

// ---------------------------------------------------------------- servers

/// A server in a child process, killed when dropped.
struct Server {
    child: std::process::Child,
    addr: String,
    /// Whether it is the truth server (which answers `GET /truth`).
    truth: bool,
}

impl Server {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    fn cpu(&self) -> Duration {
        os::process_cpu(self.pid()).unwrap_or_default()
    }

    /// The timing-truth server, pacing chunks as asked.
    fn truth(pace: Pace) -> Server {
        let exe = std::env::current_exe().expect("own path");
        let mut cmd = Command::new(exe);
        cmd.arg("serve-truth");
        match pace {
            Pace::Saturate => {
                cmd.arg("saturate");
            }
            Pace::Paced { ttft, gap } => {
                cmd.args([
                    "paced".to_string(),
                    ttft.as_millis().to_string(),
                    gap.as_millis().to_string(),
                ]);
            }
        }
        let mut child = cmd
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start the truth server");
        let mut line = String::new();
        BufReader::new(child.stdout.take().expect("piped"))
            .read_line(&mut line)
            .expect("truth server address");
        let addr = line
            .trim()
            .strip_prefix("listening ")
            .expect("truth server says where it listens")
            .to_string();
        Server {
            child,
            addr,
            truth: true,
        }
    }

    /// `llmprobe simulate` with these extra arguments.
    async fn simulator(args: &[&str]) -> Server {
        let addr = free_addr();
        let child = Command::new(LLMPROBE)
            .arg("simulate")
            .args(["--listen", &addr])
            .args(args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llmprobe simulate");
        let server = Server {
            child,
            addr,
            truth: false,
        };
        wait_http(&format!("http://{}/health", server.addr)).await;
        server
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A loopback address that was free a moment ago.
fn free_addr() -> String {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").to_string()
}

/// Waits until `url` answers 200 (servers take a moment to start).
async fn wait_http(url: &str) {
    wait_http_with(&reqwest::Client::new(), url).await
}

/// [`wait_http`] with this client (an HTTPS one, say).
async fn wait_http_with(http: &reqwest::Client, url: &str) {
    for _ in 0..200 {
        if let Ok(r) = http.get(url).send().await {
            if r.status().is_success() {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("{url} did not come up");
}

/// Takes the server's records (and makes it forget them).
async fn take_truth(server: &Server) -> truth::Report {
    reqwest::get(format!("http://{}/truth", server.addr))
        .await
        .expect("GET /truth")
        .bytes()
        .await
        .map(|b| serde_json::from_slice(&b).expect("truth JSON"))
        .expect("truth body")
}

// ---------------------------------------------------------------- client

/// Request bodies as llmprobe's `request::bodies` builds them, plus a
/// unique `user` id that the truth server records the request under.
fn bodies(prefix: &str, n: usize, tokens: u32) -> Arc<Vec<(String, Bytes)>> {
    Arc::new(
        (0..n)
            .map(|i| {
                let id = format!("{prefix}{i}");
                let body = serde_json::json!({
                    "model": "bench-model",
                    "messages": [{"role": "user", "content": "Write a haiku about capacity planning."}],
                    "stream": true,
                    "stream_options": {"include_usage": true},
                    "temperature": 0.0,
                    "max_completion_tokens": tokens,
                    "user": id,
                });
                (id, Bytes::from(serde_json::to_vec(&body).expect("json")))
            })
            .collect(),
    )
}

/// Keeps `concurrency` requests in flight until every body was sent, as a
/// sweep's level does; returns each request's id and sample.
async fn closed_loop(
    client: &Client,
    url: &str,
    concurrency: usize,
    bodies: Arc<Vec<(String, Bytes)>>,
) -> Vec<(String, Sample)> {
    let next = Arc::new(AtomicUsize::new(0));
    let url: Arc<str> = url.into();
    let cancel = CancellationToken::new();
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency {
        let (client, url, bodies, next, cancel) = (
            client.clone(),
            url.clone(),
            bodies.clone(),
            next.clone(),
            cancel.clone(),
        );
        workers.spawn(async move {
            let spec = RequestSpec {
                url: &url,
                read_chunk: llmprobe::stream::chunk::interpret,
                key: None,
                timeout: REQUEST_TIMEOUT,
                output_limit: None,
            };
            let mut mine = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some((id, body)) = bodies.get(i) else {
                    break;
                };
                let sample = probe::measure(&client, &spec, body.clone(), &cancel).await;
                mine.push((id.clone(), sample));
            }
            mine
        });
    }
    let mut all = Vec::with_capacity(bodies.len());
    while let Some(done) = workers.join_next().await {
        all.extend(done.expect("worker"));
    }
    all
}

/// One measured level.
struct Level {
    samples: Vec<(String, Sample)>,
    wall: Duration,
    /// CPU of this process (the client) during the level, summary included.
    cpu: Duration,
    /// CPU of the server process during the level.
    server_cpu: Duration,
    /// Content chunks of successful requests.
    chunks: u64,
    load: f64,
    /// The truth server's records of the measured requests (not the warm-up).
    truth: Option<truth::Report>,
}

impl Level {
    fn cpu_per_chunk_us(&self) -> f64 {
        self.cpu.as_secs_f64() * 1e6 / self.chunks.max(1) as f64
    }
}

/// A warm-up round (opens the connections; forgotten), then `n` requests
/// with `concurrency` in flight, measured.
async fn level(
    client: &Client,
    server: &Server,
    concurrency: usize,
    n: usize,
    tokens: u32,
    tag: &str,
) -> Level {
    let url = format!("{}/chat/completions", server.base_url());
    closed_loop(
        client,
        &url,
        concurrency,
        bodies(&format!("warm-{tag}-"), concurrency, tokens),
    )
    .await;
    if server.truth {
        take_truth(server).await;
    }
    let bodies = bodies(&format!("{tag}-"), n, tokens);
    let (cpu0, server0, t0) = (os::self_cpu(), server.cpu(), Instant::now());
    let samples = closed_loop(client, &url, concurrency, bodies).await;
    // What a sweep does next with the samples is part of its cost per chunk.
    let plain: Vec<Sample> = samples.iter().map(|(_, s)| s.clone()).collect();
    let slo = Slo {
        p95_latency: Duration::from_secs(60),
        max_shed_ratio: 0.05,
        max_error_ratio: 0.05,
    };
    std::hint::black_box(level::summarize_level(
        concurrency as u32,
        &plain,
        t0.elapsed(),
        &slo,
    ));
    let (wall, cpu, server_cpu) = (
        t0.elapsed(),
        os::self_cpu() - cpu0,
        server.cpu().saturating_sub(server0),
    );
    let ok = samples.iter().filter(|(_, s)| s.outcome == Outcome::Ok);
    let chunks = ok.map(|(_, s)| s.content_chunks).sum();
    let failed = samples
        .iter()
        .filter(|(_, s)| s.outcome != Outcome::Ok)
        .count();
    if let Some((_, s)) = samples.iter().find(|(_, s)| s.outcome != Outcome::Ok) {
        eprintln!(
            "  {failed} failed requests, e.g. {:?}: {:?}",
            s.outcome, s.error
        );
    }
    let load = os::load1();
    let truth = if server.truth {
        Some(take_truth(server).await)
    } else {
        None
    };
    if std::env::var_os("MEASURER_DEBUG").is_some() {
        if let Some(t) = &truth {
            // Which round of the closed loop the fresh connections came in.
            let mut rounds = std::collections::BTreeMap::new();
            for (id, r) in &t.requests {
                if r.fresh_connection {
                    let i: usize = id
                        .rsplit('-')
                        .next()
                        .and_then(|x| x.parse().ok())
                        .unwrap_or(0);
                    *rounds.entry(i / concurrency).or_insert(0) += 1;
                }
            }
            eprintln!("  {tag}: fresh connections by round {rounds:?}");
        }
    }
    Level {
        samples,
        wall,
        cpu,
        server_cpu,
        chunks,
        load,
        truth,
    }
}

// ---------------------------------------------------------------- figures

/// p50 and p99 of `v` (sorted here), in the unit the caller chose.
fn p50_p99(v: &mut [f64]) -> (f64, f64) {
    v.sort_by(f64::total_cmp);
    (
        level::quantile_sorted(v, 0.5).unwrap_or(f64::NAN),
        level::quantile_sorted(v, 0.99).unwrap_or(f64::NAN),
    )
}

/// Errors of the client's timings against the server's truth, in ms.
#[derive(Default)]
struct Errors {
    /// |client TTFT - server TTFT| per request.
    ttft: Vec<f64>,
    /// client TTFT - server TTFT, signed.
    ttft_signed: Vec<f64>,
    /// |client gap - server gap| per inter-token gap.
    itl: Vec<f64>,
    /// The server's own TTFT (request arrival to first content chunk written).
    server_ttft: Vec<f64>,
    /// Request arrival at the server's socket to the server reading it.
    read_delay: Vec<f64>,
    /// Requests without a truth record or with a different chunk count.
    unpaired: usize,
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn compare(samples: &[(String, Sample)], truth: &HashMap<String, Truth>) -> Errors {
    let mut e = Errors::default();
    for (id, s) in samples {
        let (Some(t), Some(client_ttft)) = (truth.get(id), s.ttft) else {
            e.unpaired += 1;
            continue;
        };
        let Some(server_ttft) = t.ttft() else {
            e.unpaired += 1;
            continue;
        };
        let d = ms(client_ttft) - ms(server_ttft);
        e.ttft.push(d.abs());
        e.ttft_signed.push(d);
        e.server_ttft.push(ms(server_ttft));
        e.read_delay.push(t.read_delay_ns as f64 / 1e6);
        if s.content_chunks as usize != t.writes_ns.len() {
            e.unpaired += 1;
            continue;
        }
        for (c, g) in s.inter_token.iter().zip(t.gaps()) {
            e.itl.push((ms(*c) - ms(g)).abs());
        }
    }
    e
}

fn check(ok: bool) -> &'static str {
    if ok {
        "yes"
    } else {
        "**no**"
    }
}

/// Benchmark 2: client CPU per streamed chunk in three chunk regimes.
async fn cost(client: &Client, scale: usize) {
    let tokens = 256;
    println!(
        "## 2. Client cost: llmprobe CPU per streamed chunk (OS accounting of the whole process)\n"
    );
    println!("{tokens} content chunks per request; 2 x concurrency requests after a warm-up round; CPU = user + sys of the client process (getrusage), which also summarises the level as a sweep does.\n");
    println!("| regime | concurrency | chunks | client CPU per chunk | chunks/s per client core | chunks/s (wall) | server CPU per chunk | connections opened | target | met | load |");
    println!("|---|---|---|---|---|---|---|---|---|---|---|");
    let paced = Pace::Paced {
        ttft: Duration::from_millis(10),
        gap: Duration::from_millis(10),
    };
    for (regime, target, pace) in [
        ("merged (stub engine)", 2.0, None),
        ("one write per chunk, saturated", 5.0, Some(Pace::Saturate)),
        ("paced 10 ms", 15.0, Some(paced)),
    ] {
        let server = match pace {
            None => Server::simulator(&["--profile", "stub"]).await,
            Some(pace) => Server::truth(pace),
        };
        for c in [64usize, 512] {
            let n = (2 * c / scale).max(c);
            let l = level(client, &server, c, n, tokens, &format!("cost{c}")).await;
            let per = l.cpu_per_chunk_us();
            println!(
                "| {regime} | {c} | {} | {per:.2} µs | {:.0} | {:.0} | {:.2} µs | {} | <= {target} µs | {} | {:.2} |",
                l.chunks,
                l.chunks as f64 / l.cpu.as_secs_f64(),
                l.chunks as f64 / l.wall.as_secs_f64(),
                l.server_cpu.as_secs_f64() * 1e6 / l.chunks.max(1) as f64,
                l.truth
                    .as_ref()
                    .map_or("-".to_string(), |t| t.connections.to_string()),
                check(per <= target),
                l.load
            );
        }
    }
    println!();
}

/// What the reference script printed.
#[derive(serde::Deserialize)]
struct PyRun {
    sdk_version: String,
    python: String,
    cpu_seconds: f64,
    chunks: u64,
    requests: Vec<PyRequest>,
}

#[derive(serde::Deserialize)]
struct PyRequest {
    id: String,
    ttft: Option<f64>,
}

/// Runs benches/reference_openai.py; Err is the reason it was skipped.
fn python_level(
    server: &Server,
    c: usize,
    n: usize,
    tokens: u32,
    prefix: &str,
) -> Result<PyRun, String> {
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/reference_openai.py");
    let out = Command::new("python3")
        .arg(script)
        .args(["--base-url", &server.base_url()])
        .args(["--concurrency", &c.to_string()])
        .args(["--requests", &n.to_string()])
        .args(["--max-tokens", &tokens.to_string()])
        .args(["--id-prefix", prefix])
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("python3 not runnable: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("bad output from the script: {e}"))
}

/// Benchmark 3: llmprobe next to the reference Python method, same server.
async fn reference(client: &Client, scale: usize) {
    println!(
        "## 3. Side by side with the reference method (openai SDK, AsyncOpenAI, stream=True)\n"
    );
    let cases: [(&str, Pace, usize, u32); 3] = [
        (
            "paced 20 ms + 10 ms",
            Pace::Paced {
                ttft: Duration::from_millis(20),
                gap: Duration::from_millis(10),
            },
            1,
            16,
        ),
        (
            "paced 20 ms + 10 ms",
            Pace::Paced {
                ttft: Duration::from_millis(20),
                gap: Duration::from_millis(10),
            },
            64,
            64,
        ),
        ("one write per chunk, saturated", Pace::Saturate, 64, 256),
    ];
    let mut header = false;
    for (name, pace, c, tokens) in cases {
        let n = (if c == 1 { 50 } else { 4 * c } / scale).max(c);
        let server = Server::truth(pace);
        let rust = level(client, &server, c, n, tokens, "rs").await;
        let py = match python_level(&server, c, n, tokens, "py-") {
            Ok(py) => py,
            Err(why) => {
                println!("skipped: {why}\n");
                return;
            }
        };
        let py_truth = take_truth(&server).await.requests;
        if !header {
            println!(
                "Python {}, openai {}; same truth server, same requests, one after the other. Ratios are Python / llmprobe.\n",
                py.python, py.sdk_version
            );
            println!("| workload | concurrency | chunks (llmprobe / Python) | CPU per chunk llmprobe | CPU per chunk Python | CPU ratio | TTFT error p50 llmprobe / Python | TTFT error p99 llmprobe / Python | p50 ratio | load |");
            println!("|---|---|---|---|---|---|---|---|---|---|");
            header = true;
        }
        let mut re = compare(&rust.samples, &rust.truth.as_ref().expect("truth").requests);
        let mut pe = Errors::default();
        for r in &py.requests {
            match (r.ttft, py_truth.get(&r.id).and_then(Truth::ttft)) {
                (Some(t), Some(s)) => pe.ttft.push((t * 1e3 - ms(s)).abs()),
                _ => pe.unpaired += 1,
            }
        }
        let (r50, r99) = p50_p99(&mut re.ttft);
        let (p50, p99) = p50_p99(&mut pe.ttft);
        let rust_cpu = rust.cpu_per_chunk_us();
        let py_cpu = py.cpu_seconds * 1e6 / py.chunks.max(1) as f64;
        println!(
            "| {name}, {tokens} chunks | {c} | {} / {} | {rust_cpu:.2} µs | {py_cpu:.1} µs | {:.0}x | {r50:.3} / {p50:.3} ms | {r99:.3} / {p99:.3} ms | {:.1}x | {:.2} |",
            rust.chunks,
            py.chunks,
            py_cpu / rust_cpu,
            p50 / r50,
            os::load1()
        );
    }
    println!();
}

/// A daemon started from the built binary, killed when dropped.
struct Daemon {
    child: std::process::Child,
    addr: String,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    async fn start(config: &str) -> Daemon {
        let addr = free_addr();
        let child = Command::new(LLMPROBE)
            .args(["run", "--config", config])
            .env("LLMPROBE__LISTEN", &addr)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start llmprobe run");
        let d = Daemon { child, addr };
        wait_http(&format!("http://{}/readyz", d.addr)).await;
        d
    }

    fn rss_mb(&self) -> (f64, f64) {
        let (rss, hwm) = os::rss(self.child.id()).unwrap_or_default();
        (rss as f64 / 1048576.0, hwm as f64 / 1048576.0)
    }

    async fn scrape(&self) -> String {
        reqwest::get(format!("http://{}/metrics", self.addr))
            .await
            .expect("scrape")
            .text()
            .await
            .expect("body")
    }

    /// Waits until every target finished a sweep (or `limit` passed).
    async fn first_sweeps(&self, targets: usize, limit: Duration) -> bool {
        let start = Instant::now();
        while start.elapsed() < limit {
            let text = self.scrape().await;
            let done = text
                .lines()
                .filter(|l| l.starts_with("llmprobe_sweep_success{") && l.ends_with(" 1"))
                .count();
            if done >= targets {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }
}

/// Benchmark 4: resident memory of the daemon and the cost of a big scrape.
async fn footprint() {
    println!("## 4. Footprint\n");
    println!("| what | figure | target | met | load |");
    println!("|---|---|---|---|---|");
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/config/llmprobe.yaml");
    let d = Daemon::start(shipped).await;
    let (at_start, _) = d.rss_mb();
    let swept = d.first_sweeps(1, Duration::from_secs(120)).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let (idle, peak) = d.rss_mb();
    drop(d);
    let load = os::load1();
    println!("| RSS at start, shipped config | {at_start:.1} MB | | | {load:.2} |");
    println!(
        "| RSS idle after its first sweep{} | {idle:.1} MB | < 15 MB | {} | {load:.2} |",
        if swept { "" } else { " (NO SWEEP SEEN)" },
        check(idle < 15.0)
    );
    println!("| peak RSS during that sweep (built-in simulator included) | {peak:.1} MB | | | {load:.2} |");

    // Concurrency 512 against the stub engine: 256-token answers arrive in
    // one burst each, the case where per-connection read buffers grow.
    let stub = Server::simulator(&["--profile", "stub"]).await;
    let dir = std::env::temp_dir().join(format!("llmprobe-measurer-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let config = dir.join("c512.yaml");
    std::fs::write(
        &config,
        format!(
            r#"
listen: "127.0.0.1:0"
schedule: {{ interval: 1h, jitter: 0%, max_in_flight_total: 512, sweep_timeout: 10m }}
defaults:
  workload: chat
  warmup_requests: 2
  levels: [512]
  requests_per_level: 3x
  request_timeout: 120s
  slo: {{ p95_latency: 120s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }}
workloads:
  chat:
    max_completion_tokens: 256
    prompts: ["Write a haiku about capacity planning."]
targets:
  - name: stub
    base_url: {}
    model: bench-model
"#,
            stub.base_url()
        ),
    )
    .expect("write config");
    let d = Daemon::start(config.to_str().expect("utf-8 path")).await;
    let (before, _) = d.rss_mb();
    let swept = d.first_sweeps(1, Duration::from_secs(300)).await;
    let (after, peak) = d.rss_mb();
    let port: u16 = stub
        .addr
        .rsplit(':')
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or(0);
    let pooled = os::connections_to(port);
    drop(d);
    drop(stub);
    let load = os::load1();
    println!("| RSS before a sweep at concurrency 512 (stub engine, 256 tokens, 1536 requests) | {before:.1} MB | | | {load:.2} |");
    println!(
        "| peak RSS during that sweep{} | {peak:.1} MB | < 64 MB | {} | {load:.2} |",
        if swept { "" } else { " (NO SWEEP SEEN)" },
        check(peak < 64.0)
    );
    println!("| RSS after it | {after:.1} MB | | | {load:.2} |");
    println!("| connections to the server left in the pool after it | {pooled} | 512 + warm-up | | {load:.2} |");
    let _ = std::fs::remove_dir_all(&dir);

    // The exposition of a big deployment, through the daemon's own router.
    let metrics = Arc::new(fixtures::big_metrics());
    let (control, _control_rx) = tokio::sync::mpsc::channel(1);
    let state = llmprobe::http::router::AppState {
        metrics: metrics.clone(),
        ready: Arc::new(true.into()),
        control,
        allow_reload: false,
        targets: Arc::new(Vec::new),
        dead_loops: Default::default(),
        reloads: Default::default(),
    };
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind");
    let addr = listener.local_addr().expect("addr");
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        axum::serve(listener, llmprobe::http::router::router(state))
            .with_graceful_shutdown(token.cancelled_owned())
            .await
    });
    let http = reqwest::Client::new();
    let url = format!("http://{addr}/metrics");
    let mut times = Vec::new();
    let mut size = 0;
    let mut series = 0;
    for i in 0..60 {
        let t0 = Instant::now();
        let body = http
            .get(&url)
            .send()
            .await
            .expect("scrape")
            .bytes()
            .await
            .expect("body");
        let t = ms(t0.elapsed());
        if i >= 10 {
            times.push(t);
        }
        size = body.len();
        series = body
            .split(|&b| b == b'\n')
            .filter(|l| !l.is_empty() && l[0] != b'#')
            .count();
    }
    let mut encode = Vec::new();
    for _ in 0..50 {
        let t0 = Instant::now();
        std::hint::black_box(metrics.exposition().count());
        encode.push(ms(t0.elapsed()));
    }
    stop.cancel();
    let (s50, s99) = p50_p99(&mut times);
    let (e50, _) = p50_p99(&mut encode);
    let load = os::load1();
    println!(
        "| /metrics scrape, {} targets x {} workloads x {} levels: HTTP GET p50 / max of 50 | {s50:.2} / {s99:.2} ms | < 10 ms | {} | {load:.2} |",
        fixtures::TARGETS,
        fixtures::WORKLOADS,
        fixtures::LEVELS.len(),
        check(s50 < 10.0)
    );
    println!("| of which `Metrics::exposition` written out (what /metrics sends) p50 | {e50:.2} ms | | | {load:.2} |");
    println!(
        "| size of that scrape | {:.2} MB, {series} series | | | |\n",
        size as f64 / 1048576.0
    );
}

/// Benchmark 5: how fast the simulated engine streams on loopback.
async fn engine(client: &Client, scale: usize) {
    println!("## 5. The simulated engine on loopback (llmprobe as the client, both on the same 2 cores)\n");
    println!("| engine | concurrency | tokens | tokens/s (wall) | server CPU per token | tokens/s per server core | client CPU per token | target | met | load |");
    println!("|---|---|---|---|---|---|---|---|---|---|");
    let cases: [(&str, &[&str], usize); 3] = [
        ("stub", &["--profile", "stub"], 64),
        ("stub", &["--profile", "stub"], 512),
        (
            "model, 1 ms steps, batch 512",
            &[
                "--profile",
                "large-gpu",
                "--step-base",
                "1ms",
                "--step-per-sequence",
                "0s",
                "--max-batch",
                "512",
                "--max-in-flight",
                "0",
                "--kv-cache-tokens",
                "0",
            ],
            512,
        ),
    ];
    for (name, args, c) in cases {
        let server = Server::simulator(args).await;
        let n = (4 * c).max(1024) / scale;
        let l = level(client, &server, c, n, 256, "engine").await;
        let rate = l.chunks as f64 / l.wall.as_secs_f64();
        let server_per = l.server_cpu.as_secs_f64() / l.chunks.max(1) as f64;
        let target = if name == "stub" {
            ">= 200,000 tok/s"
        } else {
            ""
        };
        println!(
            "| {name} | {c} | {} | {rate:.0} | {:.2} µs | {:.0} | {:.2} µs | {target} | {} | {:.2} |",
            l.chunks,
            server_per * 1e6,
            1.0 / server_per,
            l.cpu_per_chunk_us(),
            if name == "stub" { check(rate >= 200_000.0) } else { "" },
            l.load
        );
    }
    println!();
}
