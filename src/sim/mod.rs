//! The built-in simulated engine: an OpenAI-compatible chat-completions and
//! completions server with a realistic, fully predictable performance model.
//!
//! It serves three purposes: new users see real numbers with no GPU
//! (`llmprobe simulate`, and the shipped default config), tests get a server
//! whose capacity is known in advance ([`SimParams::predicted_latency`]), and
//! the stub engine measures gateway overhead (no model time at all).
//!
//! # HTTP API
//!
//! - `POST /v1/chat/completions`, streaming (`stream: true`; with
//!   `stream_options.include_usage` a final chunk with `choices: []` and
//!   `usage`, then `data: [DONE]`) or not (one `chat.completion` with usage).
//!   The first chunk carries `role: "assistant"` and empty content and is sent
//!   at once, before the first token; each later chunk carries one token; the
//!   last content chunk has `finish_reason: "length"`: the output always runs
//!   to `max_completion_tokens`, else `max_tokens`, else `default_max_tokens`
//!   (clipped to the context window), like vLLM with `ignore_eos`.
//!   `temperature` and other sampling fields are ignored; the text is a
//!   deterministic function of the seed and the request (messages and limit).
//!   Any `model` name is accepted and echoed back, so one simulator can stand in
//!   for any target's model. Bad requests get 400 with an OpenAI-style error
//!   (`{"error": {"message", "type", "param", "code"}}`), as does a prompt +
//!   limit over the context window (`max_model_len`, or the KV cache if smaller).
//!   With `reasoning_tokens: N` the model reasons first, as Qwen3 or
//!   DeepSeek-R1 behind vLLM do: the first N output tokens (at most the
//!   limit, which they count toward, so a limit of N or less gets no answer)
//!   stream in `delta.reasoning` (current vLLM), or `delta.reasoning_content`
//!   with `reasoning_field: reasoning_content` (older vLLM, SGLang, DeepSeek),
//!   and the answer follows in `delta.content`. `usage.completion_tokens`
//!   counts both; like vLLM, no `completion_tokens_details` is sent. The
//!   timing is the same as without reasoning: a thinking token costs a decode
//!   step like any other.
//! - `POST /v1/completions`: the same engine for a `prompt` string (or an
//!   array of one), read as one user message; the stream is of
//!   `text_completion` chunks (`choices[0].text`, no reasoning), opened by
//!   an SSE comment where chat sends its role chunk, with the same usage
//!   chunk and `[DONE]`; the output limit is `max_tokens`.
//! - `GET /v1/models`: the OpenAI list with `model_name` (and `max_model_len`).
//! - `GET /health` (200), `GET /version`; every response has
//!   `Server: llmprobe-sim/VERSION`.
//! - `GET /metrics`: the engine's figures under vLLM's names
//!   (`vllm:num_requests_running`, `vllm:num_requests_waiting`,
//!   `vllm:kv_cache_usage_perc` with `kv_cache_tokens` set,
//!   `vllm:num_preemptions_total`, `vllm:prefix_cache_queries_total` and
//!   `_hits_total`), labelled by `model_name`.
//!
//! Tokens are counted with [`count_tokens`] (4 characters per token, rounded
//! up) on each message's text, summed over messages; every generated token is
//! 4 characters, so the output re-counts to exactly `completion_tokens`.
//!
//! # Performance model (engine `model`)
//!
//! Continuous batching, as in vLLM without chunked prefill. One scheduler task
//! runs decode steps back to back; a step with `b` running sequences lasts
//! `step_base + b x step_per_sequence`, plus the prefill of the sequences that
//! join in that step (`prompt_tokens / prefill_tokens_per_second` each), and at
//! its end every running sequence gets one token. So a sequence's first token
//! comes at the end of the step it joins, and a long prompt stalls every
//! running stream for its prefill, as on a real GPU.
//!
//! - **Joining**: a request waits for the end of the running step before it can
//!   join. An idle engine keeps its step clock (empty steps of `step_base`), so
//!   a request arriving at an idle engine also waits for the next tick. This
//!   makes every closed-loop request see the same number of steps, whatever
//!   the concurrency, which is what makes the predictions exact.
//! - **Batch cap**: at most `max_batch` sequences run at once; with
//!   `kv_cache_tokens` set, each running sequence reserves
//!   `prompt_tokens + max_tokens` of it and joins only while the sum fits
//!   ([`SimParams::effective_batch`]). Small caches cap the batch below
//!   `max_batch`: the "model does not fit" case where throughput stops growing
//!   early. Waiting requests join first come, first served.
//! - **Shedding**: requests admitted and not finished (running + waiting) are
//!   limited to `max_in_flight`; one more gets 503 at once with `Retry-After: 1`
//!   and an OpenAI-style error, as a gateway shedding load answers. A request
//!   leaves the count when its last token is produced, before the usage chunk
//!   and `[DONE]` are written, so a closed-loop client that sends its next
//!   request at once is not shed spuriously. A client that disconnects frees
//!   its place in the queue or batch (at the next step) and its count.
//! - **Prefix cache**: as vLLM's automatic prefix caching, a prompt (role and
//!   text of each message in order) is cut into blocks of 64 bytes (16
//!   tokens), each named by a hash of everything up to its end; the leading
//!   blocks of an admitted request that are cached skip their prefill (at
//!   least the last prompt token is always computed), and the final usage
//!   reports them as `prompt_tokens_details.cached_tokens`. The cache holds
//!   `prefix_cache_tokens` tokens (65,536 in the model profiles, none in
//!   `stub`; 0 turns it off), least recently used out. llmprobe's default
//!   unique marker makes every prompt new, so the predictions below hold;
//!   a workload with `prefix_cache: shared` sees the cache.
//! - **Timing**: steps end on absolute deadlines (`sleep_until`), so a late
//!   timer wake-up (tokio's timer has 1 ms resolution) delays one token, never
//!   the ones after it.
//!
//! Closed loop with `c <= effective_batch` requests of `P` prompt and `N`
//! output tokens in flight, each request's life spans `N + 1` steps (one spent
//! waiting to join, `N` in the batch), and within them every one of the `c`
//! requests is in the batch for `N` steps and joins once, so:
//!
//! ```text
//! latency = (N + 1) x step_base + N x c x step_per_sequence + c x P / prefill_rate
//! ttft    = 2 x step_base + c x step_per_sequence + c x P / prefill_rate
//! per-request generation speed = 1 / (step_base + c x step_per_sequence)
//! throughput = c x N / latency
//! ```
//!
//! These are [`SimParams::predicted_latency`] and [`SimParams::predicted_ttft`].
//! The latency holds whatever the phases of the clients; the TTFT assumes they
//! move together (as requests of one size started together do): the step they
//! wait in is empty and the step they join carries all `c` prefills.
//! Measured values are lower by the client's own turnaround between two
//! requests, and by up to one `step_base` for a request that arrives at a
//! random moment (it waits for the next tick, not a whole step); timer
//! wake-ups add up to about 1 ms. Above the cap, requests queue: latency grows
//! in whole generations while throughput stays at its value at the cap.
//!
//! # Engine `stub`
//!
//! No model time: the whole answer (role chunk, `N` token chunks, usage,
//! `[DONE]`) is built in one buffer and sent at once. It never sheds unless
//! `max_in_flight` is set explicitly, not even under a model profile (a request
//! counts only while its answer is built).
//!
//! # Fault injection
//!
//! Deterministic from `seed`: the n-th request to arrive meets the same fate
//! for a given seed. `fail_ratio` of requests get `fail_status` at once (after
//! request validation, before shedding); `reset_ratio` of the others have their
//! connection aborted after at most 3 content tokens (always fewer than asked),
//! without `finish_reason` or `[DONE]`.
//!
//! # Profiles
//!
//! Single-stream speed is `1 / step(1)`; the batch figures are at `max_batch`
//! (per stream `1 / step(b)`, aggregate `b / step(b)`, before prefill).
//!
//! | profile | step_base | step_per_sequence | prefill tok/s | max_batch | kv_cache_tokens | max_in_flight | max_model_len | default_max_tokens | single stream | at max_batch (per stream / total) |
//! |---|---|---|---|---|---|---|---|---|---|---|
//! | `tiny` | 4 ms | 0.5 ms | 50,000 | 4 | none | 8 | 4096 | 32 | 222 tok/s | 167 / 667 tok/s |
//! | `small-gpu` (7B, 24 GB) | 22 ms | 1.5 ms | 4,000 | 16 | 12,288 | 32 | 8192 | 256 | 42.6 tok/s | 21.7 / 348 tok/s |
//! | `large-gpu` (70B fp8, 80 GB) | 32 ms | 0.4 ms | 6,000 | 64 | 40,960 | 96 | 32768 | 256 | 30.9 tok/s | 17.4 / 1111 tok/s |
//! | `stub` | 0 | 0 | - | no limit | none | no limit | 32768 | 16 | instant | instant |
//!
//! `small-gpu`'s cache holds 44 sequences of a short chat (about 20 + 256
//! tokens), so `max_batch` is its limit; with 2,000-token documents only 5 fit
//! and throughput stops growing at 5, as when a model barely fits in memory.
//! `tiny` queues above 4 and sheds above 8: a sweep over 1, 2, 4, 8, 16 with 32
//! output tokens takes a few seconds and shows its knee at 8.

