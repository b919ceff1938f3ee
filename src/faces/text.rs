//! The reports in words: the sweeps' table that `llmprobe sweep` prints
//! (the gateway pairs' is [`super::pairs`]'s), and the phrases (knee, saturation, notes,
//! errors) the HTML page shows as well. Pure text of the reports, below
//! both faces.

use std::collections::BTreeMap;
use std::fmt::Write;

use crate::stats::decision::{Basis, Decision};
use crate::stats::quantity::{Quantity, Unit};
use crate::stats::report::{
    Capacity, FoundIn, LevelRole, LevelSummary, OutputLimit, SweepKind, SweepReport, WorkloadReport,
};
use crate::stats::sample::Outcome;

use super::signals;

fn secs(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(s) if s < 1.0 => format!("{:.1}ms", s * 1000.0),
        Some(s) => format!("{s:.2}s"),
    }
}

fn num(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{v:.1}"))
}

/// Requests neither successful nor shed (nor cancelled by llmprobe itself,
/// when a level stopped early: those did not fail).
pub(crate) fn errors(l: &LevelSummary) -> u64 {
    // Saturating: a document read back may not add up.
    l.requests
        .saturating_sub(l.count(Outcome::Ok))
        .saturating_sub(l.shed())
        .saturating_sub(l.count(Outcome::Cancelled))
}

/// What the row of a level says after its figures: refinement probe, over
/// the SLO or concurrency not kept, stopped early.
pub(crate) fn level_notes(l: &LevelSummary) -> String {
    let mut notes = String::new();
    if l.role == LevelRole::Refinement {
        notes.push_str("  refinement");
    }
    notes.push_str(level_mark(l));
    if let Some(e) = &l.stopped_early {
        let _ = write!(
            notes,
            " (stopped early: {} requests saved, {} cancelled in flight)",
            e.saved_requests,
            l.count(Outcome::Cancelled)
        );
    }
    notes
}

/// The quantities the table shows: every one of the list, those of a
/// reasoning model only when `reasoning`.
fn shown(reasoning: bool) -> impl Iterator<Item = Quantity> {
    Quantity::ALL
        .into_iter()
        .filter(move |q| reasoning || !q.spec().reasoning_only)
}

/// A column's width: its heading's, at least 9.
fn width(heading: &str) -> usize {
    heading.chars().count().max(9)
}

/// A figure as the table writes its unit: seconds in ms below one second.
fn cell(unit: Unit, v: Option<f64>) -> String {
    match unit {
        Unit::Seconds => secs(v),
        Unit::TokensPerSecond | Unit::Requests => num(v),
    }
}

/// The table's heading line; `reasoning` adds the answer's TTFT columns.
fn level_heading(reasoning: bool) -> String {
    let mut out = format!(
        "  {:>5} {:>5} {:>5} {:>5} {:>5}",
        "conc", "reqs", "ok", "shed", "err"
    );
    for h in shown(reasoning).flat_map(Quantity::headings) {
        let _ = write!(out, " {h:>w$}", w = width(&h));
    }
    let _ = write!(out, " {:>5}", "conns");
    out
}

/// A level's figures as a row of the table (without its notes), under
/// [`level_heading`]'s columns.
fn level_row(l: &LevelSummary, reasoning: bool) -> String {
    let mut out = format!(
        "  {:>5} {:>5} {:>5} {:>5} {:>5}",
        l.concurrency,
        l.requests,
        l.count(Outcome::Ok),
        l.shed(),
        errors(l),
    );
    for q in shown(reasoning) {
        for (h, v) in q.headings().iter().zip(q.cells(l)) {
            let _ = write!(out, " {:>w$}", cell(q.spec().unit, v), w = width(h));
        }
    }
    let _ = write!(out, " {:>5}", l.new_connections);
    out
}

