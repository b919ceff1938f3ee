//! Checks of the files operators install next to the binary, with the real
//! tools that will read them:
//!
//! - `prometheus/alerts.yml`, `prometheus/alerts_test.yml`,
//!   `prometheus/scrape.yml`: `promtool check rules`, `promtool test rules`,
//!   `promtool check config` (Debian package `prometheus`; the tests fail when
//!   promtool is missing, set `PROMTOOL` to use another binary); every alert's
//!   `runbook_url` has its section in `docs/runbook.md`;
//! - `prometheus/alertmanager.example.yml`: `amtool check-config`, and a real
//!   Alertmanager (Debian package `prometheus-alertmanager`; set `AMTOOL`,
//!   `ALERTMANAGER` for other binaries) inhibiting exactly what the file says;
//! - `systemd/llmprobe.service` and its optional drop-in
//!   `systemd/credentials.conf.example`: `systemd-analyze verify` and
//!   `systemd-analyze security --offline=true` (Debian package `systemd`;
//!   these are skipped, with a printed reason, only where systemd-analyze is
//!   absent); the unit's `ExecReload=` commands run as systemd runs them,
//!   against the real daemon, accepting a valid change and failing on a
//!   rejected one;
//! - `grafana/dashboards/*.json`: structure an importable dashboard needs
//!   (datasource variable, template variables, only known metric names).
//!   The type check against Grafana's schema is `grafana/schema-check/run.sh`.

mod support;

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use support::alertmanager::{self, Alertmanager};
use support::grafana::panels;
use support::paths::{read, repo, ScratchDir};
use support::process::assert_success;
use support::promql::llmprobe_metrics;
use support::promtool;
use support::wait;