mod args;
mod chunks;
mod faults;
mod gauges;
mod http;
mod model;
mod params;
mod prefix_cache;
mod request;
mod responses;
mod scheduler;
mod state;
mod stub;
mod text;

pub use crate::config::simulator::{profiles, SimConfig, DEFAULT_PROFILE};
pub use args::SimArgs;
pub use params::{Engine, SimParams};
pub use text::count_tokens;

use axum::serve::ListenerExt;
use tokio_util::sync::CancellationToken;

/// The simulated server's routes; its scheduler runs until the router is dropped.
pub fn router(params: SimParams) -> axum::Router {
    http::router(params, CancellationToken::new())
}

/// Serves the simulator on `listener` until `shutdown` fires; streams still in
/// flight are then cut, as when a real server stops.
pub async fn serve(
    listener: tokio::net::TcpListener,
    params: SimParams,
    shutdown: CancellationToken,
) -> std::io::Result<()> {
    tracing::info!(
        address = %listener.local_addr()?,
        engine = ?params.engine,
        model = %params.model_name,
        max_batch = params.max_batch,
        max_in_flight = params.max_in_flight,
        "simulated engine listening"
    );
    let app = http::router(params, shutdown.child_token());
    // One small write per token: Nagle's algorithm would hold tokens back.
    let listener = listener.tap_io(|tcp| {
        if let Err(err) = tcp.set_nodelay(true) {
            tracing::debug!("cannot set TCP_NODELAY: {err}");
        }
    });
    axum::serve(listener, app)
        .with_graceful_shutdown(shutdown.cancelled_owned())
        .await
}
