//! llmprobe: keeps measuring the serving capacity of OpenAI-compatible LLM
//! servers and exposes what it measured to Prometheus.
//!
//! Data flows one way: config -> fleet -> schedule -> sweep -> probe ->
//! stream; stats turn samples into reports, which metrics, http and the
//! faces show. This file only wires the daemon together: [`run`] and its
//! reload.

// Layers, in the order data flows (ARCHITECTURE.md draws the arrows).
pub mod config;
pub mod faces;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod probe;
pub mod schedule;
pub mod sim;
pub mod sinks;
pub mod stats;
pub mod stream;
pub mod sweep;

pub mod build_info;
pub mod cli;
pub mod log_writer;
pub mod manual;
pub mod memory;
pub mod signals;
pub mod systemd;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fleet::Fleet;
use crate::http::router::{AppState, Control, DeadLoops};
use crate::metrics::Metrics;
use crate::schedule::Scheduler;
use crate::sinks::index_page::Statuses;
use crate::sinks::Sinks;

/// How long shutdown waits for requests in flight to be cancelled.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// How long the process waits, once the daemon stopped, for blocking work
/// (file reads) to end before it exits anyway. With [`SHUTDOWN_GRACE`]
/// twice (the requests, then the HTTP side), SIGTERM ends the process
/// within about 12 s whatever a read is doing, well under the unit's
/// `TimeoutStopSec=30`.
pub const EXIT_GRACE: Duration = Duration::from_secs(2);

/// The config path to use: the one given (`--config`, `$LLMPROBE_CONFIG`),
/// else the first that exists of `config/llmprobe.yaml` (a checkout) and
/// `/etc/llmprobe/llmprobe.yaml` ([`config::search`]).
pub fn config_path(given: Option<PathBuf>) -> Result<PathBuf, String> {
    config::search::find(given, Path::exists)
}

/// Loads the configuration at `path` with every check, the TLS files'
/// included (which config alone cannot read): for `check-config`, the
/// start and every reload.
pub fn load_config(path: &Path) -> Result<Config, config::ConfigError> {
    config::load_with(
        path,
        &config::Checks {
            tls: http::exposure::check_tls,
            client_tls: probe::tls::check,
        },
    )
}

