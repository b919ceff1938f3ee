//! Where results go: each export sink in a file of its own, built from its
//! own settings (its section of `sinks:`, [`crate::config::sinks`]) by its
//! entry in [`KINDS`], and rebuilt on a reload only when that section
//! changed. The loops hold one [`Sinks`], which always calls the sinks as
//! last built: a rebuilt sink hears the next event, and no loop restarts.
//! Every sink is told the same plain events (a target configured, each
//! measured request, each finished level, each round's results, a target's
//! or pair's removal) through the one [`Sink`] trait; the schedule knows
//! nothing of what a sink does with them.

pub mod index_page;
pub mod log;
pub mod otlp;
pub mod prometheus;
mod sink;

pub use sink::Sink;

use std::sync::{Arc, RwLock};

use crate::config::{Schedule, SinkSettings, Target, Workload};
use crate::metrics::Metrics;
use crate::stats::pair_report::PairReport;
use crate::stats::probe::ProbeEvent;
use crate::stats::report::{LevelSummary, SweepReport};
use crate::stats::sample::Sample;

/// What sinks share with the rest of the daemon, kept across rebuilds: a
/// rebuilt sink takes its state up where the one it replaces left it.
#[derive(Clone)]
pub struct Shared {
    /// Every family of `/metrics` (the prometheus sink writes the results).
    pub metrics: Arc<Metrics>,
    /// Every target's status (the index page sink keeps them).
    pub statuses: index_page::Statuses,
}

/// One kind of sink the daemon builds.
struct Kind {
    /// Its name, in the log line of a rebuild.
    name: &'static str,
    /// Whether its settings differ between two `sinks:` sections.
    changed: fn(&SinkSettings, &SinkSettings) -> bool,
    /// The sink for these settings; None when they turn it off.
    build: fn(&SinkSettings, &Shared) -> Option<Arc<dyn Sink>>,
}

/// Every sink the daemon builds, in the order they are called. A new sink
/// is its file, its entry here, and its section of `sinks:` when it has
/// settings.
const KINDS: [Kind; 4] = [
    Kind {
        name: "log",
        changed: |old, new| old.log != new.log,
        build: |settings, _| log::Log::build(&settings.log),
    },
    Kind {
        name: "prometheus",
        changed: |_, _| false,
        build: |_, shared| Some(Arc::new(prometheus::Prometheus(shared.metrics.clone()))),
    },
    Kind {
        name: "index_page",
        changed: |_, _| false,
        build: |_, shared| Some(Arc::new(index_page::IndexPage(shared.statuses.clone()))),
    },
    Kind {
        name: "otlp",
        changed: |old, new| old.otlp != new.otlp,
        build: |settings, shared| otlp::Otlp::build(settings.otlp.as_ref(), &shared.metrics),
    },
];

/// The sinks as last built.
struct Built {
    /// The settings the sinks of [`KINDS`] were built from, and what they
    /// share; None when there are none (a list given whole, [`Sinks::of`]).
    from: Option<(SinkSettings, Shared)>,
    /// The sink of each entry of [`KINDS`] (None: off).
    kinds: Vec<Option<Arc<dyn Sink>>>,
    /// Sinks given whole, called after those.
    fixed: Vec<Arc<dyn Sink>>,
    /// All of them in call order: what each event goes to.
    all: Arc<[Arc<dyn Sink>]>,
}

impl Built {
    fn list(&mut self) {
        let kinds = self.kinds.iter().flatten().cloned();
        self.all = kinds.chain(self.fixed.iter().cloned()).collect();
    }
}

/// Every sink, called in order; cloned into every loop, all clones seeing
/// the same sinks, rebuilt or not.
#[derive(Clone)]
pub struct Sinks(Arc<RwLock<Built>>);

impl Sinks {
    /// The daemon's sinks, each of [`KINDS`] built from `settings`.
    pub fn standard(settings: &SinkSettings, shared: Shared) -> Self {
        let kinds = KINDS.iter().map(|k| (k.build)(settings, &shared)).collect();
        Sinks::new(Some((settings.clone(), shared)), kinds, Vec::new())
    }

    /// These sinks, in this order, never rebuilt.
    pub fn of(sinks: Vec<Arc<dyn Sink>>) -> Self {
        Sinks::new(None, Vec::new(), sinks)
    }

    /// These sinks with `sink` called after them, never rebuilt.
    pub fn with(self, sink: Arc<dyn Sink>) -> Self {
        self.write(|b| {
            b.fixed.push(sink);
            b.list();
        });
        self
    }

    fn new(
        from: Option<(SinkSettings, Shared)>,
        kinds: Vec<Option<Arc<dyn Sink>>>,
        fixed: Vec<Arc<dyn Sink>>,
    ) -> Self {
        let mut built = Built {
            from,
            kinds,
            fixed,
            all: Arc::new([]),
        };
        built.list();
        Sinks(Arc::new(RwLock::new(built)))
    }

    fn write<R>(&self, f: impl FnOnce(&mut Built) -> R) -> R {
        // A panic elsewhere while holding the lock leaves plain data behind.
        f(&mut self.0.write().unwrap_or_else(|e| e.into_inner()))
    }

