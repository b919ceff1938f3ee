//! Exposure: HTTPS and basic auth on /metrics, open probes, reload disabled.

mod support;

use std::process::Command;

use support::config::write_config;
use support::daemon::Daemon;

fn self_signed(dir: &std::path::Path) {
    let status = Command::new("openssl")
        .args([
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
        ])
        .args([
            "-addext",
            "subjectAltName=DNS:localhost,IP:127.0.0.1",
            "-addext",
            "basicConstraints=critical,CA:FALSE",
        ])
        .arg("-keyout")
        .arg(dir.join("key.pem"))
        .arg("-out")
        .arg(dir.join("cert.pem"))
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is needed to make a test certificate (Debian package `openssl`)");
    assert!(status.success());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_with_basic_auth_and_reload_disabled() {
    let hash = bcrypt::hash("scrape-pass", 4).unwrap();
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
web:
  enable_reload: false
  basic_auth_users: {{ prometheus: "{hash}" }}
  tls_cert_file: cert.pem
  tls_key_file: key.pem
defaults: {{ workload: w, levels: [1], min_requests_per_level: 2 }}
workloads: {{ w: {{ max_completion_tokens: 4, prompts: ["hi"] }} }}
targets:
  - name: sim
    simulator: {{ profile: tiny }}
"#
    );
    let path = write_config(&yaml);
    self_signed(path.parent().unwrap());
    let d = Daemon::start(path).await;
    let cert = reqwest::Certificate::from_pem(
        &std::fs::read(d.path.parent().unwrap().join("cert.pem")).unwrap(),
    )
    .unwrap();
    let client = reqwest::Client::builder()
        .add_root_certificate(cert)
        .build()
        .unwrap();
    let base = format!("https://127.0.0.1:{}", d.addr.port());

    let r = client.get(format!("{base}/metrics")).send().await.unwrap();
    assert_eq!(r.status(), 401);
    assert_eq!(r.headers()["www-authenticate"], "Basic realm=\"llmprobe\"");
    let r = client
        .get(format!("{base}/metrics"))
        .basic_auth("prometheus", Some("wrong"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 401);
    let r = client
        .get(format!("{base}/metrics"))
        .basic_auth("prometheus", Some("scrape-pass"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("llmprobe_build_info"));

    assert_eq!(
        client
            .get(format!("{base}/healthz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    assert_eq!(
        client
            .get(format!("{base}/readyz"))
            .send()
            .await
            .unwrap()
            .status(),
        200
    );
    let r = client
        .post(format!("{base}/-/reload"))
        .basic_auth("prometheus", Some("scrape-pass"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 403, "reload is disabled");

    // Plain HTTP gets no answer from the TLS port.
    assert!(
        reqwest::get(format!("http://127.0.0.1:{}/healthz", d.addr.port()))
            .await
            .is_err()
    );
    d.stop().await;
}

#[test]
fn bad_web_settings_are_named() {
    let yaml = r#"
web:
  basic_auth_users: { prometheus: "plaintext" }
  tls_cert_file: /nonexistent/cert.pem
"#;
    let path = write_config(yaml);
    let e = llmprobe::config::load(&path).unwrap_err().to_string();
    assert!(
        e.contains("web.basic_auth_users: password of `prometheus` must be a bcrypt hash"),
        "{e}"
    );
    assert!(
        e.contains("web: set both `tls_cert_file` and `tls_key_file`"),
        "{e}"
    );
}
