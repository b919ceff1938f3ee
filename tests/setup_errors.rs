//! Setup mistakes are setup errors, not a capacity of 0 (issue 31, part 1):
//! servers that answer every request as a wrong key, a model not served or
//! a path without `/v1` would answer. `llmprobe sweep` exits 3 with a line
//! naming what is wrong; the daemon exports a failed sweep with its cause,
//! and no knee.

mod support;

use std::time::Duration;

use support::binary::{llmprobe, output};
use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::metric;
use support::raw::{self, response, RawServer};

/// OpenAI's answer to a wrong key.
const INVALID_KEY: &str = r#"{"error":{"message":"Incorrect API key provided: wr***ey. You can find your API key at https://platform.openai.com/account/api-keys.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;

/// vLLM's answer to a model it does not serve.
const NO_MODEL: &str = r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#;

/// vLLM's (FastAPI's) answer on a path it has no route for.
const NO_ROUTE: &str = r#"{"detail":"Not Found"}"#;

/// A server answering every request with `status` and a JSON `body`.
async fn answering(status: &str, body: &str) -> RawServer {
    raw::fixed(response(
        status,
        &[("content-type", "application/json")],
        body,
    ))
    .await
}

/// A configuration of one target `w` (model `x`) at `base_url`: a warm-up
/// request, then levels 1 and 2.
fn config(base_url: &str) -> std::path::PathBuf {
    let key = support::paths::fresh_dir("key").join("key");
    std::fs::write(&key, KEY).unwrap();
    write_config(
        &Yaml {
            levels: "[1, 2]",
            rest: &format!(
                "targets:\n  - name: w\n    base_url: {base_url}\n    model: x\n    api_key_file: {}",
                key.display()
            ),
            ..Yaml::default()
        }
        .render(),
    )
}

/// The key the targets send: never shown.
const KEY: &str = "sk-wrong-but-long-key";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_exits_3_with_a_line_naming_what_is_wrong() {
    // (case, status, body, base_url without /v1, words the line holds)
    let cases: [(&str, &str, &str, bool, &[&str]); 3] = [
        (
            "key",
            "401 Unauthorized",
            INVALID_KEY,
            false,
            &[
                "setup error (key)",
                "refused the API key",
                "`api_key_env` / `api_key_file`",
                "Incorrect API key",
            ],
        ),
        (
            "model",
            "404 Not Found",
            NO_MODEL,
            false,
            &[
                "setup error (model)",
                "does not serve the model `x`",
                "set `model:`",
            ],
        ),
        (
            "url",
            "404 Not Found",
            NO_ROUTE,
            true,
            &[
                "setup error (url)",
                "/chat/completions",
                "is `/v1` missing from `base_url`?",
            ],
        ),
    ];
    for (case, status, body, bare, words) in cases {
        let server = answering(status, body).await;
        let base_url = if bare {
            format!("http://{}", server.addr)
        } else {
            server.base_url()
        };
        let mut command = llmprobe();
        command.arg("--config").arg(config(&base_url)).arg("sweep");
        let out = output(command).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(3), "{case}: {stderr}");
        setup_line(case, &stderr, words);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            !stderr.contains(KEY) && !stdout.contains(KEY),
            "{case}: the key shown"
        );
        assert!(!stdout.contains("knee: 0"), "{case}: {stdout}");
        // The warm-up's one request said it all: no level was climbed.
        assert_eq!(
            server.chat_requests().len(),
            1,
            "{case}: {:?}",
            server.requests()
        );
    }
}

