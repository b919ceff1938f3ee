//! The measuring path is isolated from the HTTP side by construction: the
//! daemon serves `/`, `/metrics` and the rest from a thread of its own
//! (`llmprobe-http`), at a lower scheduling priority than the worker
//! threads that send the measured requests and take their timestamps.

mod support;

use std::time::Duration;

use support::binary::Running;
use support::config::write_config;

/// Each thread of process `pid`: its name and its nice value.
fn threads(pid: u32) -> Vec<(String, i32)> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let stat = std::fs::read_to_string(entry.unwrap().path().join("stat")).unwrap_or_default();
        // `TID (NAME) STATE ...`: the name may hold spaces, the rest not;
        // nice is the 19th field, the 17th after the name.
        let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
            continue;
        };
        let name = stat[open + 1..close].to_string();
        let nice = stat[close + 1..]
            .split_whitespace()
            .nth(16)
            .and_then(|n| n.parse().ok())
            .unwrap();
        out.push((name, nice));
    }
    out
}

#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread")]
async fn the_http_side_runs_on_its_own_thread_at_a_lower_priority() {
    let path = write_config(
        r#"
schedule: { interval: 1h, jitter: 0%, max_in_flight_total: 8, sweep_timeout: 60s }
defaults: { workload: w, levels: [1], min_requests_per_level: 2, warmup_requests: 1 }
workloads:
  w: { max_completion_tokens: 4, prompts: ["hi"] }
targets:
  - name: simulated
    simulator: { profile: stub }
"#,
    );
    let daemon = Running::start(&path, &[]);
    daemon.ready(Duration::from_secs(60)).await;
    assert!(daemon.get("/").await.is_some(), "the index page answers");
    let all = threads(daemon.process.id());
    let nice_of = |name: &str| -> Vec<i32> {
        all.iter()
            .filter(|(n, _)| n == name)
            .map(|(_, nice)| *nice)
            .collect()
    };
    let main = nice_of("llmprobe")
        .into_iter()
        .next()
        .expect("the main thread");
    let http = nice_of("llmprobe-http");
    assert_eq!(http.len(), 1, "one HTTP thread: {all:?}");
    let workers = nice_of("tokio-rt-worker");
    assert!(
        !workers.is_empty(),
        "the measuring runtime's workers: {all:?}"
    );
    // The HTTP side is 10 nicer (at most 19); the measuring workers keep
    // the process's priority.
    assert_eq!(http[0], (main + 10).min(19), "{all:?}");
    assert!(workers.iter().all(|&n| n == main), "{all:?}");
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
}
