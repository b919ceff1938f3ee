//! The quantities a level reports are one list (`Quantity::ALL`): every
//! quantity of it appears in every output, under the name the list gives it
//! there: its family on `/metrics`, its field in the JSON, its headings in
//! the terminal table, its chart (title and series) in the HTML report, its
//! gauge in what the OTLP sink sends.

use llmprobe::config::Temporality;
use llmprobe::faces::html::page;
use llmprobe::faces::html::settings::Settings;
use llmprobe::faces::json::{self, Document};
use llmprobe::faces::text;
use llmprobe::metrics::Metrics;
use llmprobe::sinks::otlp::{aggregate::Aggregator, encode, gauges};
use llmprobe::stats::quantity::{Quantity, Reading};
use llmprobe::stats::report::{Percentiles, SweepReport};

fn pct(base: f64) -> Percentiles {
    Percentiles {
        count: 9,
        p50: Some(base),
        p95: Some(base * 1.5),
        p99: Some(base * 2.0),
    }
}

/// The pinned report of a successful sweep, every quantity given a value
/// at every level, and a reasoning model's answer TTFT apart from its TTFT.
fn report() -> SweepReport {
    let doc = Document::read(include_str!("../testdata/pinned/sweep.json")).unwrap();
    let mut report = doc.targets.into_iter().find(|r| r.success).unwrap();
    let w = &mut report.workloads[0];
    for l in &mut w.levels {
        let c = f64::from(l.concurrency);
        l.stopped_early = None;
        l.answer_ttft_seconds = pct(0.5 * c);
        l.reasoning_tokens = 40;
        l.decision_latency_seconds = pct(2.0 * c);
        l.connect_seconds = pct(0.002);
        l.inter_token_latency_seconds = pct(0.03);
        l.achieved_concurrency = c * 0.97;
    }
    report
}

#[test]
fn every_quantity_is_in_every_output() {
    let report = report();
    let level = &report.workloads[0].levels[0];
    for q in Quantity::ALL {
        match q.read(level) {
            Reading::Percentiles(p) => assert!(p.count > 0, "{q:?}: no samples"),
            Reading::Value(v) => assert!(v.is_some(), "{q:?}: no value"),
        }
    }

    let metrics = Metrics::on_own_registry().unwrap();
    metrics.publish_sweep(&report);
    let exposition = metrics.encode();
    let json = json::json(std::slice::from_ref(&report));
    let table = text::table(std::slice::from_ref(&report));
    let html = page::report(
        &Document::new(vec![report.clone()], vec![]),
        &Settings::new(),
    );
    let mut otlp = Aggregator::new(0);
    for w in &report.workloads {
        otlp.set_round(&report.target, &w.workload, 1, gauges::round(&report, w));
    }
    let body = encode::export_request(&otlp.collect(Temporality::Cumulative, 2));
    let otlp = String::from_utf8_lossy(&body);

    for q in Quantity::ALL {
        let spec = q.spec();
        let series = format!("{}{{target=\"{}\"", spec.metric, report.target);
        assert!(
            exposition.contains(&series),
            "{q:?}: no {series} on /metrics"
        );
        if q.has_percentiles() {
            let samples = format!("quantity=\"{}\"", spec.label);
            assert!(exposition.contains(&samples), "{q:?}: no sample count");
        }
        let field = format!("\"{}\":", spec.json);
        assert!(json.contains(&field), "{q:?}: no {field} in the JSON");
        for heading in q.headings() {
            assert!(
                table.contains(&heading),
                "{q:?}: no `{heading}` in:\n{table}"
            );
        }
        let title = format!("<title>{}</title>", spec.title);
        assert!(html.contains(&title), "{q:?}: no chart {title}");
        let keys: Vec<String> = if q.has_percentiles() {
            spec.chart
                .iter()
                .map(|p| format!("{}_p{}", spec.series, p.as_str()))
                .collect()
        } else {
            vec![spec.series.to_string()]
        };
        for key in keys {
            let attr = format!("data-series=\"{key}\"");
            assert!(html.contains(&attr), "{q:?}: no {attr} in the HTML");
        }
        let gauge = gauges::quantity_name(q);
        assert!(
            otlp.contains(&gauge),
            "{q:?}: no {gauge} in the OTLP export"
        );
    }
}

#[test]
fn p99_inter_token_latency_is_in_the_table_and_the_html() {
    let report = report();
    let table = text::table(std::slice::from_ref(&report));
    let head = table.lines().find(|l| l.contains("itl p99")).unwrap();
    let column = head.find("itl p99").unwrap() + "itl p99".len();
    // Level 1's p99 gap (2 x 30 ms), right-aligned under its heading.
    let row = table
        .lines()
        .skip_while(|l| !l.contains("itl p99"))
        .nth(1)
        .unwrap();
    assert_eq!(row.get(column - 6..column), Some("60.0ms"), "{table}");
    let html = page::report(&Document::new(vec![report], vec![]), &Settings::new());
    assert!(
        html.contains("data-series=\"itl_p99\" data-x=\"1\" data-y=\"0.06\""),
        "no p99 gap drawn at level 1"
    );
}
