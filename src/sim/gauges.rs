//! What the engine tells on its `/metrics`, under vLLM's names (labelled
//! by `model_name`, as vLLM does), so that llmprobe's engine signals and
//! its limit can be seen against the simulator: running and waiting
//! sequences, KV-cache usage (with `kv_cache_tokens` set), preemptions (the
//! engine reserves a sequence's whole KV space when it joins, so it never
//! preempts: always 0) and the prefix cache's queried and hit tokens.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// The engine's figures, written by the scheduler and the HTTP layer.
#[derive(Debug, Default)]
pub(crate) struct Gauges {
    running: AtomicU64,
    waiting: AtomicU64,
    kv_used: AtomicU64,
    prefix_queries: AtomicU64,
    prefix_hits: AtomicU64,
}

impl Gauges {
    /// The batch as the scheduler left it.
    pub(crate) fn set_batch(&self, running: usize, waiting: usize, kv_used: u64) {
        self.running.store(running as u64, Ordering::Relaxed);
        self.waiting.store(waiting as u64, Ordering::Relaxed);
        self.kv_used.store(kv_used, Ordering::Relaxed);
    }

    /// A prompt of `tokens` looked up in the prefix cache, `hit` of them found.
    pub(crate) fn prefix_lookup(&self, tokens: u64, hit: u64) {
        self.prefix_queries.fetch_add(tokens, Ordering::Relaxed);
        self.prefix_hits.fetch_add(hit, Ordering::Relaxed);
    }

    /// The exposition for `model`; the KV usage only when the cache is bounded.
    pub(crate) fn render(&self, model: &str, kv_capacity: Option<u64>) -> String {
        let model = model
            .replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n");
        let mut out = String::new();
        let mut family = |name: &str, kind: &str, help: &str, value: f64| {
            let _ = writeln!(out, "# HELP {name} {help}");
            let _ = writeln!(out, "# TYPE {name} {kind}");
            let _ = writeln!(
                out,
                "{name}{{engine=\"0\",model_name=\"{model}\"}} {value:?}"
            );
        };
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed) as f64;
        family(
            "vllm:num_requests_running",
            "gauge",
            "Number of requests in model execution batches.",
            get(&self.running),
        );
        family(
            "vllm:num_requests_waiting",
            "gauge",
            "Number of requests waiting to be processed.",
            get(&self.waiting),
        );
        if let Some(capacity) = kv_capacity.filter(|c| *c > 0) {
            family(
                "vllm:kv_cache_usage_perc",
                "gauge",
                "KV-cache usage. 1 means 100 percent usage.",
                (get(&self.kv_used) / capacity as f64).min(1.0),
            );
        }
        family(
            "vllm:num_preemptions_total",
            "counter",
            "Cumulative number of preemption from the engine.",
            0.0,
        );
        family(
            "vllm:prefix_cache_queries_total",
            "counter",
            "Prefix cache queries, in terms of number of queried tokens.",
            get(&self.prefix_queries),
        );
        family(
            "vllm:prefix_cache_hits_total",
            "counter",
            "Prefix cache hits, in terms of number of cached tokens.",
            get(&self.prefix_hits),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_vllm_names_with_the_model() {
        let g = Gauges::default();
        g.set_batch(4, 3, 750);
        g.prefix_lookup(100, 64);
        let text = g.render("sim \"7b\"", Some(1000));
        assert!(
            text.contains(
                "vllm:num_requests_running{engine=\"0\",model_name=\"sim \\\"7b\\\"\"} 4.0\n"
            ),
            "{text}"
        );
        assert!(text.contains(
            "vllm:num_requests_waiting{engine=\"0\",model_name=\"sim \\\"7b\\\"\"} 3.0\n"
        ));
        assert!(text.contains(
            "vllm:kv_cache_usage_perc{engine=\"0\",model_name=\"sim \\\"7b\\\"\"} 0.75\n"
        ));
        assert!(text.contains(
            "vllm:prefix_cache_hits_total{engine=\"0\",model_name=\"sim \\\"7b\\\"\"} 64.0\n"
        ));
        assert!(!g.render("m", None).contains("kv_cache_usage_perc"));
    }
}
