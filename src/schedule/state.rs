//! The loops' state on disk (`state_dir`): per target identity (name, model,
//! endpoint) one file holding what its loop remembers between sweeps
//! ([`Saved`]), so that a restarted daemon, a loop a reload restarted, and
//! `llmprobe sweep --state DIR` start from it. Written atomically (a
//! temporary file, fsync, rename) once per sweep; versioned and bounded in
//! size. A file that is missing, unreadable, corrupt, of another version or
//! target, or older than [`MAX_AGE_INTERVALS`] intervals is ignored (with
//! one warning, but for a missing one): state is a help, never a reason to
//! fail. Whether the server is still the same one is judged by each part
//! that uses the state, against what the next sweep's setup finds (pooled
//! evidence, carried levels, output-limit field, warm start).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::config::{Endpoint, Target};
pub use crate::schedule::memory::Saved;
use crate::stats::evidence::WINDOW_SWEEPS;

/// The version of the file's layout: a file of another is ignored.
pub const VERSION: u32 = 1;

/// Largest state file written or read (a target with many workloads and
/// levels writes tens of KB).
pub const MAX_BYTES: usize = 4 << 20;

/// A state older than this many intervals is ignored: the pool would have
/// aged all of its sweeps out by then ([`WINDOW_SWEEPS`]).
pub const MAX_AGE_INTERVALS: u32 = WINDOW_SWEEPS as u32;

/// One target's state file as written.
#[derive(Debug, Serialize, Deserialize)]
struct StateFile {
    version: u32,
    /// The target's name, model and endpoint digest (never the URL, which
    /// may hold credentials): a file of another target is ignored.
    target: String,
    model: String,
    endpoint: String,
    /// A digest of the SLO the pooled counts were judged against (a level's
    /// `slow` count depends on the p95 limit): another SLO, another state.
    slo: String,
    saved_at_unix_seconds: f64,
    memory: Saved,
}

/// The state directory.
#[derive(Debug, Clone)]
pub struct StateDir {
    dir: PathBuf,
}

impl StateDir {
    /// The daemon's state directory, made when missing.
    pub fn open(dir: &Path) -> Result<StateDir, String> {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("cannot make state_dir `{}`: {e}", dir.display()))?;
        Ok(StateDir {
            dir: dir.to_path_buf(),
        })
    }

    /// A state directory only read from (`llmprobe sweep --state DIR`).
    pub fn reader(dir: &Path) -> StateDir {
        StateDir {
            dir: dir.to_path_buf(),
        }
    }

    /// The file of `target`'s state.
    pub fn path_of(&self, target: &Target) -> PathBuf {
        let key = format!("{}\0{}\0{}", target.name, target.model, endpoint(target));
        self.dir
            .join(format!("target-{:016x}.json", fnv1a(key.as_bytes())))
    }

    /// `target`'s saved state, if one is there and may be trusted at Unix
    /// time `now`, with the loop's `interval`. Logs why a file is ignored.
    pub fn load(&self, target: &Target, interval: Duration, now: f64) -> Option<Saved> {
        let path = self.path_of(target);
        let bytes = match read_bounded(&path) {
            Ok(Some(b)) => b,
            Ok(None) => {
                tracing::info!(target_name = %target.name, path = %path.display(), "no saved state: the first sweep starts from nothing");
                return None;
            }
            Err(e) => {
                tracing::warn!(target_name = %target.name, path = %path.display(), error = %e, "saved state ignored");
                return None;
            }
        };
        match decode(&bytes, target, interval, now) {
            Ok(saved) => Some(saved),
            Err(e) => {
                tracing::warn!(target_name = %target.name, path = %path.display(), error = %e, "saved state ignored");
                None
            }
        }
    }

    /// Saves `memory` as `target`'s state at Unix time `now`: a temporary
    /// file, fsync, rename, so a crash leaves the old file or the new one.
    pub fn save(&self, target: &Target, memory: Saved, now: f64) -> Result<(), String> {
        let bytes = encode(target, memory, now)?;
        let path = self.path_of(target);
        let tmp = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let write = || -> std::io::Result<()> {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_all()?;
            std::fs::rename(&tmp, &path)?;
            // The rename itself is durable once the folder is synced.
            std::fs::File::open(&self.dir)?.sync_all()
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write `{}`: {e}", path.display())
        })
    }
}

/// What a saved memory is only good for: the target's name, model,
/// endpoint and SLO (digests, never a URL).
pub fn identity(target: &Target) -> String {
    format!(
        "{}\0{}\0{}\0{}",
        target.name,
        target.model,
        endpoint(target),
        slo(target)
    )
}

/// Now, as Unix seconds (what a state's age is measured in).
pub fn unix_now() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// What identifies a target's endpoint, hashed (a URL may hold
/// credentials; a simulator's settings stand in for its port, chosen anew
/// at each start).
fn endpoint(target: &Target) -> String {
    let text = match &target.endpoint {
        Endpoint::Url(url) => url.clone(),
        Endpoint::Simulator(params) => format!("simulator {params:?}"),
    };
    format!("{:016x}", fnv1a(text.as_bytes()))
}

