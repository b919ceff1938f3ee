//! llmprobe: keeps measuring the serving capacity of OpenAI-compatible LLM
//! servers and exposes what it measured to Prometheus.
//!
//! Data flows one way: config -> fleet -> schedule -> sweep -> probe ->
//! stream; stats turn samples into reports, which metrics, http and the
//! terminal show.

// Layers, in the order data flows (ARCHITECTURE.md draws the arrows).
pub mod config;
pub mod faces;
pub mod fleet;
pub mod http;
pub mod metrics;
pub mod probe;
pub mod schedule;
pub mod sim;
pub mod stats;
pub mod stream;
pub mod sweep;
// Old paths of the faces, until their users move.
pub use faces::{html as report_html, text as terminal};

pub mod build_info;
pub mod cli;
pub mod manual;
pub mod memory;
pub mod signals;

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::schedule::{Scheduler, Statuses};
use crate::stats::report::{PairReport, SweepReport};
use crate::sweep::{NoObserver, Observer, SweepEnv};

/// How long shutdown waits for requests in flight to be cancelled.
pub const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Time limit on opening a connection to a target.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The config path to use: the one given, else the repository default.
pub fn config_path(given: Option<PathBuf>) -> PathBuf {
    given.unwrap_or_else(|| PathBuf::from(config::DEFAULT_PATH))
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
    let auth =
        http::exposure::BasicAuth::of(&config.web.basic_auth_users).map_err(anyhow::Error::msg)?;
    let tls = match &config.web.tls {
        Some(f) => {
            Some(http::exposure::load_tls(&f.cert_file, &f.key_file).map_err(anyhow::Error::msg)?)
        }
        None => None,
    };
    let registry = prometheus::Registry::new();
    let metrics = Arc::new(metrics::Metrics::new(&registry)?);
    let clients = clients_for(&config)?;
    let statuses: Statuses = Default::default();
    let ready = Arc::new(AtomicBool::new(false));
    let (control_tx, mut control_rx) = mpsc::channel::<http::router::Control>(8);
    let dead_loops = http::router::DeadLoops::default();

    let status_view = statuses.clone();
    let state = http::router::AppState {
        metrics: metrics.clone(),
        ready: ready.clone(),
        control: control_tx,
        allow_reload: config.web.enable_reload,
        dead_loops: dead_loops.clone(),
        targets: Arc::new(move || {
            status_view
                .read()
                .unwrap_or_else(|e| e.into_inner())
                .values()
                .cloned()
                .collect()
        }),
    };
    let app = http::router::router(state).layer(axum::middleware::from_fn(move |req, next| {
        http::exposure::require_auth(auth.clone(), req, next)
    }));
    let server_stop = shutdown.clone();
    let http = tokio::spawn(async move {
        let stopped = async move { server_stop.cancelled().await };
        match tls {
            Some(tls) => {
                axum::serve(http::exposure::TlsListener::new(listener, tls), app)
                    .with_graceful_shutdown(stopped)
                    .await
            }
            None => {
                axum::serve(listener, app)
                    .with_graceful_shutdown(stopped)
                    .await
            }
        }
    });

    let mut scheduler = Scheduler::new(metrics.clone(), clients, statuses)
        .with_config_info(metrics::ConfigInfo::new(&registry)?);
    let mut fleet = fleet::Fleet::new(Some(metrics::FleetMetrics::new(&registry)?));
    fleet.configure(&config);
    scheduler.apply(&fleet.view(&config));
    metrics.config_reloaded(true);
    let mut current = config;
    ready.store(true, Ordering::SeqCst);
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    tracing::info!(targets = current.targets.len(), config = %path.display(), "llmprobe started");

    let mut watchdog = tokio::time::interval(watchdog_period());
    let mut trim = tokio::time::interval(memory::TRIM_EVERY);
    loop {
        tokio::select! {
            _ = shutdown.cancelled() => break,
            Some(signals::Signal::Reload) = reload.recv() => {
                let _ = reload_config(path, &mut current, &mut scheduler, &mut fleet, &metrics);
            }
            Some(http::router::Control::Reload { reply }) = control_rx.recv() => {
                let _ = reply.send(reload_config(path, &mut current, &mut scheduler, &mut fleet, &metrics));
            }
            _ = tokio::time::sleep_until(fleet.next_refresh()) => {
                if fleet.refresh() {
                    scheduler.apply(&fleet.view(&current));
                }
            }
            _ = trim.tick() => memory::trim(),
            _ = watchdog.tick() => {
                // A target loop that died would otherwise stop measuring in
                // silence: withholding the ping lets systemd restart us.
                let dead: Vec<String> = scheduler.dead_loops().iter().map(ToString::to_string).collect();
                // /healthz reports the same, for Kubernetes' liveness probe.
                dead.clone_into(&mut dead_loops.write().unwrap_or_else(|e| e.into_inner()));
                if dead.is_empty() {
                    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Watchdog]);
                } else {
                    tracing::error!(loops = %dead.join(", "), "measurement loops stopped unexpectedly; withholding the watchdog ping");
                }
            }
        }
    }
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Stopping]);
    tracing::info!("shutting down: cancelling requests in flight");
    scheduler.shutdown(SHUTDOWN_GRACE).await;
    let _ = tokio::time::timeout(SHUTDOWN_GRACE, http).await;
    Ok(())
}

