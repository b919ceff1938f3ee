//! One sweep of a target at a time across processes: the daemon holds an
//! advisory lock (`flock`) on the target's `target-HASH.lock` in its
//! `state_dir` while it sweeps the target, and `llmprobe sweep` tries the
//! same lock before it starts, refusing (unless `--force`) when it is held.
//! Two sweeps of one server at once would each measure the other's load.
//! The lock goes with the process: a crashed daemon leaves no stale lock.
//!
//! Only the daemon makes the file (with the unit's user and mode 0600): a
//! `sweep` run as root that made it would leave a file the service's
//! dynamic user cannot open. `sweep` opens it read-only when it is there,
//! and holds it while it runs, so that the daemon waits meanwhile.

use std::fs::File;
use std::io;
use std::os::unix::io::AsRawFd;
use std::path::PathBuf;

use crate::config::Target;
use crate::schedule::state::StateDir;

/// How often a daemon loop looks again at a lock a `sweep` holds.
pub const RETRY_EVERY: std::time::Duration = std::time::Duration::from_secs(5);

/// A target's sweep lock, held until dropped (closing the file releases it).
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// What trying a target's lock found.
#[derive(Debug)]
pub enum Claim {
    /// Ours until dropped.
    Held(Held),
    /// No lock file: no daemon with this state directory ever swept the
    /// target, so none is sweeping it.
    Free,
    /// Another process holds it: a sweep of the target is running.
    Busy,
    /// The file cannot be opened or locked (permissions, a read-only
    /// mount...): whether a sweep is running is unknown.
    Unknown(String),
}

/// The lock file of `target` in `dir`.
pub fn path_of(dir: &StateDir, target: &Target) -> PathBuf {
    dir.path_of(target).with_extension("lock")
}

/// Tries `target`'s lock in `dir` without waiting; with `create`, makes the
/// file when missing (the daemon), else a missing file is [`Claim::Free`].
pub fn try_claim(dir: &StateDir, target: &Target, create: bool) -> Claim {
    let path = path_of(dir, target);
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if create {
        use std::os::unix::fs::OpenOptionsExt;
        options.write(true).create(true).mode(0o600);
    }
    let file = match options.open(&path) {
        Ok(f) => f,
        Err(e) if !create && e.kind() == io::ErrorKind::NotFound => return Claim::Free,
        Err(e) => return Claim::Unknown(format!("cannot open `{}`: {e}", path.display())),
    };
    // SAFETY: flock on a descriptor this function owns; no memory involved.
    let r = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if r == 0 {
        return Claim::Held(Held { _file: file });
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::EWOULDBLOCK) {
        Claim::Busy
    } else {
        Claim::Unknown(format!("cannot lock `{}`: {e}", path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target() -> Target {
        let yaml = "targets:\n  - name: t\n    base_url: http://127.0.0.1:1/v1\n    model: m\n    \
                    workloads: [w]\nworkloads:\n  w:\n    prompts: [\"hi\"]\n";
        let file = crate::config::load::decode_text(yaml, "t.yaml", false).unwrap();
        let config = crate::config::resolve(std::path::Path::new("/t.yaml"), file, &NoEnv)
            .unwrap_or_else(|e| panic!("{e}"));
        (*config.targets[0]).clone()
    }

    struct NoEnv;
    impl crate::config::Env for NoEnv {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
    }

    #[test]
    fn a_held_lock_is_busy_to_others_until_dropped() {
        let dir = std::env::temp_dir().join(format!("llmprobe-lock-{}", std::process::id()));
        let state = StateDir::open(&dir).unwrap();
        let t = target();
        assert!(matches!(try_claim(&state, &t, false), Claim::Free));
        let held = match try_claim(&state, &t, true) {
            Claim::Held(h) => h,
            other => panic!("{other:?}"),
        };
        assert!(matches!(try_claim(&state, &t, false), Claim::Busy));
        assert!(matches!(try_claim(&state, &t, true), Claim::Busy));
        drop(held);
        let again = try_claim(&state, &t, false);
        assert!(matches!(again, Claim::Held(_)), "{again:?}");
        assert!(matches!(try_claim(&state, &t, true), Claim::Busy));
        drop(again);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
