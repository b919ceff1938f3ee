//! The progress display of a one-shot sweep on stderr, when stderr is a
//! terminal (whatever stdout is: the report may go to a file or a pipe).
//! It runs from the first second: the target being reached, its warm-up,
//! each level (or sustained-rate step) with its requests done of planned,
//! the time since `sweep` started and an estimate of what the phase has
//! left; then each gateway pair. Drawn with `indicatif`, which redraws the
//! one line at a bounded rate and ticks the clock while nothing happens.

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{HumanDuration, ProgressBar, ProgressDrawTarget, ProgressState, ProgressStyle};

use crate::config::{GatewayPair, Target, Workload};
use crate::stats::sample::Sample;
use crate::sweep::Observer;

/// How often the clock and the spinner are redrawn while nothing happens.
const TICK: Duration = Duration::from_millis(250);

/// A phase with requests to count: done of planned, the time since the
/// start, and the estimate of what the phase has left (`left`).
const COUNTED: &str = "{spinner} {msg}: {pos}/{len} requests, {elapsed} elapsed, ~{left} left";

/// A phase without a count (reaching a server, a gateway pair).
const UNCOUNTED: &str = "{spinner} {msg}, {elapsed} elapsed";

/// Draws the progress display (see the module comment).
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A display on stderr, started now ("starting" until a sweep begins).
    pub fn start() -> Progress {
        let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
        set_style(&bar, UNCOUNTED);
        bar.set_message("starting");
        bar.enable_steady_tick(TICK);
        Progress { bar }
    }

    /// Says that Ctrl-C stopped the sweep and the report is being written.
    pub fn interrupted(&self) {
        set_style(&self.bar, UNCOUNTED);
        self.bar
            .set_message("interrupted: ending the requests in flight, then the partial report");
    }

    /// Runs `write` with the line cleared, and draws it again after: a log
    /// line written meanwhile would land on top of it.
    pub fn suspended(&self, write: &mut dyn FnMut()) {
        self.bar.suspend(write);
    }

    /// Clears the line, before the report is written.
    pub fn done(&self) {
        self.bar.finish_and_clear();
    }

    /// A phase of `requests` requests, counted from zero.
    fn phase_counted(&self, message: String, requests: u64) {
        // The count first: a line drawn between these calls never shows the
        // last phase's count under this one's name.
        self.bar.set_length(requests);
        self.bar.set_position(0);
        // The estimate is of this phase: the last one's pace says little of it.
        self.bar.reset_eta();
        self.bar.set_message(message);
        set_style(&self.bar, COUNTED);
    }

    /// A phase without a count.
    fn phase(&self, message: String) {
        self.bar.set_message(message);
        set_style(&self.bar, UNCOUNTED);
    }
}

/// Sets a template written here; one that could not be read keeps the
/// previous style rather than failing a sweep over its display.
fn set_style(bar: &ProgressBar, template: &str) {
    if let Ok(style) = ProgressStyle::with_template(template) {
        bar.set_style(style.with_key("left", left));
    }
}

/// What the phase has left at its pace so far: "?" before its first
/// request is done (no pace yet, and "0s" would be a wrong promise).
fn left(state: &ProgressState, out: &mut dyn std::fmt::Write) {
    let _ = match state.pos() {
        0 => write!(out, "?"),
        _ => write!(out, "{:#}", HumanDuration(state.eta())),
    };
}

/// "concurrency 4 (level 3 of 5)", or "(refinement)" for a level between
/// the configured ones.
fn level_words(target: &Target, concurrency: u32) -> String {
    match target.levels.iter().position(|&c| c == concurrency) {
        Some(i) => format!(
            "concurrency {concurrency} (level {} of {})",
            i + 1,
            target.levels.len()
        ),
        None => format!("concurrency {concurrency} (refinement)"),
    }
}

impl Observer for Progress {
    fn request(&self, _: &Target, _: &Workload, _: &Sample, _: Option<u32>) {
        self.bar.inc(1);
    }

    fn uncounted(&self, _: &Target, _: &Workload) {
        self.bar.inc(1);
    }

    fn sweep_started(&self, target: &Target) {
        self.phase(format!("{}: reaching the server", target.name));
    }

    fn warmup_started(&self, target: &Target, workload: &Workload, requests: u64) {
        self.phase_counted(
            format!("{} / {}, warm-up", target.name, workload.name),
            requests,
        );
    }

    fn level_started(&self, target: &Target, workload: &Workload, concurrency: u32, requests: u64) {
        self.phase_counted(
            format!(
                "{} / {}, {}",
                target.name,
                workload.name,
                level_words(target, concurrency)
            ),
            requests,
        );
    }

    fn step_started(&self, target: &Target, workload: &Workload, rate: f64, requests: u64) {
        self.phase_counted(
            format!(
                "{} / {}, sustained-rate step at {rate:.2} req/s",
                target.name, workload.name
            ),
            requests,
        );
    }

    fn pair_started(&self, pair: &GatewayPair) {
        self.phase(format!(
            "gateway pair {}: {} requests per side",
            pair.name, pair.requests
        ));
    }
}

/// Whether the progress display is drawn: when stderr is a terminal, so
/// that a report redirected to a file still shows its progress, and logs
/// or CI output never hold it.
pub fn wanted() -> bool {
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_template_is_read() {
        for t in [COUNTED, UNCOUNTED] {
            assert!(ProgressStyle::with_template(t).is_ok(), "{t}");
        }
    }
}