    /// Rebuilds each sink whose settings differ in `settings` (a reload),
    /// and only those; the names of the sinks rebuilt.
    pub fn configure(&self, settings: &SinkSettings) -> Vec<&'static str> {
        self.write(|b| {
            let Some((old, shared)) = &b.from else {
                return Vec::new();
            };
            let changed: Vec<usize> = (0..KINDS.len())
                .filter(|&i| (KINDS[i].changed)(old, settings))
                .collect();
            let rebuilt: Vec<(usize, Option<Arc<dyn Sink>>)> = changed
                .into_iter()
                .map(|i| (i, (KINDS[i].build)(settings, shared)))
                .collect();
            let shared = shared.clone();
            let mut names = Vec::new();
            for (i, sink) in rebuilt {
                if let Some(slot) = b.kinds.get_mut(i) {
                    *slot = sink;
                    names.push(KINDS[i].name);
                    tracing::info!(sink = KINDS[i].name, "sink rebuilt: its settings changed");
                }
            }
            b.from = Some((settings.clone(), shared));
            b.list();
            names
        })
    }

    /// Calls `f` on every sink as now built, outside the lock (a sink may
    /// take its time; a reload meanwhile waits for no one).
    fn each(&self, f: impl Fn(&dyn Sink)) {
        let all = Arc::clone(&self.0.read().unwrap_or_else(|e| e.into_inner()).all);
        for s in all.iter() {
            f(s.as_ref());
        }
    }

    /// See [`Sink::target_configured`].
    pub fn target_configured(&self, target: &Arc<Target>, schedule: &Schedule) {
        self.each(|s| s.target_configured(target, schedule));
    }

    /// See [`Sink::target_announced`].
    pub fn target_announced(&self, target: &Target) {
        self.each(|s| s.target_announced(target));
    }

    /// See [`Sink::target_started`].
    pub fn target_started(&self, target: &Target) {
        self.each(|s| s.target_started(target));
    }

    /// See [`Sink::request`].
    pub fn request(
        &self,
        target: &Target,
        workload: &Workload,
        sample: &Sample,
        concurrency: Option<u32>,
    ) {
        self.each(|s| s.request(target, workload, sample, concurrency));
    }

    /// See [`Sink::level`].
    pub fn level(&self, target: &Target, workload: &Workload, level: &LevelSummary) {
        self.each(|s| s.level(target, workload, level));
    }

    /// See [`Sink::probe`].
    pub fn probe(&self, target: &Target, event: &ProbeEvent) {
        self.each(|s| s.probe(target, event));
    }

    /// See [`Sink::sweep`].
    pub fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        self.each(|s| s.sweep(target, report));
    }

    /// See [`Sink::pair`].
    pub fn pair(&self, report: &PairReport) {
        self.each(|s| s.pair(report));
    }

    /// See [`Sink::forget_target`].
    pub fn forget_target(&self, name: &str) {
        self.each(|s| s.forget_target(name));
    }

    /// See [`Sink::forget_pair`].
    pub fn forget_pair(&self, name: &str) {
        self.each(|s| s.forget_pair(name));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::LogSink;

    fn shared() -> Shared {
        Shared {
            metrics: Arc::new(Metrics::on_own_registry().unwrap()),
            statuses: Default::default(),
        }
    }

    fn built(sinks: &Sinks) -> Vec<Option<Arc<dyn Sink>>> {
        sinks.0.read().unwrap().kinds.clone()
    }

    fn same(a: &Option<Arc<dyn Sink>>, b: &Option<Arc<dyn Sink>>) -> bool {
        match (a, b) {
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            (None, None) => true,
            _ => false,
        }
    }

    #[test]
    fn a_reload_rebuilds_only_the_sink_whose_settings_changed() {
        let settings = SinkSettings::default();
        let sinks = Sinks::standard(&settings, shared());
        let clone = sinks.clone();
        let before = built(&sinks);
        assert_eq!(before.iter().flatten().count(), 3);

        // The same settings: nothing rebuilt, the very same sinks.
        assert!(sinks.configure(&settings).is_empty());
        let after = built(&sinks);
        assert!(before.iter().zip(&after).all(|(a, b)| same(a, b)));

        // Only the log's section changed: the log sink alone, off now.
        let quiet = SinkSettings {
            log: LogSink { rounds: false },
            ..Default::default()
        };
        assert_eq!(sinks.configure(&quiet), ["log"]);
        let after = built(&clone);
        assert!(after[0].is_none());
        assert!(same(&before[1], &after[1]) && same(&before[2], &after[2]));
        assert_eq!(clone.0.read().unwrap().all.len(), 2);

        // Back on: a new log sink, the others still untouched.
        assert_eq!(sinks.configure(&settings), ["log"]);
        let again = built(&clone);
        assert!(again[0].is_some() && !same(&before[0], &again[0]));
        assert!(same(&before[1], &again[1]) && same(&before[2], &again[2]));
    }

    #[tokio::test]
    async fn a_changed_otlp_section_rebuilds_the_otlp_sink_alone() {
        let settings = SinkSettings::default();
        let sinks = Sinks::standard(&settings, shared());
        let before = built(&sinks);
        assert!(before[3].is_none(), "off unless configured");
        let on = SinkSettings {
            otlp: Some(crate::config::OtlpSink {
                endpoint: "http://127.0.0.1:9/v1/metrics".into(),
                interval: std::time::Duration::from_secs(60),
                timeout: std::time::Duration::from_secs(1),
                temporality: crate::config::Temporality::Cumulative,
                headers: Vec::new(),
            }),
            ..Default::default()
        };
        assert_eq!(sinks.configure(&on), ["otlp"]);
        let after = built(&sinks);
        assert!(after[3].is_some());
        assert!((0..3).all(|i| same(&before[i], &after[i])));
        // The same section again: nothing rebuilt.
        assert!(sinks.configure(&on).is_empty());
        assert!(same(&after[3], &built(&sinks)[3]));
    }

    #[test]
    fn a_list_given_whole_is_never_rebuilt() {
        let sinks = Sinks::of(vec![Arc::new(log::Log)]);
        let quiet = SinkSettings {
            log: LogSink { rounds: false },
            ..Default::default()
        };
        assert!(sinks.configure(&quiet).is_empty());
        assert_eq!(sinks.0.read().unwrap().all.len(), 1);
    }
}