/// How long before a sweep that finished at `finished` (Unix seconds) a
/// carried level was measured, e.g. "40 s"; None when the level does not
/// say (documents written before the field) or says a later time.
pub fn carried_age(l: &LevelSummary, finished: f64) -> Option<String> {
    let age = finished - l.measured_at_unix_seconds;
    if l.measured_at_unix_seconds <= 0.0 || !age.is_finite() || age < 0.0 {
        return None;
    }
    Some(if age < 120.0 {
        format!("{age:.0} s")
    } else if age < 7200.0 {
        format!("{:.0} min", age / 60.0)
    } else {
        format!("{:.1} h", age / 3600.0)
    })
}

/// What marks a carried level's row: that it was not measured now, how
/// long before, and whether it was within the SLO then.
pub fn carried_note(l: &LevelSummary, finished: f64) -> String {
    let when = match carried_age(l, finished) {
        Some(age) => format!("measured {age} before this sweep"),
        None => "measured by an earlier sweep".to_string(),
    };
    let verdict = if !l.within_slo {
        ", over SLO then"
    } else if !l.kept_concurrency {
        ", concurrency not kept then"
    } else {
        ""
    };
    format!("  <- carried, {when}{verdict}")
}

/// What marks a report that Ctrl-C or SIGTERM stopped (the text's first
/// line, the HTML page's banner): it holds only what was measured before.
pub const PARTIAL: &str =
    "partial: interrupted (Ctrl-C or SIGTERM) before the sweep ended; only what was \
     measured by then is shown, and the knee rests on those levels alone";

/// The reports as tables, one per target and workload.
pub fn table(reports: &[SweepReport]) -> String {
    let mut out = String::new();
    for r in reports {
        let _ = writeln!(
            out,
            "target {}  model {}  sweep {:.1}s{}",
            r.target,
            r.model,
            r.duration_seconds,
            match r.kind {
                SweepKind::Full => "",
                SweepKind::Warm => " (warm start)",
            }
        );
        let st = &r.setup;
        if !st.server.is_empty() || st.model_listed.is_some() {
            let listed = match st.model_listed {
                Some(true) => "model listed by the server".to_string(),
                Some(false) => format!(
                    "WARNING: model not among those the server lists ({})",
                    st.models.join(", ")
                ),
                None => "no model list".to_string(),
            };
            let server = if st.server.is_empty() {
                "unknown".to_string()
            } else {
                format!("{} {}", st.server, st.server_version)
            };
            let _ = writeln!(out, "  server: {}; {listed}", server.trim_end());
        }
        if !st.reasoning_field.is_empty() {
            let _ = writeln!(
                out,
                "  reasoning streamed in delta.{}",
                st.reasoning_field.replace(", ", " and delta.")
            );
        }
        if let Some(line) = output_limit(r) {
            let _ = writeln!(out, "  {line}");
        }
        let _ = writeln!(out, "  {}", signals::server_metrics_line(r));
        if let Some(e) = &r.error {
            let _ = writeln!(out, "  sweep failed: {e}");
        }
        for w in &r.workloads {
            let _ = writeln!(out, "\n  workload {}", w.workload);
            // The answer's columns only where it did not begin with the
            // first token (a reasoning model): elsewhere they would repeat
            // TTFT, and a note says so.
            let answer = reasons(w);
            let _ = writeln!(out, "{}", level_heading(answer));
            for l in &w.levels {
                let _ = writeln!(out, "{}{}", level_row(l, answer), level_notes(l));
            }
            // Apart from the measured rows: figures of earlier sweeps that
            // the knee and saturation count, each with its age.
            if !w.carried_levels.is_empty() {
                let _ = writeln!(
                    out,
                    "  carried from earlier sweeps (not run by this one; the knee and saturation count them):"
                );
            }
            for l in &w.carried_levels {
                let _ = writeln!(
                    out,
                    "{}{}",
                    level_row(l, answer),
                    carried_note(l, r.finished_at_unix_seconds)
                );
            }
            let server = signals::server_rows(w);
            if !server.is_empty() {
                let _ = writeln!(out, "\n  the server's own metrics per level");
            }
            for row in server {
                let _ = writeln!(out, "  {row}");
            }
            let c = &w.capacity;
            let _ = writeln!(
                out,
                "  knee: {}   recommended max_in_flight: {}   throughput at knee: {:.1} tok/s",
                knee(c),
                c.recommended_max_in_flight,
                c.throughput_tokens_per_second
            );
            if c.knee_concurrency > 0 {
                let _ = writeln!(out, "  {}", request_rate(c));
            }
            for line in c.sustained.iter().flat_map(super::sustained::text_block) {
                let _ = writeln!(out, "  {line}");
            }
            if let Some(line) = signals::limit_line(c) {
                let _ = writeln!(out, "  {line}");
            }
            let _ = writeln!(out, "  saturation: {}", saturation(c));
            if let Some(why) = &c.stopped_because {
                let _ = writeln!(out, "  stopped climbing: {why}");
            }
            for line in notes(w) {
                let _ = writeln!(out, "  {line}");
            }
        }
        out.push('\n');
    }
    out
}

