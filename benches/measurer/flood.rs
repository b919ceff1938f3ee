//! Benchmark 6 (issue 29): a flood at the daemon's HTTP side against the
//! TTFT the daemon reports.
//!
//! The real daemon (the built `llmprobe run`) holds 150 targets: 149 on the
//! built-in simulator (one level of concurrency 1, three requests a sweep)
//! and one on the truth server (one level of concurrency 8, 80 counted
//! requests). Its HTTP side is HTTPS (a self-signed certificate made with
//! `openssl`) behind `web.basic_auth_users` (a bcrypt hash of cost 10) with
//! `enable_reload`. For each swept level of the truth target, the TTFT p50
//! the daemon exports (`llmprobe_sweep_ttft_seconds{percentile="50"}`) is
//! set against the p50 of the server's own TTFT of the same requests: the
//! level's counted requests are the last ones the sweep sent (one level, no
//! probes, no sustained-rate search), so they are the last N requests by the
//! truth server's serial numbers, N being the level's
//! `llmprobe_sweep_samples{quantity="ttft"}`. That difference, (reported -
//! truth) p50, is taken without a flood and with 8 clients flooding one kind
//! of request (or a mix), each as fast as the daemon answers.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use llmprobe::stats::level;
use tokio_util::sync::CancellationToken;

use crate::truth::Pace;
use crate::{os, take_truth, wait_http_with, Daemon, Server, LLMPROBE};

const SIM_TARGETS: usize = 149;
const CLIENTS: usize = 8;
const USER: &str = "prometheus";
const PASSWORD: &str = "scrape-pass";
/// Truth target: its one level and counted requests.
const CONCURRENCY: u32 = 8;
const REQUESTS: u32 = 80;

/// What the flooding clients send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// `GET /` without credentials (refused 401 `missing`).
    Index,
    /// `GET /metrics` with the right password (150 targets' exposition).
    Metrics,
    /// `GET /targets/truth` with the right password.
    Target,
    /// `GET /metrics` with a different wrong password each time (401 `wrong`
    /// after a bcrypt check, or `busy`).
    Wrong,
    /// `POST /-/reload` with the right password.
    Reload,
    /// `GET /healthz` on a new connection each time: a TLS handshake each.
    Tls,
}

const KINDS: [Kind; 6] = [
    Kind::Index,
    Kind::Metrics,
    Kind::Target,
    Kind::Wrong,
    Kind::Reload,
    Kind::Tls,
];

impl Kind {
    fn describe(self) -> &'static str {
        match self {
            Kind::Index => "`GET /` unauthenticated",
            Kind::Metrics => "`GET /metrics`, right password",
            Kind::Target => "`GET /targets/truth`, right password",
            Kind::Wrong => "`GET /metrics`, a new wrong password each",
            Kind::Reload => "`POST /-/reload`, right password",
            Kind::Tls => "`GET /healthz`, a new TLS connection each",
        }
    }
}

/// One condition: no flood, one kind, or every kind (client i starts at
/// kind i and moves to the next kind with each request).
#[derive(Debug, Clone, Copy)]
enum Flood {
    None,
    One(Kind),
    Mix,
}

impl Flood {
    fn describe(self) -> String {
        match self {
            Flood::None => "none".to_string(),
            Flood::One(k) => k.describe().to_string(),
            Flood::Mix => "mix of the six, round robin per client".to_string(),
        }
    }

    fn kind(self, client: usize, n: usize) -> Option<Kind> {
        match self {
            Flood::None => None,
            Flood::One(k) => Some(k),
            Flood::Mix => Some(KINDS[(client + n) % KINDS.len()]),
        }
    }
}

/// The flood's answers, counted.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    refused: AtomicU64,
    /// 429: a reload refused, the previous one less than a second ago.
    too_many: AtomicU64,
    other: AtomicU64,
    errors: AtomicU64,
}

/// The daemon's HTTPS endpoint and the clients that reach it.
struct Https {
    base: String,
    /// Keeps connections (one per flooding client at most).
    pooled: reqwest::Client,
    /// Keeps none: every request opens a connection and shakes hands.
    fresh: reqwest::Client,
}

