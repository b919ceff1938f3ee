//! Targets discovered from files in Prometheus's `file_sd` format: a JSON or
//! YAML list of `{targets: ["host:port", ...], labels: {...}}` groups, written
//! by whatever the operator already has (Consul templates, a CMDB export,
//! Kubernetes tooling). `target_template` says how each `host:port` becomes a
//! target; the result goes through the same validation as a static target.
//!
//! Files are re-read when they change (mtime, size or inode) and on reload.
//! A file that cannot be read or parsed keeps the targets it gave last time:
//! a half-written file or a broken export must not stop the measurement of a
//! fleet. A file that disappears (or no longer matches) takes its targets away,
//! as in Prometheus.

mod parse;
mod yaml;

use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

pub use crate::config::Format;
use crate::config::{self, Env, FileSdConfig, Target};
pub use parse::{parse, Group};

/// Largest discovery file read; a bigger one is surely not a target list.
const MAX_FILE_BYTES: u64 = 32 * 1024 * 1024;

/// The targets of a file's groups: valid ones, and one line per skipped
/// entry saying why.
pub fn targets(
    groups: &[Group],
    config: &FileSdConfig,
    env: &dyn Env,
) -> (Vec<Arc<Target>>, Vec<String>) {
    let mut good: Vec<Arc<Target>> = Vec::new();
    // A set, not a scan of `good`: 100k targets took 61 s the quadratic way.
    let mut names: HashSet<String> = HashSet::new();
    let mut invalid = Vec::new();
    for (g, group) in groups.iter().enumerate() {
        for (j, address) in group.targets.iter().enumerate() {
            let key = format!("[{g}].targets[{j}] ({address})");
            let tf = match config::target_file(&config.template, address, &group.labels) {
                Ok(tf) => tf,
                Err(e) => {
                    invalid.push(format!("{key}: {e}"));
                    continue;
                }
            };
            if tf.model.is_none() {
                let label = config.template.model_label();
                invalid.push(format!(
                    "{key}: no `{label}` label, and `target_template.model` is not set"
                ));
                continue;
            }
            if names.contains(&tf.name) {
                invalid.push(format!(
                    "{key}: duplicate target name `{}` (with `name_label`, give each group one target)",
                    tf.name
                ));
                continue;
            }
            let mut problems = Vec::new();
            // The TLS files were checked at load, on the template.
            let ctx = config::Context {
                defaults: &config.defaults,
                workloads: &config.workloads,
                base_dir: &config.base_dir,
                env,
                checks: &config::Checks::NONE,
            };
            let mut report = |k: &str, m: String| problems.push(format!("{k}: {m}"));
            let target = config::resolve_target(&tf, &key, &ctx, &mut report);
            if let Some(t) = &target {
                config::target::check_levels_within_cap(
                    &tf,
                    t,
                    &key,
                    config.max_in_flight_total,
                    &mut report,
                );
            }
            match target {
                Some(t) if problems.is_empty() => {
                    names.insert(t.name.clone());
                    good.push(Arc::new(t));
                }
                _ => invalid.push(problems.join("; ")),
            }
        }
    }
    (good, invalid)
}

/// What identifies a version of a file without reading it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    inode: u64,
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Stamp {
        #[cfg(unix)]
        let inode = std::os::unix::fs::MetadataExt::ino(meta);
        #[cfg(not(unix))]
        let inode = 0;
        Stamp {
            modified: meta.modified().ok(),
            len: meta.len(),
            inode,
        }
    }
}

/// What is known of one discovery file.
#[derive(Debug, Default, Clone)]
struct FileState {
    stamp: Option<Stamp>,
    /// Targets of the last successful read.
    targets: Vec<Arc<Target>>,
    /// Entries of the last successful read that were skipped, and why.
    invalid: Vec<String>,
    /// Why the latest read failed, while it keeps failing.
    failing: Option<String>,
}

/// One discovery file, as the last refresh left it.
#[derive(Debug, Clone)]
pub struct FileSummary<'a> {
    /// Path read.
    pub path: &'a Path,
    /// Targets it gives (from its last successful read).
    pub targets: &'a [Arc<Target>],
    /// Entries skipped at its last successful read, with the reason.
    pub invalid: &'a [String],
    /// Why it cannot be read now, if it cannot.
    pub error: Option<&'a str>,
}

/// What a refresh did.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Refresh {
    /// Whether the set of discovered targets (or any of their settings) changed.
    pub changed: bool,
    /// Files whose read failed this time.
    pub failed: Vec<PathBuf>,
}

/// Reads the discovery files and keeps what each one gave.
#[derive(Debug, Clone)]
pub struct Watcher {
    config: Arc<FileSdConfig>,
    files: BTreeMap<PathBuf, FileState>,
    /// Patterns whose directory could not be listed, so it is logged once.
    unlistable: BTreeMap<String, String>,
}

