//! A server's own Prometheus metrics: the figures of the engines llmprobe
//! knows (vLLM, SGLang, TGI, llama.cpp) read from one exposition, where
//! they live (configured, or `/metrics` beside `/v1`), and one bounded read
//! of them. A slow, huge or garbled endpoint is an `Err` with a reason,
//! never a wait longer than its limit nor more memory than its size bound.

use std::time::Duration;

use super::client::{Client, SendError};
use super::exposition::{self, Series};
use crate::config::redact;
use crate::stats::server::EngineReading;

/// The most of an exposition read: vLLM with a few models and its
/// histograms writes a few hundred kilobytes.
pub const MAX_BYTES: usize = 2 << 20;

/// An engine whose metric names llmprobe knows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Engine {
    /// vLLM (`vllm:` prefix, series labelled by `model_name`).
    Vllm,
    /// SGLang (`sglang:` prefix, needs `--enable-metrics`).
    Sglang,
    /// Hugging Face text-generation-inference (`tgi_` prefix).
    Tgi,
    /// llama.cpp's server (`llamacpp:` prefix, needs `--metrics`).
    LlamaCpp,
}

/// Each figure's names, newest first; the first found is read.
struct Names {
    engine: Engine,
    running: &'static [&'static str],
    waiting: &'static [&'static str],
    kv_cache_usage: &'static [&'static str],
    preemptions: &'static [&'static str],
    prefix_cache_hits: &'static [&'static str],
    prefix_cache_queries: &'static [&'static str],
}

const ENGINES: [Names; 4] = [
    Names {
        engine: Engine::Vllm,
        running: &["vllm:num_requests_running"],
        waiting: &["vllm:num_requests_waiting"],
        kv_cache_usage: &["vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"],
        preemptions: &["vllm:num_preemptions_total"],
        prefix_cache_hits: &[
            "vllm:prefix_cache_hits_total",
            "vllm:gpu_prefix_cache_hits_total",
        ],
        prefix_cache_queries: &[
            "vllm:prefix_cache_queries_total",
            "vllm:gpu_prefix_cache_queries_total",
        ],
    },
    Names {
        engine: Engine::Sglang,
        running: &["sglang:num_running_reqs"],
        waiting: &["sglang:num_queue_reqs"],
        kv_cache_usage: &["sglang:token_usage"],
        preemptions: &[
            "sglang:num_retracted_requests_total",
            "sglang:num_retracted_reqs",
        ],
        prefix_cache_hits: &[],
        prefix_cache_queries: &[],
    },
    Names {
        engine: Engine::Tgi,
        running: &["tgi_batch_current_size"],
        waiting: &["tgi_queue_size"],
        kv_cache_usage: &[],
        preemptions: &[],
        prefix_cache_hits: &[],
        prefix_cache_queries: &[],
    },
    Names {
        engine: Engine::LlamaCpp,
        running: &["llamacpp:requests_processing"],
        waiting: &["llamacpp:requests_deferred"],
        kv_cache_usage: &[],
        preemptions: &[],
        prefix_cache_hits: &[],
        prefix_cache_queries: &[],
    },
];

impl Engine {
    /// The value in JSON and the terminal.
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Tgi => "tgi",
            Engine::LlamaCpp => "llama.cpp",
        }
    }
}

