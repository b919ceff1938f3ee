//! The HTTP side of the daemon: `/metrics`, `/healthz`, `/readyz`,
//! `POST /-/reload`, and the pages: `/` (every target's status and the
//! charts of its latest sweep) and `/targets/NAME` (one target). Handlers
//! only read shared state or send a [`Control`] message; the work happens
//! elsewhere.
//!
//! `/healthz` is the liveness check: 200 while every target's measurement
//! loop runs, 503 once one has died (what the systemd watchdog also reacts
//! to), so that Kubernetes restarts a pod that stopped measuring.

use std::convert::Infallible;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use tokio::sync::{mpsc, oneshot};

use crate::faces::html::escape::{escape, path_segment};
use crate::faces::html::page;
use crate::faces::html::settings::TargetSettings;
use crate::faces::summary;
use crate::http::reloads::ReloadGate;
use crate::metrics::{Metrics, TEXT_CONTENT_TYPE};
use crate::stats::status::TargetStatus;

/// How long `POST /-/reload` waits for the reload to finish before answering
/// 500, so that a stuck reload cannot hold HTTP clients forever.
const RELOAD_TIMEOUT: Duration = Duration::from_secs(60);

/// A request from the HTTP side to the daemon's control loop.
#[derive(Debug)]
pub enum Control {
    /// Reload the configuration; the reply carries the outcome (notes to
    /// add on success, such as a discovery read that hangs; the error
    /// message on failure), as SIGHUP does through the same code path.
    Reload {
        /// Where the control loop sends the outcome.
        reply: oneshot::Sender<Result<Vec<String>, String>>,
    },
}

/// Produces the current status of every configured target, on demand.
pub type TargetStatusFn = Arc<dyn Fn() -> Vec<TargetStatus> + Send + Sync>;

/// Targets whose measurement loop ended although nobody stopped it, as the
/// daemon's watchdog tick last found them; empty while all is well.
pub type DeadLoops = Arc<RwLock<Vec<String>>>;

/// Everything the handlers share.
#[derive(Clone)]
pub struct AppState {
    /// Every exported metric.
    pub metrics: Arc<Metrics>,
    /// Whether `/readyz` answers 200 (set once the daemon is running).
    pub ready: Arc<AtomicBool>,
    /// Channel to the daemon's control loop.
    pub control: mpsc::Sender<Control>,
    /// Whether `POST /-/reload` is allowed (403 otherwise).
    pub allow_reload: bool,
    /// Status of the targets, for the index page.
    pub targets: TargetStatusFn,
    /// Loops that died: `/healthz` fails while there are any.
    pub dead_loops: DeadLoops,
    /// The turn of reloads over HTTP.
    pub reloads: Arc<ReloadGate>,
}

/// Longest time the index page is served as rendered: a flood of `GET /`
/// costs at most one rendering per period (150 targets make a page of
/// about 1.6 MB), whatever the number of requests.
pub const INDEX_REBUILD_EVERY: Duration = Duration::from_secs(1);

/// The index page last rendered: when, with which readiness, and the page.
#[derive(Default)]
struct IndexCache(Mutex<Option<(Instant, bool, Bytes)>>);

impl IndexCache {
    /// The page, rendered again only when the last one is older than
    /// [`INDEX_REBUILD_EVERY`] or readiness changed.
    fn page(&self, state: &AppState) -> Bytes {
        let ready = state.ready.load(Ordering::Acquire);
        let mut cached = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((at, was_ready, page)) = cached.as_ref() {
            if *was_ready == ready && at.elapsed() < INDEX_REBUILD_EVERY {
                return page.clone();
            }
        }
        let page = Bytes::from(render_index(&(state.targets)(), SystemTime::now(), ready));
        *cached = Some((Instant::now(), ready, page.clone()));
        page
    }
}

/// Builds the router with every endpoint.
pub fn router(state: AppState) -> Router {
    let cache = Arc::new(IndexCache::default());
    Router::new()
        .route(
            "/",
            get(move |State(state): State<AppState>| async move { Html(cache.page(&state)) }),
        )
        .route("/targets/{name}", get(target_page))
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/-/reload", post(reload))
        .with_state(state)
}

