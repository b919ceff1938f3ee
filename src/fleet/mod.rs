//! A fleet of targets: the static ones of the config plus those discovered
//! from files (`file_sd`), reduced to this instance's shard. The scheduler
//! never sees the difference: it is handed a [`Config`] whose targets are
//! the ones this instance measures ([`Fleet::view`]).
//!
//! Every instance exports every target it knows, owned or not
//! (`llmprobe_fleet_target`), so that Prometheus can tell a target that no
//! instance measures from one that does not exist: the fleet tells what it
//! read and placed as plain data ([`Fleet::take_read_failures`],
//! [`Fleet::file_counts`], [`Fleet::placement`]) and the daemon hands it to
//! the metrics.

pub mod file_sd;
pub mod reading;
pub mod shard;

use std::collections::BTreeSet;
use std::fmt::Write;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use crate::config::{prompt_memory, Config, ProcessEnv, Target};
use file_sd::Watcher;

/// `source` label of a target written under `targets:`.
pub const SOURCE_STATIC: &str = "static";
/// `source` label of a target read from a `file_sd` file.
pub const SOURCE_FILE_SD: &str = "file_sd";

/// Discovered targets and the shard filter, kept across reloads.
#[derive(Debug)]
pub struct Fleet {
    watcher: Option<Watcher>,
    /// Discovery files whose read failed, since last taken.
    read_failures: Vec<String>,
    /// Where the known targets were placed at the last view.
    placement: Placement,
    next_refresh: Instant,
    /// Duplicate names already logged, so each is logged once.
    reported_duplicates: BTreeSet<String>,
    /// Discovered targets this instance owns but did not start at the last
    /// view: their prompts would take the prompt memory over
    /// `max_prompt_memory_mib`.
    refused: Vec<String>,
    /// `max_prompt_memory_mib` at the last view.
    cap_mib: u32,
    /// (owned, known) at the last view, to log changes only.
    last_share: Option<(usize, usize)>,
    /// Bumped by each new configuration, so that a read begun before it
    /// is not applied after it.
    generation: u64,
    /// The next read must read every file (the settings changed).
    force_next: bool,
}

/// A read of the discovery files to run off the daemon's main loop (a hung
/// mount or a FIFO must not stall reloads and SIGTERM): a copy of the
/// watcher, brought up to date by [`PendingRead::run`] and handed back to
/// [`Fleet::end_read`].
#[derive(Debug)]
pub struct PendingRead {
    watcher: Watcher,
    force: bool,
    generation: u64,
}

/// What a [`PendingRead`] read.
#[derive(Debug)]
pub struct DoneRead {
    watcher: Watcher,
    result: file_sd::Refresh,
    generation: u64,
}

impl PendingRead {
    /// Reads the files (blocking: run it on a blocking thread).
    pub fn run(mut self) -> DoneRead {
        let result = self.watcher.refresh(self.force, &ProcessEnv);
        DoneRead {
            watcher: self.watcher,
            result,
            generation: self.generation,
        }
    }
}

/// Where the known targets are placed, as of the last [`Fleet::view`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Placement {
    /// Every known target: its name, its source ([`SOURCE_STATIC`] or
    /// [`SOURCE_FILE_SD`]) and the shard that owns it.
    pub targets: Vec<(String, &'static str, u32)>,
    /// This instance's shard index.
    pub shard_index: u32,
    /// The number of shards.
    pub shard_count: u32,
    /// How many of the targets this instance owns.
    pub owned: usize,
}

impl Default for Fleet {
    fn default() -> Self {
        Fleet::new()
    }
}

impl Fleet {
    /// A fleet with nothing read yet.
    pub fn new() -> Fleet {
        Fleet {
            watcher: None,
            read_failures: Vec::new(),
            placement: Placement::default(),
            next_refresh: far_future(),
            reported_duplicates: BTreeSet::new(),
            refused: Vec::new(),
            cap_mib: 0,
            last_share: None,
            generation: 0,
            force_next: false,
        }
    }

    /// Takes the discovery settings of `config` without reading: the next
    /// read ([`Fleet::begin_read`], due at once) reads every file again.
    pub fn configure_later(&mut self, config: &Config) {
        self.generation += 1;
        match (&config.fleet.file_sd, &mut self.watcher) {
            (None, _) => {
                self.watcher = None;
                self.next_refresh = far_future();
                return;
            }
            (Some(fs), Some(w)) => w.set_config(fs.clone()),
            (Some(fs), None) => self.watcher = Some(Watcher::new(fs.clone())),
        }
        self.force_next = true;
        self.next_refresh = Instant::now();
    }

