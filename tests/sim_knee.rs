//! The knee a sweep finds on the simulated engine equals the knee predicted
//! from the engine's parameters: by shedding at `max_in_flight`, or by
//! latency crossing the SLO.

mod support;

use std::time::Duration;

use llmprobe::sim::{count_tokens, SimConfig};

const LEVELS: [u32; 5] = [1, 2, 4, 8, 16];
const OUTPUT_TOKENS: u64 = 16;
const PROMPT: &str = "Summarise the benefits of a private AI server.";

/// The highest level that neither sheds nor exceeds the SLO according to the
/// model. Above the batch cap requests queue and latency grows in whole
/// generations: ceil(c / batch) x latency(batch).
fn predicted_knee(sim_yaml: &str, slo: Duration) -> u32 {
    let cfg: SimConfig = serde_json::from_value(yaml_to_json(sim_yaml)).unwrap();
    let p = cfg.resolve().unwrap();
    // As sent: every request's prompt starts with its own marker.
    let prompt = count_tokens(&format!("{}{PROMPT}", llmprobe::probe::body::marker(0)));
    let mut knee = 0;
    let batch = p.effective_batch(prompt, OUTPUT_TOKENS).max(1);
    for &c in &LEVELS {
        let sheds = c > p.max_in_flight;
        let latency = if c <= batch {
            p.predicted_latency(c, prompt, OUTPUT_TOKENS)
        } else {
            p.predicted_latency(batch, prompt, OUTPUT_TOKENS) * c.div_ceil(batch)
        };
        if sheds || latency > slo {
            break;
        }
        knee = c;
    }
    knee
}

/// `{ a: 1, b: 2ms }` inline YAML maps of scalars to JSON.
fn yaml_to_json(inline: &str) -> serde_json::Value {
    let body = inline.trim().trim_start_matches('{').trim_end_matches('}');
    let mut map = serde_json::Map::new();
    for pair in body.split(',') {
        let (k, v) = pair.split_once(':').unwrap();
        let v = v.trim();
        let value = v
            .parse::<u64>()
            .map(serde_json::Value::from)
            .unwrap_or_else(|_| serde_json::Value::from(v));
        map.insert(k.trim().to_string(), value);
    }
    serde_json::Value::Object(map)
}

async fn measured_knee(sim_yaml: &str, slo: Duration) -> u32 {
    let yaml = format!(
        r#"
listen: "127.0.0.1:0"
defaults:
  workload: w
  warmup_requests: 2
  levels: {LEVELS:?}
  requests_per_level: 2x
  min_requests_per_level: 8
  sustained: {{ every: 0 }}
  slo: {{ p95_latency: {}ms }}
workloads:
  w:
    max_completion_tokens: {OUTPUT_TOKENS}
    prompts: ["{PROMPT}"]
targets:
  - name: sim
    simulator: {sim_yaml}
"#,
        slo.as_millis()
    );
    let r = support::sweep::sweep_one(&yaml).await;
    let w = &r.workloads[0];
    let lat: Vec<(u32, Option<f64>, f64)> = w
        .levels
        .iter()
        .map(|l| (l.concurrency, l.latency_seconds.p95, l.shed_ratio))
        .collect();
    eprintln!("{sim_yaml}: levels (concurrency, p95, shed) {lat:?}");
    w.capacity.knee_concurrency
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knee_by_shedding_at_max_in_flight() {
    // Latency far under the SLO everywhere: only shedding limits the knee.
    for sim in ["{ profile: tiny }", "{ profile: tiny, max_in_flight: 4 }"] {
        let slo = Duration::from_secs(5);
        let predicted = predicted_knee(sim, slo);
        assert_eq!(measured_knee(sim, slo).await, predicted, "{sim}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knee_by_latency_crossing_the_slo() {
    // latency(c) = 17 x 4 ms + 16 x c x 2 ms = 100, 132, 196, 324, 580 ms:
    // an SLO of 260 ms puts the knee at 4, with margins of 25% or more on
    // both sides (measured latencies run at most one step under the model).
    let sim = "{ profile: tiny, max_batch: 16, max_in_flight: 64, step_base: 4ms, step_per_sequence: 2ms }";
    let slo = Duration::from_millis(260);
    let predicted = predicted_knee(sim, slo);
    assert_eq!(predicted, 4);
    assert_eq!(measured_knee(sim, slo).await, predicted);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn knee_when_memory_caps_the_batch() {
    // A KV cache of 70 tokens holds 2 sequences of 17 + 16 tokens (the
    // prompt with its marker): above 2 in flight requests queue, latency
    // doubles at 4 (~170 ms) and again at 8 (~340 ms); an SLO of 250 ms puts
    // the knee at 4.
    let sim = "{ profile: tiny, kv_cache_tokens: 70 }";
    let slo = Duration::from_millis(250);
    let predicted = predicted_knee(sim, slo);
    assert_eq!(predicted, 4);
    assert_eq!(measured_knee(sim, slo).await, predicted);
}