/// The figures of the first known engine whose running or waiting count is
/// in `text`, for `model`: where series carry a `model_name` label and
/// some name `model`, only those are read (a server with several models);
/// otherwise all are (counts summed, usage the largest).
pub fn read(text: &str, model: &str) -> Option<(Engine, EngineReading)> {
    let all: Vec<Series<'_>> = exposition::series(text)
        .filter(|s| s.value.is_finite())
        .collect();
    for names in &ENGINES {
        let ours: Vec<&Series<'_>> = all
            .iter()
            .filter(|s| s.name.starts_with(prefix(names)))
            .collect();
        let mine: Vec<&Series<'_>> = ours
            .iter()
            .copied()
            .filter(|s| s.label("model_name").as_deref() == Some(model))
            .collect();
        let chosen = if mine.is_empty() { ours } else { mine };
        let figure = |wanted: &[&str], combine: fn(f64, f64) -> f64| {
            wanted.iter().find_map(|name| {
                chosen
                    .iter()
                    .filter(|s| s.name == *name)
                    .map(|s| s.value)
                    .reduce(combine)
            })
        };
        let add = |a: f64, b: f64| a + b;
        let reading = EngineReading {
            running: figure(names.running, add),
            waiting: figure(names.waiting, add),
            kv_cache_usage: figure(names.kv_cache_usage, f64::max),
            preemptions: figure(names.preemptions, add),
            prefix_cache_hits: figure(names.prefix_cache_hits, add),
            prefix_cache_queries: figure(names.prefix_cache_queries, add),
        };
        if reading.running.is_some() || reading.waiting.is_some() {
            return Some((names.engine, reading));
        }
    }
    None
}

/// The prefix every name of an engine starts with.
fn prefix(names: &Names) -> &'static str {
    match names.engine {
        Engine::Vllm => "vllm:",
        Engine::Sglang => "sglang:",
        Engine::Tgi => "tgi_",
        Engine::LlamaCpp => "llamacpp:",
    }
}

/// Where the metrics of a server at `base_url` are looked for when none is
/// configured: `/metrics` in place of a final `/v1` (as vLLM, SGLang and
/// TGI serve it), else at the root of the base URL's host.
pub fn beside(base_url: &str) -> Option<String> {
    let mut url = url::Url::parse(base_url).ok()?;
    let path = url.path().trim_end_matches('/');
    let path = match path.strip_suffix("/v1") {
        Some(parent) => format!("{parent}/metrics"),
        None => "/metrics".to_string(),
    };
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    Some(url.to_string())
}

