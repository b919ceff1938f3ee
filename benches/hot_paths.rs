//! The hot pure paths, timed with divan: SSE decoding of a realistic chunk
//! stream, `chunk::interpret` of one content chunk, exact quantiles over
//! 10,000 samples, the exposition encode of a big deployment, and turning
//! 10k and 100k file_sd entries into targets.
//!
//! ```text
//! cargo bench --bench hot_paths
//! ```

#[path = "common/fixtures.rs"]
mod fixtures;

use std::sync::Arc;

use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;
use llmprobe::config::{FileSdConfig, Format, ProcessEnv};
use llmprobe::fleet::file_sd::{self, Group};
use llmprobe::stream::chunk::{self, Chunk};
use llmprobe::stream::sse::SseDecoder;

fn main() {
    divan::main();
}

/// Content chunks in the streamed response used by the SSE benchmarks.
const TOKENS: usize = 256;

/// Decoding one whole 256-token response delivered in one piece (the stub
/// engine, a bursty server): SSE framing only.
#[divan::bench]
fn sse_decode_merged(bencher: Bencher) {
    let stream = fixtures::vllm_stream(TOKENS);
    let mut decoder = SseDecoder::new(1 << 20);
    bencher
        .counter(ItemsCount::new(TOKENS + 3))
        .counter(BytesCount::new(stream.len()))
        .bench_local(|| {
            let mut n = 0usize;
            decoder
                .feed(divan::black_box(&stream), |e| n += e.data.len())
                .unwrap();
            decoder.finish(|e| n += e.data.len()).unwrap();
            n
        });
}

/// The same response arriving one event per read, as from a server that
/// writes every chunk on its own.
#[divan::bench]
fn sse_decode_per_event(bencher: Bencher) {
    let stream = fixtures::vllm_stream(TOKENS);
    let pieces: Vec<&[u8]> = stream.split_inclusive(|&b| b == b'\n').collect();
    let mut decoder = SseDecoder::new(1 << 20);
    bencher
        .counter(ItemsCount::new(TOKENS + 3))
        .bench_local(|| {
            let mut n = 0usize;
            for piece in &pieces {
                decoder
                    .feed(divan::black_box(piece), |e| n += e.data.len())
                    .unwrap();
            }
            decoder.finish(|e| n += e.data.len()).unwrap();
            n
        });
}

/// SSE framing plus interpreting every event: what the probe does per response.
#[divan::bench]
fn sse_decode_and_interpret(bencher: Bencher) {
    let stream = fixtures::vllm_stream(TOKENS);
    let mut decoder = SseDecoder::new(1 << 20);
    bencher
        .counter(ItemsCount::new(TOKENS + 3))
        .bench_local(|| {
            let mut generated = 0usize;
            let mut on_event = |e: llmprobe::stream::sse::SseEvent<'_>| {
                if let Ok(Chunk::Data(info)) = chunk::interpret(e.data) {
                    generated += usize::from(info.generated);
                }
            };
            decoder
                .feed(divan::black_box(&stream), &mut on_event)
                .unwrap();
            decoder.finish(&mut on_event).unwrap();
            generated
        });
}

/// One vLLM content chunk.
#[divan::bench]
fn interpret_content_chunk(bencher: Bencher) {
    let data = br#"{"id":"chatcmpl-7f3a9c1e2b4d4e0f","object":"chat.completion.chunk","created":1718000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"delta":{"content":" capacity"},"logprobs":null,"finish_reason":null}],"usage":null}"#;
    bencher.bench(|| chunk::interpret(divan::black_box(data)));
}

/// The usage chunk that ends a vLLM stream.
#[divan::bench]
fn interpret_usage_chunk(bencher: Bencher) {
    let data = br#"{"id":"chatcmpl-7f3a9c1e2b4d4e0f","object":"chat.completion.chunk","created":1718000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{"prompt_tokens":31,"total_tokens":287,"completion_tokens":256}}"#;
    bencher.bench(|| chunk::interpret(divan::black_box(data)));
}

