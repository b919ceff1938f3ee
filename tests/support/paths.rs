//! Where things are: the repository, and scratch directories for a test.

use std::path::{Path, PathBuf};

/// The repository root (where Cargo.toml is).
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The text of a file of the repository, by its path from the root.
pub fn read(rel: &str) -> String {
    let path = repo().join(rel);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// `dir` written as a path relative to `from` (kustomize refuses absolute
/// paths in `resources:`).
pub fn relative(dir: &Path, from: &Path) -> PathBuf {
    let dir = dir.canonicalize().unwrap();
    let from = from.canonicalize().unwrap();
    let common = dir
        .components()
        .zip(from.components())
        .take_while(|(a, b)| a == b)
        .count();
    let mut rel = PathBuf::new();
    for _ in from.components().skip(common) {
        rel.push("..");
    }
    rel.extend(dir.components().skip(common));
    rel
}

/// Where the tests' directories go: `$TMPDIR/llmprobe-tests`.
fn tests_root() -> PathBuf {
    std::env::temp_dir().join("llmprobe-tests")
}

/// A new, empty directory `$TMPDIR/llmprobe-tests/PID-TAG-RANDOM`, kept while
/// the test process lives (for files a test hands to code that may keep
/// reading them). The first one a process makes removes those of test
/// processes that have ended: each run of the suite wrote some 400 that
/// nothing removed.
pub fn fresh_dir(tag: &str) -> PathBuf {
    static SWEPT: std::sync::Once = std::sync::Once::new();
    SWEPT.call_once(remove_ended);
    let dir = tests_root().join(format!(
        "{}-{tag}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// The file that marks a directory a failed test kept for reading.
const KEPT: &str = ".kept-by-a-failed-test";

/// Removes the directories of test processes no longer running (by
/// `/proc/PID`; where there is no `/proc`, nothing), but those a failed
/// test kept ([`ScratchDir`]).
fn remove_ended() {
    if !Path::new("/proc/self").exists() {
        return;
    }
    let Ok(entries) = std::fs::read_dir(tests_root()) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name.to_str().and_then(|n| n.split('-').next()) else {
            continue;
        };
        let ended = pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists();
        if ended && !entry.path().join(KEPT).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// A fresh directory removed when dropped; kept, with its path printed, when
/// the test panics, so that the logs and configs in it can be read.
pub struct ScratchDir(PathBuf);

impl ScratchDir {
    /// A new directory named after `tag` (see [`fresh_dir`]).
    pub fn new(tag: &str) -> Self {
        ScratchDir(fresh_dir(tag))
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.0
    }

    /// A path inside the directory.
    pub fn join(&self, rel: impl AsRef<Path>) -> PathBuf {
        self.0.join(rel)
    }
}

impl Drop for ScratchDir {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let _ = std::fs::write(self.0.join(KEPT), "");
            eprintln!("scratch files kept in {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}
