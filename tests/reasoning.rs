//! Reasoning models: a server that streams its thinking first
//! (`delta.reasoning` as current vLLM, `delta.reasoning_content` as older
//! vLLM, SGLang and DeepSeek) and answers after it. Each sweep runs levels 1
//! and 4 against a hand-written server whose every byte the test chooses,
//! with a pause between the thinking and the answer: the answer TTFT must be
//! at least that pause after the TTFT (a lower bound only: nothing here
//! asserts on speed), the reasoning tokens exactly what was streamed or
//! reported, and `setup` must name the field the server used. A server that
//! does not reason gives an answer TTFT equal to its TTFT; a tool call after
//! the thinking is an answer; a usage report's `reasoning_tokens` wins over
//! counting; the built-in simulator reasons when asked.

mod support;

use std::sync::Arc;
use std::time::Duration;

use llmprobe::stats::report::{LevelSummary, SweepReport};
use support::config::Yaml;
use support::raw::{self, RawServer, DONE, SSE_HEAD};
use support::sweep::sweep_one;

/// The pause between the last thinking chunk and the first answer chunk.
const THINK: Duration = Duration::from_millis(150);

/// What the server streams for each chat request.
#[derive(Clone)]
struct Answer {
    /// Delta fields the thinking is written in (none: no thinking).
    fields: &'static [&'static str],
    /// Thinking chunks before the pause.
    thinking: u32,
    /// Answer chunks after it: content, or a tool call's argument pieces.
    answer: u32,
    /// The answer is a tool call instead of content.
    tool_call: bool,
    /// `usage.completion_tokens_details.reasoning_tokens`, when sent.
    usage_reasoning: Option<u32>,
}

impl Answer {
    fn thinking_in(fields: &'static [&'static str]) -> Answer {
        Answer {
            fields,
            thinking: 6,
            answer: 10,
            tool_call: false,
            usage_reasoning: None,
        }
    }
}

fn event(delta: &str, finish: &str) -> String {
    format!(
        "data: {{\"choices\":[{{\"index\":0,\"delta\":{delta},\"finish_reason\":{finish}}}]}}\n\n"
    )
}

