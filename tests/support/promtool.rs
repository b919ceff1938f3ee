//! promtool, Prometheus's checker (Debian package `prometheus`, or the
//! binary named by `$PROMTOOL`). A test that needs it fails, saying so, when
//! it is missing.

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Command, Output, Stdio};

use super::paths;

const HINT: &str = "promtool is required: install Debian's `prometheus` package \
     (apt-get install -y prometheus; scripts/test does) or set PROMTOOL to a promtool binary";

/// The promtool binary's name or path.
fn tool() -> String {
    std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".to_string())
}

/// Runs `promtool ARGS` in the repository root.
pub fn run<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    Command::new(tool())
        .args(args)
        .current_dir(paths::repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{}` ({e}): {HINT}", tool()))
}

/// `promtool check metrics` on an exposition.
pub fn check_metrics(text: &str) -> Output {
    let mut child = Command::new(tool())
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run `{}` ({e}): {HINT}", tool()));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    child.wait_with_output().expect("promtool output")
}

/// Panics unless `promtool check metrics` accepts the exposition without a
/// word (a lint warning is printed but does not fail its exit status).
pub fn assert_metrics_clean(text: &str) {
    let out = check_metrics(text);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.trim().is_empty() && stderr.trim().is_empty(),
        "promtool check metrics: {}\nstdout:\n{stdout}\nstderr:\n{stderr}\nexposition:\n{text}",
        out.status
    );
}
