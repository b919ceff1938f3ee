//! `api: completions`, the second endpoint kind, end to end: against the
//! built-in simulator, and against a hand-written server whose every byte
//! the test chooses (TTFT, output tokens from usage and from counted text
//! chunks, a 503, a cut stream); and a target's request options
//! (`top_p`, `extra_body`) reaching the server verbatim.

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use llmprobe::stats::report::{LevelSummary, SweepReport};
use serde_json::{json, Value};
use support::config::Yaml;
use support::raw::{self, response, DONE, SSE_HEAD};
use support::sweep::sweep_one;

/// A `text_completion` chunk carrying `text`.
fn text(text: &str) -> String {
    format!("data: {{\"id\":\"cmpl-1\",\"object\":\"text_completion\",\"choices\":[{{\"index\":0,\"text\":\"{text}\",\"logprobs\":null,\"finish_reason\":null}}]}}\n\n")
}

/// The last chunk of llama.cpp's stream: no text, the finish reason.
fn finish() -> String {
    "data: {\"object\":\"text_completion\",\"choices\":[{\"index\":0,\"text\":\"\",\"finish_reason\":\"length\"}]}\n\n".into()
}

/// The usage chunk with empty `choices`, as vLLM sends it.
fn usage(completion_tokens: u32) -> String {
    format!("data: {{\"object\":\"text_completion\",\"choices\":[],\"usage\":{{\"prompt_tokens\":3,\"completion_tokens\":{completion_tokens}}}}}\n\n")
}

/// A one-target configuration of `api: completions` against `base_url`.
fn config(base_url: &str, more: &str) -> String {
    Yaml {
        rest: &format!(
            "targets:\n  - name: t\n    base_url: {base_url}\n    model: m\n    api: completions\n{more}"
        ),
        ..Default::default()
    }
    .render()
}

/// The first level of the one workload.
fn level(r: &SweepReport) -> &LevelSummary {
    &r.workloads[0].levels[0]
}

/// What a raw server received: the heads and bodies of its POSTs.
type Seen = Arc<Mutex<Vec<(String, Value)>>>;