/// p50, p95 and p99 of 10,000 samples (the sort dominates), as `stats` does per level.
#[divan::bench]
fn percentiles_10k(bencher: Bencher) {
    let mut rng = fastrand::Rng::with_seed(7);
    let values: Vec<f64> = (0..10_000).map(|_| 0.01 + rng.f64() * 0.05).collect();
    bencher
        .counter(ItemsCount::new(values.len()))
        .with_inputs(|| values.clone())
        .bench_local_values(|mut v| llmprobe::stats::level::percentiles(&mut v));
}

/// One scrape of 100 targets x 3 workloads x 8 levels, every chunk of the
/// body written, as /metrics sends it (the results' text was written when
/// the sweeps ended).
#[divan::bench(sample_count = 20)]
fn exposition_scrape_100_targets(bencher: Bencher) {
    let metrics = fixtures::big_metrics();
    metrics.exposition().count();
    bencher.bench(|| metrics.exposition().count());
}

/// The same right after a sweep finished: that target's results are
/// written again (only its own).
#[divan::bench(sample_count = 10)]
fn exposition_scrape_after_a_sweep(bencher: Bencher) {
    let metrics = fixtures::big_metrics();
    let report = fixtures::report(0);
    bencher.bench(|| {
        metrics.publish_sweep(&report);
        metrics.exposition().count()
    });
}

/// The file_sd settings of a configuration with one workload, targets
/// named by their `name` label (loaded from a file, as the daemon does).
fn file_sd_config() -> Arc<FileSdConfig> {
    let dir = std::env::temp_dir().join(format!("llmprobe-bench-file-sd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("a temporary directory");
    let path = dir.join("llmprobe.yaml");
    std::fs::write(
        &path,
        r#"
listen: "127.0.0.1:0"
schedule: { interval: 1m, max_in_flight_total: 64 }
defaults: { workload: chat, levels: [1, 2, 4, 8] }
workloads:
  chat: { max_completion_tokens: 64, prompts: ["hello"] }
file_sd: { files: ["targets/*.json"] }
target_template: { name_label: name, model: m }
targets: []
"#,
    )
    .expect("write the configuration");
    let config = llmprobe::config::decode(&path, false)
        .and_then(|f| llmprobe::config::resolve(&path, f, &ProcessEnv))
        .unwrap_or_else(|e| panic!("{e}"));
    let _ = std::fs::remove_dir_all(&dir);
    config.fleet.file_sd.expect("file_sd configured")
}

/// A generated file_sd JSON file of `n` groups, one distinctly named
/// target each, parsed as a refresh parses it.
fn file_sd_groups(n: usize) -> Vec<Group> {
    let entries: Vec<String> = (0..n)
        .map(|i| {
            format!(
                r#"{{"targets": ["10.{}.{}.{}:8000"], "labels": {{"name": "worker-{i}", "gpu": "a100"}}}}"#,
                i >> 16,
                (i >> 8) & 0xff,
                i & 0xff
            )
        })
        .collect();
    let text = format!("[{}]", entries.join(",\n"));
    file_sd::parse(&text, Format::Json).expect("a valid file_sd file")
}

/// `file_sd::targets` over a file of 10k and 100k entries: validation,
/// template and the duplicate-name check (a set: linear; the scan it
/// replaced took 61 s at 100k).
#[divan::bench(args = [10_000, 100_000], sample_count = 5, sample_size = 1)]
fn file_sd_targets(bencher: Bencher, n: usize) {
    let config = file_sd_config();
    let groups = file_sd_groups(n);
    let (good, invalid) = file_sd::targets(&groups, &config, &ProcessEnv);
    assert_eq!((good.len(), invalid.len()), (n, 0), "{:?}", invalid.first());
    bencher
        .counter(ItemsCount::new(n))
        .bench(|| file_sd::targets(divan::black_box(&groups), &config, &ProcessEnv));
}