/// The knee as it should be read: "≥ 32" when no measured level broke the
/// SLO (capacity at least that, not measured higher); "8?" when a level it
/// depends on was undecided (it stepped over that level).
pub fn knee(c: &Capacity) -> String {
    let mark = if c.knee_undecided { "?" } else { "" };
    if c.knee_is_lower_bound {
        format!("≥ {}{mark}", c.knee_concurrency)
    } else {
        format!("{}{mark}", c.knee_concurrency)
    }
}

/// The sustainable request rate at the knee, with what it rests on.
pub fn request_rate(c: &Capacity) -> String {
    format!(
        "requests at knee: {:.2} req/s completed ({} requests)",
        c.requests_per_second, c.requests_per_second_samples
    )
}

/// Whether a workload's answers did not all begin with the first token: a
/// reasoning model thought first (or thought and never answered).
pub fn reasons(w: &WorkloadReport) -> bool {
    w.levels.iter().any(|l| {
        l.reasoning_tokens > 0
            || l.requests_without_answer > 0
            || (l.answer_ttft_seconds.count > 0 && l.answer_ttft_seconds != l.ttft_seconds)
    })
}

/// What the notes say of a reasoning model's thinking, or that the model
/// did not reason (documents written before answer TTFT say nothing).
fn reasoning_notes(w: &WorkloadReport, out: &mut Vec<String>) {
    if !reasons(w) {
        if w.levels.iter().any(|l| l.answer_ttft_seconds.count > 0) {
            out.push("answer TTFT: equal to TTFT (no reasoning was streamed)".to_string());
        }
        return;
    }
    let completed: u64 = w.levels.iter().map(|l| l.count(Outcome::Ok)).sum();
    let tokens: u64 = w.levels.iter().map(|l| l.reasoning_tokens).sum();
    let sources: Vec<&str> = w
        .levels
        .iter()
        .map(|l| l.reasoning_token_source)
        .filter(|s| *s != "none")
        .collect();
    let source = match sources.first() {
        Some(first) if sources.iter().all(|s| s == first) => *first,
        Some(_) => "mixed",
        None => "none",
    };
    let mean = if completed > 0 {
        tokens as f64 / completed as f64
    } else {
        0.0
    };
    out.push(format!(
        "reasoning: {mean:.0} tokens per completed request before the answer (counted from: {source}); \
         `ans`: time to the first answer token; generation speed counts the reasoning tokens \
         (a late answer after long reasoning is not slow decoding)"
    ));
    let unanswered: u64 = w.levels.iter().map(|l| l.requests_without_answer).sum();
    if unanswered > 0 {
        out.push(format!(
            "warning: {unanswered} completed requests reasoned until the output limit and never answered \
             (raise max_completion_tokens)"
        ));
    }
}

