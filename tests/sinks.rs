//! An export sink is one file: a sink written here, outside the crate,
//! listed beside the standard ones, receives what the daemon's loops
//! measured (through the real `Scheduler`, against the built-in simulator):
//! every measured request, every finished level, the round, and that its
//! target left the configuration. A sink rebuilt because its settings
//! changed takes the running loops' next rounds, no loop restarted.

mod support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use llmprobe::config::{LogSink, Schedule, SinkSettings, Target, Workload};
use llmprobe::metrics::Metrics;
use llmprobe::probe::tls::Clients;
use llmprobe::schedule::Scheduler;
use llmprobe::sinks::index_page::Statuses;
use llmprobe::sinks::{Shared, Sink, Sinks};
use llmprobe::stats::pair_report::PairReport;
use llmprobe::stats::report::{LevelSummary, SweepReport};
use llmprobe::stats::sample::{Outcome, Sample};

/// What the sink saw, in order; requests counted apart (one line each
/// would bury the rest), and each level's summary kept.
#[derive(Default)]
struct Recorder {
    lines: Mutex<Vec<String>>,
    requests: AtomicU64,
    ok: AtomicU64,
    levels: Mutex<Vec<LevelSummary>>,
}

impl Sink for Recorder {
    fn target_configured(&self, target: &Arc<Target>, schedule: &Schedule) {
        self.push(format!(
            "configured {} every {:?}",
            target.name, schedule.interval
        ));
    }
    fn target_started(&self, target: &Target) {
        self.push(format!("started {}", target.name));
    }
    fn request(&self, _target: &Target, _workload: &Workload, sample: &Sample, _: Option<u32>) {
        self.requests.fetch_add(1, Ordering::SeqCst);
        if sample.outcome == Outcome::Ok {
            self.ok.fetch_add(1, Ordering::SeqCst);
        }
    }
    fn level(&self, target: &Target, workload: &Workload, level: &LevelSummary) {
        self.push(format!(
            "level {} {} {}",
            target.name, workload.name, level.concurrency
        ));
        self.levels.lock().unwrap().push(level.clone());
    }
    fn sweep(&self, target: &Target, report: &Arc<SweepReport>) {
        let w = &report.workloads[0];
        self.push(format!(
            "sweep {} knee {} ok {}",
            target.name, w.capacity.knee_concurrency, report.success
        ));
    }
    fn pair(&self, report: &PairReport) {
        self.push(format!("pair {}", report.pair));
    }
    fn forget_target(&self, name: &str) {
        self.push(format!("forget {name}"));
    }
}

impl Recorder {
    fn push(&self, line: String) {
        self.lines.lock().unwrap().push(line);
    }
    fn lines(&self) -> Vec<String> {
        self.lines.lock().unwrap().clone()
    }
}

