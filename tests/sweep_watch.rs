//! A sweep you can watch and stop: `llmprobe sweep` run as a person runs it,
//! its progress display in a pseudo-terminal, and Ctrl-C in the middle of
//! it (what was measured written, marked partial, exit status 130). The
//! test server holds the requests of the level a test stops in, so the
//! sweep waits there for the signal whatever the machine's speed.

mod support;

use std::path::Path;
use std::process::ExitStatus;
use std::time::Duration;

use support::binary::llmprobe;
use support::config::{write_config, Yaml};
use support::paths;
use support::process::Process;
use support::server::{start, Behavior, TestServer};
use support::terminal::Terminal;
use support::wait;

/// Long enough for a loaded machine; the sweep never needs it.
const LIMIT: Duration = Duration::from_secs(60);

/// One target `t1` at `base_url`: one warm-up request, levels 1, 2 and 4
/// of 8 requests at least; nothing times out while a test holds a level.
fn config(base_url: &str) -> std::path::PathBuf {
    write_config(
        &Yaml {
            levels: "[1, 2, 4]",
            min_requests_per_level: 8,
            request_timeout: "300s",
            sweep_timeout: "600s",
            slo: Some("{ p95_latency: 30s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
            rest: &format!(
                "targets:\n  - name: t1\n    base_url: {base_url}\n    model: test-model"
            ),
            ..Yaml::default()
        }
        .render(),
    )
}

/// A server that answers level 1 (one request at a time) and holds
/// level 2's requests (more than one in flight) until the client goes away.
async fn held_at_level_2() -> TestServer {
    start(Behavior {
        hold_above: Some(1),
        ..Default::default()
    })
    .await
}

/// Waits until `server` holds a request: one found another in flight, so
/// level 1 (one at a time) was measured in full, and level 2 waits.
async fn level_2_held(server: &TestServer, logs: impl Fn() -> String) {
    wait::poll("a request of level 2 held", LIMIT, || async {
        match server.held() {
            0 => Err(format!(
                "{} requests received\n{}",
                server.requests(),
                logs()
            )),
            _ => Ok(()),
        }
    })
    .await;
}

/// The exit status of `process`, waited for at most [`LIMIT`].
async fn exit_status(process: &Process) -> ExitStatus {
    wait::poll("the exit", LIMIT, || async {
        process.exited().ok_or_else(|| process.tail())
    })
    .await
}

/// `sweep --format FORMAT --config CONFIG`.
fn sweep_args<'a>(format: &'a str, config: &'a Path) -> Vec<&'a str> {
    vec![
        "sweep",
        "--format",
        format,
        "--config",
        config.to_str().unwrap(),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_mid_sweep_writes_what_was_measured_marked_partial() {
    let server = held_at_level_2().await;
    let config = config(&server.base_url());
    let mut command = llmprobe();
    command.args(sweep_args("json", &config));
    let sweep = Process::spawn("llmprobe", &mut command, config.parent().unwrap());
    level_2_held(&server, || sweep.tail()).await;
    sweep.interrupt();
    let status = exit_status(&sweep).await;
    assert_eq!(status.code(), Some(130), "{}", sweep.tail());

    let doc: serde_json::Value = serde_json::from_str(&sweep.stdout())
        .unwrap_or_else(|e| panic!("not JSON: {e}\n{}", sweep.tail()));
    assert_eq!(doc["partial"], true, "{doc:#}");
    let target = &doc["targets"][0];
    assert_eq!(target["success"], false);
    assert!(
        target["error"].as_str().unwrap().contains("cancelled"),
        "{target:#}"
    );
    // Level 1 measured in full, with its figures; level 2 left out.
    let levels = target["workloads"][0]["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 1, "{levels:#?}");
    let l1 = &levels[0];
    assert_eq!(l1["concurrency"], 1);
    assert_eq!(l1["outcomes"]["ok"], 8);
    assert_eq!(l1["ttft_seconds"]["count"], 8);
    assert!(l1["ttft_seconds"]["p50"].as_f64().unwrap() > 0.0, "{l1:#}");
    assert!(l1["throughput_tokens_per_second"].as_f64().unwrap() > 0.0);
    let stopped = target["workloads"][0]["capacity"]["stopped_because"]
        .as_str()
        .unwrap();
    assert!(stopped.contains("concurrency 2 not completed"), "{stopped}");

    // Standard error is not a terminal: no progress display, one line on Ctrl-C.
    let stderr = sweep.stderr();
    assert!(!stderr.contains("elapsed"), "{stderr}");
    assert!(stderr.contains("interrupted"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_mid_sweep_writes_the_partial_report_and_exits_143() {
    let server = held_at_level_2().await;
    let config = config(&server.base_url());
    let mut command = llmprobe();
    command.args(sweep_args("table", &config));
    let sweep = Process::spawn("llmprobe", &mut command, config.parent().unwrap());
    level_2_held(&server, || sweep.tail()).await;
    sweep.terminate();
    let status = exit_status(&sweep).await;
    assert_eq!(status.code(), Some(143), "{}", sweep.tail());
    let report = sweep.stdout();
    assert!(
        report.starts_with("partial: interrupted (Ctrl-C or SIGTERM)"),
        "{report}"
    );
    assert!(report.contains("t1"), "{report}");
    assert!(
        sweep.stderr().contains("measured before SIGTERM"),
        "{}",
        sweep.stderr()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_shows_the_warm_up_on_a_terminal_and_ctrl_c_stops_it() {
    // Every request held: the sweep waits in its warm-up.
    let server = start(Behavior {
        hold_above: Some(0),
        ..Default::default()
    })
    .await;
    let config = config(&server.base_url());
    let dir = config.parent().unwrap();
    let table = dir.join("table.txt");
    let term = Terminal::start(
        Path::new(env!("CARGO_BIN_EXE_llmprobe")),
        &sweep_args("table", &config),
        &paths::repo(),
        &table,
        dir,
    );
    // Drawn on standard error from the start: the phase, requests done of
    // planned, the time elapsed, and no estimate before a request is done.
    wait::poll("the warm-up on the terminal", LIMIT, || async {
        let screen = term.screen();
        match screen.contains("t1 / chat, warm-up: 0/1 requests")
            && screen.contains("elapsed, ~? left")
        {
            true => Ok(()),
            false => Err(term.process.tail()),
        }
    })
    .await;
    term.interrupt();
    let status = exit_status(&term.process).await;
    assert_eq!(status.code(), Some(130), "{}", term.process.tail());
    // The report went to standard output alone, with no trace of the display.
    let report = std::fs::read_to_string(&table).unwrap();
    assert!(
        report.starts_with("partial: interrupted (Ctrl-C or SIGTERM)"),
        "{report}"
    );
    assert!(report.contains("t1"), "{report}");
    assert!(
        !report.contains('\x1b') && !report.contains("elapsed"),
        "{report:?}"
    );
    assert!(
        term.screen().contains("llmprobe: interrupted"),
        "{}",
        term.screen()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_shows_the_level_and_the_html_report_is_marked_partial() {
    let server = held_at_level_2().await;
    let config = config(&server.base_url());
    let dir = config.parent().unwrap();
    let page = dir.join("report.html");
    let term = Terminal::start(
        Path::new(env!("CARGO_BIN_EXE_llmprobe")),
        &sweep_args("html", &config),
        &paths::repo(),
        &page,
        dir,
    );
    level_2_held(&server, || term.process.tail()).await;
    wait::poll("level 2 on the terminal", LIMIT, || async {
        let screen = term.screen();
        match screen.contains("t1 / chat, concurrency 2 (level 2 of 3): ")
            && screen.contains("/8 requests")
        {
            true => Ok(()),
            false => Err(term.process.tail()),
        }
    })
    .await;
    term.interrupt();
    let status = exit_status(&term.process).await;
    assert_eq!(status.code(), Some(130), "{}", term.process.tail());
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(
        html.contains("<p class=\"partial\">partial: interrupted"),
        "{html}"
    );
    // Level 1's row: TTFT and latency p50 / p95 with their 8 samples, and
    // the throughput of its 8 completed requests.
    let (_, counts) = html.split_once("<table class=\"counts\">").unwrap();
    let row = counts
        .lines()
        .find(|l| l.starts_with("<tr><td>1</td>"))
        .unwrap_or_else(|| panic!("no row of level 1\n{counts}"));
    assert_eq!(row.matches(" ms (8)</td>").count(), 2, "{row}");
    assert!(row.contains(" tok/s (8)</td>"), "{row}");
}
