//! A workload's climb: level after level as the ladder says, each measured
//! ([`super::level_run`]) and judged, a level the client could not keep up
//! with run again and then not measured, until a level breaks, cannot be
//! measured, or the ladder ends. What it measured is concluded in
//! `stats::conclusion`.

use crate::stats::client;
use crate::stats::conclusion::Climb;
use crate::stats::evidence;
use crate::stats::limit;
use crate::stats::report::LevelSummary;
use crate::sweep::closed_loop;
use crate::sweep::ladder::Ladder;
use crate::sweep::setup_check::{self, Stop};
use crate::sweep::timing::{settle_after, Ending};
use crate::sweep::{level_run, signals};

/// Climbs `ladder` for `run`'s target and workload: the levels measured and
/// those not; Err when an answer was beyond the output limit, or the first
/// requests showed a setup mistake (`first`).
pub(super) async fn run(
    run: &closed_loop::Run,
    ending: &Ending,
    mut ladder: Ladder,
    pool: &(dyn Fn(u32) -> evidence::Prior + Sync),
    server: Option<&signals::Watch>,
    first: &mut setup_check::First<'_>,
) -> Result<Climb, Stop> {
    let (target, workload) = (&run.requests.target, &run.requests.workload);
    let mut levels: Vec<LevelSummary> = Vec::new();
    let mut not_measured = None;
    // Why the client could not measure a level, when it could not.
    let mut client_limited = None;
    // Levels whose places other targets held, or that the client could not
    // keep up with: "not measured", not a break.
    let mut starved: Vec<u32> = Vec::new();
    let mut settle = false;
    while let Some((concurrency, role)) = ladder.next() {
        if settle {
            settle_after(&run.cancel).await;
        }
        if run.cancel.is_cancelled() {
            not_measured = Some(format!(
                "concurrency {concurrency} not measured: {}",
                ending.why()
            ));
            break;
        }
        if concurrency > run.env.in_flight_total {
            not_measured = Some(format!(
                "concurrency {concurrency} not measured: it is above schedule.max_in_flight_total ({}), \
                 so the level could not keep its requests in flight",
                run.env.in_flight_total
            ));
            break;
        }
        let mut retries = 0;
        let measured = loop {
            let pooled = pool(concurrency);
            let (summary, samples) =
                match level_run::measure(run, concurrency, role, server, &pooled).await {
                    Ok(measured) => measured,
                    Err(stop) => break Err(stop),
                };
            // The first level's requests, when no warm-up came before.
            first.judge(&run.requests, &samples)?;
            match client::limited(&summary, &target.slo) {
                // A stall passes: the level runs again.
                Some(why) if retries < client::CLIENT_RETRIES && !run.cancel.is_cancelled() => {
                    retries += 1;
                    tracing::info!(target_name = %target.name, concurrency, why = %why, "client-limited level: run again");
                    if summary.stopped_early.is_some() {
                        settle_after(&run.cancel).await;
                    }
                }
                Some(why) => break Ok(Err(why)),
                None => break Ok(Ok(summary)),
            }
        };
        let summary = match measured {
            Ok(Ok(summary)) => summary,
            Ok(Err(why)) => {
                // Not the server's: the climb ends, neither a pass nor a break.
                not_measured = Some(format!(
                    "concurrency {concurrency} not measured (client): {why}"
                ));
                client_limited = Some(why);
                starved = not_measured_from(concurrency, &ladder, run.env.in_flight_total);
                break;
            }
            Err(level_run::Stop::Places(why)) => {
                not_measured = Some(format!("concurrency {concurrency} not measured: {why}"));
                if !run.cancel.is_cancelled() {
                    // Higher levels need even more places: the climb ends
                    // here, and the levels it had left are not measured.
                    starved = not_measured_from(concurrency, &ladder, run.env.in_flight_total);
                }
                break;
            }
            Err(level_run::Stop::Unbounded(why, found_in)) => {
                return Err(Stop::Unbounded(why, found_in))
            }
            Err(level_run::Stop::Cancelled) => {
                not_measured = Some(format!(
                    "concurrency {concurrency} not completed: {}",
                    ending.why()
                ));
                break;
            }
        };
        settle = summary.stopped_early.is_some();
        // A break on errors or latency that rests on the level's pool alone
        // ends the knee there, not the climb: the levels above measure
        // whether the errors or outliers are there at every load (after a
        // fall of the error ratio, each level's pool holds the old one for
        // sweeps).
        let climb_on = limit::break_rests_on_pool(&summary, &target.slo, target.verdict_confidence);
        ladder.record(concurrency, !summary.stops_knee() || climb_on);
        run.env.observer.level_finished(target, workload, &summary);
        levels.push(summary);
    }
    levels.sort_by_key(|l| l.concurrency);
    Ok(Climb {
        levels,
        skipped: ladder.skipped().to_vec(),
        not_measured: starved,
        why_not_measured: not_measured,
        client: client_limited,
    })
}

/// The levels a climb that ends at `concurrency` leaves unmeasured: that one
/// and those the ladder had left, within the global cap, in order.
fn not_measured_from(concurrency: u32, ladder: &Ladder, cap: u32) -> Vec<u32> {
    let mut levels: Vec<u32> = std::iter::once(concurrency)
        .chain(ladder.climb_left())
        .filter(|c| *c <= cap)
        .collect();
    levels.sort_unstable();
    levels.dedup();
    levels
}
