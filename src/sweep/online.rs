//! `check-config --online`: what one target's server says before any sweep
//! (its model list, one request of one output token judged for setup
//! mistakes by `stats::setup_error`, where its engine's metrics are), and
//! the load one sweep will send.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;

use crate::config::Target;
use crate::probe::setup;
use crate::stats::report::Setup;
use crate::stats::sample::Outcome;
use crate::stats::server::ServerMetrics;
use crate::stats::setup_error::{self, Context, SetupError};
use crate::sweep::env::SweepEnv;
use crate::sweep::requests::Requests;
use crate::sweep::signals;

/// What the server said of one target's setup.
#[derive(Debug, Clone)]
pub struct Online {
    /// What the server told of itself (its model list among it).
    pub setup: Setup,
    /// The one request: Ok with its latency, or what went wrong.
    pub request: Result<Duration, String>,
    /// The setup mistake the request showed, if it showed one.
    pub setup_error: Option<SetupError>,
    /// Where the engine's metrics are, if anywhere.
    pub server_metrics: ServerMetrics,
    /// The load one sweep will send at most.
    pub load: Load,
}

impl Online {
    /// Whether a sweep can measure the target as configured.
    pub fn ready(&self) -> bool {
        self.request.is_ok()
    }
}

/// The load one full sweep sends at most: every configured level in full,
/// each once (a sweep stops climbing at the first level over the SLO; an
/// early stop or a warm start sends fewer; an undecided level may send up
/// to `verdict_ceiling` passes).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Load {
    /// Requests, warm-up and the uncounted ones opening connections included.
    pub requests: u64,
    /// Output tokens asked for by those requests.
    pub output_tokens: u64,
    /// Seconds the levels take at least, were every request as fast as the
    /// one sent here (None: it failed); loaded levels are slower.
    pub seconds_at_least: Option<f64>,
}

/// The load of one full sweep of `target`; `latency` that of one request
/// alone, for the duration's lower bound.
pub fn load(target: &Target, latency: Option<Duration>) -> Load {
    let mut load = Load::default();
    let mut at_least = 0.0;
    for w in &target.workloads {
        let tokens = u64::from(w.max_completion_tokens);
        let warmup = u64::from(target.warmup_requests);
        load.requests += warmup;
        load.output_tokens += warmup * tokens;
        for &c in &target.levels {
            let n = target
                .requests_per_level
                .count(c, target.min_requests_per_level);
            // `c` requests of one token open the level's connections first.
            load.requests += u64::from(c) + n;
            load.output_tokens += u64::from(c) + n * tokens;
            at_least += n as f64 / f64::from(c.max(1));
        }
    }
    load.seconds_at_least = latency.map(|l| at_least * l.as_secs_f64());
    load
}

/// Asks the server at `base_url` what a sweep of `target` would meet first.
pub async fn check(env: &SweepEnv, target: &Arc<Target>, base_url: &str) -> Online {
    let client = env.clients.for_target(target);
    let setup = setup::discover(client, base_url, target.api_key.as_ref(), &target.model).await;
    let (server_metrics, _) = signals::locate(client, target, base_url).await;
    let Some(workload) = target.workloads.first() else {
        return Online {
            setup,
            request: Err("no workload".to_string()),
            setup_error: None,
            server_metrics,
            load: load(target, None),
        };
    };
    let requests = Requests::new(target, workload, base_url).await;
    // One request of one output token: the cheapest that shows the key,
    // the model and the path accepted.
    let placed = requests
        .send_placed(env, &CancellationToken::new(), 0, false, true, None)
        .await;
    let sample = placed.sample;
    let context = Context {
        model: &target.model,
        url: requests.url(),
        served: &setup.models,
        model_listed: setup.model_listed,
    };
    let setup_error = setup_error::judge(std::slice::from_ref(&sample), &context);
    let request = match (sample.outcome, sample.latency) {
        (Outcome::Ok, Some(latency)) => Ok(latency),
        (Outcome::Ok, None) => Ok(sample.elapsed),
        (outcome, _) => Err(match &setup_error {
            Some(e) => e.message.clone(),
            None => format!(
                "{}: {}",
                outcome.as_str(),
                sample.error.as_deref().unwrap_or("")
            ),
        }),
    };
    Online {
        load: load(target, request.as_ref().ok().copied()),
        setup,
        request,
        setup_error,
        server_metrics,
    }
}
