//! Refusals logged at a bounded rate: the first of a quiet spell at once,
//! then one line per [`LOG_EVERY`] with how many there were, by reason.
//! A flood of wrong passwords or reload posts costs the journal a line a
//! minute, not one per request (journald drops lines past its own limit,
//! and the lines it drops could be the ones that matter).

use std::collections::BTreeMap;
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};

/// Longest time refusals wait to be logged.
pub const LOG_EVERY: Duration = Duration::from_secs(60);

/// A count of one kind of refusal (failed auth, refused reloads) since the
/// last line logged about it.
#[derive(Debug)]
pub struct Tally {
    what: &'static str,
    state: Mutex<State>,
}

#[derive(Debug, Default)]
struct State {
    last_line: Option<Instant>,
    pending: BTreeMap<&'static str, u64>,
}

impl Tally {
    /// A tally whose lines say `what` was refused ("requests failed basic
    /// auth").
    pub const fn new(what: &'static str) -> Tally {
        Tally {
            what,
            state: Mutex::new(State {
                last_line: None,
                pending: BTreeMap::new(),
            }),
        }
    }

    /// Counts one refusal for `reason` at `now`; the line to log when one
    /// is due (none was logged within [`LOG_EVERY`]).
    pub fn record(&self, reason: &'static str, now: Instant) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *state.pending.entry(reason).or_default() += 1;
        self.due(&mut state, now)
    }

    /// The line for the refusals counted and not yet logged, when one is
    /// due at `now`: what the periodic flush logs after a flood stops.
    pub fn flush(&self, now: Instant) -> Option<String> {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.pending.is_empty() {
            return None;
        }
        self.due(&mut state, now)
    }

    fn due(&self, state: &mut State, now: Instant) -> Option<String> {
        let quiet = state
            .last_line
            .map_or(true, |at| now.saturating_duration_since(at) >= LOG_EVERY);
        if !quiet {
            return None;
        }
        let counts = std::mem::take(&mut state.pending);
        let total: u64 = counts.values().sum();
        let by_reason = counts
            .iter()
            .map(|(reason, n)| format!("{reason}: {n}"))
            .collect::<Vec<_>>()
            .join(", ");
        let since = match state.last_line {
            Some(at) => format!(
                "in the last {}s",
                now.saturating_duration_since(at).as_secs()
            ),
            None => "since the start".to_string(),
        };
        state.last_line = Some(now);
        Some(format!(
            "{total} {} {since} ({by_reason}); the next line within {}s at most",
            self.what,
            LOG_EVERY.as_secs()
        ))
    }

    /// Counts one refusal and logs its line at WARN when one is due.
    pub fn warn(&self, reason: &'static str) {
        if let Some(line) = self.record(reason, Instant::now()) {
            tracing::warn!("{line}");
        }
    }

    /// Logs the pending line at WARN when one is due.
    pub fn warn_pending(&self) {
        if let Some(line) = self.flush(Instant::now()) {
            tracing::warn!("{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_flood_makes_one_line_per_period_with_its_count() {
        let tally = Tally::new("requests failed basic auth");
        let start = Instant::now();
        let first = tally
            .record("wrong", start)
            .expect("the first is logged at once");
        assert!(
            first.starts_with("1 requests failed basic auth since the start (wrong: 1)"),
            "{first}"
        );
        let mut lines = 0;
        for i in 1..10_000u32 {
            let at = start + Duration::from_millis(u64::from(i) / 200);
            let reason = if i % 2 == 0 { "wrong" } else { "busy" };
            lines += usize::from(tally.record(reason, at).is_some());
        }
        assert_eq!(lines, 0, "9,999 more within 50 s: no line");
        assert_eq!(tally.flush(start + Duration::from_secs(59)), None);
        let line = tally.flush(start + LOG_EVERY).expect("due after a period");
        assert!(
            line.starts_with(
                "9999 requests failed basic auth in the last 60s (busy: 5000, wrong: 4999)"
            ),
            "{line}"
        );
        assert_eq!(tally.flush(start + LOG_EVERY * 3), None, "nothing pending");
        let again = tally
            .record("missing", start + LOG_EVERY * 3)
            .expect("quiet again");
        assert!(
            again.starts_with("1 requests failed basic auth in the last 120s"),
            "{again}"
        );
    }
}
