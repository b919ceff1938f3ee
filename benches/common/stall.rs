//! `--stall ON_MS/PERIOD_MS`: the client's runtime held `ON_MS` of every
//! `PERIOD_MS`, as a CPU quota throttles a container, while the engine it
//! sweeps runs on a runtime of its own, out of the stall's reach (as
//! tests/client_limits.rs holds the client and not its server).
//!
//! `--burn MS/EVERY`: the client's thread burns MS ms of CPU after every
//! EVERY-th counted request ends, before its loop sends the next (a thread
//! a loaded host keeps from its CPU between two requests, as
//! tests/real_servers.rs's 422 case injects): a runtime hold cannot land
//! there, this can.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use llmprobe::config::Target;
use llmprobe::schedule::endpoint::{self, Reachable};
use tokio::runtime::{Handle, Runtime};
use tokio_util::sync::CancellationToken;

/// How long the client's runtime is held, and how often.
#[derive(Debug, Clone, Copy)]
pub struct Stall {
    /// Held this long...
    pub on: Duration,
    /// ...at the start of every period this long.
    pub period: Duration,
}

impl Stall {
    /// `20/50` (milliseconds); panics on anything else, a bench's flag.
    pub fn parse(spec: &str) -> Stall {
        let ms = |s: &str| -> u64 {
            s.trim()
                .parse()
                .expect("--stall ON_MS/PERIOD_MS, e.g. 20/50")
        };
        let (on, period) = spec
            .split_once('/')
            .expect("--stall ON_MS/PERIOD_MS, e.g. 20/50");
        let (on, period) = (ms(on), ms(period));
        assert!(on < period, "--stall: ON_MS must be below PERIOD_MS");
        Stall {
            on: Duration::from_millis(on),
            period: Duration::from_millis(period),
        }
    }

    /// `20/50 ms`.
    pub fn label(&self) -> String {
        format!("{}/{} ms", self.on.as_millis(), self.period.as_millis())
    }

    /// Holds `rt`'s workers: one companion per worker, all woken at the
    /// start of each period on one grid (a quota stops every thread of a
    /// container at once), each blocking its worker with a sleep, so that
    /// whatever the worker had queued waits. Ends when the token is
    /// cancelled; the engine runtime starts here too.
    pub fn start(&self, rt: &Runtime) -> CancellationToken {
        ENGINE.get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(1)
                .thread_name("engine")
                .enable_all()
                .build()
                .unwrap()
        });
        let stop = CancellationToken::new();
        let (on, period) = (self.on, self.period);
        let grid = tokio::time::Instant::now();
        for _ in 0..rt.metrics().num_workers() {
            let stop = stop.clone();
            rt.spawn(async move {
                let mut k: u32 = 1;
                while !stop.is_cancelled() {
                    tokio::time::sleep_until(grid + period * k).await;
                    std::thread::sleep(on);
                    // A companion late past a whole period skips it rather
                    // than holding its worker twice in a row.
                    let now = tokio::time::Instant::now();
                    let due = ((now - grid).as_nanos() / period.as_nanos()) as u32 + 1;
                    k = (k + 1).max(due);
                }
            });
        }
        stop
    }
}

/// The engine's own runtime, once a stall is on.
static ENGINE: OnceLock<Runtime> = OnceLock::new();

fn engine_handle() -> Option<Handle> {
    ENGINE.get().map(|rt| rt.handle().clone())
}

/// Starts `target`'s engine: on the engine runtime when a stall is on (the
/// simulator is spawned on the runtime that reaches it), else here.
pub async fn reach(target: &Arc<Target>) -> Reachable {
    match engine_handle() {
        Some(h) => {
            let t = target.clone();
            h.spawn(async move { endpoint::reach(&t).await })
                .await
                .unwrap()
                .unwrap()
        }
        None => endpoint::reach(target).await.unwrap(),
    }
}

/// The burn after a request, and how often, once `--burn` is given.
static BURN: OnceLock<(Duration, u64)> = OnceLock::new();
/// Counted requests ended, for `--burn`.
static ENDED: AtomicU64 = AtomicU64::new(0);

/// Sets `--burn MS/EVERY` (`8/40`); its label, `8 ms after every 40th request`.
pub fn burn(spec: &str) -> String {
    let bad = "--burn MS/EVERY, e.g. 8/40";
    let (ms, every) = spec.split_once('/').expect(bad);
    let ms: u64 = ms.trim().parse().expect(bad);
    let every: u64 = every.trim().parse::<u64>().expect(bad).max(1);
    BURN.get_or_init(|| (Duration::from_millis(ms), every));
    format!("{ms} ms after every {every}th request")
}

/// Called as a counted request ends, on its loop's thread: burns there
/// when `--burn` says so.
pub fn after_request() {
    let Some((ms, every)) = BURN.get() else {
        return;
    };
    if ENDED.fetch_add(1, Ordering::Relaxed) % every == every - 1 {
        let until = std::time::Instant::now() + *ms;
        while std::time::Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// Level runs started, and levels that came out of them measured: the
/// difference is the runs the client's limit had run again or left not
/// measured (a setup stop or a cancel aside).
pub static LEVEL_RUNS: AtomicU64 = AtomicU64::new(0);
/// Levels measured (see [`LEVEL_RUNS`]).
pub static LEVELS_MEASURED: AtomicU64 = AtomicU64::new(0);

/// Runs not kept since `from` (a `(runs, measured)` snapshot).
pub fn runs_not_kept(from: (u64, u64)) -> u64 {
    let (runs, measured) = snapshot();
    (runs - from.0).saturating_sub(measured - from.1)
}

/// `(runs, measured)` now.
pub fn snapshot() -> (u64, u64) {
    (
        LEVEL_RUNS.load(Ordering::Relaxed),
        LEVELS_MEASURED.load(Ordering::Relaxed),
    )
}
