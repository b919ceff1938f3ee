//! The HTML document around the charts: one section per target (what the
//! server told, the configuration, then per workload the verdict and limit,
//! its charts ([`super::workload_charts`]) and the sample counts, then the
//! terminal's table), and the gateway pairs in a section of their own.

use std::fmt::Write;
use std::time::{Duration, UNIX_EPOCH};

use super::charts::Unit;
use super::escape::escape;
use super::settings::{Settings, TargetSettings};
use super::workload_charts::charts;
use crate::faces::json::Document;
use crate::faces::{signals, text};
use crate::stats::pair_report::PairReport;
use crate::stats::quantity::{Quantity, Reading};
use crate::stats::report::{LevelRole, LevelSummary, Percentiles, SweepReport, WorkloadReport};

/// The page's only style sheet, inline so that the file opens anywhere.
pub const STYLE: &str = r#"
:root{--ink:#1f2430;--muted:#5d6675;--line:#e2e5ea;--bg:#f5f6f8;--card:#fff;
--knee:#15803d;--rec:#7c3aed;--slo:#dc2626}
*{box-sizing:border-box}
body{margin:0;background:var(--bg);color:var(--ink);
font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif}
main{max-width:1180px;margin:0 auto;padding:22px 20px 40px}
a{color:#1d4ed8}
h1{font-size:22px;margin:0 0 2px}
h2{font-size:19px;margin:0}
h3{font-size:15px;margin:18px 0 8px}
.sub,.muted{color:var(--muted)}
.sub{margin:0 0 6px}
nav a{margin-right:12px}
section.target,section.pairs{background:var(--card);border:1px solid var(--line);
border-radius:10px;padding:16px 20px 18px;margin:16px 0}
.head{display:flex;align-items:baseline;gap:12px;flex-wrap:wrap}
.badge{font-size:12px;font-weight:600;border-radius:10px;padding:1px 9px}
.badge.ok{background:#e6f4ea;color:#17663a}
.badge.failed{background:#fde8e8;color:#a11d1d}
.badge.stale{background:#eeeeee;color:#555555}
.error{color:#a11d1d;margin:6px 0}
.partial{background:#fff7e0;border:1px solid #e8c66a;color:#7a5300;border-radius:8px;
padding:8px 14px;margin:10px 0;font-weight:600}
.facts{display:grid;grid-template-columns:repeat(auto-fit,minmax(330px,1fr));gap:0 28px;margin:10px 0 0}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0;align-content:start}
dt{color:var(--muted)}
dd{margin:0;overflow-wrap:anywhere}
.charts{display:grid;grid-template-columns:repeat(3,minmax(0,1fr));gap:12px;align-items:start}
@media (max-width:880px){.charts{grid-template-columns:minmax(0,1fr)}}
figure{margin:0;border:1px solid var(--line);border-radius:8px;background:#fff;padding:2px}
svg.chart{display:block;width:100%;height:auto}
svg .title{font-size:13px;font-weight:600;fill:var(--ink)}
svg .legend,svg .axis-title{font-size:11px;fill:var(--muted)}
svg .tick{font-size:10.5px;fill:var(--muted)}
svg line.grid{stroke:#edf0f3}
svg line.axis{stroke:#9aa2af}
svg polyline.line{fill:none;stroke-width:2.2;stroke-linejoin:round;stroke-linecap:round}
svg circle.point{stroke:#fff;stroke-width:1.2}
svg line.rule{stroke-width:1.5}
svg line.knee{stroke:var(--knee)}
svg line.rec{stroke:var(--rec);stroke-dasharray:5 4}
svg line.slo{stroke:var(--slo);stroke-dasharray:7 4}
svg line.stopped{stroke:var(--muted);stroke-dasharray:2 3}
svg .rule-label{font-size:10.5px;font-weight:600}
svg .rule-label.knee{fill:var(--knee)}
svg .rule-label.rec{fill:var(--rec)}
svg .rule-label.slo{fill:var(--slo)}
svg .rule-label.stopped{fill:var(--muted)}
svg rect.over-slo{fill:var(--slo);fill-opacity:.07}
.verdict{display:grid;grid-template-columns:minmax(0,360px) minmax(0,1fr);gap:4px 26px;
border:1px solid var(--line);border-radius:8px;padding:12px 16px;background:#fafbfc;margin-bottom:12px}
@media (max-width:880px){.verdict{grid-template-columns:minmax(0,1fr)}}
.kpis{display:grid;grid-template-columns:repeat(3,1fr);gap:6px;align-content:center}
.kpi b{display:block;font-size:28px;line-height:1.1}
.kpi span{font-size:12px;color:var(--muted)}
.kpi.knee b{color:var(--knee)}
.kpi.rec b{color:var(--rec)}
.verdict p{margin:2px 0 4px;font-size:13px}
.verdict ul{margin:4px 0 0;padding-left:18px;font-size:12.5px;color:var(--muted)}
table{border-collapse:collapse;font-size:12.5px;font-variant-numeric:tabular-nums}
th,td{padding:3px 10px;border-bottom:1px solid var(--line);text-align:right}
td{white-space:nowrap}
th{color:var(--muted);font-weight:600;background:#fafbfc}
th:first-child,td:first-child{text-align:left}
tr.over td{color:#b91c1c}
tr.carried td{font-style:italic;background:#fafbfc}
.scroll{overflow-x:auto;margin-top:10px}
pre{background:#f3f4f6;border-radius:8px;padding:10px 12px;margin:6px 0 0;
white-space:pre-wrap;overflow-wrap:anywhere;
font:12px/1.4 "DejaVu Sans Mono",ui-monospace,Menlo,Consolas,monospace}
footer{color:var(--muted);font-size:12px;margin-top:18px}
"#;

/// A whole page: `title` (text, escaped here) in the head, `body` (markup,
/// already escaped by its writer) inside `<main>`.
pub fn document(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n<main>\n{body}</main>\n</body>\n</html>\n",
        escape(title)
    )
}

/// The report of a JSON document (or of a sweep just run): every target,
/// then the gateway pairs. `settings` adds each target's configuration.
pub fn report(results: &Document, settings: &Settings) -> String {
    let mut body = String::new();
    let _ = writeln!(body, "<header>\n<h1>llmprobe sweep report</h1>");
    let _ = writeln!(
        body,
        "<p class=\"sub\">{} target{}{} · measured by llmprobe {} (JSON format {}) · rendered by llmprobe {}</p>",
        results.targets.len(),
        if results.targets.len() == 1 { "" } else { "s" },
        match results.gateway_pairs.len() {
            0 => String::new(),
            n => format!(", {n} gateway pair{}", if n == 1 { "" } else { "s" }),
        },
        escape(&results.llmprobe_version),
        results.format_version,
        env!("CARGO_PKG_VERSION")
    );
    if results.targets.len() > 1 || !results.gateway_pairs.is_empty() {
        body.push_str("<nav>");
        for (i, t) in results.targets.iter().enumerate() {
            let _ = write!(body, "<a href=\"#target-{i}\">{}</a>", escape(&t.target));
        }
        if !results.gateway_pairs.is_empty() {
            body.push_str("<a href=\"#gateway-pairs\">gateway pairs</a>");
        }
        body.push_str("</nav>\n");
    }
    if settings.is_empty() {
        body.push_str(
            "<p class=\"sub\">The configuration is not part of the JSON document: \
             pass <code>--config FILE</code> to show it and the SLO limits on the charts.</p>\n",
        );
    }
    if results.partial {
        let _ = writeln!(body, "<p class=\"partial\">{}</p>", escape(text::PARTIAL));
    }
    body.push_str("</header>\n");
    body.push_str(&super::summary::table(&results.targets));
    for (i, t) in results.targets.iter().enumerate() {
        body.push_str(&target_section(
            t,
            settings.get(&t.target),
            &format!("target-{i}"),
        ));
    }
    body.push_str(&pairs_section(&results.gateway_pairs));
    body.push_str(
        "<footer>Charts: each marker is one measured level; hover a marker for its value. \
         Knee: the highest level within the SLO with every lower level within it too.</footer>\n",
    );
    document("llmprobe sweep report", &body)
}

/// "2024-01-01T00:00:00Z", or "-" for a time that cannot be one.
fn timestamp(unix: f64) -> String {
    Duration::try_from_secs_f64(unix)
        .ok()
        .and_then(|d| UNIX_EPOCH.checked_add(d))
        .map_or("-".into(), |t| {
            humantime::format_rfc3339_seconds(t).to_string()
        })
}

/// One `<dt>`/`<dd>` pair; `value` is text, escaped here.
fn fact(out: &mut String, name: &str, value: &str) {
    let _ = write!(out, "<dt>{}</dt><dd>{}</dd>", escape(name), escape(value));
}

/// One target's section; `id` is its anchor (made by the caller, not from input).
pub fn target_section(r: &SweepReport, settings: Option<&TargetSettings>, id: &str) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "<section class=\"target\" id=\"{}\">\n<div class=\"head\"><h2>{}</h2>\
         <span class=\"muted\">model {}</span><span class=\"badge {}\">{}</span></div>",
        escape(id),
        escape(&r.target),
        escape(&r.model),
        if r.success { "ok" } else { "failed" },
        match (r.success, &r.setup_error) {
            (true, _) => "sweep complete".to_string(),
            (false, None) => "sweep failed".to_string(),
            (false, Some(e)) => format!("setup error: {}", e.cause.as_str()),
        }
    );
    if let Some(e) = &r.error {
        let _ = writeln!(out, "<p class=\"error\">{}</p>", escape(e));
    }
    out.push_str("<div class=\"facts\">\n<dl>");
    fact(
        &mut out,
        "measured",
        &format!(
            "{}, in {:.1} s",
            timestamp(r.finished_at_unix_seconds),
            r.duration_seconds
        ),
    );
    let st = &r.setup;
    let server = format!("{} {}", st.server, st.server_version);
    fact(
        &mut out,
        "server",
        if server.trim().is_empty() {
            "did not say"
        } else {
            server.trim()
        },
    );
    let listed = match st.model_listed {
        Some(true) => "listed by the server".to_string(),
        Some(false) => "NOT among those the server lists".to_string(),
        None => "no model list".to_string(),
    };
    fact(&mut out, "model", &format!("{}: {listed}", r.model));
    if !st.models.is_empty() {
        fact(&mut out, "models served", &st.models.join(", "));
    }
    if !st.reasoning_field.is_empty() {
        fact(
            &mut out,
            "reasoning",
            &format!("streamed in delta.{}", st.reasoning_field),
        );
    }
    fact(
        &mut out,
        "server metrics",
        signals::server_metrics_line(r).trim_start_matches("server metrics: "),
    );
    out.push_str("</dl>\n");
    if let Some(s) = settings {
        out.push_str("<dl>");
        fact(&mut out, "endpoint", &s.endpoint);
        let levels: Vec<String> = s.levels.iter().map(u32::to_string).collect();
        fact(&mut out, "levels", &levels.join(", "));
        fact(
            &mut out,
            "requests",
            &format!(
                "{} per level, {} warm-up, timeout {}",
                s.requests_per_level, s.warmup_requests, s.request_timeout
            ),
        );
        fact(
            &mut out,
            "SLO",
            &format!(
                "p95 latency ≤ {}, shed ≤ {}, errors ≤ {}; headroom {}",
                Unit::Seconds.format(s.slo_p95_latency_seconds),
                Unit::Ratio.format(s.max_shed_ratio),
                Unit::Ratio.format(s.max_error_ratio),
                s.headroom
            ),
        );
        for (name, what) in &s.workloads {
            fact(&mut out, &format!("workload {name}"), what);
        }
        if !s.labels.is_empty() {
            let labels: Vec<String> = s.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
            fact(&mut out, "labels", &labels.join(", "));
        }
        out.push_str("</dl>\n");
    }
    out.push_str("</div>\n");
    for w in &r.workloads {
        out.push_str(&workload_block(w, settings, r.finished_at_unix_seconds));
    }
    let _ = writeln!(
        out,
        "<h3>As printed by <code>llmprobe sweep</code></h3>\n<pre>{}</pre>\n</section>",
        escape(text::table(std::slice::from_ref(r)).trim_end())
    );
    out
}

/// Verdict, charts and sample counts of one workload, of a sweep that
/// finished at `finished` (Unix seconds).
fn workload_block(w: &WorkloadReport, settings: Option<&TargetSettings>, finished: f64) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "<h3>workload {}</h3>", escape(&w.workload));
    out.push_str(&verdict(w));
    // The charts draw what this sweep measured; levels carried from earlier
    // sweeps are listed apart, with their age, never drawn as if measured now.
    if !w.carried_levels.is_empty() {
        let levels: Vec<String> = w
            .carried_levels
            .iter()
            .map(|l| l.concurrency.to_string())
            .collect();
        let (which, them, their) = match levels.as_slice() {
            [one] => (format!("Level {one} was"), "it", "its"),
            many => (format!("Levels {} were", many.join(", ")), "them", "their"),
        };
        let _ = writeln!(
            out,
            "<p class=\"muted carried-note\">{which} not run by this sweep: the charts leave {them} out; \
             {their} figures from earlier sweeps, which the knee and saturation count, are listed below the sample counts.</p>"
        );
    }
    out.push_str("<div class=\"charts\">\n");
    for chart in charts(w, settings) {
        let _ = writeln!(out, "<figure>{}</figure>", chart.svg());
    }
    out.push_str("</div>\n");
    out.push_str(&counts_table(&w.levels));
    out.push_str(&carried_table(&w.carried_levels, finished));
    out.push_str(&super::sustained::block(w, settings));
    out
}

/// The levels carried from earlier sweeps, each with when it was measured
/// (empty when there are none).
fn carried_table(levels: &[LevelSummary], finished: f64) -> String {
    if levels.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Carried from earlier sweeps (not measured by this one)</h3>\n\
         <div class=\"scroll\"><table class=\"carried\">\n<thead><tr><th>concurrency</th><th>measured</th>\
         <th>requests</th><th>ok</th><th>shed</th><th>errors</th><th>TTFT p95</th><th>latency p95</th>\
         <th>throughput</th><th>within SLO</th></tr></thead>\n<tbody>\n",
    );
    let seconds = |v: Option<f64>| v.map_or("-".to_string(), |v| Unit::Seconds.format(v));
    for l in levels {
        let when = match text::carried_age(l, finished) {
            Some(age) => format!(
                "carried, measured {age} before this sweep ({})",
                timestamp(l.measured_at_unix_seconds)
            ),
            None => "carried, measured by an earlier sweep".to_string(),
        };
        let _ = writeln!(
            out,
            "<tr class=\"carried{}\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            if l.within_slo { "" } else { " over" },
            l.concurrency,
            escape(&when),
            l.requests,
            l.count(crate::stats::sample::Outcome::Ok),
            l.shed(),
            text::errors(l),
            escape(&seconds(l.ttft_seconds.p95)),
            escape(&seconds(l.latency_seconds.p95)),
            escape(&Unit::TokensPerSecond.format(l.throughput_tokens_per_second)),
            if l.within_slo { "yes" } else { "no" },
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// The knee, the recommendation and why the climb ended, in big type.
fn verdict(w: &WorkloadReport) -> String {
    let c = &w.capacity;
    let mut out = String::from("<div class=\"verdict\">\n<div class=\"kpis\">");
    let knee = if c.knee_concurrency == 0 {
        "none".to_string()
    } else {
        // "≥ 32" when no measured level broke the SLO.
        text::knee(c)
    };
    let _ = write!(
        out,
        "<div class=\"kpi knee\"><b>{knee}</b><span>knee (concurrency)</span></div>\
         <div class=\"kpi rec\"><b>{}</b><span>recommended max_in_flight</span></div>\
         <div class=\"kpi\"><b>{:.0}</b><span>tok/s at the knee</span></div>\
         <div class=\"kpi\"><b>{:.2}</b><span>req/s at the knee ({} requests)</span></div></div>\n<div>",
        c.recommended_max_in_flight,
        c.throughput_tokens_per_second,
        c.requests_per_second,
        c.requests_per_second_samples
    );
    if c.knee_concurrency == 0 {
        out.push_str("<p><b>No level met the SLO</b>, not even the first.</p>\n");
    }
    if let Some(line) = signals::limit_line(c) {
        let _ = writeln!(
            out,
            "<p><b>Limit:</b> {}</p>",
            escape(line.trim_start_matches("limit: "))
        );
    }
    let _ = writeln!(
        out,
        "<p><b>Saturation:</b> {}</p>",
        escape(&text::saturation(c))
    );
    match &c.stopped_because {
        Some(why) => {
            let _ = writeln!(out, "<p><b>Stopped climbing:</b> {}</p>", escape(why));
        }
        None => out.push_str("<p><b>Climb:</b> every configured level was measured.</p>\n"),
    }
    let notes = text::notes(w);
    if !notes.is_empty() {
        out.push_str("<ul>");
        for n in notes {
            let _ = write!(out, "<li>{}</li>", escape(&n));
        }
        out.push_str("</ul>\n");
    }
    out.push_str("</div></div>\n");
    out
}

/// Each level's figures with the samples they rest on: TTFT, latency and
/// throughput, each with its count (a p95 of 6 samples reads as such),
/// then the counts behind the other quantities the charts draw.
fn counts_table(levels: &[LevelSummary]) -> String {
    // The quantities read as percentiles; TTFT and latency have their
    // values in the table, the others only their counts.
    let counted: Vec<Quantity> = Quantity::ALL
        .into_iter()
        .filter(|q| q.has_percentiles() && !matches!(q, Quantity::Ttft | Quantity::Latency))
        .collect();
    let mut out = String::from(
        "<div class=\"scroll\"><table class=\"counts\">\n<thead><tr><th>concurrency</th><th>requests</th>\
         <th>ok</th><th>shed</th><th>errors</th><th>TTFT p50 / p95 (samples)</th>\
         <th>latency p50 / p95 (samples)</th><th>throughput (requests)</th>",
    );
    for q in &counted {
        let _ = write!(out, "<th>{} samples</th>", q.spec().label.replace('_', " "));
    }
    out.push_str(
        "<th>output tokens</th><th>wall</th><th>tokens from</th><th>within SLO</th></tr></thead>\n<tbody>\n",
    );
    for l in levels {
        let ok = l.count(crate::stats::sample::Outcome::Ok);
        let _ = write!(
            out,
            "<tr{}><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>",
            if l.within_slo { "" } else { " class=\"over\"" },
            match l.role {
                LevelRole::Configured => l.concurrency.to_string(),
                LevelRole::Refinement => format!("{} (refinement)", l.concurrency),
            },
            l.requests,
            ok,
            l.shed(),
            text::errors(l),
            escape(&with_count(&l.ttft_seconds)),
            escape(&with_count(&l.latency_seconds)),
            escape(&throughput_with_count(l, ok)),
        );
        for q in &counted {
            if let Reading::Percentiles(p) = q.read(l) {
                let _ = write!(out, "<td>{}</td>", p.count);
            }
        }
        let _ = writeln!(
            out,
            "<td>{}</td><td>{:.2} s</td><td>{}</td><td>{}</td></tr>",
            l.output_tokens,
            l.wall_seconds,
            escape(l.token_source),
            match (l.within_slo, l.stopped_early) {
                (true, _) => "yes".to_string(),
                (false, None) => "no".to_string(),
                (false, Some(e)) =>
                    format!("no: stopped early, {} requests not sent", e.saved_requests),
            }
        );
    }
    out.push_str("</tbody>\n</table></div>\n");
    out
}

/// "9.0 ms / 12 ms (8)": p50 and p95 of a level's samples and their count;
/// "- (0)" without samples.
fn with_count(p: &Percentiles) -> String {
    match (p.p50, p.p95) {
        (Some(p50), Some(p95)) => format!(
            "{} / {} ({})",
            Unit::Seconds.format(p50),
            Unit::Seconds.format(p95),
            p.count
        ),
        _ => format!("- ({})", p.count),
    }
}

/// "210 tok/s (8)": a level's throughput and the completed requests whose
/// tokens it sums; "-" for a level stopped early (too few to mean anything).
fn throughput_with_count(l: &LevelSummary, ok: u64) -> String {
    match Quantity::Throughput.read(l) {
        Reading::Value(Some(v)) => format!("{} ({ok})", Unit::TokensPerSecond.format(v)),
        _ => format!("- ({ok})"),
    }
}

/// Milliseconds with microsecond resolution, or "-".
fn millis(v: Option<f64>) -> String {
    v.map_or("-".into(), |v| format!("{:.3} ms", v * 1000.0))
}

/// The gateway pairs: what the gateway adds to latency and TTFT.
fn pairs_section(pairs: &[PairReport]) -> String {
    if pairs.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section class=\"pairs\" id=\"gateway-pairs\">\n<h2>Gateway overhead</h2>\n\
         <p class=\"muted\">Through the gateway minus direct, measured interleaved on a stub engine.</p>\n\
         <div class=\"scroll\"><table>\n<thead><tr><th>pair</th><th>direct</th><th>through</th>\
         <th>workload</th><th>concurrency</th><th>latency +p50</th><th>latency +p95</th>\
         <th>TTFT +p50</th><th>TTFT +p95</th><th>samples</th><th>status</th></tr></thead>\n<tbody>\n",
    );
    for p in pairs {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td>\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&p.pair),
            escape(&p.direct.target),
            escape(&p.through.target),
            escape(&p.workload),
            p.concurrency,
            millis(p.latency_overhead_seconds.p50),
            millis(p.latency_overhead_seconds.p95),
            millis(p.ttft_overhead_seconds.p50),
            millis(p.ttft_overhead_seconds.p95),
            p.latency_overhead_seconds.count,
            escape(
                p.error
                    .as_deref()
                    .unwrap_or(if p.success { "ok" } else { "failed" })
            )
        );
    }
    out.push_str("</tbody>\n</table></div>\n</section>\n");
    out
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::probe::setup::Setup;
    use crate::stats::pair_report::SideSummary;
    use crate::stats::report::{Capacity, LevelSummary};

    const HOSTILE: &str = "\"><script>alert(1)</script><img src=x onerror=alert(2)>'&";

    fn pct(base: f64) -> Percentiles {
        Percentiles {
            count: 8,
            p50: Some(base),
            p95: Some(base * 1.5),
            p99: Some(base * 2.0),
        }
    }

    fn level(concurrency: u32, within_slo: bool) -> LevelSummary {
        let c = f64::from(concurrency);
        LevelSummary {
            concurrency,
            role: Default::default(),
            requests: 8,
            planned_requests: 8,
            stopped_early: None,
            outcomes: [("ok", 6), ("shed", 1), ("timeout", 1)]
                .into_iter()
                .collect(),
            shed_ratio: 0.125,
            error_ratio: 0.125,
            ttft_seconds: pct(0.01 * c),
            latency_seconds: pct(0.1 * c),
            inter_token_latency_seconds: pct(0.004),
            generation_tokens_per_second: pct(200.0 / c),
            throughput_tokens_per_second: 100.0 * c + 0.123,
            output_tokens: 256,
            prompt_tokens: 0,
            wall_seconds: 1.0,
            token_source: "usage",
            tokens_per_content_chunk: Some(1.0),
            streams_without_finish_reason: 0,
            error_examples: [("timeout", HOSTILE.to_string())].into_iter().collect(),
            within_slo,
            ..LevelSummary::default()
        }
    }

    fn hostile_results() -> Document {
        let side = |target: &str| SideSummary {
            target: target.to_string(),
            requests: 4,
            outcomes: BTreeMap::new(),
            latency_seconds: pct(0.001),
            ttft_seconds: pct(0.0005),
            first_error: Some(HOSTILE.into()),
        };
        Document {
            format_version: 1,
            llmprobe_version: HOSTILE.into(),
            partial: true,
            targets: vec![SweepReport {
                setup_error: None,
                server_metrics: Default::default(),
                target: format!("t{HOSTILE}"),
                kind: Default::default(),
                model: format!("m{HOSTILE}"),
                success: false,
                error: Some(HOSTILE.into()),
                duration_seconds: 3.0,
                finished_at_unix_seconds: 1_700_000_000.0,
                setup: Setup {
                    server: HOSTILE.into(),
                    server_version: HOSTILE.into(),
                    models: vec![HOSTILE.into()],
                    model_listed: Some(false),
                    reasoning_field: HOSTILE.into(),
                },
                output_limit: Default::default(),
                workloads: vec![WorkloadReport {
                    workload: format!("w{HOSTILE}"),
                    levels: vec![level(1, true), level(2, true), level(4, false)],
                    skipped_levels: Vec::new(),
                    carried_levels: Vec::new(),
                    capacity: Capacity {
                        limit: None,
                        knee_concurrency: 2,
                        throughput_tokens_per_second: 200.123,
                        requests_per_second: 3.0,
                        requests_per_second_samples: 6,
                        recommended_max_in_flight: 1,
                        saturation_concurrency: None,
                        saturated_before_knee: false,
                        stopped_because: Some(HOSTILE.into()),
                        knee_is_lower_bound: false,
                        ..Default::default()
                    },
                }],
            }],
            gateway_pairs: vec![PairReport {
                pair: HOSTILE.into(),
                workload: HOSTILE.into(),
                concurrency: 2,
                success: false,
                error: Some(HOSTILE.into()),
                direct: side(HOSTILE),
                through: side(HOSTILE),
                latency_overhead_seconds: pct(0.0002),
                ttft_overhead_seconds: pct(0.0001),
                duration_seconds: 1.0,
                finished_at_unix_seconds: 1_700_000_000.0,
            }],
        }
    }

    fn hostile_settings() -> Settings {
        let s = TargetSettings {
            endpoint: HOSTILE.into(),
            levels: vec![1, 2, 4],
            requests_per_level: HOSTILE.into(),
            warmup_requests: 1,
            request_timeout: HOSTILE.into(),
            slo_p95_latency_seconds: 0.35,
            max_shed_ratio: 0.2,
            max_error_ratio: 0.1,
            headroom: 0.9,
            workloads: vec![(HOSTILE.into(), HOSTILE.into())],
            labels: [(HOSTILE.to_string(), HOSTILE.to_string())]
                .into_iter()
                .collect(),
        };
        [(format!("t{HOSTILE}"), s)].into_iter().collect()
    }

    /// Every element the page itself writes; anything else came from input.
    const OWN_TAGS: &[&str] = &[
        "!DOCTYPE", "html", "head", "meta", "title", "style", "body", "main", "header", "h1", "h2",
        "h3", "p", "nav", "a", "section", "div", "span", "dl", "dt", "dd", "figure", "svg", "text",
        "line", "rect", "polyline", "circle", "ul", "li", "table", "thead", "tbody", "tr", "th",
        "td", "pre", "code", "b", "footer",
    ];

    #[test]
    fn strings_from_servers_and_config_cannot_make_markup() {
        let page = report(&hostile_results(), &hostile_settings());
        for (i, _) in page.match_indices('<') {
            let name: String = page[i + 1..]
                .trim_start_matches('/')
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '!')
                .collect();
            assert!(
                OWN_TAGS.contains(&name.as_str()),
                "element <{name}> at {i}: {}",
                &page[i..(i + 80).min(page.len())]
            );
        }
        // Attribute values are quoted and quotes escaped: no attribute can
        // be smuggled in either.
        assert!(!page.contains("onerror=alert(2)>"), "{page}");
        assert!(page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(page.contains("&quot;&gt;"));
    }

    #[test]
    fn the_page_carries_every_plotted_value() {
        let results = hostile_results();
        let page = report(&results, &hostile_settings());
        let w = &results.targets[0].workloads[0];
        for l in &w.levels {
            let c = l.concurrency;
            for (series, v) in [
                ("throughput", l.throughput_tokens_per_second),
                ("ttft_p50", l.ttft_seconds.p50.unwrap()),
                ("ttft_p95", l.ttft_seconds.p95.unwrap()),
                ("latency_p95", l.latency_seconds.p95.unwrap()),
                (
                    "generation_p50",
                    l.generation_tokens_per_second.p50.unwrap(),
                ),
                ("itl_p99", l.inter_token_latency_seconds.p99.unwrap()),
                ("achieved_concurrency", l.achieved_concurrency),
                ("shed_ratio", l.shed_ratio),
            ] {
                let attrs = format!("data-series=\"{series}\" data-x=\"{c}\" data-y=\"{v}\"");
                assert!(page.contains(&attrs), "{attrs} missing");
            }
        }
        // The SLO limits of the configuration are drawn, the knee and the
        // recommendation marked, the over-SLO levels shaded.
        assert!(page.contains("SLO 350 ms"), "{page}");
        assert!(page.contains("shed SLO 20.0%") && page.contains("error SLO 10.0%"));
        assert!(page.contains(">knee 2</text>") && page.contains(">recommended 1</text>"));
        // Throughput, achieved concurrency, TTFT, latency, inter-token
        // latency, generation speed, shed and errors: decision latency and
        // connect time have no value at any level, and are left out.
        assert_eq!(page.matches("<svg").count(), 7);
        assert_eq!(page.matches("<rect class=\"over-slo\" x").count(), 7 * 2);
        // Without a configuration: no SLO line, and a word on why.
        let bare = report(&results, &Settings::new());
        assert!(!bare.contains("SLO 350 ms"));
        assert!(bare.contains("--config FILE"));
    }

    #[test]
    fn the_levels_table_gives_ttft_latency_and_throughput_with_their_counts() {
        let mut results = hostile_results();
        let page = report(&results, &Settings::new());
        let (_, counts) = page.split_once("<table class=\"counts\">").unwrap();
        let row = counts
            .lines()
            .find(|l| l.starts_with("<tr><td>1</td>"))
            .unwrap_or_else(|| panic!("no row of level 1\n{counts}"));
        // TTFT and latency p50 / p95 of 8 samples; the throughput of the
        // level's 6 completed requests.
        assert!(row.contains("<td>10.0 ms / 15.0 ms (8)</td>"), "{row}");
        assert!(row.contains("<td>100 ms / 150 ms (8)</td>"), "{row}");
        assert!(row.contains("<td>100 tok/s (6)</td>"), "{row}");
        // A partial document says so at the top; a whole one does not.
        assert!(page.contains("<p class=\"partial\">partial: interrupted (Ctrl-C or SIGTERM)"));
        results.partial = false;
        assert!(!report(&results, &Settings::new()).contains("class=\"partial\""));
    }

    #[test]
    fn a_level_stopped_early_is_drawn_as_stopped_not_as_a_collapse() {
        let mut stopped = level(4, false);
        stopped.throughput_tokens_per_second = 3.0;
        stopped.stopped_early = Some(crate::stats::report::EarlyStop {
            breach: crate::stats::decision::Breach::Shed,
            saved_requests: 20,
        });
        let w = WorkloadReport {
            workload: "chat".into(),
            levels: vec![level(1, true), level(2, true), stopped],
            skipped_levels: vec![],
            carried_levels: Vec::new(),
            capacity: crate::stats::report::Capacity {
                knee_concurrency: 2,
                recommended_max_in_flight: 1,
                ..Default::default()
            },
        };
        let charts = charts(&w, None);
        let throughput = &charts[0].series[0].points;
        assert_eq!(throughput[2], (4.0, None), "no partial throughput drawn");
        assert_eq!(throughput[1], (2.0, Some(200.123)));
        let svg = charts[0].svg();
        assert!(svg.contains(">stopped early at 4</text>"), "{svg}");
        assert!(!svg.contains("data-x=\"4\" data-y=\"3\""), "{svg}");
    }

    #[test]
    fn carried_levels_are_listed_with_their_age_and_left_out_of_the_charts() {
        let mut carried = level(2, true);
        carried.measured_at_unix_seconds = 1_699_999_960.0;
        carried.throughput_tokens_per_second = 777.0;
        let w = WorkloadReport {
            workload: "chat".into(),
            levels: vec![level(1, true), level(4, false)],
            skipped_levels: vec![2],
            carried_levels: vec![carried],
            capacity: Capacity {
                knee_concurrency: 2,
                recommended_max_in_flight: 1,
                ..Default::default()
            },
        };
        let block = workload_block(&w, None, 1_700_000_000.0);
        let (_, listed) = block
            .split_once("<table class=\"carried\">")
            .unwrap_or_else(|| panic!("no carried table: {block}"));
        assert!(
            listed.contains(
                "<tr class=\"carried\"><td>2</td><td>carried, measured 40 s before this sweep \
                 (2023-11-14T22:12:40Z)</td>"
            ),
            "{listed}"
        );
        assert!(listed.contains("<td>777 tok/s</td>"), "{listed}");
        assert!(
            block.contains("Level 2 was not run by this sweep: the charts leave it out"),
            "{block}"
        );
        // Not drawn, not counted among this sweep's samples.
        assert!(!block.contains("data-x=\"2\""), "{block}");
        assert!(!block.contains("data-y=\"777\""), "{block}");
        let (counts, _) = block.split_once("<table class=\"carried\">").unwrap();
        let (_, counts) = counts.split_once("<table class=\"counts\">").unwrap();
        assert!(!counts.contains("<td>2</td>"), "{counts}");
        // Without carried levels, neither the note nor the table.
        let measured = WorkloadReport {
            carried_levels: vec![],
            ..w
        };
        let block = workload_block(&measured, None, 1_700_000_000.0);
        assert!(!block.contains("carried"), "{block}");
    }
}