/// Runs systemd-analyze in the repository root.
fn systemd_analyze_run<I, S>(tool: &str, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(tool)
        .args(args)
        .current_dir(repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{tool}` ({e})"))
}

// ---------------------------------------------------------------------------
// Prometheus

#[test]
fn promtool_check_rules() {
    let out = promtool::run([
        "check",
        "rules",
        "prometheus/alerts.yml",
        "prometheus/gateway_max_in_flight.example.yml",
    ]);
    assert_success("promtool check rules", &out);
    // The rules read the limits llmprobe exports, not numbers copied in.
    let rules = read("prometheus/alerts.yml");
    for metric in [
        "llmprobe_target_slo_p95_latency_seconds",
        "llmprobe_target_slo_max_shed_ratio",
        "llmprobe_target_slo_max_error_ratio",
        "llmprobe_schedule_interval_seconds",
    ] {
        assert!(rules.contains(metric), "alerts.yml does not use {metric}");
    }
}

#[test]
fn promtool_test_rules() {
    let out = promtool::run(["test", "rules", "prometheus/alerts_test.yml"]);
    assert_success("promtool test rules prometheus/alerts_test.yml", &out);
}

#[test]
fn promtool_check_config() {
    // scrape.yml is a complete configuration (global, rule_files with
    // alerts.yml next to it, the scrape job); check it as Prometheus would
    // load it, from a copy laid out like /etc/prometheus.
    let dir = ScratchDir::new("operator-promconfig");
    std::fs::copy(
        repo().join("prometheus/scrape.yml"),
        dir.path().join("prometheus.yml"),
    )
    .unwrap();
    std::fs::copy(
        repo().join("prometheus/alerts.yml"),
        dir.path().join("alerts.yml"),
    )
    .unwrap();
    let config = dir.path().join("prometheus.yml");
    let out = promtool::run([
        OsStr::new("check"),
        OsStr::new("config"),
        config.as_os_str(),
    ]);
    assert_success("promtool check config (scrape.yml)", &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 rule files found") && stdout.contains("rules found"),
        "promtool check config did not load the rule file:\n{stdout}"
    );

    let scrape = read("prometheus/scrape.yml");
    for needle in [
        "job_name: llmprobe",
        "\"127.0.0.1:9775\"",
        "scrape_interval: 30s",
        "rule_files:",
    ] {
        assert!(scrape.contains(needle), "scrape.yml lacks `{needle}`");
    }
}

/// Alert names defined in alerts.yml (`- alert: Name` lines).
fn alert_names() -> Vec<String> {
    read("prometheus/alerts.yml")
        .lines()
        .filter_map(|l| l.trim().strip_prefix("- alert:"))
        .map(|n| n.trim().to_string())
        .collect()
}

#[test]
fn every_alert_has_firing_and_silent_unit_tests() {
    let alerts = alert_names();
    assert!(
        alerts.len() >= 8,
        "expected the full llmprobe alert set, found {alerts:?}"
    );

    // Walk alerts_test.yml: each `alertname: X` is followed by its
    // `exp_alerts:` which is either `[]` (must stay silent) or a list.
    let tests = read("prometheus/alerts_test.yml");
    let mut fires = BTreeSet::new();
    let mut silent = BTreeSet::new();
    let mut current: Option<String> = None;
    for line in tests.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("alertname:") {
            current = Some(name.trim().to_string());
        } else if let Some(rest) = t.strip_prefix("exp_alerts:") {
            let name = current.take().expect("exp_alerts without alertname");
            if rest.trim() == "[]" {
                silent.insert(name);
            } else {
                fires.insert(name);
            }
        }
    }
    for a in &alerts {
        assert!(
            fires.contains(a),
            "alerts_test.yml has no case where {a} fires"
        );
        assert!(
            silent.contains(a),
            "alerts_test.yml has no case where {a} stays silent"
        );
    }
    for a in fires.iter().chain(silent.iter()) {
        assert!(
            alerts.contains(a),
            "alerts_test.yml tests unknown alert {a}"
        );
    }
}

#[test]
fn every_alert_has_for_severity_summary_description() {
    let text = read("prometheus/alerts.yml");
    let blocks: Vec<&str> = text.split("- alert:").skip(1).collect();
    assert_eq!(blocks.len(), alert_names().len());
    for block in blocks {
        let name = block.lines().next().unwrap_or("").trim();
        for key in ["expr:", "for:", "severity:", "summary:", "description:"] {
            assert!(block.contains(key), "alert {name} lacks `{key}`");
        }
        assert!(
            block.contains("severity: critical") || block.contains("severity: warning"),
            "alert {name}: severity must be critical or warning"
        );
    }
}

/// Where every `runbook_url` points by default; the anchor is the alert name
/// in lower case (GitHub's anchor of a `## AlertName` heading).
const DOCS_BASE: &str = "https://github.com/llmprobe/llmprobe/blob/main/docs";

/// Every `runbook_url` as written: the base from `llmprobe:docs_url:info`
/// when a rule records it, else [`DOCS_BASE`] (docs/operating.md).
fn runbook_url(anchor: &str) -> String {
    format!(
        "'{{{{ with query \"llmprobe:docs_url:info\" }}}}{{{{ . | first | label \"url\" }}}}\
         {{{{ else }}}}{DOCS_BASE}{{{{ end }}}}/runbook.md#{anchor}'"
    )
}

#[test]
fn every_alert_has_a_runbook_section() {
    let text = read("prometheus/alerts.yml");
    let runbook = read("docs/runbook.md");
    let sections: Vec<&str> = runbook
        .lines()
        .filter_map(|l| l.strip_prefix("## "))
        .map(str::trim)
        .collect();
    let alerts = alert_names();
    for block in text.split("- alert:").skip(1) {
        let name = block.lines().next().unwrap_or("").trim();
        let url = block
            .lines()
            .find_map(|l| l.trim().strip_prefix("runbook_url:"))
            .unwrap_or_else(|| panic!("alert {name} has no runbook_url"))
            .trim();
        assert_eq!(url, runbook_url(&name.to_lowercase()), "alert {name}");
        assert!(
            sections.contains(&name),
            "docs/runbook.md has no `## {name}` section"
        );
    }
    for s in &sections {
        assert!(
            alerts.iter().any(|a| a == s),
            "docs/runbook.md has a section for {s}, which is not an alert"
        );
    }
}

// ---------------------------------------------------------------------------
// Alertmanager

#[test]
fn alertmanager_example_passes_amtool() {
    let out = alertmanager::amtool(["check-config", "prometheus/alertmanager.example.yml"]);
    assert_success("amtool check-config", &out);
    // Every alert name the inhibit rules match on exists.
    let alerts = alert_names();
    let text = read("prometheus/alertmanager.example.yml");
    let mut named = 0;
    for line in text.lines().filter(|l| l.contains("alertname=")) {
        let value = line
            .split_once('"')
            .and_then(|(_, rest)| rest.rsplit_once('"'))
            .map(|(v, _)| v)
            .unwrap_or_else(|| panic!("cannot read the alert names of `{line}`"));
        for name in value.split('|') {
            named += 1;
            assert!(alerts.iter().any(|a| a == name), "no alert named {name}");
        }
    }
    assert!(named >= 10, "only {named} alert names in the inhibit rules");
}

/// Sends alerts to a real Alertmanager running the example configuration and
/// compares which ones it reports as inhibited.
#[tokio::test]
async fn alertmanager_example_inhibits_what_it_says() {
    let dir = ScratchDir::new("alertmanager");
    let am = Alertmanager::start(
        dir.path(),
        &repo().join("prometheus/alertmanager.example.yml"),
    );
    let base = &am.api;
    let http = reqwest::Client::builder().no_proxy().build().unwrap();

    // (labels, inhibited?)
    let job = ("job", "llmprobe");
    let cases: &[(&[(&str, &str)], bool)] = &[
        // 1. llmprobe-a is down: its per-target alerts are silenced...
        (
            &[
                ("alertname", "LlmprobeDown"),
                job,
                ("instance", "llmprobe-a"),
            ],
            false,
        ),
        (
            &[
                ("alertname", "LlmprobeSweepStale"),
                job,
                ("instance", "llmprobe-a"),
                ("target", "w1"),
            ],
            true,
        ),
        // ...not those of another instance,
        (
            &[
                ("alertname", "LlmprobeSweepStale"),
                job,
                ("instance", "llmprobe-b"),
                ("target", "w2"),
            ],
            false,
        ),
        // 2. and unmeasured targets wait while an instance is down.
        (
            &[("alertname", "LlmprobeTargetUnmeasured"), ("target", "w3")],
            true,
        ),
        // 3. A knee at 0 covers the same target's latency warning...
        (
            &[
                ("alertname", "LlmprobeKneeZero"),
                ("target", "w4"),
                ("model", "m"),
                ("workload", "chat"),
            ],
            false,
        ),
        (
            &[
                ("alertname", "LlmprobeLatencyP95AboveSlo"),
                job,
                ("instance", "llmprobe-b"),
                ("target", "w4"),
                ("model", "m"),
                ("workload", "chat"),
                ("concurrency", "1"),
                ("percentile", "95"),
            ],
            true,
        ),
        (
            &[
                ("alertname", "LlmprobeLatencyP95AboveSlo"),
                job,
                ("instance", "llmprobe-b"),
                ("target", "w5"),
                ("model", "m"),
                ("workload", "chat"),
                ("concurrency", "1"),
                ("percentile", "95"),
            ],
            false,
        ),
        // ...and a model's fleet page its workers' knee drops.
        (
            &[
                ("alertname", "LlmprobeModelCapacityDropped"),
                ("model", "m2"),
                ("workload", "chat"),
            ],
            false,
        ),
        (
            &[
                ("alertname", "LlmprobeKneeDropped"),
                ("target", "w6"),
                ("model", "m2"),
                ("workload", "chat"),
            ],
            true,
        ),
        (
            &[
                ("alertname", "LlmprobeKneeDropped"),
                ("target", "w7"),
                ("model", "m3"),
                ("workload", "chat"),
            ],
            false,
        ),
    ];
    let body: Vec<serde_json::Value> = cases
        .iter()
        .map(|(labels, _)| {
            let labels: serde_json::Map<String, serde_json::Value> = labels
                .iter()
                .map(|(k, v)| (k.to_string(), serde_json::Value::from(*v)))
                .collect();
            serde_json::json!({ "labels": labels })
        })
        .collect();
    let key = |labels: &serde_json::Value| {
        format!(
            "{} {}",
            labels["alertname"].as_str().unwrap_or(""),
            labels["target"]
                .as_str()
                .or(labels["instance"].as_str())
                .or(labels["model"].as_str())
                .unwrap_or("")
        )
    };
    let mut want: Vec<(String, bool)> = body
        .iter()
        .zip(cases)
        .map(|(a, (_, inhibited))| (key(&a["labels"]), *inhibited))
        .collect();
    want.sort();

    // Ready, then the alerts in; the inhibitor picks the sources up
    // asynchronously: poll until the answer matches or time runs out.
    let posted = &AtomicBool::new(false);
    let (http, body, want, am) = (&http, &body, &want, &am);
    wait::poll(
        "Alertmanager to inhibit what the example says",
        Duration::from_secs(60),
        move || async move {
            if !posted.load(Ordering::Relaxed) {
                let ok = http
                    .post(format!("{base}/alerts"))
                    .header("content-type", "application/json")
                    .body(serde_json::to_vec(body).unwrap())
                    .send()
                    .await
                    .is_ok_and(|r| r.status().is_success());
                posted.store(ok, Ordering::Relaxed);
                return Err(format!("alerts posted: {ok}\n{}", am.process.tail()));
            }
            let r = http
                .get(format!("{base}/alerts"))
                .send()
                .await
                .map_err(|e| format!("GET {base}/alerts: {e}"))?;
            let bytes = r.bytes().await.unwrap_or_default();
            let alerts: Vec<serde_json::Value> = serde_json::from_slice(&bytes).unwrap_or_default();
            let mut got: Vec<(String, bool)> = alerts
                .iter()
                .map(|a| {
                    let inhibited = a["status"]["inhibitedBy"]
                        .as_array()
                        .is_some_and(|v| !v.is_empty());
                    (key(&a["labels"]), inhibited)
                })
                .collect();
            got.sort();
            if got == *want {
                Ok(())
            } else {
                Err(format!(
                    "Alertmanager reports\n{got:?}\nwanted\n{want:?}\n{}",
                    am.process.tail()
                ))
            }
        },
    )
    .await;
}

// ---------------------------------------------------------------------------
// systemd

/// `systemd-analyze`, or None (with the reason printed) where it is absent.
fn systemd_analyze() -> Option<&'static str> {
    match Command::new("systemd-analyze").arg("--version").output() {
        Ok(out) if out.status.success() => Some("systemd-analyze"),
        Ok(out) => {
            eprintln!(
                "SKIPPED: systemd-analyze --version failed ({}); install Debian's `systemd` package",
                out.status
            );
            None
        }
        Err(e) => {
            eprintln!(
                "SKIPPED: systemd-analyze not available ({e}); install Debian's `systemd` package"
            );
            None
        }
    }
}

#[test]
fn systemd_unit_has_the_required_settings() {
    let unit = read("systemd/llmprobe.service");
    let lines: BTreeSet<&str> = unit.lines().map(str::trim).collect();
    for wanted in [
        "Type=notify",
        "NotifyAccess=main",
        "WatchdogSec=60",
        "ExecStart=/usr/bin/llmprobe run --config /etc/llmprobe/llmprobe.yaml",
        "EnvironmentFile=-/etc/default/llmprobe",
        "ExecReload=/usr/bin/llmprobe check-config --config /etc/llmprobe/llmprobe.yaml",
        "ExecReload=/bin/kill -HUP $MAINPID",
        "DynamicUser=yes",
        "StateDirectory=llmprobe",
        "NoNewPrivileges=yes",
        "CapabilityBoundingSet=",
        "ProtectSystem=strict",
        "ProtectHome=yes",
        "PrivateTmp=yes",
        "RestrictAddressFamilies=AF_INET AF_INET6 AF_UNIX",
        "SystemCallFilter=@system-service",
        "MemoryDenyWriteExecute=yes",
        "LimitNOFILE=65536",
    ] {
        assert!(
            lines.contains(wanted),
            "systemd/llmprobe.service lacks `{wanted}`"
        );
    }
    // Validation comes before the signal: systemd runs ExecReload= lines in
    // order and stops at the first that fails.
    let reloads: Vec<&str> = unit
        .lines()
        .filter(|l| l.starts_with("ExecReload="))
        .collect();
    assert_eq!(reloads.len(), 2, "{reloads:?}");
    assert!(reloads[0].contains("check-config"), "{reloads:?}");
    // A LoadCredential= line fails the start when its file is missing: the
    // unit has none outside comments, the optional drop-in has them.
    assert!(
        !lines.iter().any(|l| l.starts_with("LoadCredential")),
        "an active LoadCredential= line in the unit breaks the start without the key file"
    );
    assert!(
        unit.contains("api_key_env: WORKER_API_KEY"),
        "the unit should explain how a target reads its key from /etc/default/llmprobe"
    );
    // process_start_time_seconds needs /proc/stat.
    assert!(
        !lines.contains("ProcSubset=pid"),
        "ProcSubset=pid hides /proc/stat"
    );
    assert!(
        unit.contains("Needs systemd 248 or later"),
        "the unit should state the minimum systemd version"
    );

    let dropin = read("systemd/credentials.conf.example");
    let dropin_lines: BTreeSet<&str> = dropin.lines().map(str::trim).collect();
    for wanted in [
        "[Service]",
        "LoadCredential=worker-api-key:/etc/llmprobe/credentials/worker-api-key",
    ] {
        assert!(
            dropin_lines.contains(wanted),
            "systemd/credentials.conf.example lacks `{wanted}`"
        );
    }
    assert!(
        dropin.contains("api_key_file: ${CREDENTIALS_DIRECTORY}/worker-api-key"),
        "the drop-in should explain how a target reads its credential"
    );
}

/// `systemd-analyze verify` on the unit with `dropin` as
/// `llmprobe.service.d/credentials.conf`; returns the complaints that concern
/// our files (verify reports problems it tolerates, unknown keys or bad
/// values, on stderr with exit status 0).
fn verify_unit(tool: &str, dropin: &str) -> Vec<String> {
    // verify needs the binaries the unit runs to exist: point them at the
    // one cargo built.
    let bin = env!("CARGO_BIN_EXE_llmprobe");
    let unit = read("systemd/llmprobe.service");
    let original = "/usr/bin/llmprobe ";
    assert!(
        unit.contains(&format!("ExecStart={original}")),
        "unit has no `ExecStart={original}` line"
    );
    let unit = unit.replace(original, &format!("{bin} "));
    let dir = ScratchDir::new("unit");
    let path = dir.path().join("llmprobe.service");
    std::fs::write(&path, unit).unwrap();
    // A drop-in next to the unit is read as in /etc/systemd/system.
    let dropins = dir.path().join("llmprobe.service.d");
    std::fs::create_dir(&dropins).unwrap();
    std::fs::write(dropins.join("credentials.conf"), dropin).unwrap();

    let out = systemd_analyze_run(tool, [OsStr::new("verify"), path.as_os_str()]);
    assert_success("systemd-analyze verify", &out);
    String::from_utf8_lossy(&out.stderr)
        .lines()
        .filter(|l| l.contains("llmprobe.service"))
        .map(str::to_string)
        .collect()
}

#[test]
fn systemd_analyze_verify() {
    let Some(tool) = systemd_analyze() else {
        return;
    };
    let complaints = verify_unit(tool, &read("systemd/credentials.conf.example"));
    assert!(
        complaints.is_empty(),
        "systemd-analyze verify complains:\n{}",
        complaints.join("\n")
    );
    // The check can fail: a broken drop-in is reported.
    let complaints = verify_unit(tool, "[Service]\nLoadCredentail=x:/y\n");
    assert!(
        complaints.iter().any(|c| c.contains("LoadCredentail")),
        "verify did not read the drop-in: {complaints:?}"
    );
}

/// The daemon started from the built binary; killed when dropped.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// GET `path` from 127.0.0.1:`port` over HTTP/1.0; None while nothing listens.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(std::time::Duration::from_secs(10)))
        .ok()?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Polls /metrics until `pred` holds (60 s at most) and returns it.
fn wait_for_metrics(port: u16, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let text = http_get(port, "/metrics").unwrap_or_default();
        if pred(&text) {
            return text;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "timed out waiting for {what}; /metrics:\n{text}"
        );
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}

/// Runs the unit's `ExecReload=` lines as systemd does: in order, each split
/// on whitespace (no shell), `$MAINPID` replaced, stopping at the first that
/// fails. Returns whether the reload succeeded and the output of the last
/// command run.
fn systemctl_reload(unit: &str, bin: &str, config: &Path, pid: u32) -> (bool, String) {
    let mut last = String::new();
    for line in unit.lines().filter_map(|l| l.strip_prefix("ExecReload=")) {
        let line = line
            .replace("/usr/bin/llmprobe", bin)
            .replace("/etc/llmprobe/llmprobe.yaml", &config.display().to_string())
            .replace("$MAINPID", &pid.to_string());
        let mut words = line.split_whitespace();
        let program = words.next().expect("empty ExecReload=");
        let out = Command::new(program).args(words).output().unwrap();
        last = format!(
            "{line}: {}\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if !out.status.success() {
            return (false, last);
        }
    }
    (true, last)
}

#[test]
fn systemd_reload_validates_first_and_fails_on_a_rejected_config() {
    let bin = env!("CARGO_BIN_EXE_llmprobe");
    let unit = read("systemd/llmprobe.service");
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    // The shipped configuration (the in-process simulator), on a free port.
    let shipped = read("config/llmprobe.yaml");
    let listen = "listen: \"127.0.0.1:9775\"";
    assert!(
        shipped.contains(listen),
        "config/llmprobe.yaml: no `{listen}`"
    );
    let shipped = shipped.replace(listen, &format!("listen: \"127.0.0.1:{port}\""));
    let dir = ScratchDir::new("reload");
    let config = dir.path().join("llmprobe.yaml");
    std::fs::write(&config, &shipped).unwrap();

    let mut daemon = Child(
        Command::new(bin)
            .args(["run", "--config"])
            .arg(&config)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = daemon.0.id();
    wait_for_metrics(port, "the daemon", |t| {
        t.contains("llmprobe_config_last_reload_successful 1")
    });

    // A valid change: the reload succeeds and the daemon measures the new
    // target.
    let added = "\n  - name: simulated-2\n    simulator:\n      profile: tiny\n";
    std::fs::write(&config, format!("{shipped}{added}")).unwrap();
    let (ok, output) = systemctl_reload(&unit, bin, &config, pid);
    assert!(ok, "reload of a valid config failed: {output}");
    wait_for_metrics(port, "the reloaded target", |t| {
        t.contains("target=\"simulated-2\"")
    });

    // A rejected change: the reload fails at validation, before the signal;
    // the daemon keeps running on the configuration it had.
    let broken = format!("{shipped}{added}").replace("levels: [1, 2, 4, 8, 16]", "levels: [4, 2]");
    assert_ne!(
        broken,
        format!("{shipped}{added}"),
        "no levels line to break"
    );
    std::fs::write(&config, &broken).unwrap();
    let (ok, output) = systemctl_reload(&unit, bin, &config, pid);
    assert!(!ok, "reload of a rejected config succeeded: {output}");
    assert!(
        output.contains("check-config") && output.contains("levels"),
        "the failure should come from check-config and name the key: {output}"
    );
    let text = wait_for_metrics(port, "the daemon after the rejected reload", |t| {
        t.contains("llmprobe_config_last_reload_successful")
    });
    assert!(
        text.contains("llmprobe_config_last_reload_successful 1")
            && text.contains("target=\"simulated-2\""),
        "the daemon should keep its last good configuration:\n{text}"
    );
    assert!(daemon.0.try_wait().unwrap().is_none(), "the daemon exited");
}

#[test]
fn systemd_analyze_security_exposure_at_most_2() {
    let Some(tool) = systemd_analyze() else {
        return;
    };
    let out = systemd_analyze_run(
        tool,
        [
            "security",
            "--offline=true",
            "--no-pager",
            "systemd/llmprobe.service",
        ],
    );
    assert_success("systemd-analyze security --offline=true", &out);
    let stdout = String::from_utf8_lossy(&out.stdout);
    // "→ Overall exposure level for llmprobe.service: 1.1 OK 🙂"
    let line = stdout
        .lines()
        .find(|l| l.contains("Overall exposure level for llmprobe.service:"))
        .unwrap_or_else(|| panic!("no overall exposure level in:\n{stdout}"));
    let score: f64 = line
        .rsplit_once(':')
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("cannot parse exposure level from `{line}`"));
    eprintln!("systemd-analyze security: {}", line.trim());
    assert!(score <= 2.0, "exposure level {score} > 2.0:\n{stdout}");
}

// ---------------------------------------------------------------------------
// Grafana

/// Metric names the dashboards may query: llmprobe's contract plus the
/// operator-provided gateway setting and Prometheus' own `up`.
const KNOWN_METRICS: &[&str] = &[
    "llmprobe_sweep_ttft_seconds",
    "llmprobe_sweep_answer_ttft_seconds",
    "llmprobe_sweep_reasoning_tokens",
    "llmprobe_sweep_latency_seconds",
    "llmprobe_sweep_inter_token_latency_seconds",
    "llmprobe_sweep_generation_tokens_per_second",
    "llmprobe_sweep_throughput_tokens_per_second",
    "llmprobe_sweep_shed_ratio",
    "llmprobe_sweep_error_ratio",
    "llmprobe_sweep_requests",
    "llmprobe_sweep_samples",
    "llmprobe_sweep_verdict",
    "llmprobe_sweep_verdict_requests",
    "llmprobe_sweep_verdict_pooled_sweeps",
    "llmprobe_sweep_verdict_lower_bound_ratio",
    "llmprobe_capacity_knee_concurrency",
    "llmprobe_capacity_knee_decided",
    "llmprobe_capacity_knee_lower_bound",
    "llmprobe_capacity_knee_carried_over",
    "llmprobe_capacity_knee_measured_timestamp_seconds",
    "llmprobe_sweep_levels_not_measured",
    "llmprobe_sweep_level_measured_timestamp_seconds",
    "llmprobe_capacity_limit_info",
    "llmprobe_sweep_server_requests_running",
    "llmprobe_sweep_server_requests_waiting",
    "llmprobe_sweep_server_kv_cache_usage_ratio",
    "llmprobe_sweep_server_preemptions",
    "llmprobe_capacity_throughput_tokens_per_second",
    "llmprobe_capacity_requests_per_second",
    "llmprobe_capacity_sustained_requests_per_second",
    "llmprobe_capacity_sustained_info",
    "llmprobe_capacity_sustained_measured_timestamp_seconds",
    "llmprobe_capacity_sustained_sweeps_since_measured",
    "llmprobe_capacity_sustained_confidence",
    "llmprobe_sustained_step_offered_requests_per_second",
    "llmprobe_sustained_step_achieved_requests_per_second",
    "llmprobe_sustained_step_goodput_requests_per_second",
    "llmprobe_sustained_step_shed_ratio",
    "llmprobe_sustained_step_error_ratio",
    "llmprobe_sustained_step_scheduled_latency_seconds",
    "llmprobe_sustained_step_dispatch_lag_seconds",
    "llmprobe_sustained_step_in_flight",
    "llmprobe_sustained_step_not_sent",
    "llmprobe_sustained_step_info",
    "llmprobe_capacity_requests_per_second_samples",
    "llmprobe_capacity_saturation_concurrency",
    "llmprobe_recommended_max_in_flight",
    "llmprobe_sweep_success",
    "llmprobe_target_setup_error",
    "llmprobe_sweep_duration_seconds",
    "llmprobe_sweep_last_completion_timestamp_seconds",
    "llmprobe_gateway_overhead_seconds",
    "llmprobe_request_ttft_seconds_bucket",
    "llmprobe_request_answer_ttft_seconds_bucket",
    "llmprobe_reasoning_tokens_total",
    "llmprobe_request_duration_seconds_bucket",
    "llmprobe_requests_total",
    "llmprobe_requests_saved_total",
    "llmprobe_output_tokens_total",
    "llmprobe_prompt_tokens_total",
    "llmprobe_target_info",
    "llmprobe_build_info",
    "llmprobe_config_last_reload_successful",
    "llmprobe_sweeps_postponed_total",
    "llmprobe_sweeps_total",
    "llmprobe_in_flight_requests",
    "llmprobe_otlp_dropped_data_points_total",
    "llmprobe_gateway_configured_max_in_flight",
    "llmprobe_target_slo_p95_latency_seconds",
    "llmprobe_target_slo_max_shed_ratio",
    "llmprobe_target_slo_max_error_ratio",
    "llmprobe_schedule_interval_seconds",
    "llmprobe_config_last_reload_success_timestamp_seconds",
    "llmprobe_probe_requests_total",
    "llmprobe_probe_success",
    "llmprobe_probe_ttft_seconds_bucket",
    "llmprobe_probe_ttft_seconds_count",
    "llmprobe_probe_latency_seconds_bucket",
    "llmprobe_probe_cold_ttft_seconds_sum",
    "llmprobe_probe_cold_ttft_seconds_count",
    "llmprobe_probe_last_success_timestamp_seconds",
    "llmprobe_probe_client_stalled_total",
    "llmprobe_sweep_client_lag_seconds",
];

const DASHBOARDS: &[&str] = &[
    "grafana/dashboards/llmprobe-capacity-overview.json",
    "grafana/dashboards/llmprobe-target-detail.json",
];

#[test]
fn dashboards_are_importable_and_use_known_metrics() {
    let mut uids = BTreeSet::new();
    for rel in DASHBOARDS {
        let d: serde_json::Value =
            serde_json::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let uid = d["uid"].as_str().unwrap_or_else(|| panic!("{rel}: no uid"));
        assert!(uids.insert(uid.to_string()), "{rel}: duplicate uid {uid}");
        assert!(
            d["title"].as_str().is_some_and(|t| !t.is_empty()),
            "{rel}: no title"
        );
        assert!(
            d["schemaVersion"].as_u64().is_some_and(|v| v >= 39),
            "{rel}: schemaVersion < 39"
        );
        assert!(
            d["id"].is_null(),
            "{rel}: `id` must be null so that the dashboard imports anywhere"
        );

        let vars = d["templating"]["list"]
            .as_array()
            .unwrap_or_else(|| panic!("{rel}: no templating"));
        let var = |name: &str| vars.iter().find(|v| v["name"] == name);
        let ds = var("datasource").unwrap_or_else(|| panic!("{rel}: no datasource variable"));
        assert_eq!(ds["type"], "datasource", "{rel}");
        assert_eq!(ds["query"], "prometheus", "{rel}");
        for name in ["target", "model", "workload"] {
            let v = var(name).unwrap_or_else(|| panic!("{rel}: no `{name}` variable"));
            assert_eq!(v["type"], "query", "{rel}: {name}");
            assert_eq!(v["datasource"]["uid"], "${datasource}", "{rel}: {name}");
            let q = v["query"]["query"]
                .as_str()
                .or(v["query"].as_str())
                .unwrap_or("");
            assert!(q.starts_with("label_values("), "{rel}: {name} query {q}");
        }

        let text = read(rel);
        assert!(
            !text.contains("\"uid\": \"prometheus\""),
            "{rel}: hard-coded datasource uid"
        );

        let mut ids = BTreeSet::new();
        for p in panels(&d) {
            let title = p["title"].as_str().unwrap_or("?");
            assert!(
                ids.insert(p["id"].as_u64().expect("panel id")),
                "{rel}: duplicate panel id ({title})"
            );
            if p["type"] == "row" {
                continue;
            }
            assert_eq!(
                p["datasource"]["uid"], "${datasource}",
                "{rel}: panel {title}"
            );
            let targets = p["targets"]
                .as_array()
                .unwrap_or_else(|| panic!("{rel}: {title}: no targets"));
            assert!(!targets.is_empty(), "{rel}: {title}: no queries");
            for t in targets {
                assert_eq!(
                    t["datasource"]["uid"], "${datasource}",
                    "{rel}: panel {title}"
                );
                let expr = t["expr"]
                    .as_str()
                    .unwrap_or_else(|| panic!("{rel}: {title}: no expr"));
                for m in llmprobe_metrics(expr) {
                    assert!(
                        KNOWN_METRICS.contains(&m.as_str()),
                        "{rel}: {title}: unknown metric {m} in {expr}"
                    );
                }
            }
        }
    }
}

/// Grafana moves panels that overlap or stick out of its 24 columns wherever
/// it finds room, so a panel placed "beside" another could end up anywhere:
/// every top-level panel fits the grid and covers no other's cells.
#[test]
fn dashboard_panels_fit_the_grid_without_overlap() {
    for rel in DASHBOARDS {
        let d: serde_json::Value =
            serde_json::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
        let mut taken: std::collections::BTreeMap<(u64, u64), String> = Default::default();
        for p in d["panels"].as_array().into_iter().flatten() {
            let title = p["title"].as_str().unwrap_or("?");
            let at = |k: &str| {
                p["gridPos"][k]
                    .as_u64()
                    .unwrap_or_else(|| panic!("{rel}: {title}: no gridPos.{k}"))
            };
            let (x, y, w, h) = (at("x"), at("y"), at("w"), at("h"));
            assert!(w > 0 && h > 0, "{rel}: {title}: empty gridPos");
            assert!(x + w <= 24, "{rel}: {title}: wider than the 24 columns");
            for cx in x..x + w {
                for cy in y..y + h {
                    if let Some(other) = taken.insert((cx, cy), title.to_string()) {
                        panic!("{rel}: {title} overlaps {other} at x={cx}, y={cy}");
                    }
                }
            }
        }
    }
}