/// The line of `stderr` about target `w`'s setup error, holding every word.
fn setup_line(case: &str, stderr: &str, words: &[&str]) {
    let line = stderr
        .lines()
        .find(|l| l.starts_with("w: setup error"))
        .unwrap_or_else(|| panic!("{case}: no setup error line in {stderr}"));
    for word in words {
        assert!(line.contains(word), "{case}: {word:?} not in {line}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_and_dns_failures_are_setup_errors_and_a_refused_connection_is_not() {
    // TLS spoken to a plain HTTP port: it answers in plain text at once.
    let plain = raw::start(|mut c| async move {
        c.write(response("400 Bad Request", &[], "plain HTTP here"))
            .await;
    })
    .await;
    let cases: [(&str, String, i32, &[&str]); 3] = [
        (
            "tls",
            format!("https://{}/v1", plain.addr),
            3,
            &[
                "setup error (tls)",
                "the TLS handshake failed",
                "the connection failed:",
            ],
        ),
        (
            "dns",
            "http://no-such-host.invalid/v1".to_string(),
            3,
            &["setup error (dns)", "does not resolve"],
        ),
        // Nothing listening: the server is down, not misconfigured.
        ("refused", support::ports::refusing_base_url(), 2, &[]),
    ];
    for (case, base_url, code, words) in cases {
        let mut command = llmprobe();
        command.arg("--config").arg(config(&base_url)).arg("sweep");
        let out = output(command).await;
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{case}: {stderr}");
        if words.is_empty() {
            assert!(!stderr.contains("setup error"), "{case}: {stderr}");
        } else {
            setup_line(case, &stderr, words);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_warm_up_the_first_level_decides() {
    let server = answering("401 Unauthorized", INVALID_KEY).await;
    let path = write_config(
        &Yaml {
            warmup_requests: 0,
            levels: "[1, 2]",
            rest: &format!(
                "targets:\n  - name: w\n    base_url: {}\n    model: x",
                server.base_url()
            ),
            ..Yaml::default()
        }
        .render(),
    );
    let mut command = llmprobe();
    command
        .arg("--config")
        .arg(path)
        .args(["sweep", "--format", "json"]);
    let out = output(command).await;
    assert_eq!(out.status.code(), Some(3));
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let target = &doc["targets"][0];
    assert_eq!(target["success"], false);
    assert_eq!(target["setup_error"]["cause"], "key");
    assert_eq!(target["workloads"], serde_json::json!([]));
    // Level 1's (its connection's, and up to its four counted), and no
    // level 2's (two more connections, and more counted).
    let sent = server.chat_requests().len();
    assert!((2..=5).contains(&sent), "{sent}: {:?}", server.requests());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_errors_stay_results() {
    let server = answering("500 Internal Server Error", r#"{"error":"boom"}"#).await;
    let mut command = llmprobe();
    command
        .arg("--config")
        .arg(config(&server.base_url()))
        .args(["sweep", "--format", "json"]);
    let out = output(command).await;
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let doc: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let target = &doc["targets"][0];
    assert_eq!(target["success"], true);
    assert!(target.get("setup_error").is_none(), "{target}");
    assert_eq!(target["workloads"][0]["capacity"]["knee_concurrency"], 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_exports_a_failed_sweep_with_its_cause_and_no_knee() {
    let server = answering("401 Unauthorized", INVALID_KEY).await;
    let daemon = Daemon::start(config(&server.base_url())).await;
    let w = [("target", "w")];
    let text = daemon
        .wait_for(Duration::from_secs(20), "a setup error", |t| {
            metric(
                t,
                "llmprobe_target_setup_error",
                &[("target", "w"), ("cause", "key")],
            ) == Some(1.0)
        })
        .await;
    assert_eq!(metric(&text, "llmprobe_sweep_success", &w), Some(0.0));
    let setup_errors = [("target", "w"), ("result", "setup_error"), ("kind", "full")];
    assert!(
        metric(&text, "llmprobe_sweeps_total", &setup_errors) >= Some(1.0),
        "{text}"
    );
    let ok = [("target", "w"), ("result", "ok"), ("kind", "full")];
    assert_eq!(metric(&text, "llmprobe_sweeps_total", &ok), Some(0.0));
    for family in [
        "llmprobe_capacity_knee_concurrency",
        "llmprobe_recommended_max_in_flight",
        "llmprobe_capacity_limit_info",
    ] {
        assert!(!text.contains(family), "{family} exported:\n{text}");
    }
    let index = daemon.get("/").await;
    assert!(index.contains("setup error: key"), "{index}");
    let page = daemon.get("/targets/w").await;
    assert!(page.contains("badge failed\">setup error: key"), "{page}");
    assert!(page.contains("refused the API key"), "{page}");
    daemon.stop().await;
}

#[test]
fn a_setup_error_leaves_the_loops_memory_as_it_was() {
    use llmprobe::schedule::memory::Memory;
    use llmprobe::stats::report::SweepReport;
    use llmprobe::stats::setup_error::{Cause, SetupError};
    let target = support::config::load(
        &Yaml {
            rest: "targets:\n  - name: w\n    base_url: http://127.0.0.1:9/v1\n    model: x",
            ..Yaml::default()
        }
        .render(),
    )
    .targets[0]
        .clone();
    let mut memory = Memory::new(&target);
    let setup_error = SetupError {
        cause: Cause::Key,
        message: "setup error (key)".to_string(),
    };
    memory.record(std::sync::Arc::new(SweepReport {
        target: "w".to_string(),
        kind: Default::default(),
        model: "x".to_string(),
        success: false,
        error: Some(setup_error.message.clone()),
        setup_error: Some(setup_error),
        duration_seconds: 0.1,
        finished_at_unix_seconds: 1_700_000_000.0,
        setup: Default::default(),
        output_limit: Default::default(),
        server_metrics: Default::default(),
        workloads: Vec::new(),
    }));
    // Its output-limit field and server identity would be the wrong key's.
    assert!(memory.saved().latest.is_none());
}

/// `llmprobe check-config --online --config PATH`: exit code and stdout.
async fn check_online(path: &std::path::Path) -> (Option<i32>, String) {
    let mut command = llmprobe();
    command
        .args(["check-config", "--online", "--config"])
        .arg(path);
    let out = output(command).await;
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// The line of `w` in the online part of `stdout`.
fn online_line(stdout: &str) -> &str {
    let online = stdout
        .split("\nonline:\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{stdout}"));
    online
        .lines()
        .find(|l| l.starts_with("w: "))
        .unwrap_or_else(|| panic!("{stdout}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_online_finds_the_built_in_engine_ready() {
    let path = write_config(
        &Yaml {
            levels: "[1, 2]",
            rest: "targets:\n  - name: w\n    simulator: { profile: tiny }",
            ..Yaml::default()
        }
        .render(),
    );
    let (code, stdout) = check_online(&path).await;
    assert_eq!(code, Some(0), "{stdout}");
    let line = online_line(&stdout);
    for word in [
        "w: ok: model and path accepted (no key sent)",
        "listed",
        "engine metrics: vllm at http://127.0.0.1:",
        // Warm-up 1 (8 tokens); levels 1 and 2: 1 + 4 and 2 + 4 (one token
        // each to open connections, 8 for each counted one).
        "one sweep sends up to 12 requests asking up to 75 output tokens",
        "cut at 1m",
        "no idle gate",
    ] {
        assert!(line.contains(word), "{word:?} not in {line}");
    }
    // Offline, the default, asks no server.
    let mut command = llmprobe();
    command.args(["check-config", "--config"]).arg(&path);
    let out = output(command).await;
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stdout).contains("online:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_online_names_each_setup_error_and_exits_3() {
    let cases: [(&str, &str, &str, bool); 3] = [
        ("setup error (key)", "401 Unauthorized", INVALID_KEY, false),
        ("setup error (model)", "404 Not Found", NO_MODEL, false),
        ("setup error (url)", "404 Not Found", NO_ROUTE, true),
    ];
    for (want, status, body, bare) in cases {
        let server = answering(status, body).await;
        let base_url = if bare {
            format!("http://{}", server.addr)
        } else {
            server.base_url()
        };
        let (code, stdout) = check_online(&config(&base_url)).await;
        assert_eq!(code, Some(3), "{want}: {stdout}");
        let line = online_line(&stdout);
        assert!(line.starts_with(&format!("w: {want}")), "{line}");
        assert!(!stdout.contains(KEY), "{want}: the key shown");
        // One request of one token, nothing more.
        assert_eq!(server.chat_requests().len(), 1, "{want}");
    }
    let (code, stdout) = check_online(&config(&support::ports::refusing_base_url())).await;
    assert_eq!(code, Some(3), "{stdout}");
    assert!(online_line(&stdout).contains("not ready: the one request sent failed (connect_error"));
}