/// What the target's SLO is, digested.
fn slo(target: &Target) -> String {
    format!("{:016x}", fnv1a(format!("{:?}", target.slo).as_bytes()))
}

/// FNV-1a, 64 bits: stable across builds and Rust versions (std's hasher
/// is not), which file names must be.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The file's bytes; None when there is no file; an error when it cannot
/// be read or is larger than [`MAX_BYTES`].
fn read_bounded(path: &Path) -> Result<Option<Vec<u8>>, String> {
    use std::io::Read;
    let f = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let mut bytes = Vec::new();
    f.take(MAX_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() > MAX_BYTES {
        return Err(format!("larger than {MAX_BYTES} bytes"));
    }
    Ok(Some(bytes))
}

/// The file's bytes for `memory`; the reports are left out when they
/// would make it larger than [`MAX_BYTES`] (the pool and the plan are kept).
fn encode(target: &Target, mut memory: Saved, now: f64) -> Result<Vec<u8>, String> {
    loop {
        let file = StateFile {
            version: VERSION,
            target: target.name.clone(),
            model: target.model.clone(),
            endpoint: endpoint(target),
            slo: slo(target),
            saved_at_unix_seconds: now,
            memory,
        };
        let bytes = serde_json::to_vec(&file).map_err(|e| e.to_string())?;
        if bytes.len() <= MAX_BYTES {
            return Ok(bytes);
        }
        memory = file.memory;
        if memory.good.is_some() {
            memory.good = None;
        } else if memory.latest.is_some() {
            memory.latest = None;
        } else {
            return Err(format!("state larger than {MAX_BYTES} bytes"));
        }
    }
}

/// The saved memory in `bytes`, if it is `target`'s, of this version, and
/// not older than [`MAX_AGE_INTERVALS`] times `interval` at `now`.
fn decode(bytes: &[u8], target: &Target, interval: Duration, now: f64) -> Result<Saved, String> {
    #[derive(Deserialize)]
    struct Version {
        version: u32,
    }
    let v: Version = serde_json::from_slice(bytes).map_err(|e| format!("not a state file: {e}"))?;
    if v.version != VERSION {
        return Err(format!(
            "version {} (this llmprobe reads version {VERSION})",
            v.version
        ));
    }
    let file: StateFile =
        serde_json::from_slice(bytes).map_err(|e| format!("corrupt state file: {e}"))?;
    if file.target != target.name || file.model != target.model || file.endpoint != endpoint(target)
    {
        return Err(format!(
            "it is the state of another target (`{}`, model `{}`) or endpoint",
            file.target, file.model
        ));
    }
    if file.slo != slo(target) {
        return Err("it was saved under another SLO: its counts were judged against it".into());
    }
    if !file.memory.plausible() {
        return Err("corrupt state file: counts no loop could have saved".into());
    }
    let age = now - file.saved_at_unix_seconds;
    let max_age = interval.as_secs_f64() * f64::from(MAX_AGE_INTERVALS);
    if !age.is_finite() || age > max_age {
        return Err(format!(
            "saved {age:.0}s ago, more than {MAX_AGE_INTERVALS} intervals ({max_age:.0}s)"
        ));
    }
    Ok(file.memory)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::memory::Memory;
    use crate::stats::decision::{Counts, Verdict};
    use crate::stats::report::{LevelSummary, Setup, SweepReport, WorkloadReport};

    fn target(name: &str, url: &str) -> Target {
        let yaml = format!(
            "targets:\n  - name: {name}\n    base_url: {url}\n    model: m\n    workloads: [w]\n\
             workloads:\n  w:\n    prompts: [\"hi\"]\n"
        );
        let file = crate::config::load::decode_text(&yaml, "t.yaml", false).unwrap();
        let config = crate::config::resolve(Path::new("/t.yaml"), file, &NoEnv)
            .unwrap_or_else(|e| panic!("{e}"));
        (*config.targets[0]).clone()
    }

    struct NoEnv;
    impl crate::config::Env for NoEnv {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
    }

    fn report(failed: u64) -> SweepReport {
        SweepReport {
            setup_error: None,
            server_metrics: Default::default(),
            target: "w1".into(),
            kind: Default::default(),
            model: "m".into(),
            success: true,
            error: None,
            duration_seconds: 1.0,
            finished_at_unix_seconds: 1.0,
            setup: Setup {
                server: "vllm".into(),
                ..Setup::default()
            },
            output_limit: Default::default(),
            workloads: vec![WorkloadReport {
                workload: "w".into(),
                levels: vec![LevelSummary {
                    concurrency: 8,
                    token_source: "usage",
                    reasoning_token_source: "none",
                    verdict: Some(Verdict {
                        counts: Counts {
                            ended: 32,
                            ok: 32 - failed,
                            failed,
                            timed: 32,
                            ..Counts::default()
                        },
                        ..Verdict::default()
                    }),
                    ..LevelSummary::default()
                }],
                skipped_levels: vec![],
                carried_levels: vec![],
                capacity: crate::stats::knee::capacity(&[], 0.9, None),
            }],
        }
    }

    fn memory_of(t: &Target, sweeps: u64) -> Memory {
        let mut m = Memory::new(t);
        for i in 0..sweeps {
            m.record(std::sync::Arc::new(report(i % 2)));
        }
        m
    }

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_saved_memory_comes_back_whole() {
        let t = target("w1", "http://10.0.0.5:8000/v1");
        let m = memory_of(&t, 3);
        let bytes = encode(&t, m.saved(), 1000.0).unwrap();
        let back = decode(&bytes, &t, HOUR, 1060.0).unwrap();
        let restored = Memory::restored(&t, back);
        assert_eq!(restored.pooled_sweeps(), 3);
        let setup = Setup {
            server: "vllm".into(),
            ..Setup::default()
        };
        let again = serde_json::to_value(restored.saved()).unwrap();
        assert_eq!(again, serde_json::to_value(m.saved()).unwrap());
        let restored_prior = restored.saved().evidence.prior(&setup, "w", 8);
        assert_eq!(restored_prior.window.len(), 3);
        assert_eq!(restored_prior.window[1].failed, 1);
    }

    #[test]
    fn a_file_of_another_target_version_or_age_is_refused() {
        let t = target("w1", "http://10.0.0.5:8000/v1");
        let bytes = encode(&t, memory_of(&t, 1).saved(), 1000.0).unwrap();
        let other_url = target("w1", "http://10.0.0.6:8000/v1");
        let other_name = target("w2", "http://10.0.0.5:8000/v1");
        let mut other_slo = t.clone();
        other_slo.slo.max_error_ratio = 0.1;
        assert!(decode(&bytes, &other_slo, HOUR, 1000.0)
            .unwrap_err()
            .contains("another SLO"));
        assert!(decode(&bytes, &other_url, HOUR, 1000.0)
            .unwrap_err()
            .contains("another target"));
        assert!(decode(&bytes, &other_name, HOUR, 1000.0)
            .unwrap_err()
            .contains("another target"));
        // 8 intervals of 1h: 8h old is kept, a second more is not.
        assert!(decode(&bytes, &t, HOUR, 1000.0 + 8.0 * 3600.0).is_ok());
        assert!(decode(&bytes, &t, HOUR, 1001.0 + 8.0 * 3600.0)
            .unwrap_err()
            .contains("more than 8 intervals"));
        let v2 = String::from_utf8(bytes)
            .unwrap()
            .replacen("\"version\":1", "\"version\":2", 1);
        assert!(decode(v2.as_bytes(), &t, HOUR, 1000.0)
            .unwrap_err()
            .starts_with("version 2"));
    }

    #[test]
    fn corrupt_and_truncated_files_are_errors_not_panics() {
        let t = target("w1", "http://10.0.0.5:8000/v1");
        let bytes = encode(&t, memory_of(&t, 2).saved(), 1000.0).unwrap();
        for cut in [0, 1, bytes.len() / 3, bytes.len() - 1] {
            assert!(
                decode(&bytes[..cut], &t, HOUR, 1000.0).is_err(),
                "cut at {cut}"
            );
        }
        assert!(decode(b"{\"version\":1,\"target\":7}", &t, HOUR, 1000.0)
            .unwrap_err()
            .starts_with("corrupt"));
        assert!(decode(&[0xff, 0xfe, 0], &t, HOUR, 1000.0)
            .unwrap_err()
            .starts_with("not a state file"));
        // Well-formed, but counts that would overflow the pool's arithmetic.
        let text = String::from_utf8(bytes).unwrap();
        let huge = text.replacen("\"ended\":32", &format!("\"ended\":{}", u64::MAX), 1);
        assert_ne!(huge, text);
        assert!(decode(huge.as_bytes(), &t, HOUR, 1000.0)
            .unwrap_err()
            .contains("no loop could have saved"));
    }

    #[test]
    fn saving_replaces_the_file_and_names_are_per_identity() {
        let dir = std::env::temp_dir().join(format!("llmprobe-state-{}", std::process::id()));
        let state = StateDir::open(&dir).unwrap();
        let t = target("w1", "http://10.0.0.5:8000/v1");
        assert_ne!(
            state.path_of(&t),
            state.path_of(&target("w1", "http://10.0.0.6:8000/v1"))
        );
        assert!(state.load(&t, HOUR, 1000.0).is_none(), "nothing saved yet");
        state.save(&t, memory_of(&t, 1).saved(), 1000.0).unwrap();
        state.save(&t, memory_of(&t, 4).saved(), 1000.0).unwrap();
        let back = state.load(&t, HOUR, 1000.0).unwrap();
        assert_eq!(Memory::restored(&t, back).pooled_sweeps(), 4);
        let leftovers: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left: {leftovers:?}");
        std::fs::write(state.path_of(&t), b"{\"version\":1,").unwrap();
        assert!(state.load(&t, HOUR, 1000.0).is_none(), "corrupt: ignored");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn fnv1a_is_the_published_function() {
        // Test vectors of FNV-1a 64.
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
