//! The quantities a level reports, listed once ([`Quantity::ALL`]): each
//! with its unit, how it is read from a [`LevelSummary`], the percentiles a
//! person is shown, and its name in every output (the `/metrics` family, the
//! JSON field, the table's heading, the HTML chart's title). `/metrics`, the
//! terminal table and the HTML charts iterate the list; the JSON is serde's
//! on `LevelSummary`, whose field names a test holds to the list. A new
//! quantity is its entry here and the code that computes it.

use crate::stats::report::{LevelSummary, Percentiles};

/// One quantity a level reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Quantity {
    /// Aggregate output tokens per second of the level.
    Throughput,
    /// Mean requests in flight over the level.
    AchievedConcurrency,
    /// Time to first token.
    Ttft,
    /// Time to the first answer token, after any reasoning.
    AnswerTtft,
    /// End-to-end latency of completed requests.
    Latency,
    /// Latency of every request the SLO decision counts (failures too).
    DecisionLatency,
    /// Gaps between content chunks.
    InterTokenLatency,
    /// Per-request generation speed.
    GenerationSpeed,
    /// Time to open a new connection.
    Connect,
}

/// What a quantity's values measure.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds.
    Seconds,
    /// Tokens per second.
    TokensPerSecond,
    /// A number of requests.
    Requests,
}

/// A percentile of a level's samples.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Percentile {
    /// The median.
    P50,
    /// The 95th.
    P95,
    /// The 99th.
    P99,
}

impl Percentile {
    /// Every percentile a level computes, as `/metrics` exports them.
    pub const ALL: [Percentile; 3] = [Percentile::P50, Percentile::P95, Percentile::P99];

    /// Its number as written in labels and headings: "50", "95", "99".
    pub const fn as_str(self) -> &'static str {
        match self {
            Percentile::P50 => "50",
            Percentile::P95 => "95",
            Percentile::P99 => "99",
        }
    }

    /// Its value in `p` (None without samples).
    pub fn of(self, p: &Percentiles) -> Option<f64> {
        match self {
            Percentile::P50 => p.p50,
            Percentile::P95 => p.p95,
            Percentile::P99 => p.p99,
        }
    }
}

/// A quantity's figures at one level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Reading<'a> {
    /// Percentiles of the level's samples, with their count.
    Percentiles(&'a Percentiles),
    /// One figure for the whole level (None: not meaningful there).
    Value(Option<f64>),
}

/// Everything the outputs know of one quantity.
#[derive(Debug, Clone, Copy)]
pub struct QuantitySpec {
    /// What its values measure.
    pub unit: Unit,
    /// Its figures at a level.
    pub read: fn(&LevelSummary) -> Reading<'_>,
    /// Its `/metrics` family (gauges of the latest completed sweep).
    pub metric: &'static str,
    /// The family's `# HELP`.
    pub help: &'static str,
    /// Its `quantity` label on `llmprobe_sweep_samples` (percentile ones).
    pub label: &'static str,
    /// Its field of a level in the JSON document.
    pub json: &'static str,
    /// Its table heading; `{p}` stands for the percentile's number.
    pub heading: &'static str,
    /// The percentiles the table shows: at least one for a quantity read
    /// as percentiles, none for a single figure (always shown).
    pub table: &'static [Percentile],
    /// Its HTML chart's title.
    pub title: &'static str,
    /// The key of its chart's series (`data-series`), before `_p50`...
    pub series: &'static str,
    /// The percentiles its chart draws, the first solid, the others dashed.
    pub chart: &'static [Percentile],
    /// Whether the SLO's p95 latency limit is drawn on its chart.
    pub slo_rule: bool,
    /// Shown in the table and charts only for a model that reasoned
    /// (elsewhere it repeats another quantity, and a note says so).
    pub reasoning_only: bool,
}

use Percentile::{P50, P95, P99};

