//! A planted API key, given through `api_key_env` and through
//! `api_key_file`, reaches the server in the Authorization header and
//! nowhere else: not `check-config`, not `sweep` output (table or JSON), not
//! logs at trace level, not `/metrics` or the index page, not `Debug` of the
//! loaded configuration, and not error messages, even when the server echoes
//! the key back in a 401 body or in an error event.

mod support;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use support::binary::{self, Running};
use support::config::Yaml;
use support::exposition::metric_sum;
use support::paths::fresh_dir;
use support::process::output_text;
use support::raw::{self, content, response, SSE_HEAD};
use support::wait;

const KEY: &str = "sk-PLANTED-5ecr3t";

/// Unique to this binary: tests in one binary share the environment.
const KEY_VAR: &str = "LLMPROBE_SECRETS_TEST_PLANTED_KEY";

/// The `Authorization` header of a recorded request head.
fn authorization(head: &str) -> Option<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .find(|(k, _)| k.trim().eq_ignore_ascii_case("authorization"))
        .map(|(_, v)| v.trim().to_string())
}

/// Two servers that echo the key back: one rejects with 401 quoting the
/// Authorization header, the other streams an error event quoting it.
async fn echoing_servers() -> (raw::RawServer, raw::RawServer) {
    let rejecting = raw::start(|mut c| async move {
        if let Some(head) = c.read_request().await {
            let auth = authorization(&head).unwrap_or_default();
            if head.starts_with("GET ") && head.contains("/version ") {
                // What a server tells of itself becomes llmprobe_target_info:
                // this one echoes the header, escaped in its JSON and raw in
                // its `server` header.
                let body = format!(r#"{{"version":"{}"}}"#, escaped_u(&auth));
                c.write(response("200 OK", &[("content-type", "application/json"), ("server", &auth)], &body))
                    .await;
                return;
            }
            let body = format!(
                r#"{{"error":{{"message":"Incorrect API key provided: {auth}","type":"invalid_request_error"}}}}"#
            );
            c.write(response(
                "401 Unauthorized",
                &[("content-type", "application/json")],
                &body,
            ))
            .await;
        }
    })
    .await;
    let streaming = raw::start(|mut c| async move {
        if let Some(head) = c.read_request().await {
            let auth = authorization(&head).unwrap_or_default();
            c.write(format!(
                "{SSE_HEAD}{}data: {{\"error\":{{\"message\":\"upstream refused {auth}\"}}}}\n\n",
                content("a")
            ))
            .await;
        }
    })
    .await;
    (rejecting, streaming)
}

/// A config with the key in an environment variable for one target and in
/// a file for the other.
fn planted_config(rejecting: &str, streaming: &str) -> PathBuf {
    let dir = fresh_dir("secrets");
    let key_file = dir.join("planted.key");
    std::fs::write(&key_file, format!("{KEY}\n")).unwrap();
    let targets = format!(
        r#"
targets:
  - name: via-env
    base_url: {rejecting}
    model: m
    api_key_env: {KEY_VAR}
  - name: via-file
    base_url: {streaming}
    model: m
    api_key_file: {}
"#,
        key_file.display()
    );
    let yaml = Yaml {
        max_in_flight_total: 8,
        sweep_timeout: "20s",
        levels: "[1, 2]",
        requests_per_level: "2",
        min_requests_per_level: 1,
        request_timeout: "2s",
        prompts: r#"["hi"]"#,
        rest: &targets,
        ..Yaml::default()
    }
    .render();
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, yaml).unwrap();
    path
}

/// The built binary with the key in its environment and logs at trace level.
fn llmprobe(args: &[&str]) -> Command {
    let mut c = binary::llmprobe();
    c.args(args)
        .env(KEY_VAR, KEY)
        .env(SLASHED_KEY_VAR, SLASHED_KEY)
        .env("RUST_LOG", "trace")
        .stdin(Stdio::null());
    c
}

fn assert_no_key(what: &str, text: &str) {
    for key in [KEY, SLASHED_KEY] {
        assert!(!text.contains(key), "{what} shows the key:\n{text}");
        // A prefix long enough to be the key's, should it be cut short
        // somewhere, as written or in a form anyone can decode.
        for form in [
            key[..10].to_string(),
            escaped_u(&key[..6]),
            escaped_u(&key[..6]).replace('\\', "\\\\"),
            percent(&key[..6]),
            key[..10].replace('/', "\\/"),
        ] {
            assert!(
                !text.contains(&form),
                "{what} shows part of the key ({form}):\n{text}"
            );
        }
    }
}

