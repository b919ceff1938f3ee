//! Targets behind a private CA: `ca_file` makes a sweep of an HTTPS server
//! succeed, a wrong CA fails it with a connect error naming the certificate
//! problem, and `cert_file`/`key_file` pass a server that requires a client
//! certificate. Problems with the files are named at load, by key.

mod support;

use std::time::Duration;

use support::config::{write_config, Yaml};
use support::daemon::Daemon;
use support::exposition::metric;
use support::server::{start_tls, Behavior};
use support::sweep::sweep_one;
use support::tls::Pki;

/// Requests the server sees in one good sweep of [`config`].
const SEEN: usize = 5;

/// One target `t1` at `base_url`, with `more` lines of target settings.
fn config(base_url: &str, more: &str) -> String {
    Yaml {
        levels: "[1]",
        warmup_requests: 0,
        requests_per_level: "2x",
        min_requests_per_level: 4,
        request_timeout: "5s",
        max_completion_tokens: 16,
        prompts: r#"["hello there"]"#,
        rest: &format!(
            // Every request sent, failed or not: these tests count them.
            "targets:\n  - name: t1\n    base_url: {base_url}\n    model: test-model\n    early_stop: false\n{more}"
        ),
        ..Yaml::default()
    }
    .render()
}

fn line(key: &str, path: &std::path::Path) -> String {
    format!("    {key}: {}\n", path.display())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_file_lets_a_sweep_through_and_a_wrong_ca_is_a_named_connect_error() {
    let pki = Pki::new();
    let server = start_tls(Behavior::default(), pki.server_config(false)).await;
    let url = server.https_base_url();

    let r = sweep_one(&config(&url, &line("ca_file", &pki.ca))).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.workloads[0].levels[0].outcomes["ok"], 4);
    // The 4 counted, and 1 uncounted of warm-up (every answer is checked
    // against the output limit: no request of its own does that).
    assert_eq!(server.requests(), SEEN);

    // The other CA, and the built-in roots: neither trusts the server. The
    // warm-up's request says so: a setup error (TLS), no level measured.
    for more in [line("ca_file", &pki.other_ca), String::new()] {
        let r = sweep_one(&config(&url, &more)).await;
        assert!(!r.success, "{more}");
        assert!(r.workloads.is_empty(), "{more}");
        let setup = r.setup_error.as_ref().expect("a setup error");
        assert_eq!(setup.cause.as_str(), "tls", "{more}");
        assert!(
            setup
                .message
                .contains("invalid peer certificate: UnknownIssuer"),
            "{more}: {}",
            setup.message
        );
    }
    assert_eq!(
        server.requests(),
        SEEN,
        "no request got past a failed handshake"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_passes_a_server_that_requires_a_client_certificate() {
    let pki = Pki::new();
    let server = start_tls(Behavior::default(), pki.server_config(true)).await;
    let url = server.https_base_url();

    let ca = line("ca_file", &pki.ca);
    let identity = format!(
        "{}{}",
        line("cert_file", &pki.client_cert),
        line("key_file", &pki.client_key)
    );
    let yaml = config(&url, &format!("{ca}{identity}"));
    let explained = llmprobe::faces::explain::explain(&support::config::load(&yaml));
    let roots = format!(
        "TLS: roots from {}; client certificate {}",
        pki.ca.display(),
        pki.client_cert.display()
    );
    assert!(explained.contains(&roots), "{explained}");
    let r = sweep_one(&yaml).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.workloads[0].levels[0].outcomes["ok"], 4);
    // The 4 counted, and 1 uncounted of warm-up (every answer is checked
    // against the output limit: no request of its own does that).
    assert_eq!(server.requests(), SEEN);

    // Without the client certificate the server refuses every request. In
    // TLS 1.3 the client's side of the handshake is over by then, so the
    // refusal arrives as an alert on the first request; it is still a
    // connection that could not be set up: a connect error, and as every
    // request of the warm-up meets it, a setup error (TLS) that stops the
    // sweep there. Under load a request may be queued on the connection
    // the server is closing and never sent ("connection was not ready"):
    // it counts neither way (4 of 40 runs beside two CPU burners read no
    // setup error before that rule).
    let r = sweep_one(&config(&url, &ca)).await;
    assert!(
        !r.success,
        "no request could connect: {:?} {:?}",
        r.error,
        r.workloads.first().map(|w| w
            .levels
            .iter()
            .map(|l| (&l.outcomes, &l.error_examples))
            .collect::<Vec<_>>())
    );
    let setup = r.setup_error.as_ref().expect("a setup error");
    assert_eq!(setup.cause.as_str(), "tls");
    assert!(
        setup
            .message
            .contains("received fatal alert: CertificateRequired"),
        "{}",
        setup.message
    );
    assert!(r.workloads.is_empty(), "no level measured");
    assert_eq!(server.requests(), SEEN);
}

/// A CA file replaced on disk is read again on reload, and the loop of the
/// target that uses it (its settings otherwise unchanged) restarts with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_picks_up_a_renewed_ca_file() {
    let pki = Pki::new();
    let server = start_tls(Behavior::default(), pki.server_config(false)).await;
    let ca = pki.dir.join("trusted.pem");
    std::fs::copy(&pki.other_ca, &ca).unwrap();
    let path = write_config(&config(&server.https_base_url(), &line("ca_file", &ca)));
    let d = Daemon::start(path).await;
    let count = |t: &str, outcome: &str| {
        metric(t, "llmprobe_requests_total", &[("outcome", outcome)]).unwrap_or(0.0)
    };
    let wait = Duration::from_secs(60);
    let text = d
        .wait_for(wait, "refused handshakes", |t| {
            count(t, "connect_error") > 0.0
        })
        .await;
    assert_eq!(count(&text, "ok"), 0.0);

    std::fs::copy(&pki.ca, &ca).unwrap();
    d.signal_reload().await;
    d.wait_for(wait, "requests through the renewed CA", |t| {
        count(t, "ok") > 0.0
    })
    .await;
    assert!(server.requests() > 0);
    d.stop().await;
}

#[test]
fn problems_with_the_files_name_the_key_and_the_file() {
    let pki = Pki::new();
    let d = pki.dir.display();
    // Two targets and the defaults; the second inherits the defaults' CA.
    let yaml = format!(
        r#"
defaults:
  workload: chat
  ca_file: {d}/server.key
workloads:
  chat: {{ prompts: ["hi"] }}
targets:
  - name: a
    base_url: https://127.0.0.1:1/v1
    model: m
    ca_file: {d}/ca.pem
    cert_file: {d}/client.pem
    key_file: {d}/server.key
  - name: b
    base_url: https://127.0.0.1:1/v1
    model: m
"#
    );
    let path = write_config(&yaml);
    let e = llmprobe::load_config(&path).unwrap_err();
    let shown = path.display();
    assert_eq!(
        e.problems,
        vec![
            format!(
                "{shown}: targets[0] (a).key_file: `{d}/server.key` is not the key of `{d}/client.pem`: \
                 keys may not be consistent: KeyMismatch"
            ),
            format!("{shown}: defaults.ca_file: `{d}/server.key` holds no PEM certificate"),
        ]
    );
    // Plain config does not read the files.
    assert!(llmprobe::config::load(&path).is_ok());
}
