//! Alertmanager and amtool (Debian package `prometheus-alertmanager`, or the
//! binaries named by `$ALERTMANAGER` and `$AMTOOL`). A test that needs them
//! fails, saying so, when they are missing.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::paths;
use super::ports::free_port;
use super::process::Process;

const HINT: &str = "amtool and alertmanager are required: install Debian's \
     `prometheus-alertmanager` package (apt-get install -y prometheus-alertmanager; \
     scripts/test does) or set AMTOOL and ALERTMANAGER";

/// Runs `amtool ARGS` in the repository root.
pub fn amtool<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let tool = std::env::var("AMTOOL").unwrap_or_else(|_| "amtool".to_string());
    Command::new(&tool)
        .args(args)
        .current_dir(paths::repo())
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{tool}` ({e}): {HINT}"))
}

/// The Alertmanager server binary: `$ALERTMANAGER`, or where Debian puts it.
fn binary() -> PathBuf {
    std::env::var_os("ALERTMANAGER")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/usr/bin/prometheus-alertmanager"))
}

/// A running single Alertmanager (no gossip); stopped when dropped.
pub struct Alertmanager {
    /// `http://127.0.0.1:PORT/api/v2`.
    pub api: String,
    /// The child process and its logs.
    pub process: Process,
}

impl Alertmanager {
    /// Starts Alertmanager on the configuration file `config`, storing its
    /// data and logs in `dir`.
    pub fn start(dir: &Path, config: &Path) -> Alertmanager {
        let binary = binary();
        assert!(binary.is_file(), "no {}: {HINT}", binary.display());
        let port = free_port();
        let process = Process::spawn(
            "alertmanager",
            Command::new(binary)
                .arg(format!("--config.file={}", config.display()))
                .arg(format!("--storage.path={}", dir.join("data").display()))
                .arg(format!("--web.listen-address=127.0.0.1:{port}"))
                // A single Alertmanager: no gossip port.
                .arg("--cluster.listen-address="),
            dir,
        );
        Alertmanager {
            api: format!("http://127.0.0.1:{port}/api/v2"),
            process,
        }
    }
}
