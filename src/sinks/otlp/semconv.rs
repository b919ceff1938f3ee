//! The OpenTelemetry GenAI client metrics of one pinned revision of the
//! semantic conventions, by name, with their attributes; and what one
//! measured request records in them. Pure.

use crate::config::{Api, Endpoint, Target, Workload};
use crate::stats::sample::{Outcome, Sample};

/// The revision of the semantic conventions followed: the last release of
/// the main repository that holds the GenAI conventions (v1.42.0 moved them
/// to a repository of their own, untagged when this was written).
pub const SEMCONV_VERSION: &str = "1.41.0";
/// The schema URL of that revision, sent with every scope.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

/// One histogram the sink keeps.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Instrument {
    /// Its name.
    pub name: &'static str,
    /// Its UCUM unit.
    pub unit: &'static str,
    /// Its description.
    pub description: &'static str,
    /// Its explicit bucket boundaries, as the conventions advise.
    pub bounds: &'static [f64],
}

/// The boundaries the conventions give every client time histogram, seconds.
const TIME_BOUNDS: &[f64] = &[
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
];
/// The boundaries the conventions give `gen_ai.client.token.usage`.
const TOKEN_BOUNDS: &[f64] = &[
    1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0,
    16777216.0, 67108864.0,
];

/// `gen_ai.client.operation.duration`: send to the end of every request.
pub const OPERATION_DURATION: Instrument = Instrument {
    name: "gen_ai.client.operation.duration",
    unit: "s",
    description: "GenAI operation duration.",
    bounds: TIME_BOUNDS,
};
/// `gen_ai.client.token.usage`: input and output tokens of completed requests.
pub const TOKEN_USAGE: Instrument = Instrument {
    name: "gen_ai.client.token.usage",
    unit: "{token}",
    description: "Number of input and output tokens used.",
    bounds: TOKEN_BOUNDS,
};
/// `gen_ai.client.operation.time_to_first_chunk`: llmprobe's TTFT.
pub const TIME_TO_FIRST_CHUNK: Instrument = Instrument {
    name: "gen_ai.client.operation.time_to_first_chunk",
    unit: "s",
    description: "Time to receive the first chunk, measured from when the client issues the generation request to when the first chunk is received in the response stream.",
    bounds: TIME_BOUNDS,
};
/// `gen_ai.client.operation.time_per_output_chunk`: llmprobe's inter-token gaps.
pub const TIME_PER_OUTPUT_CHUNK: Instrument = Instrument {
    name: "gen_ai.client.operation.time_per_output_chunk",
    unit: "s",
    description: "Time per output chunk, recorded for each chunk received after the first one, measured as the time elapsed from the end of the previous chunk to the end of the current chunk.",
    bounds: TIME_BOUNDS,
};

/// Every histogram, in export order; an index in it names one.
pub const HISTOGRAMS: [Instrument; 4] = [
    OPERATION_DURATION,
    TOKEN_USAGE,
    TIME_TO_FIRST_CHUNK,
    TIME_PER_OUTPUT_CHUNK,
];

/// An attribute's value.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Value {
    /// A string.
    Str(String),
    /// An integer.
    Int(i64),
}

/// An attribute set, in the order it is sent.
pub type Attrs = Vec<(&'static str, Value)>;

/// Every attribute key the sink sends.
pub mod key {
    /// `chat` or `text_completion`.
    pub const OPERATION: &str = "gen_ai.operation.name";
    /// See [`super::PROVIDER`].
    pub const PROVIDER: &str = "gen_ai.provider.name";
    /// The model asked for.
    pub const MODEL: &str = "gen_ai.request.model";
    /// The target's host.
    pub const ADDRESS: &str = "server.address";
    /// The target's port.
    pub const PORT: &str = "server.port";
    /// The outcome class of a failed request.
    pub const ERROR: &str = "error.type";
    /// `input` or `output`.
    pub const TOKEN_TYPE: &str = "gen_ai.token.type";
    /// The target's name.
    pub const TARGET: &str = "llmprobe.target";
    /// The workload's name.
    pub const WORKLOAD: &str = "llmprobe.workload";
    /// Requests kept in flight when the request was sent.
    pub const CONCURRENCY: &str = "llmprobe.concurrency";
    /// What binds at the knee.
    pub const LIMIT: &str = "llmprobe.limit";
    /// A percentile of a level's samples: `50`, `95`, `99`.
    pub const PERCENTILE: &str = "llmprobe.percentile";
}

/// `gen_ai.provider.name`: every target speaks the OpenAI REST API, and
/// the conventions name the provider by that flavour when the backend
/// behind it is not known (`server.address` and `gen_ai.request.model`
/// tell which it is).
pub const PROVIDER: &str = "openai";

/// `gen_ai.operation.name` of an endpoint kind.
fn operation(api: Api) -> &'static str {
    match api {
        Api::Chat => "chat",
        Api::Completions => "text_completion",
    }
}

