//! The one-shot path of `llmprobe sweep`: every selected target swept once,
//! then every selected gateway pair measured once, one after the other,
//! reached and measured as one round of their daemon loop ([`super::job`])
//! does, until a cancel token (Ctrl-C) stops them: what was measured by
//! then is returned, and nothing more is started.

use std::path::Path;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::fleet;
use crate::probe::tls::Clients;
use crate::schedule::job::Job;
use crate::schedule::memory::Memory;
use crate::schedule::state::{self, StateDir};
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
    sweep_from(config, only, observer, None, &CancellationToken::new()).await
}

/// [`sweep`], each target starting from what the daemon saved of it in
/// `state` (`llmprobe sweep --state DIR`): its pooled evidence, carried
/// levels and output-limit field; read, never written. The climb is full
/// all the same: a one-shot report shows every level. Once `cancel` fires,
/// the sweep under way ends with what it measured, and no other starts.
pub async fn sweep_from(
    config: &Config,
    only: &[String],
    observer: Arc<dyn Observer>,
    state: Option<&Path>,
    cancel: &CancellationToken,
) -> Result<Vec<SweepReport>, String> {
    let state = state.map(StateDir::reader);
    let config = &fleet::view_once(config);
    for name in only {
        if !config.targets.iter().any(|t| &t.name == name) {
            return Err(format!(
                "no target named `{name}` in {}",
                config.path.display()
            ));
        }
    }
    let env = env(config, observer.clone(), cancel)?;
    let mut reports = Vec::new();
    for target in &config.targets {
        if !only.is_empty() && !only.contains(&target.name) {
            continue;
        }
        if cancel.is_cancelled() {
            break;
        }
        observer.sweep_started(target);
        let job = Job::Target(target.clone());
        let reached = tokio::select! {
            reached = job.reach() => reached?,
            _ = cancel.cancelled() => break,
        };
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
