//! The one-shot path of `llmprobe sweep`: every selected target swept once,
//! then every selected gateway pair measured once, one after the other,
//! reached and measured as one round of their daemon loop ([`super::job`])
//! does, until a cancel token (Ctrl-C) stops them: what was measured by
//! then is returned, and nothing more is started. A target waits for its
//! idle gate, and a target a daemon is sweeping now is refused
//! ([`super::sweep_lock`]), unless `--force`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{Config, Target};
use crate::fleet;
use crate::probe::tls::Clients;
use crate::schedule::idle_gate;
use crate::schedule::job::Job;
use crate::schedule::memory::Memory;
use crate::schedule::state::{self, StateDir};
use crate::schedule::sweep_lock::{self, Claim};
use crate::stats::pair_report::PairReport;
use crate::stats::report::SweepReport;
use crate::sweep::interleaved::pair_targets;
use crate::sweep::{Observer, SweepEnv};

/// One full sweep of each selected target now (all when `only` is empty):
/// discovered targets too, and only this instance's shard, as the daemon.
/// `observer` sees the levels start.
pub async fn sweep(
    config: &Config,
    only: &[String],
    observer: Arc<dyn Observer>,
) -> Result<Vec<SweepReport>, String> {
    sweep_with(
        config,
        only,
        observer,
        Options::default(),
        &CancellationToken::new(),
    )
    .await
    .map_err(|e| e.to_string())
}

/// How `llmprobe sweep` goes about it.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options<'a> {
    /// `--state DIR`: each target starts from what the daemon saved of it
    /// there (its pooled evidence, carried levels and output-limit field;
    /// read, never written). The climb is full all the same: a one-shot
    /// report shows every level. Also where the daemon's sweep locks are
    /// looked for (else the configuration's `state_dir`).
    pub state: Option<&'a Path>,
    /// `--force`: sweep now, whatever each target's idle gate says and
    /// even while a daemon sweeps it.
    pub force: bool,
}

/// Why a one-shot sweep did not run.
#[derive(Debug)]
pub enum Refused {
    /// A daemon with the same state directory is sweeping these targets
    /// now (their sweep locks are held): nothing was swept.
    Busy(Vec<(String, PathBuf)>),
    /// A target named that is not there, or an endpoint that cannot be
    /// reached.
    Failed(String),
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refused::Busy(names) => {
                for (i, (name, lock)) in names.iter().enumerate() {
                    if i > 0 {
                        writeln!(f)?;
                    }
                    write!(
                        f,
                        "{name}: a daemon is sweeping this target now (it holds {}); \
                         run again later, or pass --force",
                        lock.display()
                    )?;
                }
                Ok(())
            }
            Refused::Failed(e) => f.write_str(e),
        }
    }
}

/// [`sweep`] as `options` say: refused when a daemon is sweeping a selected
/// target (its sweep lock in the state directory held); the selected
/// targets' locks are held until every sweep ended, so that the daemon
/// waits; each target waits for its idle gate. `--force` skips both. Once
/// `cancel` fires, the sweep under way ends with what it measured, and no
/// other starts.
pub async fn sweep_with(
    config: &Config,
    only: &[String],
    observer: Arc<dyn Observer>,
    options: Options<'_>,
    cancel: &CancellationToken,
) -> Result<Vec<SweepReport>, Refused> {
    let state = options.state.map(StateDir::reader);
    let config = &fleet::view_once(config);
    for name in only {
        if !config.targets.iter().any(|t| &t.name == name) {
            return Err(Refused::Failed(format!(
                "no target named `{name}` in {}",
                config.path.display()
            )));
        }
    }
    let selected: Vec<&Arc<Target>> = config
        .targets
        .iter()
        .filter(|t| only.is_empty() || only.contains(&t.name))
        .collect();
    let _locks = if options.force {
        Vec::new()
    } else {
        let locks = state
            .clone()
            .or_else(|| config.state_dir.as_deref().map(StateDir::reader));
        claim_all(locks.as_ref(), &selected)?
    };
    let env = env(config, observer.clone(), cancel).map_err(Refused::Failed)?;
    let mut reports = Vec::new();
    for target in selected {
        if cancel.is_cancelled() {
            break;
        }
        observer.sweep_started(target);
        let job = Job::Target(target.clone());
        let reached = tokio::select! {
            reached = job.reach() => reached.map_err(Refused::Failed)?,
            _ = cancel.cancelled() => break,
        };
        if let (Some(gate), false) = (&target.idle_gate, options.force) {
            let client = env.clients.for_target(target);
            idle_gate::wait_until_idle(client, &target.name, gate, cancel, || 0, |v| {
                tracing::warn!(target_name = %target.name, metric = %gate.metric, value = v, max_value = gate.max_value, retry_in = ?gate.retry_every, "server busy: the sweep waits for the idle gate (--force sweeps now)");
            })
            .await;
        }
        let mut memory = state
            .as_ref()
            .and_then(|s| s.load(target, config.schedule.interval, state::unix_now()))
            .map(|saved| Memory::restored(target, saved));
        let prior = memory.as_mut().map_or_else(Default::default, |m| {
            let mut prior = m.prior();
            prior.warm = None;
            prior
        });
        let measured = reached
            .measure(&env, config.schedule.sweep_timeout, prior)
            .await;
        reports.extend(measured.into_sweep());
    }
    Ok(reports)
}

