//! Proxies only when asked: proxy variables in the environment pointing at
//! a dead port leave a target without `proxy: environment`, a loopback
//! target with it and the built-in engine measured; `check-config` and
//! `sweep` say which proxy each target uses.

mod support;

use support::binary;
use support::config::write_config;
use support::ports::free_port;
use support::sim::{profile, SimServer};

/// Two loopback targets (one asking for the environment's proxies, one
/// not) and the built-in engine asking for them.
fn config(sim_url: &str) -> std::path::PathBuf {
    write_config(&format!(
        r#"
defaults: {{ workload: w, levels: [1], min_requests_per_level: 2, warmup_requests: 1 }}
workloads:
  w: {{ max_completion_tokens: 4, prompts: ["hi"] }}
targets:
  - name: loopback-asks
    base_url: {sim_url}/v1
    model: m
    proxy: environment
  - name: loopback-default
    base_url: {sim_url}/v1
    model: m
  - name: built-in
    simulator: {{ profile: stub }}
    proxy: environment
"#
    ))
}

/// `llmprobe ARGS` with every proxy variable set to a port nothing listens on.
fn with_dead_proxy(args: &[&str]) -> std::process::Command {
    let dead = format!("http://127.0.0.1:{}", free_port());
    let mut c = binary::llmprobe();
    c.args(args);
    for var in [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
    ] {
        c.env(var, &dead);
    }
    c.env_remove("NO_PROXY").env_remove("no_proxy");
    c
}

#[tokio::test(flavor = "multi_thread")]
async fn dead_proxy_variables_leave_loopback_and_the_built_in_engine_measured() {
    let sim = SimServer::start(profile("stub")).await;
    let path = config(&sim.url());
    let path = path.to_str().unwrap();

    let out = binary::output(with_dead_proxy(&[
        "sweep", "--config", path, "--format", "json",
    ]))
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let targets = doc["targets"].as_array().unwrap();
    assert_eq!(targets.len(), 3);
    for t in targets {
        let level = &t["workloads"][0]["levels"][0];
        assert_eq!(t["success"], true, "{}: {t}", t["target"]);
        assert_eq!(
            level["outcomes"]["ok"], level["requests"],
            "{}: {level}",
            t["target"]
        );
        assert_eq!(level["outcomes"]["proxy_error"], 0, "{}", t["target"]);
    }
    for line in [
        "loopback-asks: proxy none (NO_PROXY or a loopback host)",
        "loopback-default: proxy none (proxy variables in the environment ignored: `proxy: off`)",
        "built-in: proxy none (the built-in engine is never proxied)",
    ] {
        assert!(stderr.contains(line), "{line}\n{stderr}");
    }

    let out = binary::output(with_dead_proxy(&["check-config", "--config", path])).await;
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    assert!(
        text.contains("  proxy: none (NO_PROXY or a loopback host)"),
        "{text}"
    );
    sim.stop().await;
}
