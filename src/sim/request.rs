//! Parsing and validating one chat-completions or completions request body
//! (no I/O), and the OpenAI-style error it may turn into.

use axum::http::StatusCode;
use serde::Deserialize;
use serde_json::Value;

use super::params::SimParams;
use super::text::{count_tokens, fold, mix};
use crate::config::simulator::ReasoningField;

/// What the engine needs to know about a valid request.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ChatRequest {
    /// Model name to echo back (the requested one, or ours when absent).
    pub model: String,
    /// Prompt size under the [`count_tokens`] rule, summed over messages.
    pub prompt_tokens: u64,
    /// Tokens to generate (the output always runs to this limit).
    pub max_tokens: u32,
    /// Server-sent events instead of one JSON body.
    pub stream: bool,
    /// `stream_options.include_usage`: a final usage chunk.
    pub include_usage: bool,
    /// Seed of this request's text: same seed and request, same text.
    pub text_seed: u64,
    /// Hashes of the prompt's full blocks, for the prefix cache.
    pub prefix_blocks: Vec<u64>,
    /// Prompt tokens served from the prefix cache (set when admitted).
    pub cached_tokens: u64,
    /// The first this many output tokens are thinking, not answer (the
    /// model's reasoning length, cut to the output limit as servers do).
    pub reasoning_tokens: u32,
    /// The delta field the thinking is streamed in.
    pub reasoning_field: ReasoningField,
    /// Sent to `/v1/completions`: answered with `text_completion` chunks.
    pub completions: bool,
}

/// An error answered as OpenAI does: `{"error": {message, type, param, code}}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// Human-readable message.
    pub message: String,
    /// OpenAI error type (`invalid_request_error`, `server_error`...).
    pub kind: &'static str,
    /// The request field at fault, if any.
    pub param: Option<&'static str>,
    /// Machine-readable code, if any.
    pub code: Option<&'static str>,
}

impl ApiError {
    /// A 400 about one request field.
    pub(crate) fn invalid(param: Option<&'static str>, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            message: message.into(),
            kind: "invalid_request_error",
            param,
            code: None,
        }
    }

    /// The JSON body.
    pub(crate) fn body(&self) -> Value {
        serde_json::json!({
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        })
    }
}

// Lenient on purpose: clients send many fields (temperature, top_p, tools...)
// that the simulator ignores, so unknown keys are accepted.
#[derive(Deserialize)]
struct RawRequest {
    #[serde(default)]
    model: Option<String>,
    #[serde(default)]
    messages: Option<Vec<RawMessage>>,
    /// `/v1/completions`: a string, or an array holding one.
    #[serde(default)]
    prompt: Option<Value>,
    #[serde(default)]
    stream: Option<bool>,
    #[serde(default)]
    stream_options: Option<RawStreamOptions>,
    #[serde(default)]
    max_tokens: Option<u64>,
    #[serde(default)]
    max_completion_tokens: Option<u64>,
    #[serde(default)]
    n: Option<u64>,
}

#[derive(Deserialize)]
struct RawMessage {
    #[serde(default)]
    role: Option<String>,
    #[serde(default)]
    content: Option<Value>,
}

#[derive(Deserialize)]
struct RawStreamOptions {
    #[serde(default)]
    include_usage: Option<bool>,
}

/// Checks a request body against the OpenAI schema (leniently) and the model's
/// context window.
pub(crate) fn parse(body: &[u8], params: &SimParams) -> Result<ChatRequest, ApiError> {
    parse_for(body, params, false)
}

/// Checks a `/v1/completions` body: as [`parse`], with `prompt` (one string,
/// or an array of one) read as a single user message.
pub(crate) fn parse_completions(body: &[u8], params: &SimParams) -> Result<ChatRequest, ApiError> {
    parse_for(body, params, true)
}