/// A server answering every POST with `answer`, after `delay`; GETs
/// (setup discovery) get a 404.
async fn server(answer: String, delay: Duration, cut: bool) -> (raw::RawServer, Seen) {
    let seen: Seen = Default::default();
    let log = seen.clone();
    let answer = Arc::new(answer);
    let srv = raw::start(move |mut c| {
        let (log, answer) = (log.clone(), answer.clone());
        async move {
            let Some((head, body)) = c.read_request_and_body().await else {
                return;
            };
            if !head.starts_with("POST ") {
                c.write(response("404 Not Found", &[], "")).await;
                return;
            }
            let body = serde_json::from_slice(&body).unwrap_or(Value::Null);
            log.lock().unwrap().push((head, body));
            // The head first, then the answer after the delay: TTFT
            // includes the wait, time to the first byte does not.
            let (head, rest) = answer.split_at(SSE_HEAD.len().min(answer.len()));
            c.write(head).await;
            tokio::time::sleep(delay).await;
            c.write(rest).await;
            if cut {
                c.reset();
            }
        }
    })
    .await;
    (srv, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_on_the_simulator_measure_as_chat_does() {
    let sim = |api: &str| {
        Yaml {
            levels: "[1, 2]",
            rest: &format!(
                "targets:\n  - name: sim\n    simulator: {{ profile: tiny }}\n    api: {api}\n"
            ),
            ..Default::default()
        }
        .render()
    };
    let r = sweep_one(&sim("completions")).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(r.output_limit.field, "max_tokens");
    let l = level(&r);
    assert_eq!(l.outcomes.get("ok"), Some(&4), "{:?}", l.error_examples);
    assert_eq!((l.output_tokens, l.token_source), (4 * 8, "usage"));
    assert!(l.ttft_seconds.p50.unwrap() > 0.0);
    assert_eq!(l.inter_token_latency_seconds.count, 4 * 7);
    // The prompt as the server counted it: the marker, then the text.
    let marked = llmprobe::sim::count_tokens(&format!("{}hello", llmprobe::probe::body::marker(0)));
    assert_eq!(l.prompt_tokens, 4 * marked);
    assert_eq!(r.workloads[0].levels.len(), 2);
    // Chat on the same engine counts the same tokens.
    let chat = sweep_one(&sim("chat")).await;
    assert_eq!(chat.output_limit.field, "max_completion_tokens");
    assert_eq!(level(&chat).output_tokens, l.output_tokens);
    assert_eq!(level(&chat).prompt_tokens, l.prompt_tokens);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_tokens_from_usage_and_ttft_from_the_first_text() {
    let stream = format!(
        "{SSE_HEAD}{}{}{}{}{}{DONE}",
        text("a"),
        text("b"),
        text("c"),
        finish(),
        usage(7)
    );
    let delay = Duration::from_millis(150);
    let (srv, seen) = server(stream, delay, false).await;
    let r = sweep_one(&config(
        &srv.base_url(),
        "    max_tokens_field: max_tokens\n",
    ))
    .await;
    let l = level(&r);
    assert_eq!(l.outcomes.get("ok"), Some(&4), "{:?}", l.error_examples);
    // The server's count wins over the three text chunks.
    assert_eq!((l.output_tokens, l.token_source), (4 * 7, "usage"));
    assert!(l.ttft_seconds.p50.unwrap() >= delay.as_secs_f64());
    assert_eq!(l.inter_token_latency_seconds.count, 4 * 2);
    let seen = seen.lock().unwrap();
    let (head, body) = &seen[0];
    assert!(head.starts_with("POST /v1/completions "), "{head}");
    assert_eq!(body["model"], "m");
    assert_eq!(body["stream"], true);
    assert_eq!(body["max_tokens"], 8);
    assert!(
        body["prompt"].as_str().unwrap().ends_with("hello"),
        "{body}"
    );
    assert!(body.get("messages").is_none() && body.get("max_completion_tokens").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_tokens_counted_from_text_chunks_without_usage() {
    let stream = format!("{SSE_HEAD}{}{}{}{DONE}", text("a"), text("b"), finish());
    let (srv, _seen) = server(stream, Duration::ZERO, false).await;
    // The output-limit field is checked at warm-up: `max_tokens` holds.
    let r = sweep_one(&config(&srv.base_url(), "")).await;
    assert!(r.success, "{:?}", r.error);
    assert_eq!(
        (
            r.output_limit.field.as_str(),
            r.output_limit.source.as_str()
        ),
        ("max_tokens", "default")
    );
    let l = level(&r);
    assert_eq!(l.outcomes.get("ok"), Some(&4), "{:?}", l.error_examples);
    // Two texts each; the empty one that carries the finish is not output.
    assert_eq!((l.output_tokens, l.token_source), (4 * 2, "chunks"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn completions_503_is_shed_and_a_cut_stream_a_protocol_error() {
    let busy = response(
        "503 Service Unavailable",
        &[("content-type", "application/json")],
        r#"{"error":{"message":"busy"}}"#,
    );
    let (srv, _seen) = server(busy, Duration::ZERO, false).await;
    // Every request of the level, not only those before it is certain to break.
    let more = "    max_tokens_field: max_tokens\n    early_stop: false\n";
    let r = sweep_one(&config(&srv.base_url(), more)).await;
    assert_eq!(level(&r).outcomes.get("shed"), Some(&4));
    assert_eq!(level(&r).shed_ratio, 1.0);

    let cut = format!("{SSE_HEAD}{}{}", text("a"), text("b"));
    let (srv, _seen) = server(cut, Duration::ZERO, true).await;
    let r = sweep_one(&config(&srv.base_url(), more)).await;
    let l = level(&r);
    assert_eq!(l.outcomes.get("protocol_error"), Some(&4), "{l:#?}");
    let example = &l.error_examples["protocol_error"];
    assert!(example.contains("after 2 content chunks"), "{example}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn request_options_reach_the_server_verbatim_for_both_kinds() {
    let chat_stream = raw::good_stream(2);
    let options = "    top_p: 0.5\n    extra_body:\n      repetition_penalty: 1.1\n      \
                   ignore_eos: true\n      chat_template_kwargs: { enable_thinking: false }\n      \
                   stop: [\"\\n\\n\", \"END\"]\n";
    let expected = json!({
        "repetition_penalty": 1.1,
        "ignore_eos": true,
        "chat_template_kwargs": { "enable_thinking": false },
        "stop": ["\n\n", "END"],
    });
    for (api, answer, prompt_key) in [
        ("chat", format!("{SSE_HEAD}{chat_stream}"), "messages"),
        (
            "completions",
            format!("{SSE_HEAD}{}{}{DONE}", text("a"), finish()),
            "prompt",
        ),
    ] {
        let (srv, seen) = server(answer, Duration::ZERO, false).await;
        let yaml = config(&srv.base_url(), options).replace(
            "api: completions",
            &format!("api: {api}\n    max_tokens_field: max_tokens"),
        );
        let r = sweep_one(&yaml).await;
        assert_eq!(level(&r).outcomes.get("ok"), Some(&4), "{api}: {r:#?}");
        let seen = seen.lock().unwrap();
        for (_, body) in seen.iter() {
            for (key, value) in expected.as_object().unwrap() {
                assert_eq!(&body[key], value, "{api}: {key} in {body}");
            }
            assert_eq!(body["top_p"], 0.5, "{api}");
            assert_eq!(
                (&body["model"], &body["stream"]),
                (&json!("m"), &json!(true))
            );
            assert!(body.get(prompt_key).is_some(), "{api}: {body}");
        }
    }
}