    /// A read of the discovery files to run off the main loop, when there
    /// are any; no other read is due until it ends.
    pub fn begin_read(&mut self) -> Option<PendingRead> {
        let w = self.watcher.as_ref()?;
        self.next_refresh = far_future();
        Some(PendingRead {
            watcher: w.clone(),
            force: std::mem::take(&mut self.force_next),
            generation: self.generation,
        })
    }

    /// A read was abandoned or could not start ([`reading`]): the files keep
    /// the targets they gave, and the read is tried again, every file read,
    /// after the refresh interval.
    pub fn read_abandoned(&mut self) {
        let Some(w) = &self.watcher else {
            return;
        };
        self.force_next = true;
        self.next_refresh = Instant::now() + w.config().refresh_interval;
    }

    /// Takes what a read found; true when the discovered targets changed
    /// (then call [`Fleet::view`] and apply it). A read begun before the
    /// latest configuration is dropped, and the next one is due at once.
    pub fn end_read(&mut self, done: DoneRead) -> bool {
        let Some(w) = &self.watcher else {
            return false;
        };
        if done.generation != self.generation {
            self.next_refresh = Instant::now();
            return false;
        }
        self.next_refresh = Instant::now() + w.config().refresh_interval;
        self.watcher = Some(done.watcher);
        self.read_failures
            .extend(done.result.failed.iter().map(|f| f.display().to_string()));
        done.result.changed
    }

    /// Takes the discovery settings of `config` (at start and on every
    /// reload) and reads every discovery file again.
    pub fn configure(&mut self, config: &Config) {
        self.generation += 1;
        match (&config.fleet.file_sd, &mut self.watcher) {
            (None, _) => self.watcher = None,
            (Some(fs), Some(w)) => w.set_config(fs.clone()),
            (Some(fs), None) => self.watcher = Some(Watcher::new(fs.clone())),
        }
        self.read(true);
    }

    /// When the discovery files are next due for a look.
    pub fn next_refresh(&self) -> Instant {
        self.next_refresh
    }

    /// Re-reads the discovery files that changed; true when the discovered
    /// targets changed (then call [`Fleet::view`] and apply it).
    pub fn refresh(&mut self) -> bool {
        self.read(false)
    }

    fn read(&mut self, force: bool) -> bool {
        let Some(w) = &mut self.watcher else {
            self.next_refresh = far_future();
            return false;
        };
        // Small local files: read inline rather than on a blocking thread,
        // which would need a multi-threaded runtime.
        let result = w.refresh(force, &ProcessEnv);
        self.next_refresh = Instant::now() + w.config().refresh_interval;
        self.read_failures
            .extend(result.failed.iter().map(|f| f.display().to_string()));
        result.changed
    }

    /// The discovery files whose read failed since the last call, once
    /// per failure (for a counter).
    pub fn take_read_failures(&mut self) -> Vec<String> {
        std::mem::take(&mut self.read_failures)
    }

    /// Each discovery file as last read: `(file, valid targets, invalid
    /// entries)`.
    pub fn file_counts(&self) -> Vec<(String, usize, usize)> {
        self.files()
            .iter()
            .map(|f| {
                (
                    f.path.display().to_string(),
                    f.targets.len(),
                    f.invalid.len(),
                )
            })
            .collect()
    }