/// What marks a level that does not count toward the knee.
fn level_mark(l: &LevelSummary) -> &'static str {
    let undecided = l
        .verdict
        .as_ref()
        .filter(|v| v.decision == Decision::Undecided);
    if let Some(v) = undecided {
        match v.counted_as {
            Decision::Pass => "  <- undecided (counted as it was last decided: pass)",
            Decision::Break => "  <- undecided (counted as it was last decided: over SLO)",
            Decision::Undecided => "  <- undecided (neither raises nor lowers the knee)",
        }
    } else if !l.within_slo {
        "  <- over SLO"
    } else if !l.kept_concurrency {
        "  <- concurrency not kept"
    } else {
        ""
    }
}

/// Which request field carried the output limit, and why, in words.
pub fn output_limit(r: &SweepReport) -> Option<String> {
    let o = &r.output_limit;
    if o.field.is_empty() {
        return None;
    }
    let how = match (o.source.as_str(), &o.note) {
        ("detected", Some(note)) => format!("{}: {note}", found(o)),
        ("default", None) => "the default, checked on every answer".to_string(),
        ("unbounded", Some(note)) => format!("nothing bounds the output: {note}"),
        ("default", Some(note)) => format!("the default; {note}"),
        (source, _) => source.to_string(),
    };
    Some(format!("output limit sent as `{}` ({how})", o.field))
}

/// Where a detected field was found: in which answers, and by which sweep.
fn found(o: &OutputLimit) -> String {
    let answers = match o.found_in {
        Some(FoundIn::WarmUp) => "found at warm-up",
        Some(FoundIn::Pool) => "found by a request opening a level's connections",
        Some(FoundIn::Counted) => "found by a counted answer",
        // A document written before the field: an answer, but not which.
        None => "found by an answer",
    };
    match o.kept_sweeps {
        0 => answers.to_string(),
        1 => format!("{answers} of the previous sweep"),
        n => format!("{answers} {n} sweeps before this one"),
    }
}

/// Each level's verdict, which test decided it and on how many requests.
fn verdicts(w: &WorkloadReport) -> Option<String> {
    let judged: Vec<String> = w
        .levels
        .iter()
        .filter_map(|l| {
            let v = l.verdict.as_ref()?;
            let by = v
                .decided_by
                .map(|b| format!(" by {}", b.as_str().replace('_', " ")))
                .unwrap_or_default();
            let pooled = match v.pooled_sweeps {
                0 => String::new(),
                n => format!(", {n} earlier sweeps pooled"),
            };
            // The p95 test counts latencies over the limit; the table's
            // p95 interpolates, so the two can sit either side of it.
            let slow = match v.decided_by {
                Some(Basis::P95Latency) => format!(
                    ", {} of {} latencies over the p95 limit{}",
                    v.counts.slow,
                    v.counts.timed,
                    if v.pooled_sweeps > 0 {
                        " in this sweep"
                    } else {
                        ""
                    }
                ),
                _ => String::new(),
            };
            Some(format!(
                "{} {}{by} ({} requests{pooled}{slow})",
                l.concurrency,
                v.decision.as_str(),
                v.requests
            ))
        })
        .collect();
    let confidence = w.levels.iter().find_map(|l| l.verdict.as_ref())?.confidence;
    Some(format!(
        "verdicts at {}% confidence: {}",
        confidence * 100.0,
        judged.join(", ")
    ))
}

/// Where throughput stopped growing, in words.
pub fn saturation(c: &Capacity) -> String {
    match c.saturation_concurrency {
        None => "throughput still growing at the last level".to_string(),
        Some(s) if c.saturated_before_knee => {
            format!(
                "throughput stopped growing at concurrency {s}, at or below the knee: more requests only queue \
                 (if that comes early, the model may not fit in GPU memory)"
            )
        }
        Some(s) => format!("throughput stopped growing at concurrency {s}"),
    }
}

