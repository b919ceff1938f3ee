//! End to end: 200 targets, discovered from a file_sd file and served by the
//! simulated stub engine, split over three llmprobe instances (shard 0, 1, 2
//! of 3, in-process); a real Prometheus scrapes all three and must see every
//! target measured by exactly one instance, with the fleet recording rules
//! and the "unmeasured target" alert agreeing.
//!
//! Also checks the files of `deploy/prometheus/` with promtool.
//!
//! Needs `prometheus` and `promtool` (Debian package `prometheus`, or set
//! `PROMETHEUS` / `PROMTOOL` to the binaries); the tests fail, saying so,
//! when they are missing.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::paths::{self, repo};
use support::process::assert_success;
use support::prometheus::Prometheus;
use support::sim::{self as engine, SimServer};
use support::{promtool, wait};

const TARGETS: usize = 200;
const INSTANCES: u32 = 3;
const STUB_SERVERS: usize = 4;
/// A bound on each wait below, far above what it takes (every target is
/// measured about 12 s after the start): it only keeps a broken run from
/// hanging.
const DEADLINE: Duration = Duration::from_secs(300);
/// Prometheus's scrape interval, and timeout (it may not exceed the interval).
/// An instance's /metrics names all 200 targets: a debug build took 0.35 to
/// 0.8 s to serve it to Prometheus with other builds running on the two
/// cores, and more with four busy loops, and a failed scrape marks every
/// series of the instance stale, which the instant queries below would see as
/// targets gone. Scrapes taking anywhere near this long fail the test, saying so.
const SCRAPE_SECONDS: u64 = 5;

/// Prometheus scraping `scrape` every [`SCRAPE_SECONDS`], with the shipped
/// alerts and the fleet recording rules, its files in `DIR/prometheus`.
fn start_prometheus(dir: &Path, scrape: &[SocketAddr]) -> Prometheus {
    let dir = dir.join("prometheus");
    std::fs::create_dir_all(&dir).unwrap();
    for (from, to) in [
        ("prometheus/alerts.yml", "alerts.yml"),
        ("deploy/prometheus/recording.yml", "recording.yml"),
    ] {
        std::fs::copy(repo().join(from), dir.join(to)).unwrap();
    }
    let targets: Vec<String> = scrape.iter().map(|a| format!("'{a}'")).collect();
    let config = format!(
        "global: {{scrape_interval: {SCRAPE_SECONDS}s, evaluation_interval: 1s}}\n\
         rule_files: [alerts.yml, recording.yml]\n\
         scrape_configs:\n  - job_name: llmprobe\n    scrape_timeout: {SCRAPE_SECONDS}s\n    static_configs:\n      - targets: [{}]\n",
        targets.join(", ")
    );
    Prometheus::start(&dir, &config)
}

/// Simulated stub engines (no model time) on loopback ports.
async fn stub_servers() -> Vec<SimServer> {
    let mut servers = Vec::new();
    for _ in 0..STUB_SERVERS {
        servers.push(SimServer::start(engine::profile("stub")).await);
    }
    servers
}

