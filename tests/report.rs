//! The HTML report: `sweep --format html`, `llmprobe report results.json`
//! and the daemon's pages. Each page is validated by `tidy` (Debian package
//! `tidy`), its numbers are read back out of the SVG and compared with the
//! JSON it came from, and it is rendered by headless Chromium (package
//! `chromium`) to a PNG whose pixels are counted.

mod support;

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use serde_json::Value;

fn llmprobe(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_llmprobe"))
        .args(args)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap()
}

/// The shipped configuration's sweep as JSON, measured once for all tests.
fn shipped_sweep_json() -> &'static str {
    static JSON: OnceLock<String> = OnceLock::new();
    JSON.get_or_init(|| {
        // Every level in full, so that every level has every number (a
        // level stopped early has no successful request to plot).
        let out = Command::new(env!("CARGO_BIN_EXE_llmprobe"))
            .args(["sweep", "--format", "json"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("LLMPROBE__DEFAULTS__EARLY_STOP", "false")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8(out.stdout).unwrap()
    })
}

/// `llmprobe report` of `json` (with the shipped configuration when
/// `with_config`): the page's path.
fn render(json: &str, with_config: bool) -> PathBuf {
    let dir = support::paths::fresh_dir("report");
    let input = dir.join("results.json");
    std::fs::write(&input, json).unwrap();
    let page = dir.join("report.html");
    let mut args = vec!["report", input.to_str().unwrap()];
    if with_config {
        args.extend(["--config", "config/llmprobe.yaml"]);
    }
    args.extend(["--output", page.to_str().unwrap()]);
    let out = llmprobe(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    page
}

/// Fails unless `tidy` finds neither an error nor a warning in the page.
fn assert_valid_html(page: &Path) {
    let out = Command::new("tidy")
        .args(["-errors", "-quiet", "--show-warnings", "yes"])
        .arg(page)
        .output()
        .expect("tidy validates the HTML (Debian package `tidy`; scripts/test installs it)");
    assert!(
        out.status.success() && out.stderr.is_empty(),
        "tidy on {}:\n{}",
        page.display(),
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Runs headless Chromium on `page` with `extra` flags, in a fresh profile
/// and without network chatter, for at most a minute; its stdout.
fn chromium(page: &Path, extra: &[String]) -> String {
    let dir = support::paths::fresh_dir("report");
    let stdout_path = dir.join("stdout");
    let mut child = Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", dir.join("profile").display()))
        .args(extra)
        .arg(format!("file://{}", page.display()))
        // A file, not a pipe: a full pipe would block Chromium while we wait.
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(Stdio::null())
        .spawn()
        .expect("headless Chromium renders the report (Debian package `chromium`; scripts/test installs it)");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within 60 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(status.success(), "chromium: {status}");
    let mut text = String::new();
    std::fs::File::open(&stdout_path)
        .unwrap()
        .read_to_string(&mut text)
        .unwrap();
    std::fs::remove_dir_all(&dir).ok();
    text
}

/// Every chart marker as (series, concurrency, value), read from its
/// `data-` attributes.
fn markers(html: &str) -> Vec<(String, f64, f64)> {
    html.split("<circle ")
        .skip(1)
        // The sustained rate's step markers are plotted against the offered
        // rate, not a concurrency.
        .filter(|rest| !rest.starts_with("class=\"step\""))
        .map(|rest| {
            let tag = &rest[..rest.find('>').unwrap()];
            let attr = |name: &str| -> String {
                let key = format!("{name}=\"");
                let start = tag.find(&key).unwrap_or_else(|| panic!("{name} in {tag}")) + key.len();
                tag[start..start + tag[start..].find('"').unwrap()].to_string()
            };
            (
                attr("data-series"),
                attr("data-x").parse().unwrap(),
                attr("data-y").parse().unwrap(),
            )
        })
        .collect()
}

#[test]
fn the_report_of_a_json_document_validates_and_carries_its_numbers() {
    let json = shipped_sweep_json();
    let page = render(json, true);
    assert_valid_html(&page);
    let html = std::fs::read_to_string(&page).unwrap();
    let doc: Value = serde_json::from_str(json).unwrap();
    let w = &doc["targets"][0]["workloads"][0];
    let found = markers(&html);
    let mut expected = Vec::new();
    for l in w["levels"].as_array().unwrap() {
        let c = l["concurrency"].as_f64().unwrap();
        for (series, value) in [
            ("throughput", &l["throughput_tokens_per_second"]),
            ("ttft_p50", &l["ttft_seconds"]["p50"]),
            ("ttft_p95", &l["ttft_seconds"]["p95"]),
            // The shipped simulator reasons, so its answer TTFT is charted.
            ("answer_ttft_p50", &l["answer_ttft_seconds"]["p50"]),
            ("answer_ttft_p95", &l["answer_ttft_seconds"]["p95"]),
            ("latency_p95", &l["latency_seconds"]["p95"]),
            ("latency_p50", &l["latency_seconds"]["p50"]),
            ("generation_p50", &l["generation_tokens_per_second"]["p50"]),
            ("itl_p50", &l["inter_token_latency_seconds"]["p50"]),
            ("itl_p95", &l["inter_token_latency_seconds"]["p95"]),
            ("itl_p99", &l["inter_token_latency_seconds"]["p99"]),
            (
                "decision_latency_p95",
                &l["decision_latency_seconds"]["p95"],
            ),
            ("achieved_concurrency", &l["achieved_concurrency"]),
            // Connect time only where a level opened connections.
            ("connect_p50", &l["connect_seconds"]["p50"]),
            ("connect_p95", &l["connect_seconds"]["p95"]),
            ("shed_ratio", &l["shed_ratio"]),
            ("error_ratio", &l["error_ratio"]),
        ] {
            if let Some(v) = value.as_f64() {
                expected.push((series.to_string(), c, v));
            }
        }
        // The server's own figures, where its metrics were read.
        let s = &l["server"];
        if s["readings"].as_u64().unwrap_or(0) > 0 {
            for (series, value) in [
                ("server_running_max", &s["running"]["max"]),
                ("server_running_mean", &s["running"]["mean"]),
                ("server_waiting_max", &s["waiting"]["max"]),
                ("server_waiting_mean", &s["waiting"]["mean"]),
                ("server_kv_cache_max", &s["kv_cache_usage_max"]),
            ] {
                if let Some(v) = value.as_f64() {
                    expected.push((series.to_string(), c, v));
                }
            }
        }
        // The sample counts, as the table lists them.
        let row = format!(
            "<td>{}</td><td>{}</td><td>{}</td>",
            l["concurrency"], l["requests"], l["outcomes"]["ok"]
        );
        assert!(html.contains(&row), "{row} missing");
    }
    // The very same f64s, nothing more, nothing less.
    let mut found_sorted = found.clone();
    found_sorted.sort_by(|a, b| a.partial_cmp(b).unwrap());
    expected.sort_by(|a, b| a.partial_cmp(b).unwrap());
    assert_eq!(found_sorted, expected);
    assert!(
        found.len() >= 5 * 15,
        "five levels, fifteen series and the server's"
    );
    let cap = &w["capacity"];
    assert!(html.contains(&format!(
        "<div class=\"kpi knee\"><b>{}</b>",
        cap["knee_concurrency"]
    )));
    assert!(html.contains(&format!(
        "<div class=\"kpi rec\"><b>{}</b>",
        cap["recommended_max_in_flight"]
    )));
    assert!(html.contains(">knee 8</text>") && html.contains(">recommended 7</text>"));
    // The configuration given: the SLO limits appear, on the charts too.
    assert!(html.contains("p95 latency ≤ 5 s"), "{html}");
    assert!(html.contains("SLO 5 s"));
    assert!(html.contains(">SLO 5.0%</text>"));
    // The terminal's table, below the charts.
    assert!(html.contains("knee: 8   recommended max_in_flight: 7"));
    assert!(html.find("<svg").unwrap() < html.find("<pre>").unwrap());
    // Nothing fetched from anywhere: no scripts, no external resources.
    for needle in ["<script", "src=", "http://", "https://", "<link"] {
        assert!(!html.contains(needle), "{needle} in the report");
    }
}

#[test]
fn a_document_read_back_writes_the_same_json() {
    let json = shipped_sweep_json();
    let doc = llmprobe::faces::json::Document::read(json).unwrap();
    assert_eq!(doc.targets[0].workloads[0].capacity.knee_concurrency, 8);
    let again = llmprobe::faces::json::json_with_pairs(&doc.targets, &doc.gateway_pairs);
    assert_eq!(again.trim_end(), json.trim_end());
}

#[test]
fn the_documented_example_renders_and_bad_documents_are_named() {
    let out = llmprobe(&["report", "testdata/report/readme-example.json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let html = String::from_utf8(out.stdout).unwrap();
    assert!(html.contains("data-series=\"throughput\" data-x=\"1\" data-y=\"210\""));
    assert!(html.contains("--config FILE"), "no configuration given");

    let dir = support::paths::fresh_dir("report");
    let example = std::fs::read_to_string("testdata/report/readme-example.json").unwrap();
    for (what, from, to, message) in [
        (
            "version",
            "\"format_version\": 1",
            "\"format_version\": 2",
            "format_version 2 is not 1",
        ),
        (
            "outcome",
            "\"rate_limited\": 0",
            "\"teapot\": 0",
            "targets[0].workloads[0].levels[0].outcomes: unknown outcome `teapot`",
        ),
    ] {
        let path = dir.join(format!("{what}.json"));
        std::fs::write(&path, example.replace(from, to)).unwrap();
        let out = llmprobe(&["report", path.to_str().unwrap()]);
        assert_eq!(out.status.code(), Some(1), "{what}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(message), "{what}: {err}");
        assert!(out.stdout.is_empty());
    }
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn sweep_writes_the_html_report_to_a_file() {
    let dir = support::paths::fresh_dir("report");
    let page = dir.join("sweep.html");
    let out = llmprobe(&[
        "sweep",
        "--format",
        "html",
        "--output",
        page.to_str().unwrap(),
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty(), "the report went to the file");
    assert_valid_html(&page);
    let html = std::fs::read_to_string(&page).unwrap();
    // The shipped simulator reasons: the answer TTFT has a chart of its own.
    // Connect time only when a level had to open a connection (the pool
    // is warmed before each; a loaded machine may still open one).
    let connect = usize::from(html.contains("<title>Time to open a new connection</title>"));
    // The shipped config searches the sustained rate: two charts of its own.
    assert_eq!(html.matches("<svg class=\"sustained-chart\"").count(), 2);
    assert_eq!(
        html.matches("<svg").count() - 2,
        10 + connect,
        "one chart per quantity with a value (eight, or nine with connect \
         time), the ratios, the server's running and waiting"
    );
    assert!(html.contains("Time to first answer token"));
    assert!(html.contains(">knee 8</text>"));
    assert!(
        html.contains("built-in simulated engine"),
        "configuration shown"
    );
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn headless_chromium_draws_the_report() {
    let page = render(shipped_sweep_json(), true);
    let shot = page.with_file_name("report.png");
    chromium(
        &page,
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1200,2000".to_string(),
        ],
    );
    let decoder = png::Decoder::new(std::fs::File::open(&shot).unwrap());
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size()];
    let frame = reader.next_frame(&mut buf).unwrap();
    assert_eq!((frame.width, frame.height), (1200, 2000));
    let channels = frame.color_type.samples();
    assert!(channels >= 3, "{:?}", frame.color_type);
    let pixels: Vec<[u8; 3]> = buf[..frame.buffer_size()]
        .chunks(channels)
        .map(|p| [p[0], p[1], p[2]])
        .collect();
    let background = pixels[0];
    let drawn = pixels.iter().filter(|p| **p != background).count();
    let distinct: std::collections::HashSet<[u8; 3]> = pixels.iter().copied().collect();
    // Text, cards and anti-aliased lines: far from a blank page.
    assert!(
        drawn > pixels.len() / 5,
        "{drawn} of {} pixels drawn",
        pixels.len()
    );
    assert!(distinct.len() > 200, "{} colours", distinct.len());
    // The throughput line (#2563eb) and the knee rules (#15803d) are drawn.
    let near = |c: [u8; 3]| {
        pixels
            .iter()
            .filter(|p| (0..3).all(|i| p[i].abs_diff(c[i]) <= 12))
            .count()
    };
    assert!(near([0x25, 0x63, 0xeb]) > 300, "throughput line");
    assert!(near([0x15, 0x80, 0x3d]) > 300, "knee rules");
    std::fs::remove_dir_all(page.parent().unwrap()).ok();
}

#[test]
fn strings_from_a_server_stay_text_in_the_browser() {
    let hostile = "<script>document.title='pwned'</script><img src=x onerror=alert(1)>";
    let mut doc: Value = serde_json::from_str(shipped_sweep_json()).unwrap();
    let t = &mut doc["targets"][0];
    t["model"] = format!("m\"{hostile}").into();
    t["target"] = format!("t{hostile}").into();
    t["error"] = hostile.into();
    t["setup"]["server"] = hostile.into();
    t["setup"]["models"] = vec![hostile].into();
    t["workloads"][0]["workload"] = format!("w'{hostile}").into();
    t["workloads"][0]["capacity"]["stopped_because"] = hostile.into();
    t["workloads"][0]["levels"][4]["error_examples"]["shed"] = hostile.into();
    let page = render(&doc.to_string(), false);
    assert_valid_html(&page);
    // The DOM the browser built: the strings are text, never elements.
    let dom = chromium(&page, &["--dump-dom".to_string()]);
    assert!(dom.contains("<svg"), "{dom}");
    assert!(!dom.contains("<script") && !dom.contains("<img"), "{dom}");
    assert!(dom.contains("&lt;script&gt;document.title='pwned'&lt;/script&gt;"));
    assert!(dom.contains("<title>llmprobe sweep report</title>"));
    std::fs::remove_dir_all(page.parent().unwrap()).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_pages_chart_the_latest_sweep_behind_auth() {
    let hash = bcrypt::hash("page-pass", 4).unwrap();
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
web:
  basic_auth_users: {{ viewer: "{hash}" }}
schedule: {{ interval: 1h, jitter: 0%, max_in_flight_total: 16, sweep_timeout: 60s }}
defaults: {{ workload: w, levels: [1, 2, 4], min_requests_per_level: 4, warmup_requests: 0 }}
workloads: {{ w: {{ max_completion_tokens: 8, prompts: ["hi"] }} }}
targets:
  - name: "sim <1>"
    simulator: {{ profile: tiny }}
"#
    );
    let d = support::daemon::Daemon::start(support::config::write_config(&yaml)).await;
    let client = reqwest::Client::builder().no_proxy().build().unwrap();
    let get = |path: &str, auth: bool| {
        let mut r = client.get(d.url(path));
        if auth {
            r = r.basic_auth("viewer", Some("page-pass"));
        }
        async move {
            let r = r.send().await.unwrap();
            (r.status().as_u16(), r.text().await.unwrap())
        }
    };
    let target = "/targets/sim%20%3C1%3E";
    let deadline = Instant::now() + Duration::from_secs(60);
    let page = loop {
        let (status, body) = get(target, true).await;
        assert_eq!(status, 200, "{body}");
        if body.contains("<svg") {
            break body;
        }
        assert!(Instant::now() < deadline, "no sweep within 60 s:\n{body}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(page.contains("<h1>sim &lt;1&gt;</h1>"), "{page}");
    // One chart per quantity with a value (connect time only when a level
    // opened a connection), the ratios, the server's running and waiting.
    let connect =
        |page: &str| usize::from(page.contains("<title>Time to open a new connection</title>"));
    let sustained = page.matches("<svg class=\"sustained-chart\"").count();
    assert_eq!(page.matches("<svg").count() - sustained, 9 + connect(&page));
    assert!(page.contains("data-series=\"throughput\" data-x=\"4\""));
    let (status, index) = get("/", true).await;
    assert_eq!(status, 200);
    assert!(index.contains(&format!("href=\"{target}\"")), "{index}");
    // The index is a table of targets: the charts are on the target's page.
    assert_eq!(index.matches("<svg").count(), 0, "{index}");
    assert!(index.contains("<th>knee</th><th>max_in_flight</th><th>limit</th>"));
    assert!(!index.contains("<script"));
    // The same auth as /metrics.
    for path in ["/", target, "/metrics"] {
        assert_eq!(get(path, false).await.0, 401, "{path}");
    }
    let (status, body) = get("/targets/nope", true).await;
    assert_eq!(status, 404);
    assert!(body.contains("No target named nope"));

    let dir = support::paths::fresh_dir("report");
    for (name, body) in [("index.html", &index), ("target.html", &page)] {
        let path = dir.join(name);
        std::fs::write(&path, body).unwrap();
        assert_valid_html(&path);
    }
    std::fs::remove_dir_all(&dir).ok();
    d.stop().await;
}