/// Every selected target's sweep lock in `dir`, held; refused, holding
/// none, when a daemon holds any. A lock that cannot be tried is said and
/// passed over: state is a help, never a reason to fail.
fn claim_all(
    dir: Option<&StateDir>,
    targets: &[&Arc<Target>],
) -> Result<Vec<sweep_lock::Held>, Refused> {
    let Some(dir) = dir else {
        return Ok(Vec::new());
    };
    let mut held = Vec::new();
    let mut busy = Vec::new();
    for target in targets {
        match sweep_lock::try_claim(dir, target, false) {
            Claim::Held(h) => held.push(h),
            Claim::Free => {}
            Claim::Busy => busy.push((target.name.clone(), sweep_lock::path_of(dir, target))),
            Claim::Unknown(e) => {
                tracing::warn!(target_name = %target.name, error = %e, "cannot tell whether a daemon is sweeping the target: sweeping anyway");
            }
        }
    }
    if busy.is_empty() {
        Ok(held)
    } else {
        Err(Refused::Busy(busy))
    }
}

/// Measures the gateway pairs of `config` once, one after the other. With
/// `only` non-empty, only pairs whose two targets are both in it.
/// `observer` sees each pair start.
pub async fn measure_pairs(
    config: &Config,
    only: &[String],
    observer: Arc<dyn Observer>,
) -> Result<Vec<PairReport>, String> {
    measure_pairs_until(config, only, observer, &CancellationToken::new()).await
}

/// [`measure_pairs`] until `cancel` fires: the pair under way ends with
/// what it measured, and no other starts.
pub async fn measure_pairs_until(
    config: &Config,
    only: &[String],
    observer: Arc<dyn Observer>,
    cancel: &CancellationToken,
) -> Result<Vec<PairReport>, String> {
    let env = env(config, observer.clone(), cancel)?;
    let mut reports = Vec::new();
    for pair in &config.gateway_pairs {
        if cancel.is_cancelled() {
            break;
        }
        let selected = |name: &String| only.is_empty() || only.contains(name);
        if !selected(&pair.direct) || !selected(&pair.through) {
            continue;
        }
        let Some((direct, through)) = pair_targets(config, pair) else {
            continue;
        };
        observer.pair_started(pair);
        let job = Job::Pair {
            pair: pair.clone(),
            direct: direct.clone(),
            through: through.clone(),
        };
        let reached = tokio::select! {
            reached = job.reach() => reached?,
            _ = cancel.cancelled() => break,
        };
        let measured = reached
            .measure(&env, config.schedule.sweep_timeout, Default::default())
            .await;
        reports.extend(measured.into_pair());
    }
    Ok(reports)
}

/// The environment of a one-shot sweep: the configuration's clients and
/// global cap, cancelled with `cancel`.
fn env(
    config: &Config,
    observer: Arc<dyn Observer>,
    cancel: &CancellationToken,
) -> Result<SweepEnv, String> {
    Ok(SweepEnv::new(
        Clients::of(config)?,
        config.schedule.max_in_flight_total,
        cancel.child_token(),
        observer,
    ))
}