    /// Where the known targets were placed at the last [`Fleet::view`].
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// `config` with its targets replaced by the ones this instance
    /// measures: static targets, then discovered ones whose name is not
    /// taken yet, kept when this shard owns them. Gateway pairs follow their
    /// targets (a pair and its two targets are placed together).
    pub fn view(&mut self, config: &Config) -> Config {
        let (placed, duplicates) = placements(self.watcher.as_ref(), config);
        for d in duplicates.difference(&self.reported_duplicates) {
            tracing::warn!(target_name = %d, "file_sd: a target of this name is already defined (static targets win, then files in path order); this one is skipped");
        }
        self.reported_duplicates = duplicates;
        let s = config.fleet.shard;
        let known = placed.len();
        let (owned, refused) = within_prompt_memory(&placed, s.index, config.max_prompt_memory_mib);
        if refused != self.refused && !refused.is_empty() {
            tracing::warn!(
                refused = refused.len(),
                targets = %listed(&refused),
                max_prompt_memory_mib = config.max_prompt_memory_mib,
                "file_sd: discovered targets not started: their prompts and request bodies would take the daemon's prompt memory over max_prompt_memory_mib (raise it with the unit's MemoryMax=, docs/operating.md)"
            );
        }
        self.refused = refused;
        self.cap_mib = config.max_prompt_memory_mib;
        self.placement = Placement {
            targets: placed
                .iter()
                .map(|(t, source, o)| (t.name.clone(), *source, *o))
                .collect(),
            shard_index: s.index,
            shard_count: s.count,
            owned: owned.len(),
        };
        let share = (owned.len(), known);
        if self.last_share != Some(share) && (s.count > 1 || config.fleet.file_sd.is_some()) {
            tracing::info!(
                shard = s.index,
                shards = s.count,
                owned = share.0,
                known = share.1,
                "targets of this instance"
            );
        }
        self.last_share = Some(share);
        let owned_names: BTreeSet<&str> = owned.iter().map(|t| t.name.as_str()).collect();
        let gateway_pairs = config
            .gateway_pairs
            .iter()
            .filter(|p| {
                owned_names.contains(p.direct.as_str()) && owned_names.contains(p.through.as_str())
            })
            .cloned()
            .collect();
        Config {
            targets: owned,
            gateway_pairs,
            ..config.clone()
        }
    }

    /// Discovered targets this instance owns but did not start at the last
    /// view: their prompts would take the daemon's prompt memory over
    /// `max_prompt_memory_mib` (see [`within_prompt_memory`]).
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// What a reload over HTTP notes of [`Fleet::refused`], when any.
    pub fn refused_note(&self) -> Option<String> {
        (!self.refused.is_empty()).then(|| {
            format!(
                "file_sd: {} discovered target(s) not started: their prompts would take the daemon's prompt memory over max_prompt_memory_mib ({} MiB): {}",
                self.refused.len(),
                self.cap_mib,
                listed(&self.refused)
            )
        })
    }

    /// The discovery files as last read.
    pub fn files(&self) -> Vec<file_sd::FileSummary<'_>> {
        self.watcher
            .as_ref()
            .map(Watcher::files)
            .unwrap_or_default()
    }
}

/// Every known target with its source and the shard that owns it:
/// static targets, then discovered ones whose name is not taken yet; and
/// the names (with their file) skipped as duplicates.
fn placements<'a>(
    watcher: Option<&'a Watcher>,
    config: &'a Config,
) -> (Vec<Placed<'a>>, BTreeSet<String>) {
    let mut known: Vec<(&Arc<Target>, &'static str)> =
        config.targets.iter().map(|t| (t, SOURCE_STATIC)).collect();
    let mut names: BTreeSet<&str> = config.targets.iter().map(|t| t.name.as_str()).collect();
    let mut duplicates = BTreeSet::new();
    if let Some(w) = watcher {
        for (path, t) in w.targets() {
            if names.insert(t.name.as_str()) {
                known.push((t, SOURCE_FILE_SD));
            } else {
                duplicates.insert(format!("{} ({})", t.name, path.display()));
            }
        }
    }
    let links: Vec<(&str, &str)> = config
        .gateway_pairs
        .iter()
        .map(|p| (p.direct.as_str(), p.through.as_str()))
        .collect();
    let keys = shard::placement_keys(known.iter().map(|(t, _)| t.name.as_str()), &links);
    let count = config.fleet.shard.count;
    let placed = known
        .into_iter()
        .map(|(t, source)| {
            let key = keys
                .get(t.name.as_str())
                .copied()
                .unwrap_or(t.name.as_str());
            (t, source, shard::owner(key, count))
        })
        .collect();
    (placed, duplicates)
}

/// A known target, its source and its owning shard.
type Placed<'a> = (&'a Arc<Target>, &'static str, u32);

/// The targets shard `index` measures, and the names of the discovered
/// ones it leaves out: static targets all (their prompts were checked
/// against `max_prompt_memory_mib` at load), then each discovered one
/// whose prompts and bodies still fit under the cap with those before it
/// (a model or workload already counted adds nothing), in file and entry
/// order.
fn within_prompt_memory(
    placed: &[Placed<'_>],
    index: u32,
    cap_mib: u32,
) -> (Vec<Arc<Target>>, Vec<String>) {
    let mine = placed.iter().filter(|(_, _, o)| *o == index);
    if !mine.clone().any(|(_, source, _)| *source == SOURCE_FILE_SD) {
        // Nothing to count: the prompts are not measured at every view.
        return (mine.map(|(t, _, _)| Arc::clone(t)).collect(), Vec::new());
    }
    let cap = u64::from(cap_mib) << 20;
    let mut tally = prompt_memory::Tally::default();
    let (mut owned, mut refused) = (Vec::new(), Vec::new());
    for (t, source, _) in mine {
        if *source == SOURCE_STATIC {
            tally.add(t);
        } else if !tally.add_within(t, cap) {
            refused.push(t.name.clone());
            continue;
        }
        owned.push(Arc::clone(t));
    }
    (owned, refused)
}

/// Names for a line: the first ten, then how many more.
fn listed(names: &[String]) -> String {
    let mut line = names
        .iter()
        .take(10)
        .cloned()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        let _ = write!(line, " and {} more", names.len() - 10);
    }
    line
}

/// A deadline that never comes (tokio's sleep_until needs one).
fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(86_400 * 365)
}

