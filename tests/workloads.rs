//! Workloads on the simulated engine: long prompts change the capacity.

mod support;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn long_prompts_lower_the_knee_and_saturate_earlier() {
    // tiny profile, with a KV cache that holds 4 short sequences but only 2
    // sequences of 2000-token prompts: long documents queue from 4 in flight
    // (latency doubles), short chats do not until 8.
    // Predicted p95 latency (sim model): short ~100 ms at 4, ~200 ms at 8;
    // long ~170 ms at 2, ~330 ms at 4. An SLO of 260 ms splits them with
    // margins of 25% or more on each side.
    let yaml = r#"
listen: "127.0.0.1:0"
defaults:
  warmup_requests: 1
  levels: [1, 2, 4, 8]
  requests_per_level: 1x
  min_requests_per_level: 4
  sustained: { every: 0 }
  slo: { p95_latency: 260ms }
workloads:
  short:
    max_completion_tokens: 16
    prompts: ["hi"]
  long:
    max_completion_tokens: 16
    synthetic: { prompt_tokens: 2000, count: 4 }
targets:
  - name: sim
    simulator: { profile: tiny, kv_cache_tokens: 4200 }
    workloads: [short, long]
"#;
    let r = support::sweep::sweep_one(yaml).await;
    let short = &r.workloads[0];
    let long = &r.workloads[1];
    assert_eq!(
        (short.workload.as_str(), long.workload.as_str()),
        ("short", "long")
    );
    assert_eq!(short.capacity.knee_concurrency, 8, "{:#?}", short.levels);
    assert_eq!(long.capacity.knee_concurrency, 2, "{:#?}", long.levels);
    // TTFT grows with prompt length.
    let ttft = |w: &llmprobe::stats::report::WorkloadReport| w.levels[0].ttft_seconds.p50.unwrap();
    assert!(
        ttft(long) > ttft(short) + 0.02,
        "long {} short {}",
        ttft(long),
        ttft(short)
    );
    // Prompt tokens as the server counted them: 2000 per long request, and
    // the marker that starts every prompt (so no prefix cache serves it).
    let marked = llmprobe::sim::count_tokens(&format!(
        "{}{}",
        llmprobe::probe::body::marker(0),
        "x".repeat(8000)
    ));
    assert_eq!(marked, 2000 + 5);
    assert_eq!(long.levels[0].prompt_tokens, 4 * marked);
}
