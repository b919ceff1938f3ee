//! State that survives (issue 28): the daemon, as a process, keeps each
//! target's state in `state_dir`; a restart starts from it (its first
//! sweep's verdicts pool the earlier sweeps), a corrupt state file is
//! ignored with one warning, `llmprobe sweep --state DIR` reads it, and a
//! reload that changes only the schedule's jitter keeps every loop.

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;
use support::binary::{llmprobe, output, Running};
use support::config::{write_config, Yaml};
use support::paths::ScratchDir;
use support::process::assert_success;
use support::wait;

const WAIT: Duration = Duration::from_secs(90);

/// The tiny engine (sheds above 8 in flight) failing 2% of requests at
/// random, on the default levels, request counts and SLO, its state in
/// `state_dir`.
fn config(state_dir: &Path) -> String {
    Yaml {
        warmup_requests: 2,
        levels: "[1, 2, 4, 8, 16]",
        requests_per_level: "3x",
        min_requests_per_level: 8,
        slo: Some("{ p95_latency: 5s, max_shed_ratio: 0.05, max_error_ratio: 0.05 }"),
        rest: &format!(
            "targets:\n  - name: sim\n    simulator: {{ profile: tiny, step_base: 4ms, \
             step_per_sequence: 500us, max_in_flight: 8, fail_ratio: 0.02, seed: 11 }}\n\
             state_dir: {}",
            state_dir.display()
        ),
        ..Yaml::default()
    }
    .render()
}

/// The one state file in `dir`, if there is one yet.
fn state_file(dir: &Path) -> Option<PathBuf> {
    let files: Vec<PathBuf> = std::fs::read_dir(dir)
        .ok()?
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "json"))
        .collect();
    assert!(files.len() <= 1, "one target, one file: {files:?}");
    files.into_iter().next()
}

/// Waits until the state in `dir` has recorded `sweeps` sweeps in all, and
/// returns it.
async fn state_after(dir: &Path, sweeps: u64, daemon: &Running) -> Value {
    wait::poll("the saved state", WAIT, || async {
        daemon.process.assert_running();
        let path = state_file(dir).ok_or("no state file yet")?;
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        match v["memory"]["evidence"]["sweeps"].as_u64() {
            Some(n) if n >= sweeps => Ok(v),
            n => Err(format!("{n:?} sweeps recorded\n{}", daemon.process.tail())),
        }
    })
    .await
}

/// The most earlier sweeps any level of the state's latest sweep pooled.
fn pooled(state: &Value) -> u64 {
    state["memory"]["latest"]["workloads"][0]["levels"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|l| l["verdict"]["pooled_sweeps"].as_u64())
        .max()
        .unwrap_or(0)
}

fn logs(daemon: &Running) -> String {
    format!("{}{}", daemon.process.stdout(), daemon.process.stderr())
}

/// Runs the daemon on `config` (in a folder of its own, for its logs) with
/// `env`, until its state has recorded `sweeps` sweeps; stops it.
async fn run_until(config: &str, env: &[(&str, &str)], dir: &Path, sweeps: u64) -> (Value, String) {
    let daemon = Running::start(&write_config(config), env);
    daemon.ready(WAIT).await;
    let state = state_after(dir, sweeps, &daemon).await;
    assert!(daemon.stop(WAIT).success());
    (state, logs(&daemon))
}

