//! Targets discovered from file_sd files: both formats through the template,
//! change detection, a broken file keeping its targets, static targets
//! winning over discovered ones, sharding settings from the environment, and
//! the daemon picking all of it up (refresh, reload, metrics).

mod support;

use std::path::{Path, PathBuf};
use std::time::Duration;

use llmprobe::config::{self, Config, Endpoint, ProcessEnv};
use llmprobe::fleet::Fleet;
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::metric;
use support::server::{start, Behavior};

/// Tests that set `LLMPROBE__*` or `HOSTNAME` hold this, as does every test
/// that loads a config with environment overrides, so none sees another's.
/// (A tokio mutex: the daemon test holds it across awaits.)
static ENV: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn config_text(file_sd: &str, static_targets: &str) -> String {
    Yaml {
        sweep_timeout: "30s",
        warmup_requests: 0,
        levels: "[1, 2, 4]",
        min_requests_per_level: 2,
        request_timeout: "5s",
        max_completion_tokens: 4,
        rest: &format!("{file_sd}\ntargets: {static_targets}"),
        ..Yaml::default()
    }
    .render()
}

const TEMPLATE: &str = r#"
file_sd:
  files: ["targets/*.json", "targets/*.yaml"]
  refresh_interval: 200ms
target_template:
  path_prefix: /v1
  name_label: name
  model: fallback-model
  labels: [gpu]
  max_concurrency_label: max_in_flight
"#;

/// Loads without `LLMPROBE__` overrides (other tests may be setting them).
fn load(path: &Path) -> Config {
    config::decode(path, false)
        .and_then(|f| config::resolve(path, f, &ProcessEnv))
        .unwrap_or_else(|e| panic!("{e}"))
}

fn targets_dir(config: &Path) -> PathBuf {
    let dir = config.parent().unwrap().join("targets");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes a file the way discovery writers should: a temporary file renamed
/// over the old one, so a reader never sees it half-written.
fn write_atomic(path: &Path, text: &str) {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text).unwrap();
    std::fs::rename(&tmp, path).unwrap();
}

fn names(c: &Config) -> Vec<String> {
    c.targets.iter().map(|t| t.name.clone()).collect()
}

#[test]
fn json_and_yaml_files_become_targets_through_the_template() {
    let path = write_config(&config_text(TEMPLATE, "[]"));
    let dir = targets_dir(&path);
    std::fs::write(
        dir.join("a.json"),
        r#"[{"targets": ["10.0.0.1:8000"], "labels": {"name": "w1", "model": "qwen", "gpu": "L40S", "rack": "r1", "max_in_flight": "2"}},
            {"targets": ["10.0.0.2:8000", "http://10.0.0.9:8000"], "labels": {}}]"#,
    )
    .unwrap();
    std::fs::write(
        dir.join("b.yaml"),
        "- targets: ['10.0.0.3:8000']\n  labels:\n    name: w3\n    model: llama\n    max_in_flight: lots\n- targets: ['10.0.0.4:8000']\n  labels: {name: w1}\n",
    )
    .unwrap();
    std::fs::write(dir.join("ignored.txt"), "not matched").unwrap();

    let c = load(&path);
    let mut fleet = Fleet::new();
    fleet.configure(&c);
    let view = fleet.view(&c);
    assert_eq!(names(&view), ["w1", "10.0.0.2:8000"]);

    let w1 = &view.targets[0];
    assert_eq!(w1.endpoint, Endpoint::Url("http://10.0.0.1:8000/v1".into()));
    assert_eq!(w1.model, "qwen");
    assert_eq!(w1.levels, [1, 2], "max_in_flight label caps the levels");
    assert_eq!(
        w1.labels.iter().collect::<Vec<_>>(),
        [(&"gpu".to_string(), &"L40S".to_string())],
        "only the template's labels are copied"
    );
    let anon = &view.targets[1];
    assert_eq!(anon.model, "fallback-model");
    assert_eq!(anon.levels, [1, 2, 4]);

    let files = fleet.files();
    assert_eq!(files.len(), 2, "the .txt file is not read");
    let a = files.iter().find(|f| f.path.ends_with("a.json")).unwrap();
    assert_eq!(a.invalid.len(), 1, "{:?}", a.invalid);
    assert!(
        a.invalid[0].contains(
            "[1].targets[1] (http://10.0.0.9:8000): must be `host:port`, without a scheme"
        ),
        "{:?}",
        a.invalid
    );
    let b = files.iter().find(|f| f.path.ends_with("b.yaml")).unwrap();
    assert_eq!(b.invalid.len(), 1, "{:?}", b.invalid);
    assert!(
        b.invalid[0].contains("[0].targets[0] (10.0.0.3:8000): label `max_in_flight` (max_concurrency) is `lots`, not a whole number"),
        "{:?}",
        b.invalid
    );
    // b.yaml's w1 is valid on its own, but a.json's w1 came first (files
    // are taken in path order), so the view keeps a.json's.
    assert_eq!(b.targets.len(), 1);
    assert_eq!(b.targets[0].name, "w1");
    let explained = llmprobe::faces::explain::explain(&c);
    assert!(
        explained.contains("2 entries skipped") || explained.contains("1 entries skipped"),
        "{explained}"
    );
    assert!(
        explained.contains("skipped [0].targets[0] (10.0.0.3:8000)"),
        "{explained}"
    );
    assert!(
        explained.contains("this instance measures 2 of 2 targets"),
        "{explained}"
    );
}

