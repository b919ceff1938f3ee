//! The artifacts operators install, and docs/install.md which installs them:
//!
//! - the container image built by `packaging/image/build`: what
//!   `podman image inspect` says (user, entrypoint, command, ports), the files
//!   of its exported root filesystem, and the binary run from it, chrooted as
//!   the image's user (this sandbox refuses to run containers);
//! - the Debian package built by `packaging/deb/build`: control fields and
//!   conffiles, installed with dpkg into a scratch root: `check-config` on the
//!   installed configuration and example, `systemd-analyze verify` on the
//!   installed unit, man pages, completions, purge;
//! - every command in the code blocks of docs/install.md, in order, in the
//!   forms the page's last section lists.
//!
//! Building the artifacts is a release build of minutes, so the tests that
//! need them are `#[ignore]`d in a plain `cargo test`; `scripts/test` runs
//! `packaging/build` and then `cargo test --test packaging -- --ignored`.
//! Needs podman, dpkg, systemd-analyze, chroot, curl and man (scripts/test
//! installs what is missing). `PODMAN` overrides the podman command line.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

const VERSION: &str = env!("CARGO_PKG_VERSION");
const BUILD_HINT: &str = "run `packaging/build` first (scripts/test does)";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

fn deb_file() -> PathBuf {
    let path = repo().join(format!("target/packages/llmprobe_{VERSION}-1_amd64.deb"));
    assert!(path.exists(), "{} is missing: {BUILD_HINT}", path.display());
    path
}

fn image_archive() -> PathBuf {
    let path = repo().join(format!("target/packages/llmprobe-{VERSION}.oci.tar"));
    assert!(path.exists(), "{} is missing: {BUILD_HINT}", path.display());
    path
}

fn image_name() -> String {
    format!("localhost/llmprobe:{VERSION}")
}