/// The list, in [`Quantity::ALL`]'s order.
const SPECS: [QuantitySpec; 9] = [
    QuantitySpec {
        unit: Unit::TokensPerSecond,
        // A level stopped early completed too few requests for its
        // throughput to mean anything: left out, as a percentile without
        // samples is.
        read: |l| Reading::Value(l.stopped_early.is_none().then_some(l.throughput_tokens_per_second)),
        metric: "llmprobe_sweep_throughput_tokens_per_second",
        help: "Aggregate output tokens per second of the level in the latest completed sweep.",
        label: "throughput",
        json: "throughput_tokens_per_second",
        heading: "thru tok/s",
        table: &[],
        title: "Aggregate throughput",
        series: "throughput",
        chart: &[],
        slo_rule: false,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Requests,
        read: |l| Reading::Value(Some(l.achieved_concurrency)),
        metric: "llmprobe_sweep_achieved_concurrency",
        help: "Mean requests in flight over the level (time-weighted) in the latest completed sweep; a level under 90% of its concurrency does not count toward the knee.",
        label: "achieved_concurrency",
        json: "achieved_concurrency",
        heading: "in flight",
        table: &[],
        title: "Achieved concurrency (mean requests in flight)",
        series: "achieved_concurrency",
        chart: &[],
        slo_rule: false,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.ttft_seconds),
        metric: "llmprobe_sweep_ttft_seconds",
        help: "Time to first token percentiles of the latest completed sweep, per level.",
        label: "ttft",
        json: "ttft_seconds",
        heading: "ttft p{p}",
        table: &[P50, P95],
        title: "Time to first token",
        series: "ttft",
        chart: &[P50, P95],
        slo_rule: false,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.answer_ttft_seconds),
        metric: "llmprobe_sweep_answer_ttft_seconds",
        help: "Time to the first answer token (content or a tool call, after any reasoning) percentiles of the latest completed sweep, per level; equal to llmprobe_sweep_ttft_seconds for a model that does not reason.",
        label: "answer_ttft",
        json: "answer_ttft_seconds",
        heading: "ans p{p}",
        table: &[P50, P95],
        title: "Time to first answer token (after reasoning)",
        series: "answer_ttft",
        chart: &[P50, P95],
        slo_rule: false,
        reasoning_only: true,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.latency_seconds),
        metric: "llmprobe_sweep_latency_seconds",
        help: "End-to-end request latency percentiles of the latest completed sweep, per level.",
        label: "latency",
        json: "latency_seconds",
        heading: "lat p{p}",
        table: &[P95],
        title: "End-to-end latency",
        series: "latency",
        chart: &[P95, P50],
        slo_rule: true,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.decision_latency_seconds),
        metric: "llmprobe_sweep_decision_latency_seconds",
        help: "Percentiles of the latency of every request the SLO decision counts (all but shed, rate-limited and cancelled ones; a failure counts the time it took) in the latest completed sweep, per level: its p95 is what the SLO judges.",
        label: "decision_latency",
        json: "decision_latency_seconds",
        heading: "dec p{p}",
        table: &[P95],
        title: "Latency the SLO judges (failures included)",
        series: "decision_latency",
        chart: &[P95],
        slo_rule: true,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.inter_token_latency_seconds),
        metric: "llmprobe_sweep_inter_token_latency_seconds",
        help: "Percentiles of the gaps between streamed content chunks in the latest completed sweep, per level.",
        label: "inter_token_latency",
        json: "inter_token_latency_seconds",
        // p99 alone: the median gap is the generation speed's inverse,
        // already in the table; the stalls a reader feels are the tail.
        heading: "itl p{p}",
        table: &[P99],
        title: "Inter-token latency (per chunk)",
        series: "itl",
        chart: &[P50, P95, P99],
        slo_rule: false,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::TokensPerSecond,
        read: |l| Reading::Percentiles(&l.generation_tokens_per_second),
        metric: "llmprobe_sweep_generation_tokens_per_second",
        help: "Per-request generation speed percentiles of the latest completed sweep, per level.",
        label: "generation_speed",
        json: "generation_tokens_per_second",
        heading: "gen p{p} t/s",
        table: &[P50],
        title: "Generation speed per request",
        series: "generation",
        chart: &[P50],
        slo_rule: false,
        reasoning_only: false,
    },
    QuantitySpec {
        unit: Unit::Seconds,
        read: |l| Reading::Percentiles(&l.connect_seconds),
        metric: "llmprobe_sweep_connect_seconds",
        help: "Percentiles of the time counted requests spent opening a new connection (DNS, TCP, TLS) in the latest completed sweep, per level.",
        label: "connect",
        json: "connect_seconds",
        heading: "conn p{p}",
        table: &[P95],
        title: "Time to open a new connection",
        series: "connect",
        chart: &[P50, P95],
        slo_rule: false,
        reasoning_only: false,
    },
];