/// A key with slashes, which JSON may write as `\/`.
const SLASHED_KEY: &str = "sk/PLANTED/two-9z8y7x";

/// Unique to this binary, as [`KEY_VAR`].
const SLASHED_KEY_VAR: &str = "LLMPROBE_SECRETS_TEST_SLASHED_KEY";

/// `s` with every character as a JSON `\uXXXX` escape.
fn escaped_u(s: &str) -> String {
    s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
}

/// `s` with every byte percent-encoded.
fn percent(s: &str) -> String {
    s.bytes().map(|b| format!("%{b:02X}")).collect()
}

/// How one target's server echoes the key back, and what the message shows.
const ECHO_FORMS: &[(&str, &str)] = &[
    // 272 spaces: the old 300-byte cut fell inside the key.
    ("spaces", "HTTP 401: {\"error\":\" Bearer [redacted]\"}"),
    // 90 three-byte characters, the same.
    ("cjk", "Bearer [redacted]"),
    ("u-body", "HTTP 401: {\"error\":\"Bearer [redacted]\"}"),
    (
        "u-event",
        "error event in stream: refused Bearer [redacted]",
    ),
    ("slash-body", "HTTP 401: {\"error\":\"Bearer [redacted]\"}"),
    (
        "slash-event",
        "error event in stream: refused Bearer [redacted]",
    ),
    (
        "percent",
        "HTTP 401: https://auth.example/?token=[redacted]&retry=1",
    ),
];