async fn wait_until(what: &str, rec: &Recorder, done: impl Fn(&[String]) -> bool) {
    let start = Instant::now();
    while !done(&rec.lines()) {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "no {what}: {:?}",
            rec.lines()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_of_its_own_receives_every_round_and_the_forget() {
    // The `tiny` engine sheds above 8 in flight: knee 8 on levels 4, 8, 16.
    let yaml = support::config::Yaml {
        levels: "[4, 8, 16]",
        requests_per_level: "2x",
        min_requests_per_level: 8,
        rest: "targets:\n  - name: sim\n    simulator: { profile: tiny }",
        ..Default::default()
    }
    .render();
    let config = support::config::load(&yaml);
    let metrics = Arc::new(Metrics::on_own_registry().unwrap());
    let statuses: Statuses = Default::default();
    let recorder = Arc::new(Recorder::default());
    // The standard sinks run beside it, as the daemon lists them. Sinks
    // are called in order, so with the recorder last, what it has heard
    // the standard sinks have already acted on.
    let shared = Shared {
        metrics: metrics.clone(),
        statuses: statuses.clone(),
    };
    let sinks = Sinks::standard(&config.sinks, shared).with(recorder.clone());
    let clients = Clients::of(&config).unwrap();
    let mut scheduler = Scheduler::new(sinks, metrics.clone(), clients);
    scheduler.apply(&config);

    wait_until("sweep", &recorder, |l| {
        l.iter().any(|l| l.starts_with("sweep"))
    })
    .await;
    let lines = recorder.lines();
    assert_eq!(lines[0], "configured sim every 1s");
    assert_eq!(lines[1], "started sim");
    // Every level as it finished, before the round.
    assert_eq!(
        lines[2..],
        [
            "level sim chat 4",
            "level sim chat 8",
            "level sim chat 16",
            "sweep sim knee 8 ok true"
        ]
    );
    let report = statuses.read().unwrap()["sim"].report.clone().unwrap();
    let levels = &report.workloads[0].levels;
    assert_eq!(*recorder.levels.lock().unwrap(), *levels);
    // Every measured request (no warm-up, no pool connections), as the
    // running totals counted them: the levels' requests, and those of a
    // level run again after the client stalled (a loaded machine), which
    // the server served all the same.
    let counted: u64 = levels.iter().map(|l| l.requests).sum();
    let heard = recorder.requests.load(Ordering::SeqCst);
    assert!(
        heard >= counted,
        "{heard} requests heard, {counted} in the levels"
    );
    let totals = support::exposition::metric_sum(
        &metrics.encode(),
        "llmprobe_requests_total",
        &[("target", "sim"), ("workload", "chat")],
    );
    assert_eq!(totals, heard as f64);
    let ok_total = support::exposition::metric(
        &metrics.encode(),
        "llmprobe_requests_total",
        &[("target", "sim"), ("workload", "chat"), ("outcome", "ok")],
    );
    assert_eq!(ok_total, Some(recorder.ok.load(Ordering::SeqCst) as f64));
    // The standard sinks got the same round.
    assert!(statuses.read().unwrap()["sim"].report.is_some());
    let knee = support::exposition::metric(
        &metrics.encode(),
        "llmprobe_capacity_knee_concurrency",
        &[("target", "sim"), ("workload", "chat")],
    );
    assert_eq!(knee, Some(8.0));

    // The target leaves the configuration: every sink forgets it.
    let other = support::config::load(
        &support::config::Yaml {
            rest: "targets:\n  - name: other\n    simulator: { profile: tiny }",
            ..Default::default()
        }
        .render(),
    );
    scheduler.apply(&other);
    wait_until("forget", &recorder, |l| l.iter().any(|l| l == "forget sim")).await;
    assert!(!statuses.read().unwrap().contains_key("sim"));
    scheduler.shutdown(Duration::from_secs(5)).await;
}

/// Log output, shared with the subscriber.
#[derive(Clone, Default)]
struct Logs(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Logs {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl Logs {
    fn count(&self, needle: &str) -> usize {
        String::from_utf8_lossy(&self.0.lock().unwrap())
            .matches(needle)
            .count()
    }
}

fn sweeps(rec: &Recorder) -> usize {
    rec.lines()
        .iter()
        .filter(|l| l.starts_with("sweep"))
        .count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sink_rebuilt_on_reload_takes_the_running_loops_next_rounds() {
    // The only test in this binary that installs a subscriber (global,
    // because the loops run on the runtime's worker threads).
    let logs = Logs::default();
    let writer = logs.clone();
    tracing_subscriber::fmt()
        .with_env_filter("llmprobe=info")
        .with_ansi(false)
        .with_writer(move || writer.clone())
        .init();
    let yaml = support::config::Yaml {
        levels: "[1, 2]",
        requests_per_level: "1x",
        min_requests_per_level: 4,
        rest: "targets:\n  - name: sim\n    simulator: { profile: tiny }",
        ..Default::default()
    }
    .render();
    let config = support::config::load(&yaml);
    let metrics = Arc::new(Metrics::on_own_registry().unwrap());
    let shared = Shared {
        metrics: metrics.clone(),
        statuses: Default::default(),
    };
    let recorder = Arc::new(Recorder::default());
    let sinks = Sinks::standard(&config.sinks, shared).with(recorder.clone());
    let clients = Clients::of(&config).unwrap();
    let mut scheduler = Scheduler::new(sinks.clone(), metrics, clients);
    scheduler.apply(&config);
    wait_until("sweep", &recorder, |l| {
        l.iter().any(|l| l.starts_with("sweep"))
    })
    .await;
    assert!(logs.count("sweep finished") >= 1);

    // Only the log's settings change: it alone is rebuilt, off.
    let quiet = SinkSettings {
        log: LogSink { rounds: false },
        ..Default::default()
    };
    assert_eq!(sinks.configure(&quiet), ["log"]);
    // A round handed out before the change may still be logged; every
    // round after the next one goes to the rebuilt sinks.
    let k = sweeps(&recorder);
    wait_until("next sweep", &recorder, |_| sweeps(&recorder) > k).await;
    let logged = logs.count("sweep finished");
    wait_until("two more sweeps", &recorder, |_| sweeps(&recorder) > k + 2).await;
    assert_eq!(logs.count("sweep finished"), logged, "the log sink is off");

    // Back on: a new log sink hears the loop's next rounds.
    assert_eq!(sinks.configure(&SinkSettings::default()), ["log"]);
    let k = sweeps(&recorder);
    wait_until("sweeps logged again", &recorder, |_| {
        sweeps(&recorder) > k + 1 && logs.count("sweep finished") > logged
    })
    .await;
    // The loop was never restarted: configured and started once.
    let lines = recorder.lines();
    assert_eq!(
        lines.iter().filter(|l| l.starts_with("configured")).count(),
        1
    );
    assert_eq!(lines.iter().filter(|l| l.starts_with("started")).count(), 1);
    assert_eq!(logs.count("sink rebuilt"), 2);
    scheduler.shutdown(Duration::from_secs(5)).await;
}