impl Watcher {
    /// A watcher that has read nothing yet.
    pub fn new(config: Arc<FileSdConfig>) -> Watcher {
        Watcher {
            config,
            files: BTreeMap::new(),
            unlistable: BTreeMap::new(),
        }
    }

    /// Takes new settings (a reload), keeping what each file gave so far:
    /// a file broken at the time of the reload keeps its targets.
    pub fn set_config(&mut self, config: Arc<FileSdConfig>) {
        self.config = config;
    }

    /// The settings in use.
    pub fn config(&self) -> &Arc<FileSdConfig> {
        &self.config
    }

    /// Every file the patterns match now.
    fn matching_files(&mut self) -> Vec<PathBuf> {
        let mut found = Vec::new();
        for p in &self.config.patterns {
            if !p.has_wildcard() {
                let path = p.dir.join(&p.name);
                // A named file that is absent gives no targets, like a
                // pattern that matches nothing; it is not an error.
                if path.is_file() {
                    found.push(path);
                }
                continue;
            }
            match std::fs::read_dir(&p.dir) {
                Ok(entries) => {
                    self.unlistable.remove(&p.shown);
                    for e in entries.flatten() {
                        let name = e.file_name();
                        let Some(name) = name.to_str() else { continue };
                        let path = e.path();
                        if wildcard_match(&p.name, name) && path.is_file() {
                            found.push(path);
                        }
                    }
                }
                Err(e) => {
                    let e = e.to_string();
                    if self.unlistable.insert(p.shown.clone(), e.clone()).is_none() {
                        tracing::warn!(pattern = %p.shown, error = %e, "file_sd: cannot list the directory of a pattern");
                    }
                }
            }
        }
        found.sort();
        found.dedup();
        found
    }

    /// Reads the files that changed since the last refresh (every file when
    /// `force`, and failing ones each time). Logs a file that starts failing
    /// once, not at every refresh.
    pub fn refresh(&mut self, force: bool, env: &dyn Env) -> Refresh {
        let mut out = Refresh::default();
        let paths = self.matching_files();
        let gone: Vec<PathBuf> = self
            .files
            .keys()
            .filter(|p| !paths.contains(p))
            .cloned()
            .collect();
        for p in gone {
            if let Some(st) = self.files.remove(&p) {
                tracing::info!(file = %p.display(), targets = st.targets.len(), "file_sd: file gone or no longer matched; its targets are removed");
                out.changed |= !st.targets.is_empty();
            }
        }
        for path in paths {
            let config = self.config.clone();
            let st = self.files.entry(path.clone()).or_default();
            let stamp = std::fs::metadata(&path).map(|m| Stamp::of(&m));
            let unchanged = matches!(&stamp, Ok(s) if st.stamp == Some(*s));
            if unchanged && !force && st.failing.is_none() {
                continue;
            }
            let read = stamp
                .map_err(|e| format!("cannot read: {e}"))
                .and_then(|s| read_groups(&path).map(|g| (s, g)));
            match read {
                Ok((stamp, groups)) => {
                    let (targets, invalid) = targets(&groups, &config, env);
                    if !same_targets(&st.targets, &targets) {
                        out.changed = true;
                    }
                    if st.failing.take().is_some() {
                        tracing::info!(file = %path.display(), targets = targets.len(), "file_sd: file readable again");
                    }
                    if !invalid.is_empty() {
                        tracing::warn!(
                            file = %path.display(),
                            skipped = invalid.len(),
                            valid = targets.len(),
                            first = %invalid.iter().take(3).cloned().collect::<Vec<_>>().join(" | "),
                            "file_sd: entries skipped (`llmprobe check-config` lists them all)"
                        );
                    }
                    st.stamp = Some(stamp);
                    st.targets = targets;
                    st.invalid = invalid;
                }
                Err(e) => {
                    out.failed.push(path.clone());
                    if st.failing.is_none() {
                        tracing::error!(
                            file = %path.display(),
                            error = %e,
                            kept_targets = st.targets.len(),
                            "file_sd: cannot use the file; keeping the targets it gave last time"
                        );
                    }
                    st.failing = Some(e);
                }
            }
        }
        out
    }

    /// Every discovered target with the file it came from, in path order.
    pub fn targets(&self) -> impl Iterator<Item = (&Path, &Arc<Target>)> {
        self.files
            .iter()
            .flat_map(|(p, st)| st.targets.iter().map(move |t| (p.as_path(), t)))
    }

    /// The state of every file read.
    pub fn files(&self) -> Vec<FileSummary<'_>> {
        self.files
            .iter()
            .map(|(p, st)| FileSummary {
                path: p,
                targets: &st.targets,
                invalid: &st.invalid,
                error: st.failing.as_deref(),
            })
            .collect()
    }
}

