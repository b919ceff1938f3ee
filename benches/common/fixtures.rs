//! Realistic inputs shared by the benchmarks: a vLLM-like chunk stream, and
//! the exposition of a large deployment (100 targets x 3 workloads x 8 levels).

// Each bench includes this file and uses only part of it.
#![allow(dead_code)]

use std::time::Duration;

use llmprobe::config::Slo;
use llmprobe::metrics::Metrics;
use llmprobe::stats::report::{SweepReport, WorkloadReport};
use llmprobe::stats::sample::{Outcome, Sample, TokenSource};
use llmprobe::stats::{knee, level as stats};

/// Targets, workloads per target and levels per workload of the big exposition.
pub const TARGETS: usize = 100;
/// Workloads per target.
pub const WORKLOADS: usize = 3;
/// Levels per workload.
pub const LEVELS: [u32; 8] = [1, 2, 4, 8, 16, 32, 64, 128];

/// One streamed response as vLLM writes it with `include_usage`: role chunk,
/// `tokens` content chunks (the last with `finish_reason`), usage chunk, `[DONE]`.
pub fn vllm_stream(tokens: usize) -> Vec<u8> {
    let head = r#"data: {"id":"chatcmpl-7f3a9c1e2b4d4e0f","object":"chat.completion.chunk","created":1718000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[{"index":0,"#;
    let mut out = String::new();
    out.push_str(head);
    out.push_str(r#""delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":null}"#);
    out.push_str("\n\n");
    let words = [
        " the",
        " capacity",
        " of",
        " a",
        " private",
        " server",
        ",",
        " é",
    ];
    for i in 0..tokens {
        let finish = if i + 1 == tokens {
            "\"length\""
        } else {
            "null"
        };
        out.push_str(head);
        out.push_str(&format!(
            r#""delta":{{"content":"{}"}},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#,
            words[i % words.len()]
        ));
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        r#"data: {{"id":"chatcmpl-7f3a9c1e2b4d4e0f","object":"chat.completion.chunk","created":1718000000,"model":"Qwen/Qwen2.5-7B-Instruct","choices":[],"usage":{{"prompt_tokens":31,"total_tokens":{},"completion_tokens":{tokens}}}}}"#,
        tokens + 31
    ));
    out.push_str("\n\ndata: [DONE]\n\n");
    out.into_bytes()
}

fn sample(i: usize) -> Sample {
    let mut s = Sample::failed(Outcome::Ok, Some(200), "");
    s.error = None;
    let ttft = Duration::from_micros(20_000 + (i as u64 * 7919) % 5000);
    s.ttft = Some(ttft);
    s.inter_token = (0..63)
        .map(|j| Duration::from_micros(9_000 + ((i * 31 + j) as u64 * 104_729) % 3000))
        .collect();
    s.latency = Some(ttft + s.inter_token.iter().sum::<Duration>());
    s.output_tokens = 64;
    s.content_chunks = 64;
    s.prompt_tokens = Some(31);
    s.token_source = TokenSource::Usage;
    s.finish_reason_seen = true;
    s
}

/// A completed sweep of one target with every level measured.
pub fn report(target: usize) -> SweepReport {
    let slo = Slo {
        p95_latency: Duration::from_secs(30),
        max_shed_ratio: 0.05,
        max_error_ratio: 0.05,
    };
    let workloads = (0..WORKLOADS)
        .map(|w| {
            let levels: Vec<_> = LEVELS
                .iter()
                .map(|&c| {
                    let samples: Vec<Sample> = (0..8).map(|i| sample(i + c as usize + w)).collect();
                    stats::summarize_level(c, &samples, Duration::from_secs(2), &slo)
                })
                .collect();
            let capacity = knee::capacity(&levels, 0.9, None);
            WorkloadReport {
                workload: format!("workload-{w}"),
                levels,
                skipped_levels: Vec::new(),
                carried_levels: Vec::new(),
                capacity,
            }
        })
        .collect();
    SweepReport {
        setup_error: None,
        server_metrics: Default::default(),
        target: format!("worker-{target:03}"),
        kind: Default::default(),
        model: "Qwen/Qwen2.5-7B-Instruct".into(),
        success: true,
        error: None,
        duration_seconds: 312.5,
        finished_at_unix_seconds: 1_718_000_000.0,
        setup: Default::default(),
        output_limit: Default::default(),
        workloads,
    }
}

/// Metrics holding the results of [`TARGETS`] targets, their running
/// totals (one request observed per workload) and their info series.
pub fn big_metrics() -> Metrics {
    let metrics = Metrics::new(&prometheus::Registry::new()).expect("metrics register");
    let one = sample(1);
    for t in 0..TARGETS {
        let r = report(t);
        for w in &r.workloads {
            metrics.observe_request(&r.target, &r.model, &w.workload, &one);
        }
        metrics.set_target_info(
            &r.target,
            &[
                ("model".into(), r.model.clone()),
                ("gpu".into(), "L40S".into()),
                ("driver".into(), "550.54".into()),
                ("datacenter".into(), "par-2".into()),
            ],
        );
        metrics.publish_sweep(&r);
    }
    metrics
}