async fn metrics(State(state): State<AppState>) -> Response {
    let parts = state.metrics.exposition().map(Ok::<_, Infallible>);
    (
        [(header::CONTENT_TYPE, TEXT_CONTENT_TYPE)],
        Body::from_stream(futures_util::stream::iter(parts)),
    )
        .into_response()
}

async fn healthz(State(state): State<AppState>) -> (StatusCode, String) {
    let dead = state
        .dead_loops
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    if dead.is_empty() {
        (StatusCode::OK, "ok".to_string())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "measurement stopped unexpectedly for: {}\n",
                dead.join(", ")
            ),
        )
    }
}

async fn readyz(State(state): State<AppState>) -> (StatusCode, &'static str) {
    if state.ready.load(Ordering::Acquire) {
        (StatusCode::OK, "ready")
    } else {
        (StatusCode::SERVICE_UNAVAILABLE, "not ready")
    }
}

async fn reload(State(state): State<AppState>) -> Response {
    if !state.allow_reload {
        state.metrics.reload_refused("disabled");
        state.reloads.refusals().warn("disabled");
        return (
            StatusCode::FORBIDDEN,
            "reload over HTTP is disabled; send SIGHUP instead\n".to_string(),
        )
            .into_response();
    }
    let Some(_turn) = state.reloads.enter().await else {
        state.metrics.reload_refused("busy");
        state.reloads.refusals().warn("busy");
        return (
            StatusCode::TOO_MANY_REQUESTS,
            [(header::RETRY_AFTER, "1")],
            "a reload is under way and another is waiting; try again in a second\n",
        )
            .into_response();
    };
    reload_now(&state).await.into_response()
}

/// Asks the control loop for a reload and waits for its outcome.
async fn reload_now(state: &AppState) -> (StatusCode, String) {
    let (reply, outcome) = oneshot::channel();
    if state.control.send(Control::Reload { reply }).await.is_err() {
        return (
            StatusCode::INTERNAL_SERVER_ERROR,
            "reload failed: the daemon is shutting down\n".to_string(),
        );
    }
    match tokio::time::timeout(RELOAD_TIMEOUT, outcome).await {
        Ok(Ok(Ok(notes))) => {
            let mut body = "configuration reloaded\n".to_string();
            for note in notes {
                let _ = writeln!(body, "note: {note}");
            }
            (StatusCode::OK, body)
        }
        Ok(Ok(Err(message))) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("reload failed: {message}\n"),
        ),
        Ok(Err(_)) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            "reload failed: the daemon dropped the request\n".to_string(),
        ),
        Err(_) => (
            StatusCode::INTERNAL_SERVER_ERROR,
            format!(
                "reload failed: no answer within {}s\n",
                RELOAD_TIMEOUT.as_secs()
            ),
        ),
    }
}

/// One target's page; 404 for a name that is not configured.
async fn target_page(State(state): State<AppState>, Path(name): Path<String>) -> Response {
    let targets = (state.targets)();
    match targets.iter().find(|t| t.name == name) {
        Some(t) => Html(render_target(t, SystemTime::now())).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Html(page::document(
                "llmprobe: no such target",
                &format!(
                    "<h1>No target named {}</h1>\n<p><a href=\"/\">all targets</a></p>\n",
                    escape(&name)
                ),
            )),
        )
            .into_response(),
    }
}

/// Links to the daemon's endpoints.
const NAV: &str = "<nav><a href=\"/\">targets</a><a href=\"/metrics\">/metrics</a>\
                   <a href=\"/healthz\">/healthz</a><a href=\"/readyz\">/readyz</a></nav>\n";