// After the first run, the interval is long: the state read is the one the
// restarted daemon's first sweep wrote, not a later one's.
const ONE_SWEEP: (&str, &str) = ("LLMPROBE__SCHEDULE__INTERVAL", "10m");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_daemon_starts_from_its_state() {
    let scratch = ScratchDir::new("restarts");
    let dir = scratch.join("state");
    let yaml = config(&dir);

    run_until(&yaml, &[], &dir, 2).await;
    // Read once the daemon has stopped: a sweep may have ended meanwhile.
    let first: Value =
        serde_json::from_slice(&std::fs::read(state_file(&dir).unwrap()).unwrap()).unwrap();
    let before = first["memory"]["evidence"]["sweeps"].as_u64().unwrap();
    assert!(before >= 2, "{first:#}");
    assert_eq!(first["version"], 1);
    assert_eq!(first["target"], "sim");

    let (state, logs) = run_until(&yaml, &[ONE_SWEEP], &dir, before + 1).await;
    assert_eq!(
        state["memory"]["evidence"]["sweeps"].as_u64(),
        Some(before + 1),
        "one sweep after the restart"
    );
    assert!(logs.contains("started from the saved state"), "{logs}");
    // The restarted daemon's first sweep pooled the ones before the restart.
    assert!(pooled(&state) >= 2, "pooled {}: {state:#}", pooled(&state));

    // A one-shot sweep reads the same state, and leaves it as it was.
    let file = state_file(&dir).unwrap();
    let saved = std::fs::read(&file).unwrap();
    let mut sweep = llmprobe();
    sweep
        .args(["sweep", "--format", "json", "--config"])
        .arg(write_config(&yaml))
        .arg("--state")
        .arg(&dir);
    let out = output(sweep).await;
    assert_success("llmprobe sweep --state", &out);
    let doc: Value = serde_json::from_slice(&out.stdout).unwrap();
    let levels = doc["targets"][0]["workloads"][0]["levels"]
        .as_array()
        .unwrap();
    let most = levels
        .iter()
        .filter_map(|l| l["verdict"]["pooled_sweeps"].as_u64())
        .max();
    assert!(most >= Some(2), "{levels:#?}");
    assert_eq!(std::fs::read(&file).unwrap(), saved, "read only");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_corrupt_state_file_is_ignored_with_one_warning() {
    let scratch = ScratchDir::new("restarts-corrupt");
    let dir = scratch.join("state");
    let yaml = config(&dir);
    run_until(&yaml, &[], &dir, 1).await;
    let file = state_file(&dir).unwrap();
    std::fs::write(&file, b"{\"version\":1,\"memory\":{\"evidence\":[").unwrap();

    let (state, logs) = run_until(&yaml, &[ONE_SWEEP], &dir, 1).await;
    assert_eq!(logs.matches("saved state ignored").count(), 1, "{logs}");
    assert!(logs.contains("not a state file"), "{logs}");
    // Started from nothing, and wrote a good state again.
    assert_eq!(state["memory"]["evidence"]["sweeps"].as_u64(), Some(1));
    assert_eq!(pooled(&state), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_only_the_jitter_keeps_every_loop() {
    let scratch = ScratchDir::new("restarts-jitter");
    let targets = "targets:\n  - name: a\n    simulator: { profile: tiny }\n  \
                   - name: b\n    simulator: { profile: tiny }";
    let yaml = |jitter| {
        Yaml {
            jitter,
            rest: targets,
            ..Yaml::default()
        }
        .render()
    };
    let path = scratch.join("llmprobe.yaml");
    std::fs::write(&path, yaml("0%")).unwrap();
    let daemon = Running::start(&path, &[]);
    daemon.ready(WAIT).await;
    let swept = |n: usize| {
        let daemon = &daemon;
        async move {
            wait::poll("sweeps of both targets", WAIT, || async {
                let text = daemon.get("/metrics").await.unwrap_or_default();
                let ok = |target: &str| -> f64 {
                    let label = format!("target=\"{target}\"");
                    text.lines()
                        .filter(|l| l.starts_with("llmprobe_sweeps_total{"))
                        .filter(|l| l.contains(&label) && l.contains("result=\"ok\""))
                        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                        .sum()
                };
                let done = ["a", "b"].iter().filter(|t| ok(t) >= n as f64).count();
                if done == 2 {
                    Ok(())
                } else {
                    Err(daemon.process.tail())
                }
            })
            .await
        }
    };
    swept(1).await;
    std::fs::write(&path, yaml("20%")).unwrap();
    let r = reqwest::Client::new()
        .post(daemon.url("/-/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    // Both loops go on sweeping, and none was stopped to do so.
    swept(3).await;
    let logs = logs(&daemon);
    assert!(logs.contains("configuration reloaded"), "{logs}");
    assert_eq!(logs.matches("stopping measurement").count(), 0, "{logs}");
    assert!(daemon.stop(WAIT).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_loop_a_reload_restarts_starts_from_the_state() {
    let scratch = ScratchDir::new("restarts-reload");
    let dir = scratch.join("state");
    let path = scratch.join("llmprobe.yaml");
    std::fs::write(&path, config(&dir)).unwrap();
    let daemon = Running::start(&path, &[]);
    daemon.ready(WAIT).await;
    state_after(&dir, 1, &daemon).await;
    assert!(!logs(&daemon).contains("started from the saved state"));
    // A label is the target's own setting: its loop restarts.
    let changed = config(&dir).replace("seed: 11 }", "seed: 11 }\n    labels: { gpu: \"sim\" }");
    assert_ne!(changed, config(&dir));
    std::fs::write(&path, changed).unwrap();
    let r = reqwest::Client::new()
        .post(daemon.url("/-/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait::poll("the restarted loop", WAIT, || async {
        let logs = logs(&daemon);
        if logs.contains("started from the saved state") {
            Ok(())
        } else {
            Err(daemon.process.tail())
        }
    })
    .await;
    assert_eq!(logs(&daemon).matches("stopping measurement").count(), 1);
    assert!(daemon.stop(WAIT).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_state_dir_a_reload_hands_a_loop_its_memory() {
    let scratch = ScratchDir::new("restarts-handoff");
    let path = scratch.join("llmprobe.yaml");
    let yaml = config(&scratch.join("unused")).replace(
        &format!("state_dir: {}", scratch.join("unused").display()),
        "state_dir: \"\"",
    );
    assert!(yaml.contains("state_dir: \"\""));
    std::fs::write(&path, &yaml).unwrap();
    let daemon = Running::start(&path, &[]);
    daemon.ready(WAIT).await;
    let finished = |n: usize| {
        let daemon = &daemon;
        async move {
            wait::poll("sweeps", WAIT, || async {
                let logs = logs(daemon);
                if logs.matches("sweep finished").count() >= n {
                    Ok(())
                } else {
                    Err(daemon.process.tail())
                }
            })
            .await
        }
    };
    finished(2).await;
    let changed = yaml.replace("seed: 11 }", "seed: 11 }\n    labels: { gpu: \"sim\" }");
    std::fs::write(&path, changed).unwrap();
    let r = reqwest::Client::new()
        .post(daemon.url("/-/reload"))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{:?}", r.text().await);
    wait::poll("the restarted loop", WAIT, || async {
        let logs = logs(&daemon);
        match logs
            .lines()
            .find(|l| l.contains("started from the saved state"))
        {
            Some(line) => Ok(line.to_string()),
            None => Err(daemon.process.tail()),
        }
    })
    .await;
    let logs = logs(&daemon);
    let line = logs
        .lines()
        .find(|l| l.contains("started from the saved state"))
        .unwrap();
    assert!(line.contains("previous loop"), "{line}");
    assert!(!line.contains("pooled_sweeps=0"), "{line}");
    assert!(!scratch.join("unused").exists(), "no state written");
    assert!(daemon.stop(WAIT).success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_names_the_state_dir_and_refuses_a_file() {
    let scratch = ScratchDir::new("restarts-check");
    let dir = scratch.join("state");
    let path = write_config(&config(&dir));
    let mut check = llmprobe();
    check.args(["check-config", "--config"]).arg(&path);
    let out = output(check).await;
    assert_success("check-config", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    let wanted = format!("kept in {} across restarts", dir.display());
    assert!(text.contains(&wanted), "{text}");

    // A state_dir that is a file is bad configuration: the key and the file.
    std::fs::write(&dir, "not a folder").unwrap();
    let mut check = llmprobe();
    check.args(["check-config", "--config"]).arg(&path);
    let out = output(check).await;
    assert_eq!(out.status.code(), Some(1));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let wanted = format!(
        "{}: state_dir: `{}` is there but is not a directory",
        path.display(),
        dir.display()
    );
    assert!(text.contains(&wanted), "{text}");
}
