//! The simulated engine served on 127.0.0.1:0 and measured with a small
//! streaming client: response format, shedding, faults, and the timing of the
//! performance model against its own predictions.
//!
//! Timing tests run one at a time (a global lock) on a two-worker runtime, so
//! that they do not compete with each other for the CPU; every tolerance is
//! justified where it is set.

mod support;

use std::future::Future;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use futures_util::StreamExt;
use llmprobe::sim::count_tokens;
use serde_json::{json, Value};
use support::sim::{profile, SimServer};

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs one test body alone, on a fresh two-worker runtime.
fn run<F: Future<Output = ()>>(test: F) {
    let _alone = SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
        .block_on(test);
}

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(Duration::from_secs(30))
        .build()
        .unwrap()
}

/// A prompt of exactly `tokens` tokens under the 4-characters rule.
fn prompt(tokens: usize) -> String {
    "abcd".repeat(tokens)
}

fn chat_body(prompt: &str, max_tokens: u32) -> Value {
    json!({
        "model": "any-model",
        "messages": [{"role": "user", "content": prompt}],
        "max_completion_tokens": max_tokens,
        "temperature": 0,
        "stream": true,
        "stream_options": {"include_usage": true},
    })
}

async fn post(client: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    client
        .post(format!("{url}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap())
        .send()
        .await
        .unwrap()
}

/// What a streaming client saw: each SSE event with the time its bytes arrived.
struct Streamed {
    status: u16,
    sent: Instant,
    events: Vec<(Instant, String)>,
    /// The body ended with an error (connection cut) instead of cleanly.
    broken: bool,
}

impl Streamed {
    fn is_content(event: &str) -> bool {
        event.contains(r#""delta":{"content":""#)
    }

    fn content_times(&self) -> Vec<Instant> {
        self.events
            .iter()
            .filter(|(_, e)| Self::is_content(e))
            .map(|(t, _)| *t)
            .collect()
    }

    fn ttft(&self) -> Duration {
        self.content_times()[0] - self.sent
    }

    fn latency(&self) -> Duration {
        *self.content_times().last().unwrap() - self.sent
    }

    /// (output tokens - 1) / (latency - TTFT), as llmprobe defines it.
    fn generation_speed(&self) -> f64 {
        let n = self.content_times().len() as f64;
        (n - 1.0) / (self.latency() - self.ttft()).as_secs_f64()
    }

    fn done(&self) -> bool {
        self.events.last().is_some_and(|(_, e)| e == "[DONE]")
    }

    fn json(&self) -> Vec<Value> {
        self.events
            .iter()
            .filter(|(_, e)| e != "[DONE]")
            .map(|(_, e)| serde_json::from_str(e).unwrap())
            .collect()
    }
}

/// Sends one streaming request and reads it to the end. Content chunks are
/// recognised by a substring, not parsed, to keep the client cheap while 256
/// streams run.
async fn stream(client: &reqwest::Client, url: &str, body: &Value) -> Streamed {
    let sent = Instant::now();
    let response = post(client, url, body).await;
    let status = response.status().as_u16();
    let mut bytes = response.bytes_stream();
    let mut buf: Vec<u8> = Vec::new();
    let mut events = Vec::new();
    let mut broken = false;
    while let Some(item) = bytes.next().await {
        let Ok(chunk) = item else {
            broken = true;
            break;
        };
        let now = Instant::now();
        buf.extend_from_slice(&chunk);
        while let Some(end) = buf.windows(2).position(|w| w == b"\n\n") {
            let event: Vec<u8> = buf.drain(..end + 2).collect();
            let text = String::from_utf8(event).unwrap();
            let data = text.trim_end().strip_prefix("data: ").unwrap_or(&text);
            events.push((now, data.to_string()));
        }
    }
    Streamed {
        status,
        sent,
        events,
        broken,
    }
}

fn median(mut values: Vec<Duration>) -> Duration {
    values.sort();
    values[values.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[test]
fn stream_format_matches_openai() {
    run(async {
        for engine in ["tiny", "stub"] {
            let server = SimServer::start(profile(engine)).await;
            let client = client();
            let text = "Hello, simulator! How fast are you today?";
            let s = stream(&client, &server.url(), &chat_body(text, 7)).await;
            assert_eq!(s.status, 200);
            assert!(s.done() && !s.broken, "{engine}: stream ends with [DONE]");
            let chunks = s.json();
            assert_eq!(chunks.len(), 1 + 7 + 1, "{engine}: role, 7 tokens, usage");
            for c in &chunks {
                assert_eq!(c["object"], "chat.completion.chunk");
                assert_eq!(c["model"], "any-model", "any model name is echoed");
                assert!(c["id"].as_str().unwrap().starts_with("chatcmpl-"));
                assert!(c["created"].as_u64().unwrap() > 1_600_000_000);
            }
            let delta = &chunks[0]["choices"][0]["delta"];
            assert_eq!(
                (delta["role"].as_str(), delta["content"].as_str()),
                (Some("assistant"), Some(""))
            );
            let mut content = String::new();
            for (i, c) in chunks[1..8].iter().enumerate() {
                let choice = &c["choices"][0];
                let token = choice["delta"]["content"].as_str().unwrap();
                assert_eq!(count_tokens(token), 1, "one token per chunk");
                content.push_str(token);
                let finish = if i == 6 { json!("length") } else { Value::Null };
                assert_eq!(choice["finish_reason"], finish);
            }
            let usage = &chunks[8];
            assert_eq!(usage["choices"], json!([]));
            assert_eq!(usage["usage"]["completion_tokens"], 7);
            assert_eq!(usage["usage"]["prompt_tokens"], count_tokens(text));
            assert_eq!(usage["usage"]["total_tokens"], count_tokens(text) + 7);

            // Deterministic: the same request gives the same text.
            let again = stream(&client, &server.url(), &chat_body(text, 7)).await;
            let again: String = again.json()[1..8]
                .iter()
                .map(|c| {
                    c["choices"][0]["delta"]["content"]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect();
            assert_eq!(again, content);

            // max_tokens is honoured without max_completion_tokens; no usage unless asked.
            let body = json!({"model": "m", "messages": [{"role": "user", "content": "hi"}],
                              "max_tokens": 5, "stream": true});
            let s = stream(&client, &server.url(), &body).await;
            let chunks = s.json();
            assert_eq!(chunks.len(), 1 + 5);
            assert!(chunks.iter().all(|c| c.get("usage").is_none()));
            assert!(s.done());

            // Non-streaming.
            let body = json!({"model": "m", "messages": [{"role": "user", "content": text}],
                              "max_completion_tokens": 9});
            let response = post(&client, &server.url(), &body).await;
            assert_eq!(response.status(), 200);
            let v: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            assert_eq!(v["object"], "chat.completion");
            assert_eq!(v["choices"][0]["message"]["role"], "assistant");
            assert_eq!(v["choices"][0]["finish_reason"], "length");
            let content = v["choices"][0]["message"]["content"].as_str().unwrap();
            assert_eq!(count_tokens(content), 9);
            assert_eq!(v["usage"]["completion_tokens"], 9);
            assert_eq!(v["usage"]["prompt_tokens"], count_tokens(text));

            // Bad requests: 400 with an OpenAI-style error naming the field.
            for (body, param) in [
                (json!({"model": "m"}), json!("messages")),
                (
                    json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 0}),
                    json!("max_tokens"),
                ),
                (
                    json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 1_000_000}),
                    json!("messages"),
                ),
            ] {
                let response = post(&client, &server.url(), &body).await;
                assert_eq!(response.status(), 400);
                let v: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
                assert_eq!(v["error"]["type"], "invalid_request_error");
                assert_eq!(v["error"]["param"], param);
                assert!(!v["error"]["message"].as_str().unwrap().is_empty());
            }
            let response = client
                .post(format!("{}/v1/chat/completions", server.url()))
                .body("{not json")
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 400);

            // Discovery endpoints.
            let response = client
                .get(format!("{}/v1/models", server.url()))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            assert!(response.headers()["server"]
                .to_str()
                .unwrap()
                .starts_with("llmprobe-sim/"));
            let v: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
            assert_eq!(v["object"], "list");
            assert_eq!(v["data"][0]["id"], profile(engine).model_name);
            assert_eq!(v["data"][0]["object"], "model");
            let response = client
                .get(format!("{}/health", server.url()))
                .send()
                .await
                .unwrap();
            assert_eq!(response.status(), 200);
            server.stop().await;
        }
    });
}

#[test]
fn a_reasoning_model_thinks_first_in_the_field_asked_for() {
    run(async {
        for (field, name) in [
            (None, "reasoning"),
            (
                Some(llmprobe::config::simulator::ReasoningField::ReasoningContent),
                "reasoning_content",
            ),
        ] {
            for engine in ["tiny", "stub"] {
                let mut params = profile(engine);
                params.reasoning_tokens = 6;
                if let Some(f) = field {
                    params.reasoning_field = f;
                }
                let server = SimServer::start(params).await;
                let client = client();
                let got = stream(&client, &server.url(), &chat_body("hello", 16)).await;
                assert!(got.done(), "{engine}");
                let chunks = got.json();
                let with = |key: &str| -> Vec<usize> {
                    chunks
                        .iter()
                        .enumerate()
                        .filter(|(_, c)| {
                            c["choices"][0]["delta"][key]
                                .as_str()
                                .is_some_and(|t| !t.is_empty())
                        })
                        .map(|(i, _)| i)
                        .collect()
                };
                let thinking = with(name);
                let answer = with("content");
                assert_eq!((thinking.len(), answer.len()), (6, 10), "{engine} {name}");
                assert!(thinking.last() < answer.first(), "thinking comes first");
                let usage = &chunks.last().unwrap()["usage"];
                assert_eq!(usage["completion_tokens"], 16, "both count");

                // A limit within the thinking gets no answer at all.
                let cut = stream(&client, &server.url(), &chat_body("hello", 4)).await;
                let chunks = cut.json();
                let answered = chunks.iter().any(|c| {
                    c["choices"][0]["delta"]["content"]
                        .as_str()
                        .is_some_and(|t| !t.is_empty())
                });
                assert!(!answered, "{engine}: 4 of 6 thinking tokens, no answer");
                server.stop().await;
            }
        }
    });
}

#[test]
fn sheds_above_max_in_flight_and_frees_slots() {
    run(async {
        let mut params = profile("tiny");
        params.max_batch = 2;
        params.max_in_flight = 4;
        let server = SimServer::start(params).await;
        let client = client();
        // 4 long requests: 2 running, 2 queued; all admitted once headers arrive.
        let mut open = Vec::new();
        for _ in 0..4 {
            let response = post(&client, &server.url(), &chat_body("x", 2000)).await;
            assert_eq!(response.status(), 200);
            open.push(response);
        }
        let response = post(&client, &server.url(), &chat_body("x", 4)).await;
        assert_eq!(response.status(), 503);
        assert_eq!(response.headers()["retry-after"], "1");
        let v: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
        assert_eq!(v["error"]["type"], "server_error");

        // A client that disconnects frees its slot (the server notices at its
        // next write, within a step).
        drop(open.pop());
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let response = post(&client, &server.url(), &chat_body("x", 1)).await;
            if response.status() == 200 {
                break;
            }
            assert_eq!(response.status(), 503);
            assert!(Instant::now() < deadline, "slot never freed");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        drop(open);
        server.stop().await;

        // Closed loop at exactly max_in_flight: a request leaves the count
        // before [DONE], so the next one sent at once is never shed.
        let mut params = profile("tiny");
        params.max_in_flight = 3;
        let server = SimServer::start(params).await;
        let clients: Vec<_> = (0..3)
            .map(|_| {
                let (client, url) = (client.clone(), server.url());
                tokio::spawn(async move {
                    for _ in 0..10 {
                        let s = stream(&client, &url, &chat_body("x", 3)).await;
                        assert_eq!(s.status, 200, "closed loop shed spuriously");
                        assert!(s.done());
                    }
                })
            })
            .collect();
        for c in clients {
            c.await.unwrap();
        }
        server.stop().await;
    });
}

#[test]
fn ttft_grows_with_prompt_length_as_predicted() {
    run(async {
        let mut params = profile("tiny");
        params.step_base = Duration::from_millis(5);
        params.step_per_sequence = Duration::from_millis(1);
        params.prefill_tokens_per_second = 20_000.0;
        params.max_model_len = 8192;
        // Each prompt is sent three times: with the prefix cache on, the
        // repeats would skip their prefill (tests/real_servers.rs shows it).
        params.prefix_cache_tokens = 0;
        let server = SimServer::start(params.clone()).await;
        let client = client();
        let mut medians = Vec::new();
        for tokens in [10u64, 1000, 4000] {
            let body = chat_body(&prompt(tokens as usize), 4);
            let mut ttfts = Vec::new();
            for _ in 0..3 {
                ttfts.push(stream(&client, &server.url(), &body).await.ttft());
            }
            let measured = median(ttfts);
            let predicted = params.predicted_ttft(1, tokens);
            // Sequential requests are the closed loop at concurrency 1, except
            // that a request arriving at a random moment waits for the idle step
            // clock's next tick (up to one step_base less than predicted), and
            // the client's turnaround is subtracted too. Above: timer wake-ups
            // (1 ms resolution) and a debug-build client on a shared 2-core
            // machine, a few ms.
            let low = predicted - params.step_base - Duration::from_millis(2);
            let high = predicted + Duration::from_millis(15);
            assert!(
                measured >= low && measured <= high,
                "prompt {tokens}: TTFT {:.1} ms, predicted {:.1} ms",
                ms(measured),
                ms(predicted)
            );
            medians.push(measured);
        }
        // 4000 tokens at 20,000 tok/s prefill: 200 ms more than 10 tokens.
        let growth = medians[2].saturating_sub(medians[0]);
        assert!(
            (180.0..225.0).contains(&ms(growth)),
            "TTFT grew {:.1} ms",
            ms(growth)
        );
        assert!(medians[0] < medians[1] && medians[1] < medians[2]);
        server.stop().await;
    });
}

/// One closed-loop level: `concurrency` clients, each sending `rounds`
/// requests back to back. Returns every stream and the level's wall time.
async fn level(
    url: &str,
    body: &Value,
    concurrency: usize,
    rounds: usize,
) -> (Vec<Vec<Streamed>>, Duration) {
    let client = client();
    let begin = Instant::now();
    let tasks: Vec<_> = (0..concurrency)
        .map(|_| {
            let (client, url, body) = (client.clone(), url.to_string(), body.clone());
            tokio::spawn(async move {
                let mut results = Vec::new();
                for _ in 0..rounds {
                    results.push(stream(&client, &url, &body).await);
                }
                results
            })
        })
        .collect();
    let mut per_client = Vec::new();
    for task in tasks {
        per_client.push(task.await.unwrap());
    }
    (per_client, begin.elapsed())
}

#[test]
fn speed_falls_and_throughput_flattens_at_the_memory_cap() {
    run(async {
        let mut params = profile("tiny");
        params.step_base = Duration::from_millis(10);
        params.step_per_sequence = Duration::from_millis(4);
        params.prefill_tokens_per_second = 1_000_000.0;
        params.max_batch = 64;
        params.max_in_flight = 64;
        // 10 prompt + 16 output tokens reserve 26: a 104-token cache holds 4.
        params.kv_cache_tokens = Some(104);
        let (p, n) = (10u64, 16u32);
        assert_eq!(params.effective_batch(p, u64::from(n)), 4);
        let server = SimServer::start(params.clone()).await;
        let body = chat_body(&prompt(p as usize), n);

        let mut throughput = Vec::new();
        let mut speed = Vec::new();
        let mut latency = Vec::new();
        for c in [1usize, 2, 4, 8] {
            let (streams, wall) = level(&server.url(), &body, c, 3).await;
            let all: Vec<&Streamed> = streams.iter().flatten().collect();
            assert!(all.iter().all(|s| s.status == 200 && s.done()));
            let tokens = all.len() as f64 * f64::from(n);
            throughput.push(tokens / wall.as_secs_f64());
            let mut speeds: Vec<f64> = all.iter().map(|s| s.generation_speed()).collect();
            speeds.sort_by(f64::total_cmp);
            speed.push(speeds[speeds.len() / 2]);
            latency.push(median(all.iter().map(|s| s.latency()).collect()));
        }
        let table: Vec<String> = (0..4)
            .map(|i| {
                format!(
                    "c={}: {:.0} tok/s total, {:.1} tok/s per request, {:.0} ms",
                    1 << i,
                    throughput[i],
                    speed[i],
                    ms(latency[i])
                )
            })
            .collect();
        let table = table.join("\n");
        println!("{table}");

        for (i, c) in [1u32, 2, 4].into_iter().enumerate() {
            // Generation speed is one token per step: gaps between tokens are
            // whole steps, each ending on an absolute deadline; 10% covers
            // late wake-ups (<= 1 ms of a 14-26 ms step).
            let predicted_speed = 1.0 / params.step_duration(c).as_secs_f64();
            assert!(
                (speed[i] / predicted_speed - 1.0).abs() < 0.10,
                "speed at c={c}\n{table}"
            );
            // Latency: within one step_base below (first request of each client
            // arrives at a random tick) and 10% above (timers, debug client).
            let predicted = params.predicted_latency(c, p, u64::from(n));
            assert!(
                latency[i] >= predicted - params.step_base - Duration::from_millis(2)
                    && latency[i] <= predicted.mul_f64(1.10),
                "latency at c={c}: predicted {:.0} ms\n{table}",
                ms(predicted)
            );
            // Throughput over the level's wall time: 3 rounds of the predicted
            // latency, plus up to one step waiting for the first tick.
            let predicted_tp = f64::from(c * n) / predicted.as_secs_f64();
            assert!(
                (throughput[i] / predicted_tp - 1.0).abs() < 0.15,
                "throughput at c={c}: predicted {predicted_tp:.0}\n{table}"
            );
        }
        // Per-request speed falls, aggregate throughput rises...
        assert!(speed[0] > speed[1] && speed[1] > speed[2], "{table}");
        assert!(
            throughput[1] > 1.3 * throughput[0] && throughput[2] > 1.2 * throughput[1],
            "{table}"
        );
        // ...then flattens above the memory cap of 4: the batch stays at 4 (speed
        // stays at step(4)), requests queue (latency about doubles), and
        // throughput gains only the wait step that queued requests skip
        // (16 -> 17 steps per 16 tokens, +6%).
        let cap_speed = 1.0 / params.step_duration(4).as_secs_f64();
        assert!((speed[3] / cap_speed - 1.0).abs() < 0.10, "{table}");
        assert!(
            throughput[3] < 1.15 * throughput[2] && throughput[3] > 0.9 * throughput[2],
            "{table}"
        );
        assert!(latency[3] > latency[2].mul_f64(1.6), "{table}");
        server.stop().await;
    });
}

#[test]
fn latency_at_256_streams_matches_prediction() {
    run(async {
        let mut params = profile("tiny");
        params.step_base = Duration::from_millis(20);
        params.step_per_sequence = Duration::from_micros(100);
        params.prefill_tokens_per_second = 1_000_000.0;
        params.max_batch = 256;
        params.max_in_flight = 256;
        let (c, p, n) = (256u32, 10u64, 16u32);
        let server = SimServer::start(params.clone()).await;
        let body = chat_body(&prompt(p as usize), n);
        let (streams, _) = level(&server.url(), &body, c as usize, 3).await;
        assert!(streams
            .iter()
            .flatten()
            .all(|s| s.status == 200 && s.done()));
        // The middle request of each client: every other client is active
        // during it (the first ones include connection set-up, and during the
        // last ones clients start to leave the batch).
        let middle: Vec<Duration> = streams.iter().map(|s| s[1].latency()).collect();
        let predicted = params.predicted_latency(c, p, u64::from(n));
        let measured = median(middle.clone());
        let mut sorted = middle.clone();
        sorted.sort();
        let p90 = sorted[sorted.len() * 9 / 10];
        let worst = sorted[sorted.len() - 1];
        println!(
            "256 streams: median {:.0} ms, p90 {:.0} ms, worst {:.0} ms, predicted {:.0} ms",
            ms(measured),
            ms(p90),
            ms(worst),
            ms(predicted)
        );
        // Below: a client's own turnaround between two requests (a few ms).
        // Above: each of the 17 steps ends on an absolute deadline, so late
        // wake-ups (1 ms timer resolution, 256 writes per step on 2 cores) do
        // not add up; a client whose next request misses the step it should
        // join waits one more step (46 ms, 6%). Measured alone, the median is
        // within 2% and the worst within 8%; the bounds are wider because a
        // machine shared with compilers can starve the client or the server
        // for a few steps (seen: the slowest tenth of requests 20% late, and
        // 30% late with a load average of 10 on the 2 cores). The median is
        // the timing claim; the p90 bound only catches a collapse.
        assert!(
            (ms(measured) / ms(predicted) - 1.0).abs() < 0.10,
            "median {:.0} ms vs predicted {:.0} ms",
            ms(measured),
            ms(predicted)
        );
        assert!(p90 < predicted.mul_f64(1.6), "p90 {:.0} ms", ms(p90));
        server.stop().await;
    });
}

#[test]
fn stub_answers_in_a_fraction_of_a_millisecond() {
    run(async {
        let server = SimServer::start(profile("stub")).await;
        let client = client();
        let body = chat_body("Summarise the benefits of a private AI server.", 16);
        let mut latencies = Vec::new();
        for _ in 0..200 {
            let s = stream(&client, &server.url(), &body).await;
            assert!(s.done() && s.content_times().len() == 16);
            latencies.push(s.latency());
        }
        let m = median(latencies);
        println!("stub median latency: {:.3} ms", ms(m));
        // Release builds answer in about 0.1 ms; 2 ms leaves room for debug
        // builds on a busy machine.
        assert!(m < Duration::from_millis(2), "median {:.3} ms", ms(m));
        server.stop().await;
    });
}

/// Streamed tokens per second through the stub engine on loopback. Meant for
/// release builds: `cargo test --release --test sim_engine -- --ignored --nocapture`.
#[test]
#[ignore = "benchmark; run in release"]
fn stub_streamed_tokens_per_second() {
    run(async {
        let server = SimServer::start(profile("stub")).await;
        let body = chat_body("Summarise the benefits of a private AI server.", 256);
        let client = client();
        let begin = Instant::now();
        let tasks: Vec<_> = (0..8)
            .map(|_| {
                let (client, url, body) = (client.clone(), server.url(), body.clone());
                tokio::spawn(async move {
                    let mut tokens = 0usize;
                    let until = Instant::now() + Duration::from_secs(3);
                    while Instant::now() < until {
                        let response = post(&client, &url, &body).await;
                        let bytes = response.bytes().await.unwrap();
                        tokens += bytes
                            .windows(20)
                            .filter(|w| w == br#""delta":{"content":""#)
                            .count();
                    }
                    tokens
                })
            })
            .collect();
        let mut tokens = 0;
        for t in tasks {
            tokens += t.await.unwrap();
        }
        let rate = tokens as f64 / begin.elapsed().as_secs_f64();
        println!("stub: {rate:.0} streamed tokens/s (8 clients, 256 tokens per request)");
        server.stop().await;
    });
}

#[test]
fn fault_injection() {
    run(async {
        for engine in ["tiny", "stub"] {
            let client = client();
            let mut params = profile(engine);
            params.fail_ratio = 1.0;
            params.fail_status = 500;
            let server = SimServer::start(params).await;
            for _ in 0..5 {
                let response = post(&client, &server.url(), &chat_body("x", 4)).await;
                assert_eq!(response.status(), 500);
                let v: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
                assert!(v["error"]["message"].is_string());
            }
            server.stop().await;

            let mut params = profile(engine);
            params.reset_ratio = 1.0;
            let server = SimServer::start(params).await;
            for _ in 0..5 {
                let s = stream(&client, &server.url(), &chat_body("x", 10)).await;
                assert_eq!(s.status, 200);
                assert!(s.broken, "{engine}: connection cut");
                assert!(!s.done(), "{engine}: no [DONE]");
                assert_eq!(s.content_times().len(), 3, "{engine}: cut after 3 tokens");
            }
            let body = json!({"messages": [{"role": "user", "content": "x"}], "max_tokens": 10});
            // The connection is cut before the response completes: the client
            // sees a failed request or a failed body, depending on whether the
            // headers had left.
            let sent = client
                .post(format!("{}/v1/chat/completions", server.url()))
                .header("content-type", "application/json")
                .body(body.to_string())
                .send()
                .await;
            let cut = match sent {
                Err(_) => true,
                Ok(response) => response.bytes().await.is_err(),
            };
            assert!(cut, "{engine}: non-streaming response cut");
            server.stop().await;
        }
    });
}

#[test]
fn shutdown_cuts_streams_in_flight() {
    run(async {
        let server = SimServer::start(profile("small-gpu")).await;
        let client = client();
        let url = server.url();
        let reader =
            tokio::spawn(async move { stream(&client, &url, &chat_body("x", 4000)).await });
        tokio::time::sleep(Duration::from_millis(200)).await;
        server.stop().await;
        let s = reader.await.unwrap();
        assert!(s.broken && !s.done());
    });
}