/// The charts of a target's latest sweep, or why there are none yet.
fn sweep_section(t: &TargetStatus, id: &str) -> String {
    match &t.report {
        Some(r) => {
            let settings = t.target.as_deref().map(TargetSettings::from_target);
            page::target_section(r, settings.as_ref(), id)
        }
        None => format!(
            "<section class=\"target\" id=\"{}\"><div class=\"head\"><h2>{}</h2>\
             <span class=\"muted\">model {}</span></div>\n<p>Not measured yet.</p></section>\n",
            escape(id),
            escape(&t.name),
            escape(&t.model)
        ),
    }
}

/// One target's page; `now` is a parameter so the page is testable.
fn render_target(t: &TargetStatus, now: SystemTime) -> String {
    let body = format!(
        "<header><h1>{}</h1>\n{NAV}<p class=\"sub\">last successful sweep: {}</p></header>\n{}",
        escape(&t.name),
        escape(&last_measured(t.last_success_unix, now)),
        sweep_section(t, "target")
    );
    page::document(&format!("llmprobe: {}", t.name), &body)
}

/// The index page; `now` is a parameter so the page is testable.
fn render_index(targets: &[TargetStatus], now: SystemTime, ready: bool) -> String {
    let mut page = String::from(concat!(
        "<header><h1>llmprobe ",
        env!("CARGO_PKG_VERSION"),
        "</h1>\n",
    ));
    page.push_str(NAV);
    let _ = writeln!(
        page,
        "<p class=\"sub\">{}</p></header>",
        if ready {
            "Ready."
        } else {
            "Starting: not ready yet."
        }
    );
    if targets.is_empty() {
        page.push_str("<p>No targets configured.</p>\n");
    } else {
        // One row per target; the reports live on each target's page, so
        // the page grows by a row (under INDEX_BYTES_PER_TARGET) a target.
        page.push_str(
            "<div class=\"scroll\"><table>\n<tr><th>target</th><th>model</th><th>health</th>\
             <th>knee</th><th>max_in_flight</th><th>limit</th><th>sustained</th>\
             <th>last probe</th><th>last measured</th><th>last error</th></tr>\n",
        );
        let now_unix = now
            .duration_since(UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        for t in targets {
            let (class, health) = t.health(now_unix);
            // No probe yet: an empty cell, not an empty badge.
            let probe = match t.probe_line(now_unix) {
                (_, line) if line.is_empty() => String::new(),
                (class, line) => format!("<span class=\"badge {class}\">{}</span>", escape(&line)),
            };
            let c = Columns::of(t);
            let _ = writeln!(
                page,
                "<tr><td><a href=\"/targets/{}\">{}</a></td><td>{}</td><td><span class=\"badge {class}\">{}</span></td>\
                 <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{probe}</td><td>{}</td><td>{}</td></tr>",
                path_segment(&t.name),
                escape(&t.name),
                escape(&t.model),
                escape(&health),
                escape(&c.knee),
                escape(&c.max_in_flight),
                escape(&c.limit),
                escape(&c.sustained),
                escape(&last_measured(t.last_success_unix, now)),
                escape(&cut(t.last_error.as_deref().unwrap_or(""), LAST_ERROR_CHARS)),
            );
        }
        page.push_str("</table></div>\n");
    }
    page::document("llmprobe", &page)
}

/// Bytes the index page grows by per target, at most (its row; the
/// reports are on `/targets/NAME`): docs/operating.md states it.
pub const INDEX_BYTES_PER_TARGET: usize = 2048;
/// Characters of the last error the index row shows (the target's page
/// shows it whole).
const LAST_ERROR_CHARS: usize = 300;

/// `s`, cut to `max` characters with an ellipsis.
fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &s[..at]),
        None => s.to_string(),
    }
}

/// The capacity cells of a target's index row, from the latest sweep that
/// measured them: one value per workload, named when there are several.
#[derive(Default)]
struct Columns {
    knee: String,
    max_in_flight: String,
    limit: String,
    sustained: String,
}

