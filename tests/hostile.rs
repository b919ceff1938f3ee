//! The daemon under hostile clients and careless operators (issue 23), run
//! as the real binary: a flood of wrong passwords, idle connections beyond
//! the descriptor limit, a closed output pipe, logs that go to a file. Each
//! asserts on what still works (sweeps succeed, `/healthz` answers), never
//! on how fast.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use support::binary::{self, Running};
use support::config::Yaml;
use support::exposition::metric_sum;
use support::paths::fresh_dir;
use support::ports::free_port;
use support::process::Process;
use support::wait;

/// A config with the built-in simulated engine as its one target, quick sweeps.
fn simulated(more: &str) -> String {
    simulated_within("20s", more)
}

/// [`simulated`] with another `sweep_timeout`.
fn simulated_within(sweep_timeout: &str, more: &str) -> String {
    let rest =
        format!("targets:\n  - name: simulated\n    simulator:\n      profile: tiny\n{more}");
    Yaml {
        levels: "[1, 2]",
        requests_per_level: "4",
        min_requests_per_level: 2,
        sweep_timeout,
        rest: &rest,
        ..Yaml::default()
    }
    .render()
}

/// `llmprobe run` with at most `nofile` descriptors (the shell's `ulimit`,
/// then `exec`): the descriptor limit a test can exhaust.
fn start_limited(config: &Path, nofile: u32) -> Running {
    let addr: SocketAddr = format!("127.0.0.1:{}", free_port()).parse().unwrap();
    let mut command = Command::new("sh");
    command
        .arg("-c")
        .arg(format!("ulimit -n {nofile} && exec \"$0\" \"$@\""))
        .arg(env!("CARGO_BIN_EXE_llmprobe"))
        .args(["run", "--config"])
        .arg(config)
        .current_dir(support::paths::repo())
        .env("LLMPROBE__LISTEN", addr.to_string());
    let process = Process::spawn("llmprobe", &mut command, config.parent().unwrap());
    Running { addr, process }
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .unwrap()
}

/// Successful sweeps of the target so far, read from /metrics.
async fn ok_sweeps(daemon: &Running, auth: Option<(&str, &str)>) -> Result<f64, String> {
    let mut req = client().get(daemon.url("/metrics"));
    if let Some((user, password)) = auth {
        req = req.basic_auth(user, Some(password));
    }
    let resp = req.send().await.map_err(|e| e.to_string())?;
    if !resp.status().is_success() {
        return Err(format!("/metrics: {}", resp.status()));
    }
    let text = resp.text().await.map_err(|e| e.to_string())?;
    Ok(metric_sum(
        &text,
        "llmprobe_sweeps_total",
        &[("target", "simulated"), ("result", "ok")],
    ))
}

/// Waits for the first successful sweep; returns the count then.
async fn first_sweep(daemon: &Running, auth: Option<(&str, &str)>) -> f64 {
    wait::poll("a first sweep", Duration::from_secs(60), || async {
        match ok_sweeps(daemon, auth).await {
            Ok(n) if n >= 1.0 => Ok(n),
            other => Err(format!("{other:?}\n{}", daemon.process.tail())),
        }
    })
    .await
}

