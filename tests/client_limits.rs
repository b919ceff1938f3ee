//! The client's own limits are never the server's: a sweep whose runtime is
//! stalled by a companion task (as on a loaded host or a throttled
//! container) reads every answer late, and its levels break the SLO's p95
//! latency on the client's account alone; those levels are "not measured
//! (client)", never a break that lowers the knee. The server runs on a
//! thread of its own, out of the stalled runtime's reach, and answers
//! after 10 ms: long enough that even the lightest level outlasts a few of
//! the lag watch's ticks, far inside the SLO's 50 ms.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use support::config::Yaml;
use support::raw::{content, finish, usage, DONE, SSE_HEAD};
use support::sweep::sweep_one;

/// A server on its own threads: every request gets a short stream 10 ms
/// after it arrived.
fn fast_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            std::thread::spawn(move || {
                let mut buf = vec![0u8; 64 * 1024];
                let mut seen = Vec::new();
                // The head, then the body its content-length announces.
                loop {
                    let Ok(n) = conn.read(&mut buf) else { return };
                    if n == 0 {
                        return;
                    }
                    seen.extend_from_slice(&buf[..n]);
                    let text = String::from_utf8_lossy(&seen).to_string();
                    if let Some(head_end) = text.find("\r\n\r\n") {
                        let len = text[..head_end]
                            .lines()
                            .find_map(|l| {
                                let l = l.to_ascii_lowercase();
                                l.strip_prefix("content-length:")
                                    .map(|v| v.trim().parse::<usize>().unwrap_or(0))
                            })
                            .unwrap_or(0);
                        if seen.len() >= head_end + 4 + len {
                            break;
                        }
                    }
                }
                std::thread::sleep(Duration::from_millis(10));
                let mut out = SSE_HEAD.to_string();
                out.push_str(&content("a"));
                out.push_str(&content("b"));
                out.push_str(&finish());
                out.push_str(&usage(2));
                out.push_str(DONE);
                let _ = conn.write_all(out.as_bytes());
            });
        }
    });
    format!("http://{addr}/v1")
}

fn config(base_url: &str) -> String {
    Yaml {
        levels: "[1, 2, 4]",
        slo: Some("{ p95_latency: 50ms, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        requests_per_level: "8",
        min_requests_per_level: 8,
        more_defaults: "  max_tokens_field: max_completion_tokens\n  server_metrics_url: \"off\"",
        rest: &format!("targets:\n  - name: fast\n    base_url: {base_url}\n    model: m\n"),
        ..Yaml::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_client_leaves_its_levels_not_measured_never_a_lower_knee() {
    let base_url = fast_server();
    let yaml = config(&base_url);

    // Unhindered, the client keeps every level: knee 4, all measured.
    let free = sweep_one(&yaml).await;
    let cap = &free.workloads[0].capacity;
    assert_eq!(cap.knee_concurrency, 4, "{:?}", cap.stopped_because);
    assert!(cap.levels_not_measured.is_empty());
    assert!(cap.not_measured_client.is_none());
    let lag = free.workloads[0].levels[0].client_lag.expect("lag watched");
    // Eight requests of 10 ms one after another: some 80 ms of 5 ms ticks.
    assert!(lag.ticks > 0, "{lag:?}");

    // Two companions hold the runtime's two workers 60 ms at a time: every
    // answer is read late, past the 50 ms limit.
    let stop = Arc::new(AtomicBool::new(false));
    for _ in 0..2 {
        let stop = stop.clone();
        tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                std::thread::sleep(Duration::from_millis(60));
                tokio::task::yield_now().await;
            }
        });
    }
    let stalled = sweep_one(&yaml).await;
    stop.store(true, Ordering::SeqCst);
    let w = &stalled.workloads[0];
    let cap = &w.capacity;
    let why = cap.not_measured_client.as_deref().unwrap_or_else(|| {
        panic!(
            "not measured (client) expected; knee {}, stopped because {:?}, levels {:?}",
            cap.knee_concurrency,
            cap.stopped_because,
            w.levels
                .iter()
                .map(|l| (l.concurrency, l.achieved_concurrency, l.kept_concurrency))
                .collect::<Vec<_>>()
        )
    });
    assert!(why.contains("the client's runtime woke"), "{why}");
    assert!(!cap.levels_not_measured.is_empty());
    // No level the client slowed counts as the server's break.
    assert!(w.levels.iter().all(|l| l.within_slo), "{:?}", w.levels);
    let stopped = cap.stopped_because.as_deref().unwrap_or("");
    assert!(stopped.contains("not measured (client)"), "{stopped}");
}
