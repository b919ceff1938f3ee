//! The built binary's one-shot commands on the shipped configuration.

mod support;

use support::paths::ScratchDir;
use support::process::assert_success;

fn llmprobe(args: &[&str]) -> std::process::Output {
    support::binary::llmprobe().args(args).output().unwrap()
}

#[test]
fn sweep_of_the_shipped_config_shows_the_simulators_knee() {
    let out = llmprobe(&["sweep", "--format", "json"]);
    assert_success("llmprobe sweep", &out);
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(doc["format_version"], 1);
    let t = &doc["targets"][0];
    assert_eq!(t["target"], "simulated");
    assert_eq!(t["success"], true);
    let w = &t["workloads"][0];
    // The tiny profile sheds above 8 in flight: 8 is the knee, 16 breaks the SLO.
    assert_eq!(w["capacity"]["knee_concurrency"], 8);
    assert_eq!(w["capacity"]["recommended_max_in_flight"], 7);
    let levels = w["levels"].as_array().unwrap();
    assert_eq!(levels.len(), 5);
    assert_eq!(levels[4]["concurrency"], 16);
    assert!(levels[4]["shed_ratio"].as_f64().unwrap() > 0.05);
    assert_eq!(levels[0]["ttft_seconds"]["count"], 8);
    assert_eq!(levels[0]["token_source"], "usage");
    // Not a terminal: no progress line in the output.
    assert!(!String::from_utf8_lossy(&out.stderr).contains("concurrency 1,"));
}

#[test]
fn table_output_names_the_knee() {
    let out = llmprobe(&["sweep", "--target", "simulated"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("knee: 8   recommended max_in_flight: 7"),
        "{text}"
    );
    assert!(text.contains("ttft p50"), "{text}");
}

#[test]
fn unknown_target_and_check_config() {
    let out = llmprobe(&["sweep", "--target", "nope"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no target named `nope`"));

    let out = llmprobe(&["check-config"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("configuration config/llmprobe.yaml is valid"),
        "{text}"
    );
    assert!(
        text.contains("target simulated: built-in simulated engine"),
        "{text}"
    );

    let dir = ScratchDir::new("cli");
    let bad = dir.join("bad.yaml");
    std::fs::write(
        &bad,
        "targets:\n  - name: x\n    base_url: http://127.0.0.1:1/v1\n",
    )
    .unwrap();
    let out = llmprobe(&["check-config", "--config", bad.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("bad.yaml: targets[0] (x).model: missing"),
        "{err}"
    );
    assert!(
        err.contains("bad.yaml: targets[0] (x).workloads: missing"),
        "{err}"
    );
}

#[test]
fn the_commented_example_config_is_valid() {
    let out = support::binary::llmprobe()
        .args(["check-config", "--config", "config/example.yaml"])
        .env("WORKER_API_KEY", "example-key")
        .output()
        .unwrap();
    assert_success("llmprobe check-config --config config/example.yaml", &out);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("workload long-documents: 2 prompts"),
        "{text}"
    );
    assert!(text.contains("workload tier-8k: 4 prompts"), "{text}");
    assert!(!text.contains("example-key"), "the key must not be printed");
}