/// Runs a command to completion; a command that cannot start fails the test.
fn output(cmd: &mut Command) -> Output {
    cmd.output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn assert_success(what: &str, out: &Output) -> String {
    assert!(
        out.status.success(),
        "{what} failed with {}\n--- stdout\n{}\n--- stderr\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    stdout(out)
}

fn run_ok(what: &str, cmd: &mut Command) -> String {
    assert_success(what, &output(cmd))
}

/// A packaging script, in the environment of the shell that scripts/test
/// ran `packaging/build` from: without what cargo sets for a test process
/// (CARGO_PKG_*, OUT_DIR, RUSTUP_TOOLCHAIN...), which build scripts of
/// dependencies watch (ring reruns on OUT_DIR) and would make the nested
/// cargo rebuild the release binary from scratch.
fn packaging_script(path: &str) -> Command {
    let mut cmd = Command::new(repo().join(path));
    for (key, _) in std::env::vars_os() {
        let key = key.to_string_lossy();
        let set_by_cargo = (key.starts_with("CARGO") && key != "CARGO_HOME")
            || key.starts_with("RUSTUP_TOOLCHAIN")
            || key.starts_with("LLMPROBE_BUILD_")
            || ["OUT_DIR", "RUST_RECURSION_COUNT", "LD_LIBRARY_PATH"].contains(&key.as_ref());
        if set_by_cargo {
            cmd.env_remove(key.as_ref());
        }
    }
    cmd.current_dir(repo());
    cmd
}

fn bash(script: &str) -> Output {
    output(
        Command::new("bash")
            .args(["-c", script])
            .current_dir(repo()),
    )
}

/// The podman command line: `PODMAN`, else podman on vfs storage (works
/// without overlay support), with `extra` global options.
fn podman(extra: &[&str]) -> Command {
    let line = std::env::var("PODMAN").unwrap_or_else(|_| "podman --storage-driver vfs".into());
    let mut words = line.split_whitespace();
    let mut cmd = Command::new(words.next().expect("empty PODMAN"));
    cmd.args(words).args(extra);
    cmd
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// GET `path` from 127.0.0.1:`port` over HTTP/1.0; None while nothing listens.
fn http_get(port: u16, path: &str) -> Option<String> {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(conn, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    conn.read_to_string(&mut text).ok()?;
    Some(text)
}

/// Polls /metrics until `pred` holds (90 s at most: a first sweep on a
/// loaded machine) and returns it.
fn wait_for_metrics(port: u16, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let text = http_get(port, "/metrics").unwrap_or_default();
        if pred(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; /metrics:\n{text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Files listed in a folder tree, relative to it, sorted ("etc/passwd").
fn files_under(root: &Path) -> Vec<String> {
    fn walk(root: &Path, dir: &Path, out: &mut Vec<String>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                walk(root, &path, out);
            } else {
                out.push(path.strip_prefix(root).unwrap().display().to_string());
            }
        }
    }
    let mut out = Vec::new();
    walk(root, root, &mut out);
    out.sort();
    out
}

/// `KEY=VALUE` lines of an environment file, as systemd's
/// `EnvironmentFile=` reads them (comments and blank lines skipped).
fn env_file(path: &Path) -> BTreeMap<String, String> {
    read(path)
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

// ---------------------------------------------------------------------------
// Scratch roots and processes

struct TempDir(PathBuf);

impl TempDir {
    fn new(tag: &str) -> Self {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static N: AtomicUsize = AtomicUsize::new(0);
        let path = std::env::temp_dir().join(format!(
            "llmprobe-packaging-{tag}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A process started by a test; killed when dropped.
struct Child(std::process::Child);

impl Child {
    fn spawn(cmd: &mut Command) -> Child {
        Child(
            cmd.spawn()
                .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}")),
        )
    }

    /// SIGTERM, as systemd stops a service, and the exit status.
    fn terminate(mut self) -> std::process::ExitStatus {
        run_ok(
            "kill -TERM",
            Command::new("kill").args(["-TERM", &self.0.id().to_string()]),
        );
        let deadline = Instant::now() + Duration::from_secs(15);
        loop {
            if let Some(status) = self.0.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "no exit within 15 s of SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// An empty root with a dpkg database, the package installed into it with
/// maintainer scripts run outside a chroot (they honour `DPKG_ROOT`), and
/// dependencies not checked (the root has no procps).
fn install_deb(root: &Path) -> String {
    for dir in [
        "var/lib/dpkg/info",
        "var/lib/dpkg/updates",
        "var/lib/dpkg/triggers",
    ] {
        std::fs::create_dir_all(root.join(dir)).unwrap();
    }
    for file in ["var/lib/dpkg/status", "var/lib/dpkg/available"] {
        std::fs::write(root.join(file), "").unwrap();
    }
    run_ok(
        "dpkg -i into a scratch root",
        Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["--force-script-chrootless", "--force-depends", "-i"])
            .arg(deb_file()),
    )
}

/// An image's configuration from `podman image inspect`.
fn inspect(podman_opts: &[&str], image: &str) -> serde_json::Value {
    let text = run_ok(
        "podman image inspect",
        podman(podman_opts).args(["image", "inspect", image]),
    );
    let list: serde_json::Value = serde_json::from_str(&text).unwrap();
    list[0].clone()
}

/// The image's root filesystem, from a created (never started) container
/// exported with `podman export`, unpacked into `dir`.
fn export_rootfs(podman_opts: &[&str], image: &str, dir: &Path) {
    let id = run_ok("podman create", podman(podman_opts).args(["create", image]));
    let id = id.trim();
    let tar = dir.with_extension("tar");
    let exported = output(
        podman(podman_opts)
            .args(["export", "--output"])
            .arg(&tar)
            .arg(id),
    );
    run_ok("podman rm", podman(podman_opts).args(["rm", id]));
    assert_success("podman export", &exported);
    std::fs::create_dir_all(dir).unwrap();
    run_ok(
        "tar -x",
        Command::new("tar").arg("-xf").arg(&tar).arg("-C").arg(dir),
    );
    std::fs::remove_file(&tar).unwrap();
}

/// Runs `args` inside `rootfs` as `user` (uid:gid), with no environment but
/// PATH (for chroot itself).
fn chroot(rootfs: &Path, user: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("chroot");
    cmd.arg(format!("--userspec={user}"))
        .arg(rootfs)
        .args(args)
        .env_clear()
        .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin");
    cmd
}

// ---------------------------------------------------------------------------
// The container image

#[test]
#[ignore = "needs packaging/build (scripts/test runs it)"]
fn image_holds_the_static_binary_its_user_config_and_port() {
    image_archive();
    let image = image_name();
    let info = inspect(&[], &image);
    let config = &info["Config"];
    assert_eq!(config["User"], "65532:65532", "{config:#}");
    assert_eq!(
        config["Entrypoint"],
        serde_json::json!(["/usr/bin/llmprobe"]),
        "{config:#}"
    );
    assert_eq!(
        config["Cmd"],
        serde_json::json!(["run", "--config", "/etc/llmprobe/llmprobe.yaml"]),
        "{config:#}"
    );
    let ports: Vec<&String> = config["ExposedPorts"]
        .as_object()
        .expect("ExposedPorts")
        .keys()
        .collect();
    assert_eq!(ports, ["9775/tcp"], "{config:#}");
    assert_eq!(
        config["Labels"]["org.opencontainers.image.version"], VERSION,
        "{config:#}"
    );
    // One layer: the files below and nothing else.
    let size = info["Size"].as_u64().expect("Size");
    eprintln!("image {image}: {size} bytes");
    assert!(
        size < 30_000_000,
        "image of {size} bytes: not a stripped binary?"
    );

    let dir = TempDir::new("image");
    let rootfs = dir.path().join("rootfs");
    export_rootfs(&[], &image, &rootfs);
    assert_eq!(
        files_under(&rootfs),
        [
            "etc/group",
            "etc/llmprobe/llmprobe.yaml",
            "etc/passwd",
            "usr/bin/llmprobe",
        ]
    );
    let passwd = read(&rootfs.join("etc/passwd"));
    assert!(
        passwd.starts_with("llmprobe:x:65532:65532:"),
        "/etc/passwd: {passwd}"
    );

    // The binary runs with nothing but the image around it, as its user.
    let version = run_ok(
        "llmprobe --version in the image",
        &mut chroot(&rootfs, "65532:65532", &["/usr/bin/llmprobe", "--version"]),
    );
    // "llmprobe 0.1.0 (revision 1a2b3c4d5e6f, rustc 1.95.0)"
    let revision = version
        .split("(revision ")
        .nth(1)
        .and_then(|r| r.split(',').next())
        .unwrap_or_else(|| panic!("no revision in `{version}`"));
    assert!(
        version.starts_with(&format!("llmprobe {VERSION} (revision "))
            && version.contains(", rustc ")
            && revision.len() == 12
            && revision.chars().all(|c| c.is_ascii_hexdigit()),
        "`{version}`"
    );
    assert_eq!(
        config["Labels"]["org.opencontainers.image.revision"], revision,
        "{config:#}"
    );
    // The image's environment names its config, so that check-config run
    // in the container needs no --config; run here with that environment.
    let env: Vec<String> = config["Env"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default();
    let config_env = "LLMPROBE_CONFIG=/etc/llmprobe/llmprobe.yaml";
    assert!(env.iter().any(|e| e == config_env), "{config:#}");
    let mut check = chroot(
        &rootfs,
        "65532:65532",
        &["/usr/bin/llmprobe", "check-config"],
    );
    for (k, v) in env.iter().filter_map(|e| e.split_once('=')) {
        if k != "PATH" {
            check.env(k, v);
        }
    }
    let explained = run_ok("check-config on the image's config", &mut check);
    assert!(
        explained.contains("listen: 0.0.0.0:9775"),
        "the image's config should listen on every interface:\n{explained}"
    );
    let readelf = run_ok(
        "readelf",
        Command::new("readelf")
            .args(["-lW"])
            .arg(rootfs.join("usr/bin/llmprobe")),
    );
    assert!(
        !readelf.contains("program interpreter"),
        "the image's binary is dynamically linked:\n{readelf}"
    );
}

// ---------------------------------------------------------------------------
// The Debian package

#[test]
#[ignore = "needs packaging/build (scripts/test runs it)"]
fn deb_installs_a_working_config_unit_man_pages_and_completions() {
    let deb = deb_file();
    let field = |name: &str| {
        run_ok(
            "dpkg-deb -f",
            Command::new("dpkg-deb").arg("-f").arg(&deb).arg(name),
        )
        .trim()
        .to_string()
    };
    assert_eq!(field("Package"), "llmprobe");
    assert_eq!(field("Version"), format!("{VERSION}-1"));
    assert_eq!(field("Architecture"), "amd64");
    assert_eq!(field("Depends"), "procps");
    let bytes = std::fs::metadata(&deb).unwrap().len();
    eprintln!("{}: {bytes} bytes", deb.display());

    let dir = TempDir::new("deb");
    let root = &dir.path().join("root");
    std::fs::create_dir(root).unwrap();
    install_deb(root);
    let conffiles = read(&root.join("var/lib/dpkg/info/llmprobe.conffiles"));
    assert_eq!(
        conffiles.lines().collect::<Vec<_>>(),
        ["/etc/llmprobe/llmprobe.yaml", "/etc/default/llmprobe"]
    );
    let files = files_under(root);
    for wanted in [
        "usr/bin/llmprobe",
        "usr/lib/systemd/system/llmprobe.service",
        "etc/llmprobe/llmprobe.yaml",
        "etc/default/llmprobe",
        "usr/share/llmprobe/prometheus/alerts.yml",
        "usr/share/llmprobe/prometheus/scrape.yml",
        "usr/share/llmprobe/prometheus/fleet/recording.yml",
        "usr/share/llmprobe/grafana/dashboards/llmprobe-capacity-overview.json",
        "usr/share/llmprobe/grafana/provisioning/dashboards/llmprobe.yaml",
        "usr/share/llmprobe/examples/example.yaml",
        "usr/share/llmprobe/examples/prompts/chats.jsonl",
        "usr/share/llmprobe/examples/credentials.conf",
        "usr/share/man/man1/llmprobe.1.gz",
        "usr/share/man/man1/llmprobe-check-config.1.gz",
        "usr/share/bash-completion/completions/llmprobe",
        "usr/share/zsh/vendor-completions/_llmprobe",
        "usr/share/fish/vendor_completions.d/llmprobe.fish",
        "usr/share/doc/llmprobe/copyright",
        "usr/share/doc/llmprobe/changelog.gz",
        "usr/share/doc/llmprobe/runbook.md",
        "usr/share/doc/llmprobe/operating.md",
    ] {
        assert!(
            files.iter().any(|f| f == wanted),
            "{wanted} not installed: {files:#?}"
        );
    }
    assert!(
        !files.iter().any(|f| f.ends_with("_test.yml")),
        "promtool unit tests installed: {files:#?}"
    );
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(root.join("etc/default/llmprobe"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "/etc/default/llmprobe holds keys");

    // The installed configuration works as installed.
    let bin = root.join("usr/bin/llmprobe");
    let config = root.join("etc/llmprobe/llmprobe.yaml");
    let explained = run_ok(
        "check-config on the installed config",
        Command::new(&bin)
            .arg("check-config")
            .arg("--config")
            .arg(&config)
            .env_clear(),
    );
    assert!(explained.contains("target simulated"), "{explained}");
    // The example works once its key is set, with the prompt files next to it,
    // and says which key is missing otherwise.
    let example = root.join("usr/share/llmprobe/examples/example.yaml");
    run_ok(
        "check-config on the installed example",
        Command::new(&bin)
            .arg("check-config")
            .arg("--config")
            .arg(&example)
            .env_clear()
            .env("WORKER_API_KEY", "sk-test-key"),
    );
    let unset = output(
        Command::new(&bin)
            .arg("check-config")
            .arg("--config")
            .arg(&example)
            .env_clear(),
    );
    assert!(!unset.status.success());
    assert!(
        String::from_utf8_lossy(&unset.stderr).contains("WORKER_API_KEY"),
        "{unset:?}"
    );

    // The installed unit is the one tests/operator_files.rs checks, and
    // verifies with the installed binary in its command lines (the scratch
    // root has no systemd of its own to verify against).
    let unit = read(&root.join("usr/lib/systemd/system/llmprobe.service"));
    assert_eq!(unit, read(&repo().join("systemd/llmprobe.service")));
    let unit_dir = dir.path().join("unit");
    std::fs::create_dir(&unit_dir).unwrap();
    let unit_path = unit_dir.join("llmprobe.service");
    std::fs::write(
        &unit_path,
        unit.replace("/usr/bin/llmprobe ", &format!("{} ", bin.display())),
    )
    .unwrap();
    let verify = output(
        Command::new("systemd-analyze")
            .arg("verify")
            .arg(&unit_path),
    );
    let stderr = String::from_utf8_lossy(&verify.stderr).into_owned();
    let complaints: Vec<&str> = stderr.lines().filter(|l| l.contains("llmprobe")).collect();
    assert!(
        verify.status.success() && complaints.is_empty(),
        "systemd-analyze verify on the installed unit: {}\n{stderr}",
        verify.status
    );

    // Man pages render; completion scripts load.
    let page = run_ok(
        "man -l",
        Command::new("man")
            .arg("-l")
            .arg(root.join("usr/share/man/man1/llmprobe.1.gz"))
            .env("MANWIDTH", "80")
            .env("MAN_KEEP_FORMATTING", "0"),
    );
    assert!(page.contains("check-config"), "{page}");
    let bash_completion = root.join("usr/share/bash-completion/completions/llmprobe");
    let complete = run_ok(
        "bash completion",
        Command::new("bash").arg("-c").arg(format!(
            "source {}; complete -p llmprobe",
            bash_completion.display()
        )),
    );
    assert!(complete.contains("_llmprobe"), "{complete}");

    // Purge removes the conffiles, the package's files and the link that
    // `systemctl enable` made.
    run_ok(
        "systemctl --root enable",
        Command::new("systemctl")
            .arg(format!("--root={}", root.display()))
            .args(["enable", "llmprobe"]),
    );
    run_ok(
        "dpkg --purge",
        Command::new("dpkg")
            .arg(format!("--root={}", root.display()))
            .args(["--force-script-chrootless", "--purge", "llmprobe"]),
    );
    let left: Vec<String> = files_under(root)
        .into_iter()
        .filter(|f| !f.starts_with("var/lib/dpkg"))
        .collect();
    assert!(left.is_empty(), "left after purge: {left:#?}");
}

// ---------------------------------------------------------------------------
// docs/install.md

/// The commands in docs/install.md's ```sh blocks, in order, without their
/// trailing comments.
fn doc_commands() -> Vec<String> {
    let text = read(&repo().join("docs/install.md"));
    let mut commands = Vec::new();
    let mut block: Option<bool> = None; // Some(is_sh) inside a fence
    for line in text.lines() {
        if line.starts_with("```") {
            block = match block {
                Some(_) => None,
                None => Some(line.trim() == "```sh"),
            };
            continue;
        }
        if block != Some(true) {
            continue;
        }
        let command = line.split("  #").next().unwrap_or("").trim();
        if !command.is_empty() && !command.starts_with('#') {
            commands.push(command.to_string());
        }
    }
    commands
}

/// The commands the test runs, in the page's order, as written there.
fn tested_commands() -> Vec<String> {
    let curl = "curl -s http://127.0.0.1:9775/metrics | grep '^llmprobe_capacity_knee_concurrency'";
    vec![
        "packaging/deb/build".into(),
        format!("apt-get install ./target/packages/llmprobe_{VERSION}-1_amd64.deb"),
        "llmprobe check-config --config /etc/llmprobe/llmprobe.yaml".into(),
        "systemctl enable --now llmprobe".into(),
        curl.into(),
        "cp -r /usr/share/llmprobe/examples/prompts /etc/llmprobe/".into(),
        "cp /usr/share/llmprobe/examples/example.yaml /etc/llmprobe/llmprobe.yaml".into(),
        "echo 'WORKER_API_KEY=sk-YOUR-KEY-HERE' >> /etc/default/llmprobe".into(),
        "sh -c 'set -a; . /etc/default/llmprobe; exec llmprobe check-config --config /etc/llmprobe/llmprobe.yaml'".into(),
        "systemctl restart llmprobe".into(),
        "systemctl reload llmprobe".into(),
        "apt-get remove llmprobe".into(),
        "apt-get purge llmprobe".into(),
        "packaging/image/build".into(),
        format!("podman load -i target/packages/llmprobe-{VERSION}.oci.tar"),
        format!("podman run -d --name llmprobe -p 9775:9775 localhost/llmprobe:{VERSION}"),
        curl.into(),
        // No --config: the image's environment names its file.
        format!("podman run --rm localhost/llmprobe:{VERSION} sweep"),
    ]
}

#[test]
fn install_doc_runs_no_command_the_test_does_not_run() {
    assert_eq!(
        doc_commands(),
        tested_commands(),
        "docs/install.md and tests/packaging.rs disagree: a command added to the page must be run here"
    );
}

/// `command` with the absolute paths of an installed system moved under
/// `root` and `llmprobe` run from there.
fn in_root(command: &str, root: &Path) -> String {
    let r = root.display().to_string();
    let moved = command
        .replace(" /etc/", &format!(" {r}/etc/"))
        .replace(" /usr/", &format!(" {r}/usr/"))
        .replace("exec llmprobe ", &format!("exec {r}/usr/bin/llmprobe "));
    match moved.strip_prefix("llmprobe ") {
        Some(rest) => format!("{r}/usr/bin/llmprobe {rest}"),
        None => moved,
    }
}

/// A line of the installed unit (`ExecStart=...`), its words with paths
/// moved under `root`, `$MAINPID` replaced.
fn unit_command(line: &str, root: &Path, pid: Option<u32>) -> Vec<String> {
    line.split_whitespace()
        .map(|w| {
            let w = if w.starts_with("/usr/bin/llmprobe") || w.starts_with("/etc/llmprobe/") {
                format!("{}{w}", root.display())
            } else {
                w.to_string()
            };
            match pid {
                Some(pid) => w.replace("$MAINPID", &pid.to_string()),
                None => w,
            }
        })
        .collect()
}

/// The service of the installed unit, started and stopped as systemd would
/// (clean environment plus `EnvironmentFile=`), listening on `port`.
struct Service {
    root: PathBuf,
    unit: String,
    port: u16,
    process: Option<Child>,
}

impl Service {
    fn new(root: &Path, port: u16) -> Service {
        Service {
            root: root.to_path_buf(),
            unit: read(&root.join("usr/lib/systemd/system/llmprobe.service")),
            port,
            process: None,
        }
    }

    fn lines(&self, key: &str) -> Vec<String> {
        self.unit
            .lines()
            .filter_map(|l| l.strip_prefix(key))
            .map(str::to_string)
            .collect()
    }

    /// The variables of every `EnvironmentFile=` (`-`: optional).
    fn environment(&self) -> BTreeMap<String, String> {
        let mut env = BTreeMap::new();
        for file in self.lines("EnvironmentFile=") {
            let (optional, file) = match file.strip_prefix('-') {
                Some(f) => (true, f.to_string()),
                None => (false, file),
            };
            let path = self.root.join(file.trim_start_matches('/'));
            if optional && !path.exists() {
                continue;
            }
            env.extend(env_file(&path));
        }
        env.insert(
            "LLMPROBE__LISTEN".into(),
            format!("127.0.0.1:{}", self.port),
        );
        env
    }

    fn command(&self, words: &[String]) -> Command {
        let mut cmd = Command::new(&words[0]);
        cmd.args(&words[1..])
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .envs(self.environment());
        cmd
    }

    fn start(&mut self) {
        let exec = self.lines("ExecStart=");
        assert_eq!(exec.len(), 1, "{exec:?}");
        let words = unit_command(&exec[0], &self.root, None);
        let mut cmd = self.command(&words);
        cmd.stderr(Stdio::null());
        self.process = Some(Child::spawn(&mut cmd));
        wait_for_metrics(self.port, "the service to serve /metrics", |t| {
            t.contains("llmprobe_config_last_reload_successful 1")
        });
    }

    fn restart(&mut self) {
        let status = self.process.take().expect("not running").terminate();
        assert!(
            status.success(),
            "the service exited with {status} on SIGTERM"
        );
        self.start();
    }

    /// `ExecReload=` lines in order, stopping at the first that fails.
    fn reload(&self) -> Result<(), String> {
        let pid = self.process.as_ref().expect("not running").0.id();
        for line in self.lines("ExecReload=") {
            let words = unit_command(&line, &self.root, Some(pid));
            let out = output(&mut self.command(&words));
            if !out.status.success() {
                return Err(format!(
                    "{line}: {}\n{}",
                    out.status,
                    String::from_utf8_lossy(&out.stderr)
                ));
            }
        }
        Ok(())
    }
}

/// Runs the curl | grep line against `port` until it prints the knee.
fn curl_knee(command: &str, port: u16) {
    let command = command.replace("9775", &port.to_string());
    let deadline = Instant::now() + Duration::from_secs(90);
    loop {
        let out = bash(&format!("set -o pipefail; {command}"));
        if out.status.success() {
            let text = stdout(&out);
            let knee: f64 = text
                .lines()
                .next()
                .and_then(|l| l.rsplit(' ').next())
                .and_then(|v| v.parse().ok())
                .unwrap_or_else(|| panic!("no knee value in {text}"));
            assert!(knee > 0.0, "knee {knee}: {text}");
            return;
        }
        assert!(Instant::now() < deadline, "no knee within 90 s: {out:?}");
        std::thread::sleep(Duration::from_millis(500));
    }
}

#[test]
#[ignore = "needs packaging/build (scripts/test runs it)"]
fn install_doc_commands_run() {
    let commands = doc_commands();
    assert_eq!(commands, tested_commands());
    let mut ran = 0;
    let started = Instant::now();
    let mut next = || {
        ran += 1;
        eprintln!(
            "[{:>5.1}s] {}",
            started.elapsed().as_secs_f64(),
            commands[ran - 1]
        );
        commands[ran - 1].as_str()
    };

    // --- Debian package
    let dir = TempDir::new("doc");
    let root = dir.path().join("root");
    std::fs::create_dir_all(&root).unwrap();

    let built = run_ok("packaging/deb/build", &mut packaging_script(next()));
    assert_eq!(repo().join(built.trim()), deb_file());

    let _ = next(); // apt-get install ./X.deb
    install_deb(&root);

    run_ok(
        "llmprobe check-config",
        Command::new("bash").arg("-c").arg(in_root(next(), &root)),
    );

    assert_eq!(next(), "systemctl enable --now llmprobe");
    run_ok(
        "systemctl --root enable",
        Command::new("systemctl")
            .arg(format!("--root={}", root.display()))
            .args(["enable", "llmprobe"]),
    );
    let link = std::fs::read_link(
        root.join("etc/systemd/system/multi-user.target.wants/llmprobe.service"),
    )
    .expect("enable made no link");
    assert_eq!(link, Path::new("/usr/lib/systemd/system/llmprobe.service"));
    let mut service = Service::new(&root, free_port());
    service.start();

    curl_knee(next(), service.port);

    // --- Measuring your servers
    run_ok(
        "cp prompts",
        Command::new("bash").arg("-c").arg(in_root(next(), &root)),
    );
    run_ok(
        "cp example",
        Command::new("bash").arg("-c").arg(in_root(next(), &root)),
    );
    // "then edit targets:": worker-1 becomes a local simulated server.
    let sim_port = free_port();
    let _sim = Child::spawn(
        Command::new(root.join("usr/bin/llmprobe"))
            .args([
                "simulate",
                "--profile",
                "tiny",
                "--model",
                "qwen2.5:7b",
                "--listen",
            ])
            .arg(format!("127.0.0.1:{sim_port}"))
            .stderr(Stdio::null()),
    );
    let config = root.join("etc/llmprobe/llmprobe.yaml");
    let example = read(&config);
    // worker-1's base_url and idle-gate metrics_url, and the commented
    // server_metrics_url of `defaults:`.
    assert_eq!(
        example.matches("http://10.0.0.5:8000").count(),
        3,
        "{example}"
    );
    std::fs::write(
        &config,
        example.replace(
            "http://10.0.0.5:8000",
            &format!("http://127.0.0.1:{sim_port}"),
        ),
    )
    .unwrap();

    run_ok(
        "echo key",
        Command::new("bash").arg("-c").arg(in_root(next(), &root)),
    );
    let explained = run_ok(
        "check-config with the keys",
        Command::new("bash")
            .arg("-c")
            .arg(in_root(next(), &root))
            .env_clear(),
    );
    assert!(explained.contains("target worker-1"), "{explained}");

    assert_eq!(next(), "systemctl restart llmprobe");
    service.restart();
    wait_for_metrics(service.port, "worker-1 measured", |t| {
        t.contains("target=\"worker-1\"")
    });

    assert_eq!(next(), "systemctl reload llmprobe");
    if let Err(e) = service.reload() {
        panic!("systemctl reload failed: {e}");
    }
    // And a rejected configuration fails the reload.
    std::fs::write(
        &config,
        read(&config).replace("levels: [1, 2, 4, 8, 16, 32]", "levels: [4, 2]"),
    )
    .unwrap();
    let rejected = service.reload();
    assert!(
        rejected.as_ref().is_err_and(|e| e.contains("levels")),
        "{rejected:?}"
    );
    let status = service.process.take().unwrap().terminate();
    assert!(status.success(), "{status}");

    // --- Removing: the configuration stays until purged.
    let dpkg = |action: &str| {
        run_ok(
            &format!("dpkg {action}"),
            Command::new("dpkg")
                .arg(format!("--root={}", root.display()))
                .args(["--force-script-chrootless", action, "llmprobe"]),
        )
    };
    assert_eq!(next(), "apt-get remove llmprobe");
    dpkg("--remove");
    assert!(!root.join("usr/bin/llmprobe").exists());
    assert!(config.exists() && root.join("etc/default/llmprobe").exists());
    assert_eq!(next(), "apt-get purge llmprobe");
    dpkg("--purge");
    assert!(!config.exists() && !root.join("etc/default/llmprobe").exists());
    assert!(
        std::fs::symlink_metadata(
            root.join("etc/systemd/system/multi-user.target.wants/llmprobe.service")
        )
        .is_err(),
        "purge left the link that enable made"
    );

    // --- Container image
    let image = run_ok("packaging/image/build", &mut packaging_script(next()));
    assert_eq!(image.trim(), image_name());

    // Loaded into a storage of its own: the archive is all it takes.
    let store = dir.path().join("storage");
    let root_opt = format!("--root={}", store.join("root").display());
    let runroot_opt = format!("--runroot={}", store.join("run").display());
    let opts = [root_opt.as_str(), runroot_opt.as_str()];
    let load = next();
    let words: Vec<&str> = load.split_whitespace().collect();
    assert_eq!(words[..2], ["podman", "load"]);
    let loaded = run_ok(
        "podman load",
        podman(&opts).args(&words[1..]).current_dir(repo()),
    );
    assert!(loaded.contains(&image_name()), "{loaded}");

    assert!(next().starts_with("podman run -d --name llmprobe -p 9775:9775"));
    let info = inspect(&opts, &image_name());
    let rootfs = dir.path().join("rootfs");
    export_rootfs(&opts, &image_name(), &rootfs);
    let mut argv: Vec<String> = Vec::new();
    for key in ["Entrypoint", "Cmd"] {
        for word in info["Config"][key].as_array().expect(key) {
            argv.push(word.as_str().unwrap().to_string());
        }
    }
    let entrypoint_len = info["Config"]["Entrypoint"].as_array().map_or(0, Vec::len);
    // `podman run IMAGE [ARGS]`: ARGS replace the image's command.
    let container = |args: &[&str]| {
        let mut words: Vec<&str> = argv.iter().map(String::as_str).collect();
        if !args.is_empty() {
            words.truncate(entrypoint_len);
            words.extend_from_slice(args);
        }
        let user = info["Config"]["User"].as_str().expect("User");
        let mut cmd = chroot(&rootfs, user, &words);
        for env in info["Config"]["Env"].as_array().into_iter().flatten() {
            if let Some((k, v)) = env.as_str().and_then(|e| e.split_once('=')) {
                cmd.env(k, v);
            }
        }
        cmd
    };
    let port = free_port();
    let daemon = Child::spawn(
        container(&[])
            .env("LLMPROBE__LISTEN", format!("127.0.0.1:{port}"))
            .stderr(Stdio::null()),
    );
    curl_knee(next(), port);
    let status = daemon.terminate();
    assert!(status.success(), "{status}");

    let sweep = next();
    let args: Vec<&str> = sweep
        .strip_prefix(&format!("podman run --rm {}", image_name()))
        .expect("podman run --rm IMAGE ARGS")
        .split_whitespace()
        .collect();
    assert_eq!(args, ["sweep"]);
    let table = run_ok("sweep in the image", &mut container(&args));
    assert!(table.contains("simulated"), "{table}");
    assert_eq!(ran, commands.len(), "commands of the page not run");
}

#[test]
fn in_root_moves_paths_and_the_binary() {
    let root = Path::new("/tmp/r");
    assert_eq!(
        in_root(
            "llmprobe check-config --config /etc/llmprobe/llmprobe.yaml",
            root
        ),
        "/tmp/r/usr/bin/llmprobe check-config --config /tmp/r/etc/llmprobe/llmprobe.yaml"
    );
    assert_eq!(
        in_root(
            "sh -c 'set -a; . /etc/default/llmprobe; exec llmprobe check-config --config /etc/x'",
            root
        ),
        "sh -c 'set -a; . /tmp/r/etc/default/llmprobe; exec /tmp/r/usr/bin/llmprobe check-config --config /tmp/r/etc/x'"
    );
    assert_eq!(
        in_root("cp -r /usr/share/a /etc/b/", root),
        "cp -r /tmp/r/usr/share/a /tmp/r/etc/b/"
    );
}