impl Columns {
    fn of(t: &TargetStatus) -> Columns {
        let Some(r) = t.report.as_deref().filter(|r| r.success) else {
            return Columns::default();
        };
        let named = r.workloads.len() > 1;
        let mut columns: [Vec<String>; 4] = Default::default();
        for w in &r.workloads {
            for (column, cell) in columns.iter_mut().zip(summary::capacity_cells(w)) {
                column.push(if named {
                    format!("{} {cell}", w.workload)
                } else {
                    cell
                });
            }
        }
        let [knee, max_in_flight, limit, sustained] = columns.map(|c| c.join(", "));
        Columns {
            knee,
            max_in_flight,
            limit,
            sustained,
        }
    }
}

/// "2024-01-01T00:00:00Z (5m 3s ago)", or "never".
fn last_measured(unix: Option<f64>, now: SystemTime) -> String {
    let Some(when) = unix
        .and_then(|s| Duration::try_from_secs_f64(s).ok())
        .and_then(|d| UNIX_EPOCH.checked_add(d))
    else {
        return "never".to_string();
    };
    let stamp = humantime::format_rfc3339_seconds(when);
    match now.duration_since(when) {
        // Whole seconds: sub-second precision is noise on this page.
        Ok(ago) => format!(
            "{stamp} ({} ago)",
            humantime::format_duration(Duration::from_secs(ago.as_secs()))
        ),
        Err(_) => stamp.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Running {
        base: String,
        /// How many times the targets' status was asked for (a page built).
        renders: Arc<std::sync::atomic::AtomicUsize>,
        ready: Arc<AtomicBool>,
        dead_loops: DeadLoops,
        client: reqwest::Client,
        metrics: Arc<Metrics>,
    }

    /// Serves the router on 127.0.0.1:0; reloads succeed unless the control
    /// loop is told to fail them.
    async fn start(allow_reload: bool, reload_result: Result<Vec<String>, String>) -> Running {
        let metrics = test_metrics();
        let ready = Arc::new(AtomicBool::new(false));
        let (tx, mut rx) = mpsc::channel::<Control>(4);
        tokio::spawn(async move {
            while let Some(Control::Reload { reply }) = rx.recv().await {
                let _ = reply.send(reload_result.clone());
            }
        });
        let renders = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = Arc::clone(&renders);
        let targets: TargetStatusFn = Arc::new(move || {
            counted.fetch_add(1, Ordering::Relaxed);
            vec![TargetStatus {
                name: "<script>alert(1)</script>".to_string(),
                model: "qwen & co".to_string(),
                last_success_unix: Some(1_700_000_000.0),
                last_error: Some("HTTP 503 \"busy\"".to_string()),
                report: None,
                target: None,
                probe: None,
                interval: None,
            }]
        });
        let dead_loops = DeadLoops::default();
        let app = router(AppState {
            metrics: metrics.clone(),
            ready: Arc::clone(&ready),
            control: tx,
            allow_reload,
            targets,
            dead_loops: Arc::clone(&dead_loops),
            reloads: Arc::default(),
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let addr = listener.local_addr().expect("addr");
        tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Running {
            base: format!("http://{addr}"),
            renders,
            ready,
            dead_loops,
            metrics,
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .expect("client"),
        }
    }

    /// A `Metrics` on a fresh registry of its own.
    fn test_metrics() -> Arc<Metrics> {
        Arc::new(Metrics::new(&Default::default()).expect("metrics"))
    }

    impl Running {
        async fn get(&self, path: &str) -> (u16, String, String) {
            let r = self
                .client
                .get(format!("{}{path}", self.base))
                .send()
                .await
                .expect("request");
            let ct = r
                .headers()
                .get(header::CONTENT_TYPE.as_str())
                .and_then(|v| v.to_str().ok())
                .unwrap_or("")
                .to_string();
            (r.status().as_u16(), ct, r.text().await.expect("body"))
        }

        async fn post(&self, path: &str) -> (u16, String) {
            let r = self
                .client
                .post(format!("{}{path}", self.base))
                .send()
                .await
                .expect("request");
            (r.status().as_u16(), r.text().await.expect("body"))
        }
    }

    #[tokio::test]
    async fn metrics_health_and_readiness() {
        let s = start(true, Ok(Vec::new())).await;
        let (status, ct, body) = s.get("/metrics").await;
        assert_eq!(status, 200);
        assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
        assert!(body.contains("llmprobe_build_info{"), "{body}");

        assert_eq!(s.get("/healthz").await.0, 200);
        assert_eq!(s.get("/healthz").await.2, "ok");
        assert_eq!(s.get("/readyz").await.0, 503);
        s.ready.store(true, Ordering::Release);
        assert_eq!(s.get("/readyz").await.0, 200);
        assert_eq!(s.get("/nope").await.0, 404);
    }

    #[tokio::test]
    async fn healthz_fails_while_a_measurement_loop_is_dead() {
        let s = start(true, Ok(Vec::new())).await;
        s.ready.store(true, Ordering::Release);
        *s.dead_loops.write().unwrap() = vec!["w1".to_string(), "w2".to_string()];
        let (status, _, body) = s.get("/healthz").await;
        assert_eq!(status, 503);
        assert_eq!(body, "measurement stopped unexpectedly for: w1, w2\n");
        // Readiness is about serving, not measuring: unchanged.
        assert_eq!(s.get("/readyz").await.0, 200);
        s.dead_loops.write().unwrap().clear();
        let (status, _, body) = s.get("/healthz").await;
        assert_eq!((status, body.as_str()), (200, "ok"));
    }

    #[tokio::test]
    async fn reload_reports_the_outcome() {
        let s = start(true, Ok(Vec::new())).await;
        assert_eq!(
            s.post("/-/reload").await,
            (200, "configuration reloaded\n".to_string())
        );
        assert_eq!(s.get("/-/reload").await.0, 405);

        let note = "file_sd: the last read did not finish within 30s and was abandoned";
        let s = start(true, Ok(vec![note.to_string()])).await;
        let (status, body) = s.post("/-/reload").await;
        assert_eq!(status, 200);
        assert_eq!(body, format!("configuration reloaded\nnote: {note}\n"));

        let s = start(true, Err("targets[0].base_url: missing".to_string())).await;
        let (status, body) = s.post("/-/reload").await;
        assert_eq!(status, 500);
        assert!(body.contains("targets[0].base_url: missing"), "{body}");

        let s = start(false, Ok(Vec::new())).await;
        assert_eq!(s.post("/-/reload").await.0, 403);
    }

    #[tokio::test]
    async fn a_flood_of_reload_posts_reloads_once_a_second_and_counts_the_rest() {
        let s = start(true, Ok(Vec::new())).await;
        let started = Instant::now();
        let posts: Vec<_> = (0..20)
            .map(|_| {
                let (client, url) = (s.client.clone(), format!("{}/-/reload", s.base));
                tokio::spawn(
                    async move { client.post(url).send().await.unwrap().status().as_u16() },
                )
            })
            .collect();
        let mut statuses = Vec::new();
        for p in posts {
            statuses.push(p.await.unwrap());
        }
        let ok = statuses.iter().filter(|&&c| c == 200).count();
        let busy = statuses.iter().filter(|&&c| c == 429).count();
        assert_eq!(ok + busy, 20, "{statuses:?}");
        // Twenty posts within milliseconds: one reload runs, one waits its
        // turn (a third may get a place once the first is done), a second
        // apart; the rest are refused.
        assert!(ok >= 1 && busy >= 10, "{statuses:?}");
        let spaced = crate::http::reloads::SPACING * (ok as u32 - 1);
        assert!(
            started.elapsed() >= spaced,
            "{ok} reloads in {:?}",
            started.elapsed()
        );
        let text = s.metrics.encode();
        let refused = format!("llmprobe_reload_refused_total{{reason=\"busy\"}} {busy}");
        assert!(text.contains(&refused), "{refused}");
        let s = start(false, Ok(Vec::new())).await;
        assert_eq!(s.post("/-/reload").await.0, 403);
        let text = s.metrics.encode();
        assert!(text.contains("llmprobe_reload_refused_total{reason=\"disabled\"} 1"));
    }

    #[tokio::test]
    async fn reload_fails_cleanly_when_the_control_loop_is_gone() {
        let (tx, rx) = mpsc::channel::<Control>(1);
        drop(rx);
        let state = AppState {
            metrics: test_metrics(),
            ready: Arc::new(AtomicBool::new(true)),
            control: tx,
            allow_reload: true,
            targets: Arc::new(Vec::new),
            dead_loops: Default::default(),
            reloads: Arc::default(),
        };
        let (status, body) = reload_now(&state).await;
        assert_eq!(status, StatusCode::INTERNAL_SERVER_ERROR);
        assert!(body.contains("shutting down"));
    }

    #[tokio::test]
    async fn index_lists_targets_escaped() {
        let s = start(true, Ok(Vec::new())).await;
        let (status, ct, body) = s.get("/").await;
        assert_eq!(status, 200);
        assert!(ct.starts_with("text/html"), "{ct}");
        for link in ["/metrics", "/healthz", "/readyz"] {
            assert!(body.contains(&format!("href=\"{link}\"")), "{body}");
        }
        assert!(!body.contains("<script>"), "{body}");
        assert!(body.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(body.contains("qwen &amp; co"));
        assert!(body.contains("HTTP 503 &quot;busy&quot;"));
        assert!(body.contains("2023-11-14T22:13:20Z"), "{body}");
    }

    #[tokio::test]
    async fn a_flood_of_index_requests_renders_the_page_once_a_period() {
        let s = start(true, Ok(Vec::new())).await;
        let (_, _, first) = s.get("/").await;
        for _ in 0..50 {
            let (status, _, body) = s.get("/").await;
            assert_eq!(status, 200);
            assert_eq!(body, first);
        }
        assert_eq!(s.renders.load(Ordering::Relaxed), 1);
        // Readiness changes the page at once; time renews it.
        s.ready.store(true, Ordering::Release);
        let (_, _, ready) = s.get("/").await;
        assert_ne!(ready, first);
        assert_eq!(s.renders.load(Ordering::Relaxed), 2);
        tokio::time::sleep(INDEX_REBUILD_EVERY).await;
        s.get("/").await;
        assert_eq!(s.renders.load(Ordering::Relaxed), 3);
    }

    #[test]
    fn the_index_row_gives_each_knee_and_the_last_probe() {
        use crate::stats::probe::{ProbeOutcome, ProbeResult};
        use crate::stats::report::{Capacity, SweepReport, WorkloadReport};
        use crate::stats::sample::Outcome;
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_300);
        let probe = |outcome, ttft| ProbeResult {
            outcome,
            ttft,
            latency: None,
            cold: None,
            client_stall: None,
            dispatch_lag: 0.0,
            prompt_tokens: 0,
            output_tokens: 0,
            reasoning_tokens: 0,
            error: None,
        };
        let mut t = TargetStatus::new("w1", "m");
        t.record(&SweepReport {
            target: "w1".into(),
            model: "m".into(),
            success: true,
            duration_seconds: 1.0,
            finished_at_unix_seconds: 1_700_000_000.0,
            workloads: vec![WorkloadReport {
                workload: "chat".into(),
                capacity: Capacity {
                    knee_concurrency: 8,
                    recommended_max_in_flight: 7,
                    limit: Some(crate::stats::report::Limit::Shed),
                    ..Capacity::default()
                },
                ..WorkloadReport::default()
            }],
            ..SweepReport::default()
        });
        t.record_probe(
            &probe(ProbeOutcome::Request(Outcome::Ok), Some(0.023)),
            1_700_000_295.0,
        );
        let page = render_index(std::slice::from_ref(&t), now, true);
        assert!(
            page.contains("<span class=\"badge ok\">ok</span></td><td>8</td><td>7</td><td>shed</td><td>-</td>"),
            "{page}"
        );
        assert!(
            page.contains("<span class=\"badge ok\">ok (TTFT 23 ms, 5s ago)</span>"),
            "{page}"
        );
        // A TTFT llmprobe's own stall explains is not shown as the server's.
        t.record_probe(
            &ProbeResult {
                client_stall: Some(0.8),
                ..probe(ProbeOutcome::Request(Outcome::Ok), Some(0.9))
            },
            1_700_000_297.0,
        );
        let page = render_index(std::slice::from_ref(&t), now, true);
        assert!(
            page.contains("ok (TTFT kept out: llmprobe stalled 800 ms, 3s ago)"),
            "{page}"
        );
        t.record_probe(
            &probe(ProbeOutcome::Request(Outcome::ConnectError), None),
            1_700_000_299.0,
        );
        let page = render_index(std::slice::from_ref(&t), now, true);
        assert!(
            page.contains("<span class=\"badge failed\">failing: connect_error (1s ago)</span>"),
            "{page}"
        );
        // Swept 300 s ago (in 1 s) with a 60 s interval: past 3 x 61 s + 60 s.
        t.interval = Some(Duration::from_secs(60));
        let page = render_index(std::slice::from_ref(&t), now, true);
        assert!(
            page.contains("<span class=\"badge stale\">stale (last: ok)</span>"),
            "{page}"
        );
        t.interval = Some(Duration::from_secs(120));
        let page = render_index(std::slice::from_ref(&t), now, true);
        assert!(
            page.contains("<span class=\"badge ok\">ok</span>"),
            "{page}"
        );
    }

    #[test]
    fn the_index_grows_by_a_row_a_target_whatever_the_reports_hold() {
        use crate::stats::report::{Capacity, LevelSummary, SweepReport, WorkloadReport};
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_300);
        // A report with three workloads of 12 levels each and a long error.
        let report = SweepReport {
            model: "m".into(),
            success: true,
            duration_seconds: 1.0,
            finished_at_unix_seconds: 1_700_000_000.0,
            workloads: ["short-chat", "long-documents", "rag"]
                .iter()
                .map(|w| WorkloadReport {
                    workload: w.to_string(),
                    levels: (0..12)
                        .map(|i| LevelSummary {
                            concurrency: 1 << (i % 8),
                            ..LevelSummary::default()
                        })
                        .collect(),
                    capacity: Capacity {
                        knee_concurrency: 128,
                        recommended_max_in_flight: 115,
                        ..Capacity::default()
                    },
                    ..WorkloadReport::default()
                })
                .collect(),
            ..SweepReport::default()
        };
        let statuses = |n: usize| -> Vec<TargetStatus> {
            (0..n)
                .map(|i| {
                    let name = format!("worker-{i:04}-of-a-long-fleet-name");
                    let mut t = TargetStatus::new(&name, "Qwen/Qwen3-30B-A3B-Instruct-2507");
                    let mut r = report.clone();
                    r.target = name;
                    t.record(&r);
                    t.last_error = Some("x".repeat(5000));
                    t
                })
                .collect()
        };
        let one = render_index(&statuses(1), now, true).len();
        let hundred = render_index(&statuses(101), now, true).len();
        let per_target = (hundred - one) / 100;
        assert!(
            per_target <= INDEX_BYTES_PER_TARGET,
            "{per_target} bytes a target"
        );
        assert!(!render_index(&statuses(3), now, true).contains("<svg"));
    }

    #[test]
    fn last_measured_formats_time_and_age() {
        let now = UNIX_EPOCH + Duration::from_secs(1_700_000_303);
        assert_eq!(
            last_measured(Some(1_700_000_000.5), now),
            "2023-11-14T22:13:20Z (5m 2s ago)"
        );
        assert_eq!(last_measured(None, now), "never");
        assert_eq!(last_measured(Some(f64::NAN), now), "never");
        assert_eq!(last_measured(Some(-1.0), now), "never");
        let page = render_index(&[], now, false);
        assert!(page.contains("No targets configured."));
        assert!(page.contains("not ready"));
    }
}