/// One server answering each form under its own path (`/FORM/v1/...`).
async fn echo_forms_server() -> raw::RawServer {
    raw::start(|mut c| async move {
        let Some(head) = c.read_request().await else {
            return;
        };
        let auth = authorization(&head).unwrap_or_default();
        let key = auth.strip_prefix("Bearer ").unwrap_or_default().to_string();
        let form = head.split('/').nth(1).unwrap_or_default().to_string();
        if head.starts_with("GET ") {
            c.write(response("404 Not Found", &[], "")).await;
            return;
        }
        let json = |body: String| {
            response(
                "401 Unauthorized",
                &[("content-type", "application/json")],
                &body,
            )
        };
        let event = |message: String| {
            format!(
                "{SSE_HEAD}{}data: {{\"error\":{{\"message\":\"refused {message}\"}}}}\n\n",
                content("a")
            )
        };
        let reply = match form.as_str() {
            "spaces" => json(format!("{{\"error\":\"{}{auth}\"}}", " ".repeat(272))),
            "cjk" => json(format!("{{\"error\":\"{} {auth}\"}}", "鍵".repeat(90))),
            "u-body" => json(format!("{{\"error\":\"Bearer {}\"}}", escaped_u(&key))),
            "u-event" => event(format!("Bearer {}", escaped_u(&key))),
            "slash-body" => json(format!("{{\"error\":\"{}\"}}", auth.replace('/', "\\/"))),
            "slash-event" => event(auth.replace('/', "\\/")),
            "percent" => json(format!(
                "https://auth.example/?token={}&retry=1",
                percent(&key)
            )),
            _ => json(String::new()),
        };
        c.write(reply).await;
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_echo_form_shows_the_key() {
    let server = echo_forms_server().await;
    let mut targets = String::from("targets:\n");
    for (form, _) in ECHO_FORMS {
        let var = if form.starts_with("slash") {
            SLASHED_KEY_VAR
        } else {
            KEY_VAR
        };
        targets.push_str(&format!(
            "  - name: {form}\n    base_url: {}/{form}/v1\n    model: m\n    api_key_env: {var}\n",
            server.base_url().trim_end_matches("/v1")
        ));
    }
    let yaml = Yaml {
        max_in_flight_total: 8,
        sweep_timeout: "20s",
        levels: "[1]",
        requests_per_level: "1",
        min_requests_per_level: 1,
        warmup_requests: 0,
        request_timeout: "2s",
        prompts: r#"["hi"]"#,
        rest: &targets,
        ..Yaml::default()
    }
    .render();
    let path = fresh_dir("secrets-forms").join("llmprobe.yaml");
    std::fs::write(&path, yaml).unwrap();
    let out = binary::output({
        let mut c = llmprobe(&[
            "sweep",
            "--config",
            path.to_str().unwrap(),
            "--format",
            "json",
        ]);
        c.env(SLASHED_KEY_VAR, SLASHED_KEY);
        c
    })
    .await;
    let all = output_text(&out);
    assert_no_key("sweep --format json", &all);
    let json: serde_json::Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}\n{all}"));
    let text = json.to_string();
    for (form, shown) in ECHO_FORMS {
        let shown = serde_json::to_string(shown).unwrap();
        let shown = shown.trim_matches('"');
        assert!(text.contains(shown), "{form}: `{shown}` not in\n{all}");
    }
    assert!(server.requests().len() >= ECHO_FORMS.len(), "{all}");
}

/// Every request carried the key: without it the test could not fail.
fn assert_key_was_sent(server: &raw::RawServer) {
    let mut heads = server.requests();
    // The server's metrics are read without the key (they may live on
    // another host than the API).
    heads.retain(|h| !h.starts_with("GET /metrics "));
    assert!(!heads.is_empty(), "the server got no request");
    for h in &heads {
        assert_eq!(authorization(h).as_deref(), Some(&*format!("Bearer {KEY}")));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_config_sweep_output_logs_and_debug_never_show_the_key() {
    let (rejecting, streaming) = echoing_servers().await;
    let path = planted_config(&rejecting.base_url(), &streaming.base_url());
    let config = path.to_str().unwrap().to_string();

    let check = binary::output(llmprobe(&["check-config", "--config", &config])).await;
    assert!(check.status.success(), "{}", output_text(&check));
    assert!(output_text(&check).contains("key: set"));
    assert_no_key("check-config", &output_text(&check));

    for format in ["json", "table"] {
        let out = binary::output(llmprobe(&[
            "sweep", "--config", &config, "--format", format,
        ]))
        .await;
        let all = output_text(&out);
        assert_no_key(&format!("sweep --format {format}"), &all);
        // The echoes were there, and were redacted rather than dropped.
        assert!(all.contains("HTTP 401"), "{all}");
        assert!(
            all.contains("Incorrect API key provided: Bearer [redacted]"),
            "{all}"
        );
        assert!(all.contains("upstream refused Bearer [redacted]"), "{all}");
    }
    assert_key_was_sent(&rejecting);
    assert_key_was_sent(&streaming);

    // In-process: the loaded configuration holds the key, and hides it.
    std::env::set_var(KEY_VAR, KEY);
    let loaded = llmprobe::config::load(&path).unwrap_or_else(|e| panic!("{e}"));
    std::env::remove_var(KEY_VAR);
    for t in &loaded.targets {
        assert_eq!(t.api_key.as_ref().map(|k| k.expose()), Some(KEY));
    }
    assert_no_key("Debug of the config", &format!("{loaded:?} {loaded:#?}"));
    assert_no_key("explain", &llmprobe::faces::explain::explain(&loaded));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_never_shows_the_key() {
    let (rejecting, streaming) = echoing_servers().await;
    let path = planted_config(&rejecting.base_url(), &streaming.base_url());
    let daemon = Running::start(&path, &[(KEY_VAR, KEY), ("RUST_LOG", "trace")]);

    let get = |p: &'static str| async { daemon.get(p).await.unwrap_or_default() };
    let metrics = wait::poll(
        "two sweeps of each target",
        Duration::from_secs(60),
        || async {
            daemon.process.assert_running();
            let m = get("/metrics").await;
            let swept = |t: &str| {
                // Full and warm sweeps alike; the rejecting server's stop
                // on a setup error (a refused key), the streaming one's
                // complete.
                metric_sum(&m, "llmprobe_sweeps_total", &[("target", t)]) >= 2.0
            };
            if swept("via-env") && swept("via-file") {
                Ok(m)
            } else {
                Err(format!("{m}\n{}", daemon.process.stderr()))
            }
        },
    )
    .await;
    let pages = [
        metrics,
        get("/").await,
        get("/healthz").await,
        get("/readyz").await,
    ];
    // SIGTERM, so that the shutdown path logs too.
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");

    for (i, page) in pages.iter().enumerate() {
        assert_no_key(&format!("page {i}"), page);
    }
    let stderr = daemon.process.stderr();
    let stdout = daemon.process.stdout();
    assert!(stderr.contains("sweep finished"), "{stderr}");
    assert!(
        stderr.contains("Bearer [redacted]"),
        "the sweep line says what went wrong, without the key:\n{stderr}"
    );
    assert_no_key("daemon logs at trace level", &format!("{stdout}\n{stderr}"));
    assert_key_was_sent(&rejecting);
    assert_key_was_sent(&streaming);
}