fn instance_config(index: u32) -> String {
    Yaml {
        jitter: "10%",
        max_in_flight_total: 32,
        sweep_timeout: "20s",
        warmup_requests: 0,
        requests_per_level: "1",
        min_requests_per_level: 1,
        request_timeout: "5s",
        max_completion_tokens: 4,
        rest: &format!(
            r#"
file_sd:
  files: [FLEET_FILE]
  refresh_interval: 1s
target_template:
  name_label: name
  model: sim-stub
shard: {{ index: {index}, count: {INSTANCES} }}
"#
        ),
        ..Yaml::default()
    }
    .render()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_hundred_targets_three_instances_each_measured_exactly_once() {
    let binary = support::prometheus::binary();
    let started = Instant::now();
    let stubs = stub_servers().await;
    let servers: Vec<SocketAddr> = stubs.iter().map(|s| s.addr).collect();

    // One discovery file for the whole fleet: 200 names over 4 servers.
    let configs: Vec<PathBuf> = (0..INSTANCES)
        .map(|i| write_config(&instance_config(i)))
        .collect();
    let fleet_dir = configs[0].parent().unwrap().join("fleet");
    std::fs::create_dir_all(&fleet_dir).unwrap();
    let groups: Vec<String> = (0..TARGETS)
        .map(|i| {
            format!(
                r#"{{"targets": ["{}"], "labels": {{"name": "fleet-t{i:03}", "gpu": "sim"}}}}"#,
                servers[i % STUB_SERVERS]
            )
        })
        .collect();
    let fleet_file = fleet_dir.join("targets.json");
    std::fs::write(&fleet_file, format!("[{}]", groups.join(",\n"))).unwrap();
    // Every instance reads the same file, as pods mounting one ConfigMap.
    for c in &configs {
        let text = std::fs::read_to_string(c)
            .unwrap()
            .replace("FLEET_FILE", &fleet_file.display().to_string());
        std::fs::write(c, text).unwrap();
    }

    let mut daemons = Vec::new();
    for c in &configs {
        daemons.push(Daemon::start(c.clone()).await);
    }
    let addrs: Vec<SocketAddr> = daemons.iter().map(|d| d.addr).collect();
    let prometheus = start_prometheus(fleet_dir.as_path(), &addrs);
    prometheus.ready(Duration::from_secs(60)).await;
    eprintln!("{} ready after {:?}", binary.display(), started.elapsed());

    // Wait until Prometheus has seen a completed sweep of every target.
    let measured = "count(count by (target) (llmprobe_sweep_last_completion_timestamp_seconds))";
    let left = DEADLINE.saturating_sub(started.elapsed());
    wait::poll("every target measured", left, || async {
        let n = prometheus.scalar(measured).await.unwrap_or(0.0);
        if n as usize == TARGETS {
            return Ok(());
        }
        Err(format!(
            "only {n} of {TARGETS} targets measured after {:?}; Prometheus log:\n{}",
            started.elapsed(),
            prometheus.process.tail()
        ))
    })
    .await;
    // Two more scrapes of every instance (and the sweeps between them), so
    // that a target measured twice would show: counted in scrapes, not seconds.
    let seen_all = prometheus.scalar("vector(time())").await.expect("time()");
    eprintln!("all {TARGETS} measured after {:?}", started.elapsed());
    wait::poll("two more scrapes of every instance", DEADLINE, || async {
        // The latest scrape at least one interval after `seen_all`: the one
        // before it came after `seen_all` too.
        let oldest = prometheus.scalar("min(timestamp(up))").await.unwrap_or(0.0);
        if oldest >= seen_all + SCRAPE_SECONDS as f64 {
            return Ok(());
        }
        Err(format!(
            "latest scrapes: {:?}",
            prometheus.samples("timestamp(up)").await
        ))
    })
    .await;
    // Every instance's latest scrape succeeded, so no series is stale below.
    let durations = prometheus.samples("scrape_duration_seconds").await;
    eprintln!("scrape durations: {durations:?}");
    let failed = prometheus.samples("up == 0").await;
    assert!(
        failed.is_empty(),
        "failed scrapes: {failed:?}; durations {durations:?}"
    );

    // Exactly one instance per target, over the whole run so far: every
    // series an instance ever exported for a target counts.
    let per_target = prometheus
        .samples(
            "count by (target) (last_over_time(llmprobe_sweep_last_completion_timestamp_seconds[10m]))",
        )
        .await;
    assert_eq!(per_target.len(), TARGETS);
    let twice: Vec<&(serde_json::Value, f64)> =
        per_target.iter().filter(|(_, v)| *v != 1.0).collect();
    assert!(
        twice.is_empty(),
        "targets measured by several instances: {twice:?}"
    );
    assert_eq!(
        prometheus
            .scalar("count(llmprobe_sweep_last_completion_timestamp_seconds)")
            .await,
        Some(TARGETS as f64)
    );
    // Each instance measured only what it owns, and they own everything.
    let owned_by_instance = prometheus
        .samples("count by (instance) (llmprobe_sweep_success)")
        .await;
    assert_eq!(
        owned_by_instance.len(),
        INSTANCES as usize,
        "{owned_by_instance:?}"
    );
    let shard_targets = prometheus.samples("llmprobe_shard_targets").await;
    for (labels, owned) in &shard_targets {
        let instance = &labels["instance"];
        let measuring = owned_by_instance
            .iter()
            .find(|(l, _)| &l["instance"] == instance)
            .map(|(_, v)| *v);
        assert_eq!(measuring, Some(*owned), "{labels}");
    }
    for (q, want) in [
        ("sum(llmprobe_shard_targets)", TARGETS as f64),
        ("count(llmprobe_shard_info{count=\"3\"})", 3.0),
        ("count(count by (index) (llmprobe_shard_info))", 3.0),
        // Every instance knows every target, owned or not.
        (
            "count(llmprobe_fleet_target)",
            (TARGETS * INSTANCES as usize) as f64,
        ),
        ("llmprobe:fleet_targets:count", TARGETS as f64),
        ("llmprobe:shard_targets:sum", TARGETS as f64),
        (
            "count(target:llmprobe_capacity_knee_concurrency:max)",
            TARGETS as f64,
        ),
        ("max(target:llmprobe_measuring_instances:count)", 1.0),
    ] {
        assert_eq!(prometheus.scalar(q).await, Some(want), "{q}");
    }
    // The owner each instance names is the one that measures the target.
    let disagree = prometheus
        .samples("count by (target) (count by (target, shard) (llmprobe_fleet_target)) > 1")
        .await;
    assert!(disagree.is_empty(), "{disagree:?}");
    // The alert's expression: nothing known goes unmeasured.
    let unmeasured = prometheus
        .samples(
            "max by (target) (llmprobe_fleet_target) unless on(target) \
             (time() - max by (target) (llmprobe_sweep_last_completion_timestamp_seconds) < 2700)",
        )
        .await;
    assert!(unmeasured.is_empty(), "{unmeasured:?}");

    for d in daemons {
        d.stop().await;
    }
    drop(stubs);
    drop(prometheus);
    for c in &configs {
        let _ = std::fs::remove_dir_all(c.parent().unwrap());
    }
    eprintln!("done in {:?}", started.elapsed());
}

#[test]
fn deploy_prometheus_files_pass_promtool() {
    let check = promtool::run(["check", "rules", "deploy/prometheus/recording.yml"]);
    assert_success(
        "promtool check rules deploy/prometheus/recording.yml",
        &check,
    );
    let test = promtool::run(["test", "rules", "deploy/prometheus/recording_test.yml"]);
    assert_success(
        "promtool test rules deploy/prometheus/recording_test.yml",
        &test,
    );
    let scrape = promtool::run(["check", "config", "deploy/prometheus/scrape-static.yml"]);
    assert_success(
        "promtool check config deploy/prometheus/scrape-static.yml",
        &scrape,
    );
    let k8s = promtool::run(["check", "config", "deploy/prometheus/scrape-kubernetes.yml"]);
    let stderr =
        String::from_utf8_lossy(&k8s.stderr).to_string() + &String::from_utf8_lossy(&k8s.stdout);
    if stderr.contains("field kubernetes_sd_configs not found") {
        // Debian builds Prometheus without Kubernetes discovery; check what
        // can be checked without it.
        eprintln!("promtool here lacks kubernetes_sd_configs: checking scrape-kubernetes.yml's structure only");
        let doc = &yaml_rust2::YamlLoader::load_from_str(&paths::read(
            "deploy/prometheus/scrape-kubernetes.yml",
        ))
        .unwrap()[0];
        let job = &doc["scrape_configs"][0];
        assert_eq!(job["job_name"].as_str(), Some("llmprobe"));
        assert_eq!(
            job["kubernetes_sd_configs"][0]["role"].as_str(),
            Some("pod")
        );
        for f in doc["rule_files"].as_vec().unwrap() {
            assert!(
                repo()
                    .join("deploy/prometheus")
                    .join(f.as_str().unwrap())
                    .is_file(),
                "{f:?}"
            );
        }
    } else {
        assert_success(
            "promtool check config deploy/prometheus/scrape-kubernetes.yml",
            &k8s,
        );
    }
}