fn parse_for(body: &[u8], params: &SimParams, completions: bool) -> Result<ChatRequest, ApiError> {
    let mut raw: RawRequest = serde_json::from_slice(body)
        .map_err(|e| ApiError::invalid(None, format!("invalid request body: {e}")))?;
    if completions {
        let text = match raw.prompt.take() {
            Some(Value::String(s)) => s,
            Some(Value::Array(mut list)) if list.len() == 1 && list[0].is_string() => list
                .pop()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            Some(_) => {
                return Err(ApiError::invalid(
                    Some("prompt"),
                    "prompt: only a string (or an array of one) is supported",
                ))
            }
            None => return Err(ApiError::invalid(Some("prompt"), "prompt: required")),
        };
        raw.messages = Some(vec![RawMessage {
            role: Some("user".into()),
            content: Some(Value::String(text)),
        }]);
    }
    let messages = raw
        .messages
        .ok_or_else(|| ApiError::invalid(Some("messages"), "messages: required"))?;
    if messages.is_empty() {
        return Err(ApiError::invalid(
            Some("messages"),
            "messages: must hold at least one message",
        ));
    }
    if raw.n.is_some_and(|n| n != 1) {
        return Err(ApiError::invalid(Some("n"), "n: only 1 is supported"));
    }
    let mut prompt_tokens = 0u64;
    let mut text_seed = params.seed;
    // Role and text of every message in order, as the engine's KV cache sees them.
    let mut prompt = Vec::new();
    for message in &messages {
        let text = content_text(message.content.as_ref()).ok_or_else(|| {
            ApiError::invalid(
                Some("messages"),
                "messages: content must be a string, an array of parts, or null",
            )
        })?;
        prompt_tokens = prompt_tokens.saturating_add(count_tokens(&text));
        text_seed = fold(text_seed, message.role.as_deref().unwrap_or("").as_bytes());
        text_seed = fold(text_seed, text.as_bytes());
        prompt.extend_from_slice(message.role.as_deref().unwrap_or("").as_bytes());
        prompt.push(0);
        prompt.extend_from_slice(text.as_bytes());
        prompt.push(0);
    }
    // The memory limit acts as a context limit too: a sequence larger than the
    // whole cache could never be admitted, so it is refused at once.
    let context = params
        .max_model_len
        .min(params.kv_cache_tokens.unwrap_or(u64::MAX));
    let (param, requested) = match (raw.max_completion_tokens, raw.max_tokens) {
        (Some(n), _) => ("max_completion_tokens", Some(n)),
        (None, Some(n)) => ("max_tokens", Some(n)),
        (None, None) => ("max_completion_tokens", None),
    };
    let max_tokens = match requested {
        Some(0) => {
            return Err(ApiError::invalid(
                Some(param),
                format!("{param}: must be at least 1"),
            ))
        }
        Some(n) => n,
        None => u64::from(params.default_max_tokens).min(context.saturating_sub(prompt_tokens)),
    };
    let total = prompt_tokens.saturating_add(max_tokens);
    if max_tokens == 0 || total > context {
        return Err(ApiError::invalid(
            Some("messages"),
            format!(
                "This model's maximum context length is {context} tokens. However, you requested \
                 {total} tokens ({prompt_tokens} in the messages, {max_tokens} in the completion). \
                 Please reduce the length of the messages or completion."
            ),
        ));
    }
    // context <= 10M (checked when resolving), so this cannot fail.
    let max_tokens = u32::try_from(max_tokens).unwrap_or(u32::MAX);
    let stream = raw.stream.unwrap_or(false);
    Ok(ChatRequest {
        model: raw.model.unwrap_or_else(|| params.model_name.clone()),
        prompt_tokens,
        max_tokens,
        stream,
        include_usage: stream
            && raw
                .stream_options
                .and_then(|o| o.include_usage)
                .unwrap_or(false),
        text_seed: mix(text_seed, u64::from(max_tokens)),
        prefix_blocks: if params.prefix_cache_tokens > 0 {
            super::prefix_cache::block_hashes(&prompt)
        } else {
            Vec::new()
        },
        cached_tokens: 0,
        // A completion is one text: no thinking apart from the answer.
        reasoning_tokens: if completions {
            0
        } else {
            params.reasoning_tokens.min(max_tokens)
        },
        reasoning_field: params.reasoning_field,
        completions,
    })
}