/// The targets one instance would measure now, read once (for `sweep`).
pub fn view_once(config: &Config) -> Config {
    let mut fleet = Fleet::new();
    fleet.configure(config);
    fleet.view(config)
}

/// What the fleet sections of a valid config do, for `check-config`: the
/// shard, each discovery file with its targets and skipped entries.
pub fn explain(config: &Config) -> String {
    let mut out = String::new();
    let s = config.fleet.shard;
    let mut fleet = Fleet::new();
    fleet.configure(config);
    let view = fleet.view(config);
    if let Some(fs) = &config.fleet.file_sd {
        let t = &fs.template;
        let files: Vec<&str> = fs.patterns.iter().map(|p| p.shown.as_str()).collect();
        let _ = writeln!(
            out,
            "file_sd: {} (checked every {})",
            files.join(", "),
            humantime::format_duration(fs.refresh_interval)
        );
        let _ = writeln!(
            out,
            "  template: {}://HOST:PORT{}, model from label `{}`{}, named by {}",
            t.scheme(),
            t.path_prefix(),
            t.model_label(),
            t.model
                .as_ref()
                .map(|m| format!(" (else {m})"))
                .unwrap_or_default(),
            t.name_label
                .as_ref()
                .map(|l| format!("label `{l}` (else HOST:PORT)"))
                .unwrap_or_else(|| "HOST:PORT".into()),
        );
        let summaries = fleet.files();
        if summaries.is_empty() {
            let _ = writeln!(out, "  no file matches yet");
        }
        for f in summaries {
            let _ = writeln!(
                out,
                "  file {}: {} targets{}",
                f.path.display(),
                f.targets.len(),
                if f.invalid.is_empty() {
                    String::new()
                } else {
                    format!(", {} entries skipped", f.invalid.len())
                }
            );
            if let Some(e) = f.error {
                let _ = writeln!(out, "    cannot be used now: {e}");
            }
            for i in f.invalid {
                let _ = writeln!(out, "    skipped {i}");
            }
        }
    }
    let (placed, duplicates) = placements(fleet.watcher.as_ref(), config);
    let total = placed.len();
    for (t, source, owner) in &placed {
        if *source != SOURCE_FILE_SD {
            continue;
        }
        let url = match &t.endpoint {
            crate::config::Endpoint::Url(u) => u.as_str(),
            crate::config::Endpoint::Simulator(_) => "simulator",
        };
        let _ = writeln!(
            out,
            "  discovered {}: {url} model {}{}",
            t.name,
            t.model,
            if s.count > 1 {
                format!(", shard {owner}")
            } else {
                String::new()
            }
        );
    }
    for d in &duplicates {
        let _ = writeln!(out, "  duplicate name, skipped: {d}");
    }
    for r in fleet.refused() {
        let _ = writeln!(
            out,
            "  not started, over max_prompt_memory_mib ({} MiB): {r}",
            config.max_prompt_memory_mib
        );
    }
    if s.count > 1 || config.fleet.file_sd.is_some() {
        let _ = writeln!(
            out,
            "shard {} of {}: this instance measures {} of {} targets",
            s.index,
            s.count,
            view.targets.len(),
            total
        );
    }
    out
}
