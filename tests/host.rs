//! The packaged host as documented (docs/install.md, docs/operating.md):
//! which configuration file is read when none is named, `--env-file` as the
//! unit's EnvironmentFile=, and `sweep` beside a daemon: the sweep lock in
//! `state_dir` and the idle gate, both skipped by `--force`.

mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use llmprobe::schedule::state::StateDir;
use llmprobe::schedule::sweep_lock::{self, Claim};
use support::paths::{self, ScratchDir};
use support::process::assert_success;

/// `llmprobe` run in `dir`, with no `$LLMPROBE_CONFIG` from the caller.
fn llmprobe_in(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_llmprobe"));
    c.current_dir(dir).env_remove("LLMPROBE_CONFIG");
    c
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A small, quick configuration: the simulated engine, one level.
fn quick_config(extra_target_keys: &str, state_dir: &Path) -> String {
    format!(
        "listen: \"127.0.0.1:0\"\nstate_dir: \"{}\"\n\
         defaults:\n  warmup_requests: 0\n  levels: [1]\n  min_requests_per_level: 2\n  \
         requests_per_level: 1x\n  probe: {{ interval: 0s }}\n\
         workloads:\n  w:\n    max_completion_tokens: 4\n    prompts: [\"hi\"]\n\
         targets:\n  - name: sim\n    simulator: {{ profile: tiny }}\n    workloads: [w]\n{extra_target_keys}",
        state_dir.display()
    )
}

#[test]
fn the_default_config_search_order() {
    let dir = ScratchDir::new("host-search");
    // Nothing in the current folder: the system file, else an error naming
    // both places.
    let out = llmprobe_in(dir.path())
        .arg("check-config")
        .output()
        .unwrap();
    if Path::new("/etc/llmprobe/llmprobe.yaml").exists() {
        let all = format!("{}{}", stdout(&out), stderr(&out));
        assert!(all.contains("/etc/llmprobe/llmprobe.yaml"), "{all}");
    } else {
        assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
        let err = stderr(&out);
        assert!(
            err.contains("neither config/llmprobe.yaml (in the current folder) nor /etc/llmprobe/llmprobe.yaml exists"),
            "{err}"
        );
    }

    // A checkout's config/llmprobe.yaml comes first.
    std::fs::create_dir(dir.join("config")).unwrap();
    std::fs::copy(
        paths::repo().join("config/llmprobe.yaml"),
        dir.join("config/llmprobe.yaml"),
    )
    .unwrap();
    let out = llmprobe_in(dir.path())
        .arg("check-config")
        .output()
        .unwrap();
    assert_success("check-config in a checkout", &out);
    assert!(
        stdout(&out).contains("configuration config/llmprobe.yaml is valid"),
        "{}",
        stdout(&out)
    );

    // $LLMPROBE_CONFIG before the search, --config before $LLMPROBE_CONFIG.
    let named = dir.join("named.yaml");
    std::fs::copy(paths::repo().join("config/llmprobe.yaml"), &named).unwrap();
    let out = llmprobe_in(dir.path())
        .arg("check-config")
        .env("LLMPROBE_CONFIG", &named)
        .output()
        .unwrap();
    assert_success("check-config with $LLMPROBE_CONFIG", &out);
    assert!(
        stdout(&out).contains("named.yaml is valid"),
        "{}",
        stdout(&out)
    );
    let out = llmprobe_in(dir.path())
        .args(["check-config", "--config", "missing.yaml"])
        .env("LLMPROBE_CONFIG", &named)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr(&out).contains("missing.yaml"), "{}", stderr(&out));

    // --help says the order.
    let out = llmprobe_in(dir.path()).arg("--help").output().unwrap();
    let help = stdout(&out)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(
        help.contains("the first that exists of config/llmprobe.yaml (in the current folder: a checkout) and /etc/llmprobe/llmprobe.yaml"),
        "{help}"
    );
}