/// One read of `url` within `timeout` and [`MAX_BYTES`], on the client's
/// side pool (never a connection of the measured requests).
pub async fn fetch(client: &Client, url: &str, timeout: Duration) -> Result<String, String> {
    let late = || {
        format!(
            "{url} did not answer within {}",
            humantime::format_duration(timeout)
        )
    };
    let read = async {
        let mut resp = client.get_aside(url, timeout).await.map_err(|e| match e {
            SendError::Timeout => late(),
            e => format!("cannot read {url}: {e}"),
        })?;
        if resp.status != 200 {
            return Err(format!("{url} answered HTTP {}", resp.status));
        }
        let mut body = Vec::new();
        while let Some(piece) = resp.next_bytes().await? {
            if body.len() + piece.len() > MAX_BYTES {
                return Err(format!(
                    "{url} sent more than {} MB: not read",
                    MAX_BYTES >> 20
                ));
            }
            body.extend_from_slice(&piece);
        }
        Ok(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(timeout, read)
        .await
        .unwrap_or_else(|_| Err(late()))
}

/// Longest note a failed read leaves in a sweep's result, in characters.
const NOTE_CHARS: usize = 300;

/// One read of `url` for `model`: the engine and its figures, or why not
/// (a note shown in results and pages: made by [`redact::message`], as the
/// URL or the client's error may carry a key).
pub async fn sample(
    client: &Client,
    url: &str,
    model: &str,
    timeout: Duration,
) -> Result<(Engine, EngineReading), String> {
    let read_one = async {
        let text = fetch(client, url, timeout).await?;
        read(&text, model).ok_or_else(|| {
            format!("{url} holds none of the metrics of vLLM, SGLang, TGI or llama.cpp")
        })
    };
    read_one
        .await
        .map_err(|why| redact::message(&why, NOTE_CHARS))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(name: &str) -> String {
        let path = format!(
            "{}/testdata/server-metrics/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    #[test]
    fn vllm_with_two_models_reads_the_targets_own_series() {
        let text = sample("vllm-two-models.prom");
        let (engine, r) = read(&text, "Qwen/Qwen2.5-7B-Instruct").unwrap();
        assert_eq!(engine, Engine::Vllm);
        assert_eq!(r.running, Some(4.0));
        assert_eq!(r.waiting, Some(3.0));
        assert_eq!(r.kv_cache_usage, Some(0.4312));
        assert_eq!(r.preemptions, Some(2.0));
        assert_eq!(r.prefix_cache_queries, Some(51234.0));
        assert_eq!(r.prefix_cache_hits, Some(20480.0));
        let (_, other) = read(&text, "meta-llama/Llama-3.1-8B-Instruct").unwrap();
        assert_eq!((other.running, other.waiting), (Some(1.0), Some(0.0)));
        assert_eq!(other.kv_cache_usage, Some(0.05));
        let (_, unknown) = read(&text, "not-served").unwrap();
        assert_eq!(unknown.running, Some(5.0), "no series of its own: all");
        assert_eq!(unknown.kv_cache_usage, Some(0.4312));
    }

    #[test]
    fn older_vllm_names_its_cache_usage_gpu() {
        let text = sample("vllm-v0.prom");
        let (_, r) = read(&text, "mistralai/Mistral-7B-Instruct-v0.3").unwrap();
        assert_eq!(r.kv_cache_usage, Some(0.9731));
        assert_eq!((r.running, r.waiting), (Some(12.0), Some(7.0)));
        assert_eq!(r.preemptions, Some(15.0));
    }

    #[test]
    fn sglang_tgi_and_llama_cpp() {
        let (e, r) = read(&sample("sglang.prom"), "qwen2.5-7b").unwrap();
        assert_eq!(e, Engine::Sglang);
        assert_eq!((r.running, r.waiting), (Some(16.0), Some(5.0)));
        assert_eq!(r.kv_cache_usage, Some(0.87));
        let (e, r) = read(&sample("tgi.prom"), "any").unwrap();
        assert_eq!(e, Engine::Tgi);
        assert_eq!(
            (r.running, r.waiting, r.kv_cache_usage),
            (Some(8.0), Some(2.0), None)
        );
        let (e, r) = read(&sample("llama-cpp.prom"), "any").unwrap();
        assert_eq!(e, Engine::LlamaCpp);
        assert_eq!((r.running, r.waiting), (Some(1.0), Some(3.0)));
    }

    #[test]
    fn other_expositions_are_no_engine() {
        assert_eq!(read("process_cpu_seconds_total 12\n", "m"), None);
        assert_eq!(read("<html>vllm:num_requests_running</html>", "m"), None);
    }

    #[test]
    fn metrics_live_beside_v1() {
        let b = |u| beside(u).unwrap();
        assert_eq!(b("http://10.0.0.5:8000/v1"), "http://10.0.0.5:8000/metrics");
        assert_eq!(b("http://h:8000/v1/"), "http://h:8000/metrics");
        assert_eq!(
            b("https://gw.example/llm/v1"),
            "https://gw.example/llm/metrics"
        );
        assert_eq!(b("http://h:8080"), "http://h:8080/metrics");
        assert_eq!(beside("not a url"), None);
    }

    #[tokio::test]
    async fn a_note_never_shows_a_key_the_url_carries() {
        let key = "sk-NOTE-5f4e3d2c1b0a9z8y";
        let _held = crate::config::secret::Secret::new(key.into());
        let client = Client::new(Duration::from_secs(1)).expect("a client");
        // Nothing listens on port 9 of loopback: the read fails at once.
        let url = format!(
            "http://127.0.0.1:9/metrics?token={}%0A{}",
            &key[..8],
            &key[8..]
        );
        let why = super::sample(&client, &url, "m", Duration::from_secs(2))
            .await
            .expect_err("nothing listens there");
        assert!(why.contains("[redacted]"), "{why}");
        assert!(
            !why.contains(&key[..8]) && !why.contains(&key[8..]),
            "{why}"
        );
    }
}