impl Https {
    async fn scrape(&self) -> String {
        loop {
            let r = self
                .pooled
                .get(format!("{}/metrics", self.base))
                .basic_auth(USER, Some(PASSWORD))
                .send()
                .await;
            match r {
                Ok(r) if r.status().is_success() => return r.text().await.unwrap_or_default(),
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    async fn send(&self, kind: Kind, client: usize, n: usize) -> reqwest::Result<u16> {
        let b = &self.base;
        let r = match kind {
            Kind::Index => self.pooled.get(format!("{b}/")),
            Kind::Metrics => self
                .pooled
                .get(format!("{b}/metrics"))
                .basic_auth(USER, Some(PASSWORD)),
            Kind::Target => self
                .pooled
                .get(format!("{b}/targets/truth"))
                .basic_auth(USER, Some(PASSWORD)),
            Kind::Wrong => self
                .pooled
                .get(format!("{b}/metrics"))
                .basic_auth(USER, Some(format!("wrong-{client}-{n}"))),
            Kind::Reload => self
                .pooled
                .post(format!("{b}/-/reload"))
                .basic_auth(USER, Some(PASSWORD)),
            Kind::Tls => self.fresh.get(format!("{b}/healthz")),
        };
        let r = r.send().await?;
        let status = r.status().as_u16();
        r.bytes().await?;
        Ok(status)
    }
}

/// Starts `CLIENTS` flooding tasks; they stop when `stop` is cancelled.
fn start_flood(
    https: &Arc<Https>,
    flood: Flood,
    tally: &Arc<Tally>,
    stop: &CancellationToken,
) -> tokio::task::JoinSet<()> {
    let mut set = tokio::task::JoinSet::new();
    if matches!(flood, Flood::None) {
        return set;
    }
    for client in 0..CLIENTS {
        let (https, tally, stop) = (https.clone(), tally.clone(), stop.clone());
        set.spawn(async move {
            let mut n = 0;
            while !stop.is_cancelled() {
                let Some(kind) = flood.kind(client, n) else {
                    return;
                };
                let counter = match https.send(kind, client, n).await {
                    Ok(200..=299) => &tally.ok,
                    Ok(401) => &tally.refused,
                    Ok(429) => &tally.too_many,
                    Ok(_) => &tally.other,
                    Err(_) => &tally.errors,
                };
                counter.fetch_add(1, Ordering::Relaxed);
                n += 1;
            }
        });
    }
    set
}

/// The value of the first series of `family` whose labels include all of
/// `labels` (`name="value"` pairs as written in the exposition).
fn series(text: &str, family: &str, labels: &[&str]) -> Option<f64> {
    text.lines()
        .filter(|l| {
            l.strip_prefix(family)
                .is_some_and(|rest| rest.starts_with('{'))
        })
        .find(|l| labels.iter().all(|p| l.contains(p)))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// `llmprobe_http_auth_failures_total` by reason: missing, wrong, busy.
fn auth_failures(text: &str) -> [f64; 3] {
    ["missing", "wrong", "busy"].map(|r| {
        series(
            text,
            "llmprobe_http_auth_failures_total",
            &[&format!("reason=\"{r}\"")],
        )
        .unwrap_or(0.0)
    })
}

/// One measured level of the truth target.
struct Swept {
    /// The daemon's TTFT p50 and the server's, ms.
    reported: f64,
    truth: f64,
    samples: usize,
}

/// Waits for the truth target's next level (its measured timestamp moves
/// past `after`), then pairs it with the server's records.
async fn next_sweep(https: &Https, server: &Server, after: &mut f64) -> Option<Swept> {
    let start = Instant::now();
    let labels = ["target=\"truth\"", "concurrency=\"8\""];
    let text = loop {
        let text = https.scrape().await;
        let at = series(
            &text,
            "llmprobe_sweep_level_measured_timestamp_seconds",
            &labels,
        );
        if let Some(at) = at.filter(|&at| at > *after) {
            *after = at;
            break text;
        }
        if start.elapsed() > Duration::from_secs(120) {
            eprintln!("  no sweep of the truth target in 120 s");
            return None;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let records = take_truth(server).await;
    let reported = series(
        &text,
        "llmprobe_sweep_ttft_seconds",
        &[labels[0], labels[1], "percentile=\"50\""],
    )? * 1e3;
    let samples = series(
        &text,
        "llmprobe_sweep_samples",
        &[labels[0], labels[1], "quantity=\"ttft\""],
    )? as usize;
    let mut serials: Vec<(u64, f64)> = records
        .requests
        .iter()
        .filter_map(|(k, t)| Some((k.strip_prefix('#')?.parse().ok()?, crate::ms(t.ttft()?))))
        .collect();
    serials.sort_by_key(|&(s, _)| s);
    if serials.len() < samples {
        eprintln!(
            "  the server has {} records, the level {samples} samples",
            serials.len()
        );
        return None;
    }
    let mut truth: Vec<f64> = serials[serials.len() - samples..]
        .iter()
        .map(|&(_, t)| t)
        .collect();
    truth.sort_by(f64::total_cmp);
    Some(Swept {
        reported,
        truth: level::quantile_sorted(&truth, 0.5)?,
        samples,
    })
}

fn config_yaml(truth_url: &str, hash: &str, interval_s: u64) -> String {
    let mut yaml = format!(
        r#"
listen: "127.0.0.1:0"
state_dir: ""
web:
  enable_reload: true
  basic_auth_users: {{ {USER}: "{hash}" }}
  tls_cert_file: cert.pem
  tls_key_file: key.pem
schedule: {{ interval: {interval_s}s, jitter: 0%, max_in_flight_total: 64, sweep_timeout: 2m }}
defaults:
  workload: haiku
  levels: [1]
  requests_per_level: 2
  min_requests_per_level: 2
  warmup_requests: 1
  full_sweep_every: 1
  probe: {{ interval: 0s }}
  sustained: {{ every: 0 }}
  slo: {{ p95_latency: 60s }}
workloads:
  haiku:
    max_completion_tokens: 16
    prompts: ["Write a haiku about capacity planning."]
targets:
  - name: truth
    base_url: {truth_url}
    model: bench-model
    levels: [{CONCURRENCY}]
    requests_per_level: {REQUESTS}
    server_metrics_url: "off"
"#
    );
    for i in 0..SIM_TARGETS {
        yaml.push_str(&format!(
            "  - name: sim{i:03}\n    simulator: {{ profile: tiny }}\n"
        ));
    }
    yaml
}

/// Benchmark 6: the flood, kind by kind.
pub async fn flood(scale: usize) {
    let sweeps = (6 / scale).max(2);
    let interval_s = 5;
    println!("## 6. A flood at the HTTP side against the TTFT reported (issue 29)\n");
    let server = Server::truth(Pace::Paced {
        ttft: Duration::from_millis(20),
        gap: Duration::from_millis(10),
    });
    let dir = std::env::temp_dir().join(format!("llmprobe-flood-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("temp dir");
    let status = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1",
        ])
        .args(["-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"])
        // An end-entity certificate: rustls refuses a CA as a server's.
        .args(["-addext", "basicConstraints=critical,CA:FALSE"])
        .args(["-keyout", "key.pem", "-out", "cert.pem"])
        .current_dir(&dir)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is needed to make the daemon's certificate");
    assert!(status.success(), "openssl req failed");
    let hash = bcrypt::hash(PASSWORD, 10).expect("bcrypt");
    let config = dir.join("flood.yaml");
    std::fs::write(&config, config_yaml(&server.base_url(), &hash, interval_s))
        .expect("write config");

    let addr = crate::free_addr();
    let log = std::fs::File::create(dir.join("daemon.log")).expect("log file");
    let child = std::process::Command::new(LLMPROBE)
        .args(["run", "--config"])
        .arg(&config)
        .env("LLMPROBE__LISTEN", &addr)
        .stdout(std::process::Stdio::null())
        .stderr(log)
        .spawn()
        .expect("start llmprobe run");
    let daemon = Daemon { child, addr };
    let cert = reqwest::Certificate::from_pem(&std::fs::read(dir.join("cert.pem")).expect("cert"))
        .expect("certificate");
    let client = |pool: usize| {
        reqwest::Client::builder()
            .add_root_certificate(cert.clone())
            .pool_max_idle_per_host(pool)
            .timeout(Duration::from_secs(30))
            .build()
            .expect("client")
    };
    let https = Arc::new(Https {
        base: format!("https://{}", daemon.addr),
        pooled: client(usize::MAX),
        fresh: client(0),
    });
    wait_http_with(&https.pooled, &format!("{}/readyz", https.base)).await;

    println!(
        "The daemon (`llmprobe run`, release build) holds {} targets: {SIM_TARGETS} on the built-in simulator (profile tiny, level [1], 1 warm-up + 2 counted requests of 16 tokens) and `truth` on the truth server (first content chunk 20 ms after the request, then one every 10 ms, 16 chunks; one level of concurrency {CONCURRENCY}, {REQUESTS} counted requests); `schedule.interval` {interval_s}s, no probes, no sustained-rate search. HTTP side: HTTPS (self-signed RSA 2048), `web.basic_auth_users` (bcrypt cost 10), `enable_reload: true`. Per sweep of `truth`: the daemon's `llmprobe_sweep_ttft_seconds{{percentile=\"50\"}}` minus the p50 of the server's own TTFT (kernel receive timestamp of the request to the first content chunk written) of the same {REQUESTS} requests. {CLIENTS} flooding clients in the bench process, each sending its next request when the last was answered; the sweep running when a flood starts is skipped. Shift: median difference under the flood minus median difference without one (the first row). Daemon CPU: its user + system time (/proc/PID/stat) over the measured sweeps' wall time.\n",
        SIM_TARGETS + 1
    );
    println!("| flood | sweeps | (reported - truth) p50, median [min, max] | shift vs no flood | truth TTFT p50 median | flood answers/s: 2xx / 401 / 429 / other / failed | 401s by the daemon's count, /s: missing / wrong / busy | daemon CPU, % of a core | load |");
    println!("|---|---|---|---|---|---|---|---|---|");

    // Every target's first sweep, then the truth target's first level.
    let mut after = 0.0;
    if next_sweep(&https, &server, &mut after).await.is_none() {
        println!("no sweep of the truth target; see {}", dir.display());
        return;
    }
    let mut conditions = vec![Flood::None];
    conditions.extend(KINDS.iter().map(|&k| Flood::One(k)));
    conditions.push(Flood::Mix);
    conditions.push(Flood::None);
    let mut baseline = None;
    for flood in conditions {
        let tally = Arc::new(Tally::default());
        let stop = CancellationToken::new();
        let mut clients = start_flood(&https, flood, &tally, &stop);
        // The level under way when the flood started is not counted.
        next_sweep(&https, &server, &mut after).await;
        let (t0, cpu0) = (Instant::now(), os::process_cpu_ticks(daemon.child.id()));
        let counters = [
            &tally.ok,
            &tally.refused,
            &tally.too_many,
            &tally.other,
            &tally.errors,
        ];
        let before = counters.map(|c| c.load(Ordering::Relaxed));
        let auth0 = auth_failures(&https.scrape().await);
        let mut diffs = Vec::new();
        let mut truths = Vec::new();
        for _ in 0..sweeps {
            if let Some(s) = next_sweep(&https, &server, &mut after).await {
                if s.samples != REQUESTS as usize {
                    eprintln!("  a level of {} samples", s.samples);
                }
                diffs.push(s.reported - s.truth);
                truths.push(s.truth);
            }
        }
        let wall = t0.elapsed().as_secs_f64();
        let cpu = os::process_cpu_ticks(daemon.child.id())
            .zip(cpu0)
            .map_or(f64::NAN, |(b, a)| {
                b.saturating_sub(a).as_secs_f64() / wall * 100.0
            });
        let auth1 = auth_failures(&https.scrape().await);
        let auth = auth1
            .iter()
            .zip(auth0)
            .map(|(b, a)| format!("{:.0}", (b - a) / wall))
            .collect::<Vec<_>>()
            .join(" / ");
        let rates = counters
            .iter()
            .zip(before)
            .map(|(c, b)| format!("{:.0}", (c.load(Ordering::Relaxed) - b) as f64 / wall))
            .collect::<Vec<_>>()
            .join(" / ");
        stop.cancel();
        while clients.join_next().await.is_some() {}
        diffs.sort_by(f64::total_cmp);
        truths.sort_by(f64::total_cmp);
        let median = level::quantile_sorted(&diffs, 0.5).unwrap_or(f64::NAN);
        let base = *baseline.get_or_insert(median);
        let shift = median - base;
        println!(
            "| {} | {} | {median:.3} ms [{:.3}, {:.3}] | {} | {:.3} ms | {rates} | {auth} | {cpu:.0} | {:.2} |",
            flood.describe(),
            diffs.len(),
            diffs.first().copied().unwrap_or(f64::NAN),
            diffs.last().copied().unwrap_or(f64::NAN),
            if matches!(flood, Flood::None) && shift == 0.0 {
                "-".to_string()
            } else {
                format!(
                    "{shift:+.3} ms ({})",
                    crate::check(shift.abs() < 1.0)
                )
            },
            level::quantile_sorted(&truths, 0.5).unwrap_or(f64::NAN),
            os::load1()
        );
    }
    println!();
    drop(daemon);
    let _ = std::fs::remove_dir_all(&dir);
}