impl Quantity {
    /// Every quantity, in the order the outputs show them.
    pub const ALL: [Quantity; 9] = [
        Quantity::Throughput,
        Quantity::AchievedConcurrency,
        Quantity::Ttft,
        Quantity::AnswerTtft,
        Quantity::Latency,
        Quantity::DecisionLatency,
        Quantity::InterTokenLatency,
        Quantity::GenerationSpeed,
        Quantity::Connect,
    ];

    /// Its entry in the list.
    pub const fn spec(self) -> &'static QuantitySpec {
        &SPECS[self as usize]
    }

    /// Its figures at `level`.
    pub fn read(self, level: &LevelSummary) -> Reading<'_> {
        (self.spec().read)(level)
    }

    /// Whether it is read as percentiles (else as one figure): a quantity
    /// read as percentiles shows some in the table, a single figure none
    /// (a unit test holds the two to the reader).
    pub const fn has_percentiles(self) -> bool {
        !self.spec().table.is_empty()
    }

    /// Its table headings: one per percentile shown, or its one figure's.
    pub fn headings(self) -> Vec<String> {
        let spec = self.spec();
        if self.has_percentiles() {
            spec.table
                .iter()
                .map(|p| spec.heading.replace("{p}", p.as_str()))
                .collect()
        } else {
            vec![spec.heading.to_string()]
        }
    }

    /// Its table cells at `level`, one per heading.
    pub fn cells(self, level: &LevelSummary) -> Vec<Option<f64>> {
        match self.read(level) {
            Reading::Percentiles(p) => self.spec().table.iter().map(|q| q.of(p)).collect(),
            Reading::Value(v) => vec![v],
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_is_in_the_order_of_all() {
        // `spec` indexes the list by the enum's position.
        for (i, q) in Quantity::ALL.into_iter().enumerate() {
            assert_eq!(q as usize, i);
        }
        assert_eq!(SPECS.len(), Quantity::ALL.len());
    }

    #[test]
    fn names_are_unique_per_output() {
        let unique = |f: fn(&QuantitySpec) -> &str| {
            let mut names: Vec<&str> = SPECS.iter().map(f).collect();
            names.sort_unstable();
            names.dedup();
            names.len() == SPECS.len()
        };
        assert!(unique(|s| s.metric));
        assert!(unique(|s| s.label));
        assert!(unique(|s| s.json));
        assert!(unique(|s| s.heading));
        assert!(unique(|s| s.title));
        assert!(unique(|s| s.series));
    }

    #[test]
    fn every_quantity_is_shown_and_read_as_its_unit_says() {
        let level = LevelSummary {
            ttft_seconds: Percentiles {
                count: 3,
                p50: Some(0.1),
                p95: Some(0.2),
                p99: Some(0.3),
            },
            throughput_tokens_per_second: 120.0,
            ..LevelSummary::default()
        };
        for q in Quantity::ALL {
            let spec = q.spec();
            assert!(spec.metric.starts_with("llmprobe_sweep_"), "{q:?}");
            let read_as_percentiles = matches!(q.read(&level), Reading::Percentiles(_));
            assert_eq!(q.has_percentiles(), read_as_percentiles, "{q:?}");
            if q.has_percentiles() {
                // A percentile quantity shows at least one in each face.
                assert!(!spec.table.is_empty() && !spec.chart.is_empty(), "{q:?}");
                assert!(spec.heading.contains("{p}"), "{q:?}");
            } else {
                assert!(spec.table.is_empty() && spec.chart.is_empty(), "{q:?}");
            }
            assert_eq!(q.headings().len(), q.cells(&level).len(), "{q:?}");
            let seconds = spec.metric.ends_with("_seconds");
            assert_eq!(seconds, spec.unit == Unit::Seconds, "{q:?}");
        }
        assert_eq!(Quantity::Ttft.headings(), ["ttft p50", "ttft p95"]);
        assert_eq!(Quantity::Ttft.cells(&level), [Some(0.1), Some(0.2)]);
        assert_eq!(Quantity::InterTokenLatency.headings(), ["itl p99"]);
        assert_eq!(Quantity::Throughput.cells(&level), [Some(120.0)]);
    }
}