/// Half the systemd watchdog period when one is set, else 15 seconds (the
/// tick also refreshes what `/healthz` reports; checking is cheap).
fn watchdog_period() -> Duration {
    let mut usec = 0;
    if sd_notify::watchdog_enabled(false, &mut usec) && usec > 0 {
        Duration::from_micros(usec / 2)
    } else {
        Duration::from_secs(15)
    }
}

fn reload_config(
    path: &Path,
    current: &mut Config,
    scheduler: &mut Scheduler,
    fleet: &mut fleet::Fleet,
    metrics: &metrics::Metrics,
) -> Result<(), String> {
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Reloading]);
    // The new clients read the TLS files again (a renewed certificate).
    let loaded = load_config(path)
        .map_err(|e| e.to_string())
        .and_then(|new| {
            let clients = scheduler.clients().for_config(&new)?;
            Ok((new, clients))
        });
    let result = match loaded {
        Ok((new, clients)) => {
            if new.listen != current.listen {
                tracing::warn!(listen = %new.listen, "`listen` changes take effect only after a restart");
            }
            fleet.configure(&new);
            scheduler.set_clients(clients);
            scheduler.apply(&fleet.view(&new));
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
    let _ = sd_notify::notify(false, &[sd_notify::NotifyState::Ready]);
    result
}

/// One sweep of each selected target now, one target after the other.
/// `progress` shows the current level on stderr.
pub async fn sweep_once(
    config: &Config,
    only: &[String],
    progress: bool,
) -> anyhow::Result<Vec<SweepReport>> {
    // Discovered targets too, and only this instance's shard, as the daemon.
    let view = fleet::view_once(config);
    let config = &view;
    for name in only {
        if !config.targets.iter().any(|t| &t.name == name) {
            anyhow::bail!("no target named `{name}` in {}", config.path.display());
        }
    }
    let observer: Arc<dyn Observer> = if progress {
        Arc::new(terminal::Progress)
    } else {
        Arc::new(NoObserver)
    };
    let env = one_shot_env(config, observer)?;
    let mut reports = Vec::new();
    for target in &config.targets {
        if !only.is_empty() && !only.contains(&target.name) {
            continue;
        }
        let reachable = schedule::endpoint::reach(target)
            .await
            .map_err(anyhow::Error::msg)?;
        reports.push(
            sweep::run(
                &env,
                target,
                &reachable.base_url,
                config.schedule.sweep_timeout,
                None,
            )
            .await,
        );
    }
    if progress {
        terminal::Progress.done();
    }
    Ok(reports)
}

/// The environment of a one-shot `llmprobe sweep`: the configuration's
/// clients and global cap, nothing to cancel it but the process's end.
fn one_shot_env(config: &Config, observer: Arc<dyn Observer>) -> anyhow::Result<SweepEnv> {
    Ok(SweepEnv::new(
        clients_for(config)?,
        config.schedule.max_in_flight_total,
        CancellationToken::new(),
        observer,
    ))
}

/// One HTTP client per TLS setting of `config`.
fn clients_for(config: &Config) -> anyhow::Result<probe::tls::Clients> {
    probe::tls::Clients::new(CONNECT_TIMEOUT)
        .and_then(|c| c.for_config(config))
        .map_err(anyhow::Error::msg)
}

/// Measures the gateway pairs of `config` once, one after the other, for
/// `llmprobe sweep`. With `only` non-empty, only pairs whose two targets are
/// both in it. `progress` shows the pair being measured on stderr.
pub async fn measure_pairs_once(
    config: &Config,
    only: &[String],
    progress: bool,
) -> anyhow::Result<Vec<PairReport>> {
    let env = one_shot_env(config, Arc::new(NoObserver))?;
    let mut reports = Vec::new();
    for pair in &config.gateway_pairs {
        let selected = |name: &String| only.is_empty() || only.contains(name);
        if !selected(&pair.direct) || !selected(&pair.through) {
            continue;
        }
        let Some((direct, through)) = sweep::interleaved::pair_targets(config, pair) else {
            continue;
        };
        if progress {
            terminal::Progress.pair_started(pair);
        }
        let d = schedule::endpoint::reach(direct)
            .await
            .map_err(anyhow::Error::msg)?;
        let t = schedule::endpoint::reach(through)
            .await
            .map_err(anyhow::Error::msg)?;
        reports.push(
            sweep::interleaved::measure(
                &env,
                pair,
                (direct, &d.base_url),
                (through, &t.base_url),
                config.schedule.sweep_timeout,
            )
            .await,
        );
    }
    if progress {
        terminal::Progress.done();
    }
    Ok(reports)
}

/// Whether a progress line should be drawn (stdout is a terminal).
pub fn progress_wanted() -> bool {
    std::io::stdout().is_terminal()
}

/// A human-readable account of what a valid configuration will do.
pub fn explain(config: &Config) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let s = &config.schedule;
    let _ = writeln!(out, "configuration {} is valid", config.path.display());
    let _ = writeln!(
        out,
        "listen: {} (reload endpoint {})",
        config.listen,
        if config.web.enable_reload {
            "on"
        } else {
            "off"
        }
    );
    let _ = writeln!(
        out,
        "web: {}, {}",
        if config.web.tls.is_some() {
            "HTTPS"
        } else {
            "plain HTTP"
        },
        if !config.web.basic_auth_users.is_empty() {
            "basic auth required (except /healthz, /readyz)"
        } else {
            "no authentication"
        }
    );
    let _ = writeln!(
        out,
        "schedule: every {} + up to {:.0}% jitter, at most {} requests in flight in all, sweeps limited to {}",
        humantime::format_duration(s.interval),
        s.jitter * 100.0,
        s.max_in_flight_total,
        humantime::format_duration(s.sweep_timeout)
    );
    out.push_str(&fleet::explain(config));
    for t in &config.targets {
        let endpoint = match &t.endpoint {
            config::Endpoint::Url(u) => u.clone(),
            config::Endpoint::Simulator(p) => format!("built-in simulated engine ({:?})", p.engine),
        };
        let _ = writeln!(out, "target {}: {} model {}", t.name, endpoint, t.model);
        let _ = writeln!(
            out,
            "  key: {}; levels {:?}; warm-up {}; request timeout {}",
            if t.api_key.is_some() { "set" } else { "none" },
            t.levels,
            t.warmup_requests,
            humantime::format_duration(t.request_timeout)
        );
        if let Some(tls) = &t.tls {
            let _ = writeln!(
                out,
                "  TLS: roots {}; client certificate {}",
                tls.ca_file
                    .as_ref()
                    .map_or("built-in".into(), |f| format!("from {}", f.display())),
                tls.identity
                    .as_ref()
                    .map_or("none".into(), |i| i.cert_file.display().to_string())
            );
        }
        let _ = writeln!(
            out,
            "  SLO: p95 latency <= {}, shed ratio <= {}, error ratio <= {}; recommended max_in_flight = floor(knee x {})",
            humantime::format_duration(t.slo.p95_latency),
            t.slo.max_shed_ratio,
            t.slo.max_error_ratio,
            t.headroom
        );
        let _ = writeln!(
            out,
            "  gentle sweeps: early stop {}; refinement between levels {}; {}",
            if t.early_stop { "on" } else { "off" },
            match t.refine_resolution {
                config::gentle::Resolution::Off => "off".to_string(),
                r => format!("to {r}"),
            },
            match t.full_sweep_every {
                0 | 1 => "every daemon sweep climbs from the lowest level".to_string(),
                n => format!("the daemon climbs in full every {n} sweeps, the others start near the last knee"),
            }
        );
        let _ = writeln!(
            out,
            "  output limit: {}",
            match t.max_tokens_field {
                Some(f) => format!("sent as `{}` (configured)", f.as_str()),
                None =>
                    "sent as `max_completion_tokens`, checked at warm-up (`max_tokens`, then both, \
                         if the server does not honour it); set max_tokens_field to skip the check"
                        .to_string(),
            }
        );
        for w in &t.workloads {
            let _ = writeln!(
                out,
                "  workload {}: {} prompts, max {} output tokens, temperature {}, prefix cache: {}",
                w.name,
                w.prompts.len(),
                w.max_completion_tokens,
                w.temperature,
                match w.prefix_cache {
                    config::PrefixCache::Unique => "unique (a new marker starts every prompt)",
                    config::PrefixCache::Shared => "shared (prompts sent as written)",
                    config::PrefixCache::SharedSystemPrompt =>
                        "shared system prompt (a new marker starts the first message after it)",
                }
            );
        }
    }
    for p in &config.gateway_pairs {
        let _ = writeln!(
            out,
            "gateway pair {}: {} (direct) vs {} (through), interleaved, {} requests per side at concurrency {}, workload {}",
            p.name, p.direct, p.through, p.requests, p.concurrency, p.workload.name
        );
    }
    out
}