#[test]
fn env_file_loads_the_units_keys_before_the_config_is_read() {
    let dir = ScratchDir::new("host-env-file");
    let config = dir.join("llmprobe.yaml");
    std::fs::write(
        &config,
        "targets:\n  - name: w1\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    \
         api_key_env: HOST_TEST_KEY\n    workloads: [w]\n\
         workloads:\n  w:\n    prompts: [\"hi\"]\n",
    )
    .unwrap();
    let config = config.to_str().unwrap();

    let out = llmprobe_in(dir.path())
        .args(["check-config", "--config", config])
        .env_remove("HOST_TEST_KEY")
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "the key is missing without the file"
    );
    assert!(stderr(&out).contains("HOST_TEST_KEY"), "{}", stderr(&out));

    let env_file = dir.join("default");
    std::fs::write(
        &env_file,
        "# keys, as in /etc/default/llmprobe\n\nHOST_TEST_KEY=\"sk-host-secret\"\n",
    )
    .unwrap();
    let out = llmprobe_in(dir.path())
        .args(["check-config", "--config", config, "--env-file"])
        .arg(&env_file)
        .env_remove("HOST_TEST_KEY")
        .output()
        .unwrap();
    assert_success("check-config --env-file", &out);
    assert!(!stdout(&out).contains("sk-host-secret") && !stderr(&out).contains("sk-host-secret"));

    std::fs::write(&env_file, "A=1\nHOST_TEST_KEY sk-host-secret\n").unwrap();
    let out = llmprobe_in(dir.path())
        .args(["check-config", "--config", config, "--env-file"])
        .arg(&env_file)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!("{}:2: no `=`", env_file.display())),
        "{err}"
    );
    assert!(!err.contains("sk-host-secret"), "{err}");
}

#[test]
fn sweep_refuses_a_target_a_daemon_is_sweeping_unless_forced() {
    let dir = ScratchDir::new("host-lock");
    let state = dir.join("state");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, quick_config("", &state)).unwrap();
    // The daemon's side of the lock, held as a daemon holds it mid-sweep.
    let config = llmprobe::load_config(&path).unwrap();
    let target = &config.targets[0];
    let held = match sweep_lock::try_claim(&StateDir::open(&state).unwrap(), target, true) {
        Claim::Held(h) => h,
        other => panic!("{other:?}"),
    };
    let sweep = |extra: &[&str]| {
        llmprobe_in(dir.path())
            .args(["sweep", "--format", "json", "--config"])
            .arg(&path)
            .args(extra)
            .output()
            .unwrap()
    };
    let out = sweep(&[]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(
        stderr(&out).contains("sim: a daemon is sweeping this target now"),
        "{}",
        stderr(&out)
    );
    assert!(stdout(&out).is_empty(), "nothing swept: {}", stdout(&out));

    let out = sweep(&["--force"]);
    assert_success("sweep --force", &out);
    drop(held);
    let out = sweep(&[]);
    assert_success("sweep once the daemon's sweep ended", &out);
}

/// Serves `busy_requests 3` on every request, until the test ends.
fn busy_metrics() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let body = "busy_requests 3\n";
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    format!("http://{addr}/metrics")
}

#[test]
fn sweep_waits_for_the_idle_gate_unless_forced() {
    let dir = ScratchDir::new("host-gate");
    let url = busy_metrics();
    let gate = format!(
        "    idle_gate: {{ metrics_url: \"{url}\", metric: busy_requests, max_value: 0, retry_every: 100ms }}\n"
    );
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, quick_config(&gate, &dir.join("state"))).unwrap();
    let mut child = llmprobe_in(dir.path())
        .args(["sweep", "--config"])
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Still waiting after a while: the server stays busy.
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(3) {
        assert!(child.try_wait().unwrap().is_none(), "sweep did not wait");
        std::thread::sleep(Duration::from_millis(100));
    }
    child.kill().unwrap();
    let out = child.wait_with_output().unwrap();
    let err = stderr(&out);
    assert!(
        err.contains("server busy: the sweep waits for the idle gate"),
        "{err}"
    );

    let out = llmprobe_in(dir.path())
        .args(["sweep", "--force", "--config"])
        .arg(&path)
        .output()
        .unwrap();
    assert_success("sweep --force past a busy idle gate", &out);
}

#[test]
fn the_daemon_makes_each_targets_sweep_lock_in_state_dir() {
    let dir = ScratchDir::new("host-daemon-lock");
    let state = dir.join("state");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(&path, quick_config("", &state)).unwrap();
    let config = llmprobe::load_config(&path).unwrap();
    let lock = sweep_lock::path_of(&StateDir::reader(&state), &config.targets[0]);
    let saved = lock.with_extension("json");
    let daemon = support::binary::Running::start(&path, &[]);
    // The state is saved while the lock is held: both are there after the
    // first sweep.
    let start = Instant::now();
    while !saved.exists() {
        daemon.process.assert_running();
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no sweep saved: {}",
            daemon.process.tail()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&lock).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "{}", lock.display());
    daemon.stop(Duration::from_secs(20));
}