/// What a reader of a workload's numbers should know besides them: an
/// example error per failed outcome, how tokens were counted, warnings.
pub fn notes(w: &WorkloadReport) -> Vec<String> {
    let mut out = Vec::new();
    let mut examples = BTreeMap::new();
    for l in &w.levels {
        for (outcome, e) in &l.error_examples {
            examples.entry(*outcome).or_insert(e);
        }
    }
    for (outcome, e) in examples {
        out.push(format!("{outcome}, e.g.: {e}"));
    }
    if !w.skipped_levels.is_empty() {
        out.push(format!(
            "warm start: levels {:?} not run (up to half the last knee)",
            w.skipped_levels
        ));
    }
    let saved: u64 = w
        .levels
        .iter()
        .filter_map(|l| l.stopped_early.map(|e| e.saved_requests))
        .sum();
    if saved > 0 {
        out.push(format!(
            "early verdict: {saved} requests not sent (a level certain to break the SLO stopped)"
        ));
    }
    if let Some(line) = verdicts(w) {
        out.push(line);
    }
    // A level without a completed request counted nothing either way.
    let sources: Vec<&str> = w
        .levels
        .iter()
        .map(|l| l.token_source)
        .filter(|s| *s != "none")
        .collect();
    if let Some(src) = sources.first() {
        let src = if sources.iter().all(|s| s == src) {
            *src
        } else {
            "mixed"
        };
        out.push(format!("output tokens counted from: {src}"));
    }
    let per_chunk = w
        .levels
        .iter()
        .filter_map(|l| l.tokens_per_content_chunk)
        .fold(0.0, f64::max);
    if per_chunk > 1.05 {
        out.push(format!(
            "note: chunks carry up to {per_chunk:.1} tokens each; inter-token latency is measured per chunk"
        ));
    }
    let untrusted: u64 = w.levels.iter().map(|l| l.usage_disagreements).sum();
    if untrusted > 0 {
        out.push(format!(
            "warning: {untrusted} streams reported 0 completion tokens although they carried content; chunks were counted instead"
        ));
    }
    let cached: u64 = w.levels.iter().map(|l| l.cached_prompt_tokens).sum();
    if cached > 0 {
        out.push(format!(
            "note: the server served {cached} prompt tokens from its prefix cache"
        ));
    }
    let opened: u64 = w.levels.iter().map(|l| l.new_connections).sum();
    if opened > 0 {
        let p95 = w
            .levels
            .iter()
            .filter_map(|l| l.connect_seconds.p95)
            .fold(0.0, f64::max);
        out.push(format!(
            "note: {opened} counted requests opened a new connection (connect p95 up to {}), timed apart in `conns`",
            secs(Some(p95))
        ));
    }
    reasoning_notes(w, &mut out);
    let cut: u64 = w
        .levels
        .iter()
        .map(|l| l.streams_without_finish_reason)
        .sum();
    if cut > 0 {
        out.push(format!(
            "warning: {cut} streams ended without finish_reason (cut off by the server?)"
        ));
    }
    let samples = w
        .levels
        .iter()
        .map(|l| l.latency_seconds.count)
        .min()
        .unwrap_or(0);
    if samples > 0 && samples < 20 {
        out.push(format!(
            "note: as few as {samples} samples per level; p95 is a rough figure"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::report::{Capacity, OutputLimit};

    fn level(concurrency: u32, at: f64, within_slo: bool) -> LevelSummary {
        LevelSummary {
            concurrency,
            requests: 8,
            planned_requests: 8,
            outcomes: [("ok", 8)].into_iter().collect(),
            throughput_tokens_per_second: 10.0 * f64::from(concurrency),
            kept_concurrency: true,
            within_slo,
            measured_at_unix_seconds: at,
            ..LevelSummary::default()
        }
    }

    #[test]
    fn a_latency_verdict_says_how_many_latencies_were_over_the_limit() {
        use crate::stats::decision::{Counts, Verdict};
        let mut l = level(8, 1_000.0, false);
        l.verdict = Some(Verdict {
            decision: Decision::Undecided,
            decided_by: Some(Basis::P95Latency),
            requests: 32,
            confidence: 0.95,
            counts: Counts {
                ended: 32,
                ok: 32,
                timed: 32,
                slow: 2,
                ..Counts::default()
            },
            ..Verdict::default()
        });
        let w = WorkloadReport {
            workload: "chat".into(),
            levels: vec![l],
            skipped_levels: vec![],
            carried_levels: vec![],
            capacity: crate::stats::knee::capacity(&[], 0.9, None),
        };
        assert_eq!(
            verdicts(&w).unwrap(),
            "verdicts at 95% confidence: 8 undecided by p95 latency \
             (32 requests, 2 of 32 latencies over the p95 limit)"
        );
    }

    fn warm_report() -> SweepReport {
        SweepReport {
            setup_error: None,
            target: "sim".into(),
            kind: SweepKind::Warm,
            model: "m".into(),
            success: true,
            error: None,
            duration_seconds: 2.0,
            finished_at_unix_seconds: 1_000.0,
            setup: Default::default(),
            output_limit: Default::default(),
            server_metrics: Default::default(),
            workloads: vec![WorkloadReport {
                workload: "chat".into(),
                levels: vec![level(1, 999.0, true), level(8, 1_000.0, true)],
                skipped_levels: vec![2, 4],
                carried_levels: vec![
                    level(2, 960.0, true),
                    level(4, 700.0, true),
                    // A document written before levels said when.
                    level(16, 0.0, false),
                ],
                capacity: Capacity::default(),
            }],
        }
    }

    #[test]
    fn carried_levels_are_rows_apart_marked_with_their_age() {
        let table = table(&[warm_report()]);
        let lines: Vec<&str> = table.lines().collect();
        let row = |c: u32| {
            lines
                .iter()
                .position(|l| l.split_whitespace().next() == Some(&c.to_string()))
                .unwrap_or_else(|| panic!("no row for {c}:\n{table}"))
        };
        let head = lines
            .iter()
            .position(|l| l.contains("carried from earlier sweeps"))
            .unwrap_or_else(|| panic!("no carried block:\n{table}"));
        // Measured rows first, unmarked; the carried ones after the heading.
        for c in [1, 8] {
            assert!(row(c) < head, "{table}");
            assert!(!lines[row(c)].contains("carried"), "{table}");
        }
        for c in [2, 4, 16] {
            assert!(row(c) > head, "{table}");
        }
        assert!(
            lines[row(2)].ends_with("  <- carried, measured 40 s before this sweep"),
            "{table}"
        );
        assert!(
            lines[row(4)].ends_with("  <- carried, measured 5 min before this sweep"),
            "{table}"
        );
        assert!(
            lines[row(16)].ends_with("  <- carried, measured by an earlier sweep, over SLO then"),
            "{table}"
        );
        assert!(lines[row(2)].contains(" 20.0 "), "its figures: {table}");
        // A full sweep's table has no such block.
        let mut full = warm_report();
        full.workloads[0].carried_levels.clear();
        assert!(!super::table(&[full]).contains("carried"));
    }

    #[test]
    fn the_output_limit_says_which_answers_found_the_field() {
        let mut r = warm_report();
        r.output_limit = OutputLimit {
            field: "max_tokens".into(),
            source: "detected".into(),
            note: Some("with `max_completion_tokens`, 90 tokens".into()),
            kept_sweeps: 0,
            found_in: Some(FoundIn::Counted),
        };
        assert_eq!(
            output_limit(&r).unwrap(),
            "output limit sent as `max_tokens` (found by a counted answer: with `max_completion_tokens`, 90 tokens)"
        );
        r.output_limit.found_in = Some(FoundIn::WarmUp);
        assert!(output_limit(&r)
            .unwrap()
            .contains("(found at warm-up: with"));
        r.output_limit.found_in = Some(FoundIn::Pool);
        assert!(output_limit(&r)
            .unwrap()
            .contains("(found by a request opening a level's connections: with"));
        r.output_limit.kept_sweeps = 3;
        r.output_limit.found_in = Some(FoundIn::WarmUp);
        assert!(output_limit(&r)
            .unwrap()
            .contains("(found at warm-up 3 sweeps before this one: with"));
        r.output_limit.found_in = None;
        r.output_limit.kept_sweeps = 0;
        assert!(output_limit(&r)
            .unwrap()
            .contains("(found by an answer: with"));
    }
}