fn same_targets(a: &[Arc<Target>], b: &[Arc<Target>]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x == y)
}

fn read_groups(path: &Path) -> Result<Vec<Group>, String> {
    let format = Format::of(path).ok_or("unknown extension")?;
    // Bounded while reading, not by a length read before: the file may
    // grow in between, and a device has no length.
    let bytes = crate::config::env::read_limited(path, MAX_FILE_BYTES)
        .map_err(|e| format!("cannot read: {e}"))?
        .ok_or_else(|| format!("is more than the {MAX_FILE_BYTES} bytes accepted"))?;
    let text = String::from_utf8(bytes).map_err(|_| "is not UTF-8 text".to_string())?;
    parse(&text, format)
}

/// Whether `name` matches `pattern`, where `*` is any run of characters
/// and `?` any one character.
pub fn wildcard_match(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with one backtrack point (the last `*`): linear
    // enough for file names, and no recursion.
    let (mut pi, mut ni) = (0, 0);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == n[ni]) {
            pi += 1;
            ni += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((sp, sn)) = star {
            pi = sp + 1;
            ni = sn + 1;
            star = Some((sp, sn + 1));
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|&c| c == '*')
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DefaultsFile, Pattern, TemplateFile, Workload};
    use std::time::Duration;

    #[test]
    fn wildcards() {
        assert!(wildcard_match("*.json", "a.json"));
        assert!(wildcard_match("tg_*.json", "tg_.json"));
        assert!(wildcard_match("tg_?.yml", "tg_1.yml"));
        assert!(!wildcard_match("tg_?.yml", "tg_12.yml"));
        assert!(!wildcard_match("*.json", "a.json.tmp"));
        assert!(wildcard_match("a*b*c.json", "aXbYbZc.json"));
        assert!(wildcard_match("exact.yaml", "exact.yaml"));
        assert!(!wildcard_match("exact.yaml", "exact.yam"));
    }

    /// Log lines written while `f` runs.
    fn logged(f: impl FnOnce()) -> String {
        use std::sync::{Arc, Mutex};
        #[derive(Clone)]
        struct Buf(Arc<Mutex<Vec<u8>>>);
        impl std::io::Write for Buf {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0.lock().unwrap().extend_from_slice(b);
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let buf = Buf(Arc::new(Mutex::new(Vec::new())));
        let writer = buf.clone();
        let subscriber = tracing_subscriber::fmt()
            .with_writer(move || writer.clone())
            .with_ansi(false)
            .finish();
        tracing::subscriber::with_default(subscriber, f);
        let out = buf.0.lock().unwrap().clone();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_failing_file_is_logged_once_per_failure_and_counted_every_read() {
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-file-sd-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("t.json");
        let workload = Arc::new(Workload {
            name: "chat".into(),
            max_completion_tokens: 4,
            temperature: 0.0,
            prompts: vec![crate::config::prompts::Prompt::user("hi")],
            prefix_cache: Default::default(),
            chat_at: None,
        });
        let config = Arc::new(FileSdConfig {
            patterns: vec![Pattern::new("*.json", &dir).unwrap()],
            refresh_interval: Duration::from_secs(1),
            template: TemplateFile {
                model: Some("m".into()),
                ..Default::default()
            },
            defaults: DefaultsFile {
                workload: Some("chat".into()),
                ..Default::default()
            },
            workloads: [("chat".to_string(), workload)].into_iter().collect(),
            base_dir: dir.clone(),
            tls: None,
            max_in_flight_total: 64,
        });
        let mut w = Watcher::new(config);
        let env = crate::config::ProcessEnv;
        std::fs::write(&file, r#"[{"targets": ["h:1"]}]"#).unwrap();
        assert!(w.refresh(false, &env).changed);

        std::fs::write(&file, "[{").unwrap();
        let mut failed = 0;
        let log = logged(|| {
            for _ in 0..5 {
                let r = w.refresh(false, &env);
                assert!(!r.changed);
                failed += r.failed.len();
            }
        });
        assert_eq!(failed, 5, "every read of a failing file counts");
        assert_eq!(log.matches("cannot use the file").count(), 1, "{log}");
        assert_eq!(
            w.targets().count(),
            1,
            "the targets of the last good read stay"
        );

        let log = logged(|| {
            std::fs::write(&file, r#"[{"targets": ["h:1", "h:2"]}]"#).unwrap();
            assert!(w.refresh(false, &env).changed);
            std::fs::write(&file, "nonsense").unwrap();
            w.refresh(false, &env);
            w.refresh(false, &env);
        });
        assert_eq!(log.matches("file readable again").count(), 1, "{log}");
        assert_eq!(log.matches("cannot use the file").count(), 1, "{log}");
        assert_eq!(w.targets().count(), 2);
        std::fs::remove_dir_all(&dir).ok();
    }
}