#[test]
fn changes_are_seen_and_a_broken_file_keeps_its_targets() {
    let path = write_config(&config_text(
        TEMPLATE,
        "\n  - { name: w2, base_url: 'http://10.9.9.9:1/v1', model: static-model }",
    ));
    let file = targets_dir(&path).join("fleet.json");
    write_atomic(
        &file,
        r#"[{"targets": ["10.0.0.1:8000"], "labels": {"name": "w1"}}]"#,
    );
    let c = load(&path);
    let mut fleet = Fleet::new();
    fleet.configure(&c);
    assert_eq!(names(&fleet.view(&c)), ["w2", "w1"]);
    assert!(!fleet.refresh(), "nothing changed");

    write_atomic(
        &file,
        r#"[{"targets": ["10.0.0.1:8000", "10.0.0.2:8000"], "labels": {}},
            {"targets": ["10.0.0.3:8000"], "labels": {"name": "w2", "model": "discovered"}}]"#,
    );
    assert!(fleet.refresh(), "a changed file is read again");
    let view = fleet.view(&c);
    assert_eq!(names(&view), ["w2", "10.0.0.1:8000", "10.0.0.2:8000"]);
    assert_eq!(
        view.targets[0].model, "static-model",
        "a static target wins over a discovered one of the same name"
    );

    write_atomic(&file, r#"[{"targets": ["10.0.0.1:8000"#);
    assert!(!fleet.refresh(), "a broken file changes nothing");
    assert_eq!(
        names(&fleet.view(&c)),
        ["w2", "10.0.0.1:8000", "10.0.0.2:8000"]
    );
    let files = fleet.files();
    assert!(
        files[0].error.unwrap().contains("EOF"),
        "{:?}",
        files[0].error
    );
    assert!(!fleet.refresh(), "still broken: still nothing changes");

    // A reload while the file is broken keeps its targets too.
    fleet.configure(&c);
    assert_eq!(
        names(&fleet.view(&c)),
        ["w2", "10.0.0.1:8000", "10.0.0.2:8000"]
    );

    write_atomic(&file, "[]");
    assert!(fleet.refresh());
    assert!(fleet.files()[0].error.is_none());
    assert_eq!(names(&fleet.view(&c)), ["w2"]);

    write_atomic(&file, r#"[{"targets": ["10.0.0.5:8000"]}]"#);
    assert!(fleet.refresh());
    std::fs::remove_file(&file).unwrap();
    assert!(
        fleet.refresh(),
        "a file that is gone takes its targets away"
    );
    assert_eq!(names(&fleet.view(&c)), ["w2"]);
}

#[test]
fn config_problems_name_the_key() {
    let bad = |file_sd: &str| {
        let path = write_config(&config_text(file_sd, "[]"));
        config::decode(&path, false)
            .and_then(|f| config::resolve(&path, f, &ProcessEnv))
            .unwrap_err()
            .to_string()
    };
    // Each part of a config, and the problem that must be named.
    for (part, problem) in [
        (
            "file_sd: {files: ['/x/*/a.json']}\n",
            "file_sd.files[0]: `/x/*/a.json`: wildcards are only allowed in the file name",
        ),
        (
            "file_sd: {files: [a.json]}\ntarget_template: {scheme: ftp}\n",
            "target_template.scheme: must be `http` or `https`, got `ftp`",
        ),
        (
            "file_sd: {files: [a.json]}\ntarget_template: {workloads: [nope]}\n",
            "target_template.workloads: workload `nope` is not defined",
        ),
        (
            "file_sd: {files: [a.json]}\ntarget_template: {api_key_env: LLMPROBE_TEST_UNSET_VARIABLE}\n",
            "target_template.api_key_env: environment variable `LLMPROBE_TEST_UNSET_VARIABLE` is not set",
        ),
        (
            "target_template: {model: m}\n",
            "target_template: is only used with `file_sd`",
        ),
        (
            "file_sd: {files: [a.json], refresh: 1s}\n",
            "file_sd.refresh: unknown field `refresh`",
        ),
        (
            "shard: {index: 3, count: 3}\n",
            "shard.index: shard 3 does not exist with `count: 3`",
        ),
    ] {
        let e = bad(part);
        assert!(e.contains(problem), "{e}");
    }
}

#[test]
fn shard_settings_come_from_the_environment_too() {
    let _env = ENV.blocking_lock();
    let path = write_config(&config_text("allow_empty: true", "[]"));
    // SAFETY of the environment: every test that reads it holds ENV.
    std::env::set_var("LLMPROBE__SHARD__INDEX", "2");
    std::env::set_var("LLMPROBE__SHARD__COUNT", "3");
    let from_env = config::load(&path);
    std::env::remove_var("LLMPROBE__SHARD__INDEX");
    let c = from_env.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((c.fleet.shard.index, c.fleet.shard.count), (2, 3));

    std::env::set_var("LLMPROBE__SHARD__INDEX_FROM_HOSTNAME", "true");
    std::env::set_var("HOSTNAME", "llmprobe-1");
    let from_host = config::load(&path);
    std::env::remove_var("LLMPROBE__SHARD__INDEX_FROM_HOSTNAME");
    std::env::remove_var("LLMPROBE__SHARD__COUNT");
    let c = from_host.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((c.fleet.shard.index, c.fleet.shard.count), (1, 3));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemon_refreshes_reloads_and_counts_read_errors() {
    let _env = ENV.lock().await;
    let server = start(Behavior::default()).await;
    let yaml = |shard: &str| {
        config_text(
            &format!(
                "file_sd: {{files: [targets/*.json], refresh_interval: 200ms}}\ntarget_template: {{name_label: name, model: m}}\n{shard}"
            ),
            "[]",
        )
    };
    let path = write_config(&yaml(""));
    let file = targets_dir(&path).join("fleet.json");
    let file_label = file.display().to_string();
    let entries = |names: &[&str]| {
        let groups: Vec<String> = names
            .iter()
            .map(|n| {
                format!(
                    r#"{{"targets": ["{}"], "labels": {{"name": "{n}"}}}}"#,
                    server.addr()
                )
            })
            .collect();
        format!("[{}]", groups.join(","))
    };
    write_atomic(&file, &entries(&["d1"]));

    let d = Daemon::start(path.clone()).await;
    let wait = Duration::from_secs(60);
    let knee =
        |t: &str, name: &str| metric(t, "llmprobe_capacity_knee_concurrency", &[("target", name)]);
    let text = d
        .wait_for(wait, "d1 measured", |t| knee(t, "d1").is_some())
        .await;
    let fleet_target = |t: &str, name: &str| {
        metric(
            t,
            "llmprobe_fleet_target",
            &[("target", name), ("source", "file_sd")],
        )
    };
    assert_eq!(fleet_target(&text, "d1"), Some(1.0));
    let file_metric = |t: &str, name: &str| metric(t, name, &[("file", &file_label)]);
    assert_eq!(file_metric(&text, "llmprobe_file_sd_targets"), Some(1.0));
    assert_eq!(
        file_metric(&text, "llmprobe_file_sd_read_errors_total"),
        Some(0.0)
    );
    assert_eq!(
        metric(&text, "llmprobe_shard_targets", &[("shard", "0")]),
        Some(1.0)
    );
    assert_eq!(
        metric(
            &text,
            "llmprobe_shard_info",
            &[("index", "0"), ("count", "1")]
        ),
        Some(1.0)
    );

    // Broken: counted, targets kept and still measured.
    write_atomic(&file, "[{");
    let text = d
        .wait_for(wait, "a read error", |t| {
            file_metric(t, "llmprobe_file_sd_read_errors_total").is_some_and(|v| v >= 1.0)
        })
        .await;
    assert_eq!(fleet_target(&text, "d1"), Some(1.0));
    assert_eq!(file_metric(&text, "llmprobe_file_sd_targets"), Some(1.0));

    // Fixed, with another target: d1 goes, d2 comes.
    write_atomic(&file, &entries(&["d2", "d3"]));
    let text = d
        .wait_for(wait, "d2 and d3 measured", |t| {
            knee(t, "d2").is_some() && knee(t, "d3").is_some()
        })
        .await;
    assert_eq!(fleet_target(&text, "d1"), None);
    assert_eq!(
        knee(&text, "d1"),
        None,
        "a target that went away is forgotten"
    );

    // Reload as shard 1 of 2: only the targets shard 1 owns stay measured.
    std::fs::write(&path, yaml("shard: {index: 1, count: 2}")).unwrap();
    let status = reqwest::Client::new()
        .post(d.url("/-/reload"))
        .send()
        .await
        .unwrap()
        .status();
    assert!(status.is_success(), "{status}");
    let owned: Vec<&str> = ["d2", "d3"]
        .into_iter()
        .filter(|n| llmprobe::fleet::shard::owner(n, 2) == 1)
        .collect();
    let text = d
        .wait_for(wait, "shard 1 of 2", |t| {
            metric(t, "llmprobe_shard_info", &[("index", "1"), ("count", "2")]) == Some(1.0)
                && metric(t, "llmprobe_shard_targets", &[("shard", "1")])
                    == Some(owned.len() as f64)
        })
        .await;
    for n in ["d2", "d3"] {
        let shard = llmprobe::fleet::shard::owner(n, 2).to_string();
        assert_eq!(
            metric(
                &text,
                "llmprobe_fleet_target",
                &[("target", n), ("shard", shard.as_str())]
            ),
            Some(1.0),
            "every known target is exported with its owner"
        );
        if !owned.contains(&n) {
            assert_eq!(knee(&text, n), None, "{n} belongs to shard 0 now");
        }
    }
    assert_eq!(
        metric(&text, "llmprobe_shard_info", &[("index", "0")]),
        None
    );
    d.stop().await;
}

/// A config whose one workload has a 300,000-character prompt (about 1.4
/// MiB of prompt memory for one model, 0.6 more for each other model),
/// capped at `cap_mib`, with targets discovered from `targets/*.json`.
fn capped(cap_mib: u32) -> String {
    let workloads = format!(
        "workloads:\n  w:\n    max_completion_tokens: 4\n    prompts: ['{}']\n",
        "x".repeat(300_000)
    );
    Yaml {
        workload: "w",
        workloads: Some(&workloads),
        rest: &format!(
            "max_prompt_memory_mib: {cap_mib}\n\
             file_sd: {{files: [targets/*.json], refresh_interval: 200ms}}\n\
             target_template: {{name_label: name}}\ntargets: []"
        ),
        ..Yaml::default()
    }
    .render()
}

/// d1 and d3 of model m1, d2 of m2, d4 of m3, at `addr`.
fn four_models(addr: &str) -> String {
    let entries: Vec<String> = [("d1", "m1"), ("d2", "m2"), ("d3", "m1"), ("d4", "m3")]
        .iter()
        .map(|(n, m)| {
            format!(r#"{{"targets": ["{addr}"], "labels": {{"name": "{n}", "model": "{m}"}}}}"#)
        })
        .collect();
    format!("[{}]", entries.join(","))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn discovered_targets_over_the_prompt_memory_cap_are_not_started() {
    let _env = ENV.lock().await;
    let server = start(Behavior::default()).await;
    let path = write_config(&capped(2));
    write_atomic(
        &targets_dir(&path).join("fleet.json"),
        &four_models(&server.addr().to_string()),
    );

    // m1 fits (d3 shares its bodies); m2 and m3 would each add 0.6 MiB
    // over the 2 MiB.
    let c = load(&path);
    let mut fleet = Fleet::new();
    fleet.configure(&c);
    assert_eq!(names(&fleet.view(&c)), ["d1", "d3"]);
    assert_eq!(fleet.refused(), ["d2", "d4"]);
    let note = fleet.refused_note().expect("a note");
    assert!(
        note.contains("2 discovered target(s) not started")
            && note.contains("max_prompt_memory_mib (2 MiB): d2, d4"),
        "{note}"
    );
    let explained = llmprobe::fleet::explain(&c);
    assert!(
        explained.contains("not started, over max_prompt_memory_mib (2 MiB): d4"),
        "{explained}"
    );
    assert_eq!(fleet.placement().owned, 2);

    // The daemon: counted, and a reload over HTTP says so; raised, all four.
    let d = Daemon::start(path.clone()).await;
    let wait = Duration::from_secs(60);
    let refused = |t: &str| {
        metric(
            t,
            "llmprobe_file_sd_refused_targets",
            &[("reason", "max_prompt_memory_mib")],
        )
    };
    let owned = |t: &str| metric(t, "llmprobe_shard_targets", &[("shard", "0")]);
    d.wait_for(wait, "two refused, two started", |t| {
        refused(t) == Some(2.0) && owned(t) == Some(2.0)
    })
    .await;
    let reload = || async {
        let r = reqwest::Client::new()
            .post(d.url("/-/reload"))
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "{}", r.status());
        r.text().await.unwrap()
    };
    let body = reload().await;
    assert!(
        body.contains("note: file_sd: 2 discovered target(s) not started")
            && body.contains("max_prompt_memory_mib (2 MiB): d2, d4"),
        "{body}"
    );
    std::fs::write(&path, capped(3)).unwrap();
    let body = reload().await;
    assert!(!body.contains("not started"), "{body}");
    d.wait_for(wait, "all four started", |t| {
        refused(t) == Some(0.0) && owned(t) == Some(4.0)
    })
    .await;
    d.stop().await;
}