/// Waits for two more successful sweeps than `before`, and for /healthz to
/// answer, while whatever the caller started keeps going.
async fn sweeps_go_on(daemon: &Running, auth: Option<(&str, &str)>, before: f64) {
    wait::poll(
        "two more successful sweeps",
        Duration::from_secs(90),
        || async {
            daemon.process.assert_running();
            match ok_sweeps(daemon, auth).await {
                Ok(n) if n >= before + 2.0 => Ok(()),
                Ok(n) => Err(format!("{n} ok sweeps\n{}", daemon.process.tail())),
                Err(e) => Err(format!("{e}\n{}", daemon.process.tail())),
            }
        },
    )
    .await;
    wait::poll("/healthz", Duration::from_secs(60), || async {
        match client().get(daemon.url("/healthz")).send().await {
            Ok(r) if r.status().is_success() => Ok(()),
            other => Err(format!("{other:?}\n{}", daemon.process.tail())),
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_wrong_passwords_does_not_stop_the_measurements() {
    // Cost 10, as `htpasswd -B` writes; a sweep here takes about a second,
    // and bcrypt on the runtime's workers made it take 30.
    let hash = tokio::task::spawn_blocking(|| bcrypt::hash("right", 10).unwrap())
        .await
        .unwrap();
    let web = format!("web:\n  basic_auth_users:\n    prom: \"{hash}\"\n");
    let dir = fresh_dir("hostile-bcrypt");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, format!("{web}{}", simulated_within("8s", ""))).unwrap();
    let daemon = start_limited(&path, 1024);
    daemon.ready(Duration::from_secs(60)).await;
    let auth = Some(("prom", "right"));
    let before = first_sweep(&daemon, auth).await;

    // Eight clients looping wrong passwords, for a known user and an unknown
    // one. The flood under way (its first wrong passwords answered, however
    // long bcrypt takes on this machine) before the sweeps are counted, so
    // that the two more sweeps below ran during it.
    let flood = Flood::start(&daemon, 8, |_| client(), false);
    flood.under_way(&daemon).await;
    let during = wait::poll("the sweeps so far", Duration::from_secs(60), || async {
        ok_sweeps(&daemon, auth)
            .await
            .map_err(|e| format!("{e}\n{}", daemon.process.tail()))
    })
    .await;
    assert!(during >= before, "{during} ok sweeps, {before} before");
    sweeps_go_on(&daemon, auth, during).await;
    let answered = flood.stop().await;
    // Counted, not logged one by one: one WARN line so far (the next is
    // due a minute after it).
    let text = client()
        .get(daemon.url("/metrics"))
        .basic_auth("prom", Some("right"))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    // Under `wrong`, or `busy` while the flood's first checks ran (one
    // address holds two places).
    let wrong_counted = metric_sum(&text, "llmprobe_http_auth_failures_total", &[]);
    assert!(
        wrong_counted >= answered as f64,
        "{wrong_counted} counted, {answered} answered"
    );
    let lines = daemon
        .process
        .stderr()
        .matches("refused by basic auth")
        .count();
    assert!((1..=2).contains(&lines), "{lines} lines about refusals");
    // The scheme is case-insensitive (RFC 9110).
    let r = client()
        .get(daemon.url("/metrics"))
        .header("authorization", "basic cHJvbTpyaWdodA==")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
}

/// Clients looping wrong passwords at `/metrics`, half for a known user
/// and half for an unknown one, each answered 401.
struct Flood {
    stop: tokio_util::sync::CancellationToken,
    wrong: Arc<std::sync::atomic::AtomicU64>,
    clients: u64,
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Flood {
    /// `clients` loops, the i-th on `client(i)`; with `fresh`, each request
    /// a password never sent before (none judged before), else the loop's
    /// same wrong one.
    fn start(
        daemon: &Running,
        clients: u8,
        client: impl Fn(u8) -> reqwest::Client,
        fresh: bool,
    ) -> Flood {
        let stop = tokio_util::sync::CancellationToken::new();
        let wrong = Arc::new(std::sync::atomic::AtomicU64::new(0));
        let tasks = (0..clients)
            .map(|i| {
                let (url, client) = (daemon.url("/metrics"), client(i));
                let (stop, wrong) = (stop.clone(), wrong.clone());
                tokio::spawn(async move {
                    let user = if i % 2 == 0 { "prom" } else { "nobody" };
                    let mut n = 0u64;
                    while !stop.is_cancelled() {
                        n += 1;
                        let password = if fresh {
                            format!("wrong-{i}-{n}")
                        } else {
                            format!("wrong-{i}")
                        };
                        if let Ok(r) = client
                            .get(&url)
                            .basic_auth(user, Some(password))
                            .send()
                            .await
                        {
                            assert_eq!(r.status(), 401);
                            wrong.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        }
                    }
                })
            })
            .collect();
        Flood {
            stop,
            wrong,
            clients: u64::from(clients),
            tasks,
        }
    }

    /// Wrong passwords answered so far.
    fn answered(&self) -> u64 {
        self.wrong.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Waits until as many wrong passwords as clients were answered.
    async fn under_way(&self, daemon: &Running) {
        wait::poll("the flood answered", Duration::from_secs(60), || async {
            match self.answered() {
                n if n >= self.clients => Ok(()),
                n => Err(format!(
                    "{n} wrong passwords answered\n{}",
                    daemon.process.tail()
                )),
            }
        })
        .await;
    }

    /// Ends every loop (an assertion that failed in one fails here);
    /// returns the wrong passwords answered in all.
    async fn stop(mut self) -> u64 {
        self.stop.cancel();
        for t in std::mem::take(&mut self.tasks) {
            t.await.unwrap();
        }
        self.answered()
    }
}

/// A client whose connections come from `127.0.0.N` (loopback holds all of
/// 127.0.0.0/8).
fn client_from(n: u8) -> reqwest::Client {
    reqwest::Client::builder()
        .local_address(std::net::IpAddr::from([127, 0, 0, n]))
        .timeout(Duration::from_secs(120))
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_wrong_passwords_from_32_addresses_does_not_keep_a_right_one_out() {
    // A cheaper cost than `htpasswd -B`'s 10 (this build's bcrypt is
    // unoptimised): the flood holds every place it may all the same.
    let (hash, one_check) = tokio::task::spawn_blocking(|| {
        let hash = bcrypt::hash("right", 8).unwrap();
        let start = std::time::Instant::now();
        let _ = bcrypt::verify("wrong", &hash);
        (hash, start.elapsed())
    })
    .await
    .unwrap();
    let web = format!("web:\n  basic_auth_users:\n    prom: \"{hash}\"\n");
    let dir = fresh_dir("hostile-addresses");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, format!("{web}{}", simulated_within("8s", ""))).unwrap();
    let daemon = start_limited(&path, 4096);
    daemon.ready(Duration::from_secs(60)).await;

    // 127.0.0.2 to 127.0.0.33, two clients each (an address's full share),
    // each request a new wrong password (none judged before), for a known
    // user and an unknown one.
    let flood = Flood::start(&daemon, 64, |i| client_from(2 + i / 2), true);
    flood.under_way(&daemon).await;

    // The right password, judged for the first time, from yet another
    // address: answered, not refused for want of a place. It waits for a
    // check per flooding address at most (they take turns); the bound
    // leaves four times that.
    let start = std::time::Instant::now();
    let right = client_from(34)
        .get(daemon.url("/metrics"))
        .basic_auth("prom", Some("right"))
        .send()
        .await
        .unwrap();
    let waited = start.elapsed();
    assert_eq!(right.status(), 200, "{}", daemon.process.tail());
    let bound = one_check * 34 * 4 + Duration::from_secs(5);
    assert!(
        waited < bound,
        "waited {waited:?} for the right password, a check takes {one_check:?}"
    );

    // And the sweeps go on under the flood.
    let auth = Some(("prom", "right"));
    let during = ok_sweeps(&daemon, auth).await.unwrap();
    sweeps_go_on(&daemon, auth, during).await;
    let answered = flood.stop().await;
    eprintln!(
        "{answered} wrong passwords answered; the right one waited {waited:?}, a check takes {one_check:?}"
    );
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_descriptor_limit_do_not_stop_the_measurements() {
    let dir = fresh_dir("hostile-idle");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, simulated("")).unwrap();
    let daemon = start_limited(&path, 512);
    daemon.ready(Duration::from_secs(60)).await;
    let before = first_sweep(&daemon, None).await;

    // 1,100 connections that send nothing: more than the daemon's 512
    // descriptors. Kept open until the end.
    let addr = daemon.addr;
    let attempts: Vec<_> = (0..1100)
        .map(|_| {
            tokio::spawn(async move {
                tokio::time::timeout(
                    Duration::from_secs(10),
                    tokio::net::TcpStream::connect(addr),
                )
                .await
                .ok()
                .and_then(Result::ok)
            })
        })
        .collect();
    let mut idle = Vec::new();
    for a in attempts {
        if let Some(s) = a.await.unwrap() {
            idle.push(s);
        }
    }
    assert!(idle.len() > 512, "only {} connections opened", idle.len());
    sweeps_go_on(&daemon, None, before).await;
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
    let stderr = daemon.process.stderr();
    assert!(!stderr.contains("Too many open files"), "{stderr}");
    drop(idle);
}

#[test]
fn check_config_into_a_closed_pipe_ends_quietly() {
    let mut child = binary::llmprobe()
        .args(["check-config"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before anything is written (`| head -0`).
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(out.status.success(), "{:?}: {stderr}", out.status);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_off_a_terminal_have_no_colours_and_one_line_per_event() {
    let dir = fresh_dir("hostile-logs");
    // A discovered target whose name (from a label) holds a line break and
    // a fake log line.
    let sd = dir.join("targets.json");
    std::fs::write(
        &sd,
        r#"[{"targets": ["127.0.0.1:9"], "labels": {"name": "evil\nFAKE 2026-01-01T00:00:00Z ERROR injected", "model": "m"}}]"#,
    )
    .unwrap();
    let more = format!(
        "file_sd:\n  files: [\"{}\"]\ntarget_template:\n  name_label: name\n  model_label: model\n",
        sd.display()
    );
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, format!("{}{more}", simulated(""))).unwrap();
    let daemon = Running::start(&path, &[("RUST_LOG", "info")]);
    daemon.ready(Duration::from_secs(60)).await;
    wait::poll(
        "a log line naming the target",
        Duration::from_secs(60),
        || async {
            let stderr = daemon.process.stderr();
            if stderr.contains("evil") {
                Ok(())
            } else {
                Err(stderr)
            }
        },
    )
    .await;
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
    let stderr = daemon.process.stderr();
    assert!(!stderr.contains('\x1b'), "colours in a log file:\n{stderr}");
    assert!(
        !stderr.lines().any(|l| l.starts_with("FAKE")),
        "a name split a log line:\n{stderr}"
    );
    // The name is refused at discovery (control characters never become
    // a name), and the line that says so shows it escaped.
    assert!(
        stderr.contains("target name `evil\\u{a}FAKE") && stderr.contains("U+000A"),
        "{stderr}"
    );
}

/// Sends SIGHUP (a reload) to the daemon.
fn hup(daemon: &Running) {
    let status = Command::new("kill")
        .args(["-HUP", &daemon.process.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// `llmprobe_config_last_reload_successful` as /metrics says it.
async fn reload_successful(daemon: &Running) -> Option<f64> {
    let text = daemon.get("/metrics").await?;
    support::exposition::metric(&text, "llmprobe_config_last_reload_successful", &[])
}

/// Starts the daemon on `config`, spoils it with `spoil` (given the config's
/// path), sends SIGHUP, and checks that the reload failed while the daemon
/// kept its targets and its life, and acts on SIGTERM.
async fn a_bad_reload_keeps_the_running_config(
    tag: &str,
    config: String,
    spoil: impl FnOnce(&Path),
) {
    let dir = fresh_dir(tag);
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, config).unwrap();
    std::fs::write(dir.join("prompts.jsonl"), "hello\n").unwrap();
    let daemon = Running::start(&path, &[]);
    daemon.ready(Duration::from_secs(60)).await;
    let before = first_sweep(&daemon, None).await;
    spoil(&path);
    hup(&daemon);
    wait::poll("the reload to fail", Duration::from_secs(60), || async {
        daemon.process.assert_running();
        match reload_successful(&daemon).await {
            Some(0.0) => Ok(()),
            other => Err(format!("{other:?}\n{}", daemon.process.tail())),
        }
    })
    .await;
    // The old configuration still runs: its target is still measured.
    sweeps_go_on(&daemon, None, before).await;
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(30)));
    assert!(status.success(), "{status}");
    let stderr = daemon.process.stderr();
    assert!(
        stderr.contains("configuration reload failed; keeping the previous configuration"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_billion_laughs_keeps_the_running_config() {
    a_bad_reload_keeps_the_running_config("hostile-laughs", simulated(""), |path| {
        let laughs =
            std::fs::read_to_string(support::paths::repo().join("testdata/bad-yaml-aliases.yml"))
                .unwrap();
        std::fs::write(path, laughs).unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_with_an_emptied_file_keeps_the_running_config() {
    a_bad_reload_keeps_the_running_config("hostile-emptied", simulated(""), |path| {
        std::fs::write(path, "").unwrap();
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_whose_prompts_file_is_a_fifo_neither_hangs_nor_holds_sigterm() {
    // The workload reads its prompts from a file, which becomes a FIFO
    // nobody writes: opening it would block for ever.
    let config = Yaml {
        levels: "[1, 2]",
        requests_per_level: "4",
        min_requests_per_level: 2,
        workloads: Some(
            "workloads:\n  chat:\n    max_completion_tokens: 8\n    prompts_file: prompts.jsonl",
        ),
        rest: "targets:\n  - name: simulated\n    simulator:\n      profile: tiny\n",
        ..Yaml::default()
    }
    .render();
    a_bad_reload_keeps_the_running_config("hostile-fifo", config, |path| {
        let prompts = path.parent().unwrap().join("prompts.jsonl");
        std::fs::remove_file(&prompts).unwrap();
        let status = Command::new("mkfifo").arg(&prompts).status().unwrap();
        assert!(status.success());
    })
    .await;
}

/// Swaps `file` between a regular file holding `[]` and a FIFO nobody
/// writes, as fast as it can, until `stop`: a reader that checks the path
/// and then opens it is bound to open the FIFO some time (issue 29).
fn swap_in_fifos(file: std::path::PathBuf, stop: Arc<std::sync::atomic::AtomicBool>) {
    let dir = file.parent().unwrap().to_path_buf();
    let (regular, fifo) = (dir.join("swap.txt"), dir.join("swap.fifo"));
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        std::fs::write(&regular, "[]").unwrap();
        std::fs::rename(&regular, &file).unwrap();
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: mkfifo reads the NUL-terminated path and nothing else.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } == 0 {
            std::fs::rename(&fifo, &file).unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fifo_swapped_in_for_a_discovery_file_neither_stalls_nor_holds_sigterm() {
    let dir = fresh_dir("hostile-fifo-sd");
    let targets = dir.join("targets");
    std::fs::create_dir_all(&targets).unwrap();
    let file = targets.join("fleet.json");
    std::fs::write(&file, "[]").unwrap();
    let more = "file_sd: {files: [targets/*.json], refresh_interval: 100ms}\ntarget_template: {name_label: name, model: m}\n";
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, simulated(more)).unwrap();
    let daemon = Running::start(&path, &[]);
    daemon.ready(Duration::from_secs(60)).await;
    let before = first_sweep(&daemon, None).await;

    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let swapper = {
        let (file, stop) = (file.clone(), stop.clone());
        std::thread::spawn(move || swap_in_fifos(file, stop))
    };
    // The static target is measured meanwhile, and the FIFO was seen (and
    // refused, never waited on).
    sweeps_go_on(&daemon, None, before).await;
    let label = file.display().to_string();
    wait::poll("a FIFO refused", Duration::from_secs(60), || async {
        let text = daemon.get("/metrics").await.unwrap_or_default();
        let errors = metric_sum(
            &text,
            "llmprobe_file_sd_read_errors_total",
            &[("file", &label)],
        );
        if errors >= 1.0 {
            Ok(())
        } else {
            Err(format!("{errors} read errors\n{}", daemon.process.tail()))
        }
    })
    .await;
    // SIGTERM while reads keep meeting the FIFO: the process ends in the
    // documented bound (docs/operating.md), far under TimeoutStopSec=30.
    let start = std::time::Instant::now();
    let status = tokio::task::block_in_place(|| daemon.stop(Duration::from_secs(15)));
    assert!(status.success(), "{status}");
    assert!(start.elapsed() < Duration::from_secs(15));
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    swapper.join().unwrap();
    let stderr = daemon.process.stderr();
    assert!(stderr.contains("a FIFO"), "{stderr}");
}