/// A server that answers every chat request as `answer` says (and 404 to
/// the setup discovery's GETs).
async fn server(answer: Answer) -> RawServer {
    let answer = Arc::new(answer);
    raw::start(move |mut conn| {
        let a = answer.clone();
        async move {
            let Some(head) = conn.read_request().await else {
                return;
            };
            if !head.starts_with("POST ") {
                conn.write(raw::response("404 Not Found", &[], "")).await;
                return;
            }
            conn.write(SSE_HEAD).await;
            conn.write(event(r#"{"role":"assistant","content":""}"#, "null"))
                .await;
            for _ in 0..a.thinking {
                let parts: Vec<String> = a.fields.iter().map(|f| format!("\"{f}\":\"hmm\"")).collect();
                conn.write(event(&format!("{{{}}}", parts.join(",")), "null"))
                    .await;
            }
            if a.thinking > 0 {
                tokio::time::sleep(THINK).await;
            }
            for i in 0..a.answer {
                let delta = if a.tool_call {
                    let head = if i == 0 {
                        r#""id":"call_1","type":"function","function":{"name":"lookup","arguments":"{"}"#
                    } else {
                        r#""function":{"arguments":"x"}"#
                    };
                    format!(r#"{{"tool_calls":[{{"index":0,{head}}}]}}"#)
                } else {
                    r#"{"content":" ok"}"#.to_string()
                };
                conn.write(event(&delta, "null")).await;
            }
            let finish = if a.tool_call { "tool_calls" } else { "stop" };
            conn.write(event("{}", &format!("\"{finish}\""))).await;
            let details = a
                .usage_reasoning
                .map(|n| format!(",\"completion_tokens_details\":{{\"reasoning_tokens\":{n}}}"))
                .unwrap_or_default();
            // The reported reasoning is part of the completion tokens.
            conn.write(format!(
                "data: {{\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{}{details}}}}}\n\n",
                a.usage_reasoning.unwrap_or(a.thinking) + a.answer
            ))
            .await;
            conn.write(DONE).await;
        }
    })
    .await
}

/// One sweep at concurrency 1 and 4 against `server`.
async fn sweep(server: &RawServer) -> SweepReport {
    let yaml = Yaml {
        levels: "[1, 4]",
        max_completion_tokens: 64,
        rest: &format!(
            "targets:\n  - name: thinker\n    base_url: {}\n    model: qwen3\n",
            server.base_url()
        ),
        ..Yaml::default()
    }
    .render();
    let report = sweep_one(&yaml).await;
    assert!(report.success, "{:?}", report.error);
    report
}

fn levels(report: &SweepReport) -> &[LevelSummary] {
    let levels = &report.workloads[0].levels;
    let concurrency: Vec<u32> = levels.iter().map(|l| l.concurrency).collect();
    assert_eq!(concurrency, [1, 4], "both levels measured");
    levels
}

/// Every request of the level answered, no earlier than its first token and
/// than `THINK` after it was sent (the server wrote the answer that late;
/// so each order statistic is too). Lower bounds only: a client that read
/// late may see the thinking and the answer in one read, at one instant.
fn answered_after_thinking(l: &LevelSummary) {
    let (t, a) = (&l.ttft_seconds, &l.answer_ttft_seconds);
    let ok = l.count(llmprobe::stats::sample::Outcome::Ok) as usize;
    assert_eq!((t.count, a.count), (ok, ok), "c={}", l.concurrency);
    for (ttft, answer) in [(t.p50, a.p50), (t.p95, a.p95), (t.p99, a.p99)] {
        let (ttft, answer) = (ttft.unwrap(), answer.unwrap());
        assert!(
            answer >= ttft && answer >= THINK.as_secs_f64(),
            "c={}: answer TTFT {answer} should be at least TTFT {ttft} and {THINK:?}",
            l.concurrency
        );
    }
    assert_eq!(l.requests_without_answer, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_in_delta_reasoning_then_the_answer() {
    let s = server(Answer::thinking_in(&["reasoning"])).await;
    let report = sweep(&s).await;
    assert_eq!(report.setup.reasoning_field, "reasoning");
    for l in levels(&report) {
        answered_after_thinking(l);
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert_eq!(l.reasoning_tokens, 6 * ok, "c={}", l.concurrency);
        assert_eq!(l.reasoning_token_source, "chunks");
        assert_eq!(l.output_tokens, 16 * ok, "usage counts both");
    }
    let table = llmprobe::faces::text::table(&[report]);
    assert!(table.contains("ans p50"), "{table}");
    assert!(
        table.contains("reasoning: 6 tokens per completed request"),
        "{table}"
    );
    assert!(
        table.contains("reasoning streamed in delta.reasoning"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_in_delta_reasoning_content_then_the_answer() {
    let s = server(Answer::thinking_in(&["reasoning_content"])).await;
    let report = sweep(&s).await;
    assert_eq!(report.setup.reasoning_field, "reasoning_content");
    for l in levels(&report) {
        answered_after_thinking(l);
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert_eq!(l.reasoning_tokens, 6 * ok, "c={}", l.concurrency);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_names_at_once_count_once_and_are_both_recorded() {
    // vLLM sent the thinking under both names while it renamed the field.
    let s = server(Answer::thinking_in(&["reasoning", "reasoning_content"])).await;
    let report = sweep(&s).await;
    assert_eq!(report.setup.reasoning_field, "reasoning, reasoning_content");
    for l in levels(&report) {
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert_eq!(l.reasoning_tokens, 6 * ok);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_that_does_not_reason_answers_at_its_first_token() {
    let s = server(Answer {
        thinking: 0,
        ..Answer::thinking_in(&[])
    })
    .await;
    let report = sweep(&s).await;
    assert_eq!(report.setup.reasoning_field, "");
    for l in levels(&report) {
        assert!(l.ttft_seconds.count > 0);
        assert_eq!(l.answer_ttft_seconds, l.ttft_seconds, "c={}", l.concurrency);
        assert_eq!(
            (l.reasoning_tokens, l.reasoning_token_source),
            (0, "chunks")
        );
    }
    let table = llmprobe::faces::text::table(&[report]);
    assert!(!table.contains("ans p50"), "no doubled columns: {table}");
    assert!(
        table.contains("answer TTFT: equal to TTFT (no reasoning was streamed)"),
        "{table}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_after_the_thinking_is_the_answer() {
    let s = server(Answer {
        tool_call: true,
        answer: 3,
        ..Answer::thinking_in(&["reasoning"])
    })
    .await;
    let report = sweep(&s).await;
    for l in levels(&report) {
        answered_after_thinking(l);
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert_eq!(l.reasoning_tokens, 6 * ok);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_usage_reports_reasoning_tokens_they_win_over_counting() {
    // 6 chunks of thinking streamed, 40 tokens reported: chunks may carry
    // several tokens, or some thinking may not be streamed at all.
    let s = server(Answer {
        usage_reasoning: Some(40),
        ..Answer::thinking_in(&["reasoning"])
    })
    .await;
    let report = sweep(&s).await;
    for l in levels(&report) {
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert_eq!(l.reasoning_tokens, 40 * ok, "c={}", l.concurrency);
        assert_eq!(l.reasoning_token_source, "usage");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_until_the_limit_gets_no_answer_and_says_so() {
    let s = server(Answer {
        answer: 0,
        ..Answer::thinking_in(&["reasoning"])
    })
    .await;
    let report = sweep(&s).await;
    for l in levels(&report) {
        let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
        assert!(ok > 0);
        assert_eq!(l.answer_ttft_seconds.count, 0);
        assert_eq!(l.requests_without_answer, ok);
    }
    let table = llmprobe::faces::text::table(&[report]);
    assert!(table.contains("never answered"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_simulator_reasons_when_asked_under_either_name() {
    for (field, name) in [
        ("", "reasoning"),
        (", reasoning_field: reasoning_content", "reasoning_content"),
    ] {
        let yaml = Yaml {
            levels: "[1, 4]",
            max_completion_tokens: 16,
            rest: &format!(
                "targets:\n  - name: sim\n    simulator: {{ profile: tiny, reasoning_tokens: 6{field} }}\n"
            ),
            ..Yaml::default()
        }
        .render();
        let report = sweep_one(&yaml).await;
        assert!(report.success, "{:?}", report.error);
        assert_eq!(report.setup.reasoning_field, name);
        for l in levels(&report) {
            let ok = l.count(llmprobe::stats::sample::Outcome::Ok);
            assert_eq!(l.reasoning_tokens, 6 * ok, "{name} c={}", l.concurrency);
            assert_eq!(l.output_tokens, 16 * ok);
            // The answer is the 7th token: at least seven decode steps of at
            // least step_base (4 ms) after the send, and after the first.
            let (t, a) = (
                l.ttft_seconds.p50.unwrap(),
                l.answer_ttft_seconds.p50.unwrap(),
            );
            assert!(
                a >= t && a >= 0.028,
                "{name} c={}: {a} vs {t}",
                l.concurrency
            );
        }
    }
}
