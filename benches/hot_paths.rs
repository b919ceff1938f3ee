//! The hot pure paths, timed with divan: SSE decoding of a realistic chunk
//! stream, `chunk::interpret` of one content chunk, exact quantiles over
//! 10,000 samples, and the exposition encode of a big deployment.
//!
//! ```text
//! cargo bench --bench hot_paths
//! ```

#[path = "common/fixtures.rs"]
mod fixtures;

use divan::counter::{BytesCount, ItemsCount};
use divan::Bencher;
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