/// The host and port of a target's URL (None for the built-in simulated
/// engine, whose loopback port is its own business, or a URL without one).
fn server(target: &Target) -> Option<(String, i64)> {
    let Endpoint::Url(base) = &target.endpoint else {
        return None;
    };
    let url = url::Url::parse(base).ok()?;
    let host = match url.host()? {
        url::Host::Domain(d) => d.to_string(),
        url::Host::Ipv4(a) => a.to_string(),
        url::Host::Ipv6(a) => a.to_string(),
    };
    Some((host, i64::from(url.port_or_known_default()?)))
}

/// The attributes every point of a request carries.
pub fn request_attrs(target: &Target, workload: &Workload, concurrency: Option<u32>) -> Attrs {
    let mut attrs: Attrs = vec![
        (key::OPERATION, Value::Str(operation(target.api).into())),
        (key::PROVIDER, Value::Str(PROVIDER.into())),
        (key::MODEL, Value::Str(target.model.clone())),
    ];
    if let Some((host, port)) = server(target) {
        attrs.push((key::ADDRESS, Value::Str(host)));
        attrs.push((key::PORT, Value::Int(port)));
    }
    attrs.push((key::TARGET, Value::Str(target.name.clone())));
    attrs.push((key::WORKLOAD, Value::Str(workload.name.clone())));
    if let Some(c) = concurrency {
        attrs.push((key::CONCURRENCY, Value::Int(i64::from(c))));
    }
    attrs
}

/// One value to add to a histogram: its index in [`HISTOGRAMS`], its
/// attributes, the value.
pub type Recording = (usize, Attrs, f64);

/// What a measured request records, under `attrs` ([`request_attrs`]):
/// its duration whatever its outcome (with `error.type`, the outcome class,
/// when it failed), and for a completed one its time to first chunk, each
/// gap between chunks and its tokens (input only when the server counted
/// them: the conventions forbid a guess).
pub fn record(sample: &Sample, attrs: &Attrs) -> Vec<Recording> {
    let mut out = Vec::new();
    let mut duration = attrs.clone();
    if sample.outcome != Outcome::Ok {
        duration.push((key::ERROR, Value::Str(sample.outcome.as_str().into())));
    }
    out.push((0, duration, sample.elapsed.as_secs_f64()));
    if sample.outcome != Outcome::Ok {
        return out;
    }
    let tokens = |kind: &str, n: u64| {
        let mut a = attrs.clone();
        a.push((key::TOKEN_TYPE, Value::Str(kind.into())));
        (1, a, n as f64)
    };
    if let Some(n) = sample.prompt_tokens {
        out.push(tokens("input", n));
    }
    out.push(tokens("output", sample.output_tokens));
    if let Some(ttft) = sample.ttft {
        out.push((2, attrs.clone(), ttft.as_secs_f64()));
    }
    for gap in &sample.inter_token {
        out.push((3, attrs.clone(), gap.as_secs_f64()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn the_conventions_boundaries_are_set_explicitly() {
        assert_eq!(OPERATION_DURATION.bounds.len(), 14);
        assert_eq!(TOKEN_USAGE.bounds[13], 67108864.0);
        assert!(HISTOGRAMS
            .iter()
            .all(|i| i.bounds.windows(2).all(|w| w[0] < w[1])));
    }

    #[test]
    fn a_failed_request_records_its_duration_with_its_class_only() {
        let mut s = Sample::failed(Outcome::Shed, Some(503), "busy");
        s.elapsed = Duration::from_millis(30);
        let attrs = vec![(key::TARGET, Value::Str("t".into()))];
        let r = record(&s, &attrs);
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].0, 0);
        assert_eq!(r[0].1[1], (key::ERROR, Value::Str("shed".into())));
        assert!((r[0].2 - 0.03).abs() < 1e-9);
    }

    #[test]
    fn a_completed_request_records_chunks_and_tokens() {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.ttft = Some(Duration::from_millis(100));
        s.inter_token = vec![Duration::from_millis(10); 3];
        s.output_tokens = 4;
        s.prompt_tokens = None;
        let r = record(&s, &Vec::new());
        let by = |i: usize| r.iter().filter(|x| x.0 == i).count();
        // No input tokens without the server's count.
        assert_eq!((by(0), by(1), by(2), by(3)), (1, 1, 1, 3));
        assert!(r[0].1.is_empty(), "no error.type on success");
        assert_eq!(r[1].1, vec![(key::TOKEN_TYPE, Value::Str("output".into()))]);
    }
}