/// Runs the daemon on `listener` until `shutdown` is cancelled. `config` was
/// loaded from `path`, which reloads (SIGHUP, `POST /-/reload`, `reload`
/// messages) read again.
pub async fn run(
    path: &Path,
    config: Config,
    listener: TcpListener,
    shutdown: CancellationToken,
    mut reload: mpsc::Receiver<signals::Signal>,
) -> anyhow::Result<()> {
    // The web section's files, read before anything starts.
    let exposure = http::serve::Exposure::of(&config.web).map_err(anyhow::Error::msg)?;
    let metrics = Arc::new(Metrics::on_own_registry()?);
    let clients = probe::tls::Clients::of(&config).map_err(anyhow::Error::msg)?;
    let statuses: Statuses = Default::default();
    let ready = Arc::new(AtomicBool::new(false));
    let (control_tx, mut control_rx) = mpsc::channel::<Control>(8);
    let dead_loops = DeadLoops::default();

    let status_view = statuses.clone();
    let state = AppState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        control: control_tx,
        allow_reload: config.web.enable_reload,
        dead_loops: dead_loops.clone(),
        reloads: Arc::default(),
        targets: Arc::new(move || {
            status_view
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .cloned()
                .collect()
        }),
    };
    let http = exposure.serve(listener, state, shutdown.clone())?;

    let shared = sinks::Shared {
        metrics: metrics.clone(),
        statuses: statuses.clone(),
    };
    let sinks = Sinks::standard(&config.sinks, shared);
    let mut scheduler = Scheduler::new(sinks.clone(), metrics.clone(), clients);
    if let Some(dir) = &config.state_dir {
        // Never fatal: without it, loops start from nothing, as before.
        match schedule::state::StateDir::open(dir) {
            Ok(state) => scheduler.keep_state_in(state),
            Err(e) => tracing::warn!(error = %e, "no state kept between runs"),
        }
    }
    let mut fleet = Fleet::new();
    fleet.configure_later(&config);
    // The discovery files are read off this loop, as every later read.
    if let Some(read) = fleet.begin_read() {
        match off_loop(move || read.run(), &shutdown).await {
            Some(Ok(done)) => {
                fleet.end_read(done);
            }
            Some(Err(e)) => {
                tracing::error!(error = %e, "file_sd: the first read did not finish; starting without discovered targets")
            }
            None => return Ok(()),
        }
    }
    scheduler.apply(&fleet.view(&config));
    export_fleet(&mut fleet, &metrics);
    metrics.config_reloaded(true);
    let mut current = config;
    ready.store(true, Ordering::SeqCst);
    systemd::ready();
    tracing::info!(targets = current.targets.len(), config = %path.display(), "llmprobe started");

    let mut watchdog = tokio::time::interval(systemd::watchdog_period());
    let mut trim = tokio::time::interval(memory::TRIM_EVERY);
    // Discovery reads run on a blocking thread (the loop never waits for a
    // file); one that hangs is abandoned, counted and tried again.
    let mut reads = fleet::reading::Reads::new(fleet::reading::READ_TIMEOUT);
    let mut abandoned = false;
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(signals::Signal::Reload) = reload.recv() => {
                let _ = reload_config(path, &mut current, &mut scheduler, &sinks, &mut fleet, &metrics, &shutdown).await;
            }
            Some(Control::Reload { reply }) = control_rx.recv() => {
                let mut notes = discovery_notes(reads.hung(), abandoned);
                let reloaded = reload_config(path, &mut current, &mut scheduler, &sinks, &mut fleet, &metrics, &shutdown).await;
                notes.extend(fleet.refused_note());
                let _ = reply.send(reloaded.map(|()| notes));
            }
            _ = tokio::time::sleep_until(fleet.next_refresh()), if !reads.busy() => {
                if let Some(read) = fleet.begin_read() {
                    if !reads.start(move || read.run()) {
                        tracing::warn!("file_sd: earlier reads still hang; no new read until one of them ends");
                        fleet.read_abandoned();
                    }
                }
            }
            ended = reads.ended(), if reads.busy() => {
                abandoned = matches!(ended, fleet::reading::Ended::Abandoned);
                if read_ended(ended, &mut fleet, &metrics) {
                    scheduler.apply(&fleet.view(&current));
                }
                export_fleet(&mut fleet, &metrics);
            }
            _ = trim.tick() => memory::trim(),
            _ = watchdog.tick() => {
                // A target loop that died would otherwise stop measuring in
                // silence; /healthz reports the same, for Kubernetes'
                // liveness probe.
                let dead: Vec<String> = scheduler.dead_loops().iter().map(ToString::to_string).collect();
                dead.clone_into(&mut dead_loops.write().unwrap_or_else(|e| e.into_inner()));
                systemd::watchdog(&dead);
            }
        }
    }
    systemd::stopping();
    tracing::info!("shutting down: cancelling requests in flight");
    scheduler.shutdown(SHUTDOWN_GRACE).await;
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, http).await;
    Ok(())
}

/// Longest wait for a configuration read (the file, its prompt and key
/// files): a FIFO or a hung mount fails the reload instead of holding it.
const LOAD_TIMEOUT: Duration = Duration::from_secs(30);

/// Runs `work` (file reads) on a blocking thread, within [`LOAD_TIMEOUT`];
/// None when `shutdown` comes first, so that SIGTERM is never held up by a
/// read (the thread is left to finish on its own).
async fn off_loop<T: Send + 'static>(
    work: impl FnOnce() -> T + Send + 'static,
    shutdown: &CancellationToken,
) -> Option<Result<T, String>> {
    let task = tokio::task::spawn_blocking(work);
    tokio::select! {
        _ = shutdown.cancelled() => None,
        r = tokio::time::timeout(LOAD_TIMEOUT, task) => Some(match r {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(e)) => Err(format!("the read failed: {e}")),
            Err(_) => Err(format!(
                "reading took longer than {}s (a FIFO, a hung mount?)",
                LOAD_TIMEOUT.as_secs()
            )),
        }),
    }
}