/// The text of a message: a string, the `text` of every part of an array
/// (images and other parts count as nothing), or nothing for null.
fn content_text(content: Option<&Value>) -> Option<String> {
    match content {
        None | Some(Value::Null) => Some(String::new()),
        Some(Value::String(s)) => Some(s.clone()),
        Some(Value::Array(parts)) => Some(
            parts
                .iter()
                .filter_map(|part| part.get("text").and_then(Value::as_str))
                .collect(),
        ),
        Some(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::SimConfig;

    fn params() -> SimParams {
        SimConfig {
            profile: "tiny".into(),
            ..SimConfig::default()
        }
        .resolve()
        .unwrap()
    }

    fn parse_str(body: &str) -> Result<ChatRequest, ApiError> {
        parse(body.as_bytes(), &params())
    }

    #[test]
    fn reads_limits_in_openai_order() {
        let msg = r#""messages":[{"role":"user","content":"hello world!"}]"#;
        let r = parse_str(&format!(
            r#"{{"model":"x",{msg},"max_tokens":5,"max_completion_tokens":7}}"#
        ))
        .unwrap();
        assert_eq!(
            (r.max_tokens, r.prompt_tokens, r.model.as_str()),
            (7, 3, "x")
        );
        let r = parse_str(&format!(
            r#"{{{msg},"max_tokens":5,"stream":true,"stream_options":{{"include_usage":true}}}}"#
        ))
        .unwrap();
        assert_eq!((r.max_tokens, r.stream, r.include_usage), (5, true, true));
        assert_eq!(r.model, "sim-tiny");
        let r = parse_str(&format!("{{{msg}}}")).unwrap();
        assert_eq!(r.max_tokens, 32);
    }

    #[test]
    fn a_completions_prompt_is_one_user_message() {
        let params = params();
        let r = parse_completions(br#"{"prompt":"hello world!","max_tokens":5}"#, &params).unwrap();
        assert_eq!((r.prompt_tokens, r.max_tokens, r.completions), (3, 5, true));
        let chat =
            parse_str(r#"{"messages":[{"role":"user","content":"hello world!"}],"max_tokens":5}"#)
                .unwrap();
        assert_eq!(r.text_seed, chat.text_seed);
        assert!(parse_completions(br#"{"prompt":["a"]}"#, &params).is_ok());
        for body in [r#"{"prompt":["a","b"]}"#, r#"{"prompt":5}"#, "{}"] {
            let err = parse_completions(body.as_bytes(), &params).unwrap_err();
            assert_eq!(err.param, Some("prompt"), "{body}");
        }
    }

    #[test]
    fn counts_parts_and_sums_messages() {
        let body = r#"{"messages":[{"role":"system","content":"abcde"},
            {"role":"user","content":[{"type":"text","text":"abcd"},{"type":"image_url","image_url":{}}]},
            {"role":"assistant","content":null}]}"#;
        assert_eq!(parse_str(body).unwrap().prompt_tokens, 3);
    }

    #[test]
    fn same_request_same_seed() {
        let a = r#"{"messages":[{"role":"user","content":"a"}],"max_tokens":4}"#;
        let b = r#"{"messages":[{"role":"user","content":"b"}],"max_tokens":4}"#;
        assert_eq!(
            parse_str(a).unwrap().text_seed,
            parse_str(a).unwrap().text_seed
        );
        assert_ne!(
            parse_str(a).unwrap().text_seed,
            parse_str(b).unwrap().text_seed
        );
    }

    #[test]
    fn bad_requests_are_400_naming_the_field() {
        for (body, param) in [
            ("not json", None),
            ("{}", Some("messages")),
            (r#"{"messages":[]}"#, Some("messages")),
            (r#"{"messages":[{"content":5}]}"#, Some("messages")),
            (
                r#"{"messages":[{"content":"a"}],"max_tokens":0}"#,
                Some("max_tokens"),
            ),
            (r#"{"messages":[{"content":"a"}],"max_tokens":-1}"#, None),
            (
                r#"{"messages":[{"content":"a"}],"max_tokens":4096}"#,
                Some("messages"),
            ),
            (r#"{"messages":[{"content":"a"}],"n":2}"#, Some("n")),
            (r#"{"messages":"a"}"#, None),
        ] {
            let err = parse_str(body).unwrap_err();
            assert_eq!(err.status, StatusCode::BAD_REQUEST, "{body}");
            assert_eq!(err.param, param, "{body}");
        }
    }
}