/// Reads the configuration at `path` again and, when it is valid, applies
/// it; the previous one stays otherwise.
async fn reload_config(
    path: &Path,
    current: &mut Config,
    scheduler: &mut Scheduler,
    sinks: &Sinks,
    fleet: &mut Fleet,
    metrics: &Metrics,
    shutdown: &CancellationToken,
) -> Result<(), String> {
    systemd::reloading();
    // The new clients read the TLS files again (a renewed certificate).
    let owned = path.to_path_buf();
    let loaded = match off_loop(move || load_config(&owned), shutdown).await {
        None => return Err("shutting down".into()),
        Some(r) => r.and_then(|r| r.map_err(|e| e.to_string())),
    }
    .and_then(|new| {
        let clients = scheduler.clients().for_config(&new)?;
        Ok((new, clients))
    });
    let result = match loaded {
        Ok((new, clients)) => {
            if new.listen != current.listen {
                tracing::warn!(listen = %new.listen, "`listen` changes take effect only after a restart");
            }
            // Only the sinks whose settings changed are rebuilt; the
            // loops see them at their next event.
            sinks.configure(&new.sinks);
            if new.state_dir != current.state_dir {
                tracing::warn!("`state_dir` changes take effect only after a restart");
            }
            // The discovery files are read again off the loop, at once.
            fleet.configure_later(&new);
            scheduler.set_clients(clients);
            scheduler.apply(&fleet.view(&new));
            export_fleet(fleet, metrics);
            tracing::info!(targets = new.targets.len(), "configuration reloaded");
            *current = new;
            metrics.config_reloaded(true);
            Ok(())
        }
        Err(e) => {
            tracing::error!(error = %e, "configuration reload failed; keeping the previous configuration");
            metrics.config_reloaded(false);
            Err(e)
        }
    };
    systemd::ready();
    result
}

/// Takes how a discovery read ended; true when the discovered targets
/// changed (then apply the fleet's view). An abandoned read is counted,
/// logged and tried again at the next refresh, as is one that failed.
fn read_ended(
    ended: fleet::reading::Ended<fleet::DoneRead>,
    fleet: &mut Fleet,
    metrics: &Metrics,
) -> bool {
    match ended {
        fleet::reading::Ended::Done(done) => return fleet.end_read(done),
        fleet::reading::Ended::Failed => {}
        fleet::reading::Ended::Abandoned => {
            metrics.discovery_read_abandoned();
            tracing::warn!(
                timeout_s = fleet::reading::READ_TIMEOUT.as_secs(),
                "file_sd: a read did not finish in time and was abandoned (a hung mount?); the files keep their targets, and the read is tried again at the next refresh"
            );
        }
    }
    fleet.read_abandoned();
    false
}

/// What a reload over HTTP says beside its outcome: a discovery read that
/// was abandoned, or abandoned reads whose threads still hang.
fn discovery_notes(hung: usize, last_abandoned: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if last_abandoned {
        notes.push(format!(
            "file_sd: the last read did not finish within {}s and was abandoned; the files keep the targets they gave last time",
            fleet::reading::READ_TIMEOUT.as_secs()
        ));
    }
    if hung > 0 {
        notes.push(format!(
            "file_sd: {hung} abandoned read(s) still hang (a hung mount?)"
        ));
    }
    notes
}

/// Hands what the fleet last read and placed to the metrics.
fn export_fleet(fleet: &mut Fleet, metrics: &Metrics) {
    for file in fleet.take_read_failures() {
        metrics.discovery_read_failed(&file);
    }
    metrics.set_discovery_files(&fleet.file_counts());
    metrics.set_discovery_refused(fleet.refused().len());
    let p = fleet.placement();
    let targets: Vec<(&str, &str, u32)> = p
        .targets
        .iter()
        .map(|(name, source, owner)| (name.as_str(), *source, *owner))
        .collect();
    metrics.set_fleet(&targets, p.shard_index, p.shard_count, p.owned);
}
