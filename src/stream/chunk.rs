//! Interprets the data of one SSE event as an OpenAI `chat.completion.chunk`.
//!
//! Only what the measurements need is extracted: whether the chunk carries
//! generated output (TTFT, latency, inter-token gaps), whether that output is
//! the answer or a reasoning model's thinking (answer TTFT, reasoning
//! tokens), the finish reason, the usage report and a mid-stream error. Parsing is zero-copy: text fields whose
//! value is not kept are only checked for emptiness, so a typical content
//! chunk allocates nothing beyond the `choices` vector.

use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, value::MapAccessDeserializer, Deserializer, IgnoredAny, Visitor};
use serde::Deserialize;

/// Longest server error message kept, in bytes. Kept whole up to this (not
/// cut to what a message shows): redaction runs on the finished message,
/// and a key it sees only in part could not be found.
pub const MAX_KEPT_BYTES: usize = 4096;

/// Ends a text cut short at [`MAX_KEPT_BYTES`]: redaction (`config/redact.rs`,
/// the same character) then also replaces a key's start right before it.
pub const CUT_MARK: char = '\u{2026}';

/// What one event's data says.
#[derive(Debug, Clone, PartialEq)]
pub enum Chunk {
    /// The literal `[DONE]` that ends an OpenAI stream.
    Done,
    /// A JSON chunk.
    Data(ChunkInfo),
}

/// The parts of a chunk that the measurements use.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ChunkInfo {
    /// Carries generated output: content, reasoning, tool calls or legacy text.
    pub generated: bool,
    /// Carries answer output: content, tool calls, a function call or legacy
    /// text (what a user waits for, after any thinking).
    pub answered: bool,
    /// Carries thinking in `delta.reasoning` (current vLLM).
    pub reasoning: bool,
    /// Carries thinking in `delta.reasoning_content` (older vLLM, SGLang,
    /// DeepSeek); vLLM sent both names for a while.
    pub reasoning_content: bool,
    /// The first non-empty `finish_reason` among the choices.
    pub finish_reason: Option<String>,
    /// The usage report, when this chunk holds a non-null one.
    pub usage: Option<Usage>,
    /// Message of an error the server sent mid-stream, as sent (at most
    /// [`MAX_KEPT_BYTES`], then [`CUT_MARK`]); not yet redacted.
    pub error: Option<String>,
}

/// Token counts as the server reported them.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Usage {
    /// `usage.prompt_tokens`.
    pub prompt_tokens: Option<u64>,
    /// `usage.completion_tokens`.
    pub completion_tokens: Option<u64>,
    /// `usage.prompt_tokens_details.cached_tokens`: prompt tokens the server
    /// served from its prefix cache.
    pub cached_prompt_tokens: Option<u64>,
    /// `usage.completion_tokens_details.reasoning_tokens`: the completion
    /// tokens that were thinking.
    pub reasoning_tokens: Option<u64>,
}

/// Why an event's data is not a chunk; messages quote at most
/// [`MAX_KEPT_BYTES`] of it (then [`CUT_MARK`]), not yet redacted.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    /// The data is not UTF-8, so it cannot be JSON.
    #[error("chunk is not valid UTF-8 (invalid byte at {valid_up_to})")]
    InvalidUtf8 {
        /// Length of the valid prefix.
        valid_up_to: usize,
    },
    /// The data is not well-formed JSON (including empty or truncated data).
    #[error("chunk is not valid JSON: {0}")]
    InvalidJson(String),
    /// The data is JSON, but not an object.
    #[error("chunk is JSON but not an object")]
    NotAnObject,
    /// A known field holds a value of the wrong type (e.g. `"content": 5`).
    #[error("chunk has an unexpected shape: {0}")]
    UnexpectedShape(String),
}

/// Interprets one event's data as `[DONE]` or a chat.completion.chunk.
pub fn interpret(data: &[u8]) -> Result<Chunk, ChunkError> {
    if data.trim_ascii() == b"[DONE]" {
        return Ok(Chunk::Done);
    }
    let text = std::str::from_utf8(data).map_err(|e| ChunkError::InvalidUtf8 {
        valid_up_to: e.valid_up_to(),
    })?;
    // Derived struct deserializers also accept a JSON array (as a tuple), so
    // the object check cannot be left to serde.
    if !text.trim_ascii_start().starts_with('{') {
        return Err(match serde_json::from_str::<IgnoredAny>(text) {
            Ok(_) => ChunkError::NotAnObject,
            Err(err) => json_error(&err),
        });
    }
    let raw: RawChunk = serde_json::from_str(text).map_err(|err| json_error(&err))?;

    let mut info = ChunkInfo {
        usage: raw.usage.map(|u| Usage {
            prompt_tokens: u.prompt_tokens,
            completion_tokens: u.completion_tokens,
            cached_prompt_tokens: u
                .prompt_tokens_details
                .and_then(|d| d.get("cached_tokens")?.as_u64()),
            reasoning_tokens: u
                .completion_tokens_details
                .and_then(|d| d.get("reasoning_tokens")?.as_u64()),
        }),
        error: raw.error.0,
        ..ChunkInfo::default()
    };
    if info.error.is_none() && raw.object.0 {
        // Older vLLM sends its ErrorResponse itself: {"object":"error","message":...}.
        info.error = Some(raw.message.0.unwrap_or_else(|| NO_MESSAGE.to_owned()));
    }
    for choice in raw.choices.unwrap_or_default() {
        let delta = choice.delta.unwrap_or_default();
        let answered =
            choice.text.0 || delta.content.0 || delta.tool_calls.0 || delta.function_call.is_some();
        info.answered |= answered;
        info.reasoning |= delta.reasoning.0;
        info.reasoning_content |= delta.reasoning_content.0;
        info.generated |= answered || delta.reasoning.0 || delta.reasoning_content.0;
        if info.finish_reason.is_none() {
            info.finish_reason = choice.finish_reason.filter(|r| !r.is_empty());
        }
    }
    Ok(Chunk::Data(info))
}

const NO_MESSAGE: &str = "error without a message";

#[derive(Deserialize)]
struct RawChunk {
    #[serde(default)]
    choices: Option<Vec<RawChoice>>,
    #[serde(default)]
    usage: Option<RawUsage>,
    #[serde(default)]
    error: ErrorField,
    #[serde(default)]
    object: ObjectIsError,
    #[serde(default)]
    message: LenientText,
}

#[derive(Deserialize)]
struct RawChoice {
    #[serde(default)]
    delta: Option<RawDelta>,
    /// Completions-style choices carry `text` instead of a delta.
    #[serde(default)]
    text: NonEmptyText,
    #[serde(default)]
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct RawDelta {
    #[serde(default)]
    content: NonEmptyText,
    /// Older vLLM, SGLang and DeepSeek name it `reasoning_content`, current
    /// vLLM `reasoning`.
    #[serde(default)]
    reasoning_content: NonEmptyText,
    #[serde(default)]
    reasoning: NonEmptyText,
    #[serde(default)]
    tool_calls: NonEmptyList,
    /// Deprecated OpenAI function calling streams its arguments here.
    #[serde(default)]
    function_call: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct RawUsage {
    #[serde(default)]
    prompt_tokens: Option<u64>,
    #[serde(default)]
    completion_tokens: Option<u64>,
    // Lenient: an optional detail of unexpected shape must not fail the chunk.
    #[serde(default)]
    prompt_tokens_details: Option<serde_json::Value>,
    #[serde(default)]
    completion_tokens_details: Option<serde_json::Value>,
}

/// Whether a text field is non-empty, without copying it. Accepts a string,
/// null, or an array of content parts (non-empty array counts as text).
#[derive(Default)]
struct NonEmptyText(bool);

impl<'de> Deserialize<'de> for NonEmptyText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string, an array of content parts or null")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<bool, E> {
                Ok(!v.is_empty())
            }
            fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
                drain_seq(seq)
            }
        }
        d.deserialize_any(V).map(NonEmptyText)
    }
}

/// Whether an array field has elements, without keeping them; null is empty.
#[derive(Default)]
struct NonEmptyList(bool);

impl<'de> Deserialize<'de> for NonEmptyList {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = bool;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array or null")
            }
            fn visit_unit<E: de::Error>(self) -> Result<bool, E> {
                Ok(false)
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<bool, A::Error> {
                drain_seq(seq)
            }
        }
        d.deserialize_any(V).map(NonEmptyList)
    }
}

/// Consumes a sequence; true when it had at least one element.
fn drain_seq<'de, A: de::SeqAccess<'de>>(mut seq: A) -> Result<bool, A::Error> {
    let non_empty = seq.next_element::<IgnoredAny>()?.is_some();
    while seq.next_element::<IgnoredAny>()?.is_some() {}
    Ok(non_empty)
}

/// Top-level `object == "error"`; any other value (or type) is not an error.
#[derive(Default)]
struct ObjectIsError(bool);

impl<'de> Deserialize<'de> for ObjectIsError {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrOrIgnore(|s: &str| s == "error", PhantomData))
            .map(ObjectIsError)
    }
}

/// A string, bounded for keeping; any other type reads as None.
#[derive(Default)]
struct LenientText(Option<String>);

impl<'de> Deserialize<'de> for LenientText {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrOrIgnore(|s: &str| Some(bounded(s)), PhantomData))
            .map(LenientText)
    }
}

/// Accepts any JSON value: strings go through the function, everything else
/// (consumed) gives the default. For fields that are not ours to validate.
struct StrOrIgnore<T, F>(F, PhantomData<T>);

impl<'de, T: Default, F: FnOnce(&str) -> T> Visitor<'de> for StrOrIgnore<T, F> {
    type Value = T;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any value")
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<T, E> {
        Ok((self.0)(v))
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_i64<E: de::Error>(self, _: i64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_u64<E: de::Error>(self, _: u64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_unit<E: de::Error>(self) -> Result<T, E> {
        Ok(T::default())
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<T, A::Error> {
        drain_seq(seq)?;
        Ok(T::default())
    }
    fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<T, A::Error> {
        IgnoredAny::deserialize(MapAccessDeserializer::new(map))?;
        Ok(T::default())
    }
}

/// The top-level `error`: a string, an object with `message`, or null. Any
/// other non-null value still says the stream failed, so it is never rejected.
#[derive(Default)]
struct ErrorField(Option<String>);

impl<'de> Deserialize<'de> for ErrorField {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct ErrorObject {
            #[serde(default)]
            message: LenientText,
        }
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Option<String>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an error string or object")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Some(bounded(v)))
            }
            fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
                Ok(None)
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<Self::Value, A::Error> {
                let object = ErrorObject::deserialize(MapAccessDeserializer::new(map))?;
                Ok(Some(
                    object.message.0.unwrap_or_else(|| NO_MESSAGE.to_owned()),
                ))
            }
            fn visit_bool<E: de::Error>(self, _: bool) -> Result<Self::Value, E> {
                Ok(Some(NO_MESSAGE.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, _: i64) -> Result<Self::Value, E> {
                Ok(Some(NO_MESSAGE.to_owned()))
            }
            fn visit_u64<E: de::Error>(self, _: u64) -> Result<Self::Value, E> {
                Ok(Some(NO_MESSAGE.to_owned()))
            }
            fn visit_f64<E: de::Error>(self, _: f64) -> Result<Self::Value, E> {
                Ok(Some(NO_MESSAGE.to_owned()))
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<Self::Value, A::Error> {
                drain_seq(seq)?;
                Ok(Some(NO_MESSAGE.to_owned()))
            }
        }
        d.deserialize_any(V).map(ErrorField)
    }
}

/// `s` whole up to [`MAX_KEPT_BYTES`], else its start up to there (at a
/// character boundary) and [`CUT_MARK`].
pub fn bounded(s: &str) -> String {
    if s.len() <= MAX_KEPT_BYTES {
        return s.to_owned();
    }
    let mut end = MAX_KEPT_BYTES;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut kept = String::with_capacity(end + CUT_MARK.len_utf8());
    kept.push_str(&s[..end]);
    kept.push(CUT_MARK);
    kept
}

/// serde_json quotes offending strings whole; keep the message bounded, and
/// the position, which is what one needs to find the problem.
fn json_error(err: &serde_json::Error) -> ChunkError {
    let full = err.to_string();
    let position = format!(" at line {} column {}", err.line(), err.column());
    let message = full.strip_suffix(&position).unwrap_or(&full);
    let short = format!("{}{position}", bounded(message));
    match err.classify() {
        serde_json::error::Category::Data => ChunkError::UnexpectedShape(short),
        _ => ChunkError::InvalidJson(short),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn info(data: &str) -> ChunkInfo {
        match interpret(data.as_bytes()) {
            Ok(Chunk::Data(info)) => info,
            other => panic!("expected data for {data}, got {other:?}"),
        }
    }

    fn choice(delta: &str, finish: &str) -> String {
        format!(
            r#"{{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1718000000,"model":"qwen2.5:7b","system_fingerprint":null,"choices":[{{"index":0,"delta":{delta},"logprobs":null,"finish_reason":{finish}}}],"usage":null}}"#
        )
    }

    #[test]
    fn role_only_first_chunk_is_not_generated() {
        assert_eq!(
            info(&choice(r#"{"role":"assistant"}"#, "null")),
            ChunkInfo::default()
        );
        assert!(!info(&choice(r#"{"role":"assistant","content":""}"#, "null")).generated);
    }

    #[test]
    fn content_chunk_is_generated() {
        let got = info(&choice(r#"{"content":" world"}"#, "null"));
        assert_eq!(
            got,
            ChunkInfo {
                generated: true,
                answered: true,
                ..ChunkInfo::default()
            }
        );
        // Escapes go through serde's scratch buffer, not an allocation.
        assert!(info(&choice(r#"{"content":"\n\u00e9"}"#, "null")).generated);
    }

    #[test]
    fn empty_or_null_content_is_not_generated() {
        assert!(!info(&choice(r#"{"content":""}"#, "null")).generated);
        assert!(!info(&choice(r#"{"content":null}"#, "null")).generated);
        assert!(!info(&choice("{}", "null")).generated);
        assert!(!info(&choice("null", "null")).generated);
    }

    #[test]
    fn reasoning_fields_are_generated() {
        assert!(
            info(&choice(
                r#"{"content":null,"reasoning_content":"Let"}"#,
                "null"
            ))
            .generated
        );
        assert!(info(&choice(r#"{"reasoning":"Hmm"}"#, "null")).generated);
        assert!(
            !info(&choice(
                r#"{"reasoning_content":"","reasoning":null}"#,
                "null"
            ))
            .generated
        );
    }

    #[test]
    fn thinking_is_not_the_answer_and_says_its_field() {
        let current = info(&choice(r#"{"reasoning":"Hmm"}"#, "null"));
        assert!(current.generated && current.reasoning && !current.answered);
        assert!(!current.reasoning_content);
        let older = info(&choice(
            r#"{"content":null,"reasoning_content":"Let"}"#,
            "null",
        ));
        assert!(older.generated && older.reasoning_content && !older.answered);
        assert!(!older.reasoning);
        // vLLM sent both names with the same text while it renamed the field.
        let both = info(&choice(
            r#"{"reasoning":"So","reasoning_content":"So"}"#,
            "null",
        ));
        assert!(both.reasoning && both.reasoning_content && !both.answered);
        // The answer after the thinking, and a tool call, are answers.
        let answer = info(&choice(r#"{"content":"Yes","reasoning":null}"#, "null"));
        assert!(answer.answered && !answer.reasoning);
        let call = r#"{"tool_calls":[{"index":0,"function":{"arguments":"{"}}]}"#;
        assert!(info(&choice(call, "null")).answered);
        assert!(info(r#"{"choices":[{"index":0,"text":"Hi"}]}"#).answered);
        assert!(!info(&choice(r#"{"role":"assistant","content":""}"#, "null")).answered);
    }

    #[test]
    fn reasoning_tokens_of_the_usage_are_read_leniently() {
        let usage = |details: &str| {
            info(&format!(
                r#"{{"choices":[],"usage":{{"completion_tokens":30,"completion_tokens_details":{details}}}}}"#
            ))
            .usage
            .unwrap()
            .reasoning_tokens
        };
        assert_eq!(
            usage(r#"{"reasoning_tokens":24,"audio_tokens":0}"#),
            Some(24)
        );
        assert_eq!(usage("null"), None);
        assert_eq!(usage(r#"{"reasoning_tokens":"many"}"#), None);
        assert_eq!(usage("[]"), None);
    }

    #[test]
    fn tool_calls_are_generated_when_non_empty() {
        let call = r#"{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"get_weather","arguments":""}}]}"#;
        assert!(info(&choice(call, "null")).generated);
        assert!(!info(&choice(r#"{"content":null,"tool_calls":[]}"#, "null")).generated);
        assert!(!info(&choice(r#"{"tool_calls":null}"#, "null")).generated);
        assert!(info(&choice(r#"{"function_call":{"arguments":"{\""}}"#, "null")).generated);
    }

    #[test]
    fn legacy_text_and_content_parts_are_generated() {
        assert!(info(r#"{"choices":[{"index":0,"text":"Hi","finish_reason":null}]}"#).generated);
        assert!(!info(r#"{"choices":[{"index":0,"text":"","finish_reason":null}]}"#).generated);
        assert!(
            info(&choice(
                r#"{"content":[{"type":"text","text":"Hi"}]}"#,
                "null"
            ))
            .generated
        );
        assert!(!info(&choice(r#"{"content":[]}"#, "null")).generated);
    }

    #[test]
    fn any_choice_with_content_makes_the_chunk_generated() {
        let got = info(
            r#"{"choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{"content":"x"},"finish_reason":null}]}"#,
        );
        assert!(got.generated);
        assert_eq!(got.finish_reason.as_deref(), Some("stop"));
    }

    #[test]
    fn finish_reason_with_usage_attached() {
        let data = r#"{"id":"x","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":"."},"finish_reason":"length"}],"usage":{"prompt_tokens":31,"completion_tokens":256,"total_tokens":287,"prompt_tokens_details":{"cached_tokens":0}}}"#;
        assert_eq!(
            info(data),
            ChunkInfo {
                generated: true,
                finish_reason: Some("length".into()),
                usage: Some(Usage {
                    prompt_tokens: Some(31),
                    completion_tokens: Some(256),
                    cached_prompt_tokens: Some(0),
                    reasoning_tokens: None,
                }),
                error: None,
                answered: true,
                ..ChunkInfo::default()
            }
        );
    }

    #[test]
    fn empty_finish_reason_is_none() {
        assert_eq!(info(&choice("{}", r#""""#)).finish_reason, None);
        assert_eq!(info(&choice("{}", "null")).finish_reason, None);
        assert_eq!(
            info(r#"{"choices":[{"delta":{}}]}"#).finish_reason,
            None,
            "absent"
        );
    }

    #[test]
    fn usage_only_final_chunk_with_empty_choices() {
        let data = r#"{"id":"chatcmpl-9","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":12,"total_tokens":40,"completion_tokens":28}}"#;
        assert_eq!(
            info(data),
            ChunkInfo {
                usage: Some(Usage {
                    prompt_tokens: Some(12),
                    completion_tokens: Some(28),
                    cached_prompt_tokens: None,
                    reasoning_tokens: None,
                }),
                ..ChunkInfo::default()
            }
        );
    }

    #[test]
    fn litellm_usage_chunk_with_empty_delta() {
        let data = r#"{"id":"chatcmpl-a","created":1,"model":"gpt","object":"chat.completion.chunk","choices":[{"index":0,"delta":{}}],"usage":{"completion_tokens":5,"prompt_tokens":7,"total_tokens":12,"completion_tokens_details":null}}"#;
        let got = info(data);
        assert!(!got.generated);
        assert_eq!(got.finish_reason, None);
        assert_eq!(
            got.usage,
            Some(Usage {
                prompt_tokens: Some(7),
                completion_tokens: Some(5),
                cached_prompt_tokens: None,
                reasoning_tokens: None,
            })
        );
    }

    #[test]
    fn usage_null_or_partial() {
        assert_eq!(info(&choice(r#"{"content":"a"}"#, "null")).usage, None);
        assert_eq!(
            info(r#"{"choices":[],"usage":{"completion_tokens":3}}"#).usage,
            Some(Usage {
                prompt_tokens: None,
                completion_tokens: Some(3),
                cached_prompt_tokens: None,
                reasoning_tokens: None,
            })
        );
    }

    #[test]
    fn cached_prompt_tokens_are_read_leniently() {
        let usage = |details: &str| {
            info(&format!(
                r#"{{"choices":[],"usage":{{"completion_tokens":3,"prompt_tokens_details":{details}}}}}"#
            ))
            .usage
            .unwrap()
            .cached_prompt_tokens
        };
        assert_eq!(usage(r#"{"cached_tokens":96}"#), Some(96));
        assert_eq!(usage("null"), None);
        assert_eq!(usage(r#""odd""#), None);
    }

    #[test]
    fn error_object_mid_stream() {
        let data = r#"{"error":{"object":"error","message":"The model ran out of KV cache","type":"InternalServerError","param":null,"code":500}}"#;
        assert_eq!(
            info(data).error.as_deref(),
            Some("The model ran out of KV cache")
        );
        assert_eq!(
            info(r#"{"error":{"code":500}}"#).error.as_deref(),
            Some(NO_MESSAGE)
        );
        assert_eq!(
            info(r#"{"error":{"message":{"nested":true}}}"#)
                .error
                .as_deref(),
            Some(NO_MESSAGE)
        );
    }

    #[test]
    fn error_as_string_is_kept_and_truncated() {
        assert_eq!(
            info(r#"{"error":"Input validation error","error_type":"validation"}"#)
                .error
                .as_deref(),
            Some("Input validation error")
        );
        // Kept whole up to the bound (redaction needs it whole), then cut
        // at a character boundary, with the mark.
        let long = "é".repeat(500);
        let got = info(&format!(r#"{{"error":"{long}"}}"#)).error.unwrap();
        assert_eq!(got, long);
        let longer = "é".repeat(3000);
        let got = info(&format!(r#"{{"error":"{longer}"}}"#)).error.unwrap();
        assert_eq!(got, format!("{}{CUT_MARK}", "é".repeat(MAX_KEPT_BYTES / 2)));
    }

    #[test]
    fn error_null_is_no_error_and_odd_error_values_still_count() {
        assert_eq!(info(&choice("{}", "null")).error, None);
        assert_eq!(info(r#"{"choices":[],"error":null}"#).error, None);
        assert_eq!(info(r#"{"error":true}"#).error.as_deref(), Some(NO_MESSAGE));
        assert_eq!(info(r#"{"error":[1]}"#).error.as_deref(), Some(NO_MESSAGE));
    }

    #[test]
    fn top_level_error_response_is_an_error() {
        let data = r#"{"object":"error","message":"max_tokens must be at least 1","type":"BadRequestError","param":null,"code":400}"#;
        assert_eq!(
            info(data).error.as_deref(),
            Some("max_tokens must be at least 1")
        );
        // A stray top-level `message` on a normal chunk is not an error.
        assert_eq!(
            info(r#"{"object":"chat.completion.chunk","message":{"a":1},"choices":[]}"#).error,
            None
        );
    }

    #[test]
    fn done_marker() {
        assert_eq!(interpret(b"[DONE]"), Ok(Chunk::Done));
        assert_eq!(interpret(b" [DONE]\r\n"), Ok(Chunk::Done));
        assert!(interpret(b"[DONE] x").is_err());
        assert!(interpret(b"[done]").is_err());
    }

    #[test]
    fn invalid_json_is_an_error_with_position() {
        let err = interpret(br#"{"choices":[{"delta":{"content":"a"}"#).unwrap_err();
        assert!(
            matches!(&err, ChunkError::InvalidJson(m) if m.starts_with("EOF while parsing") && m.ends_with("column 36")),
            "{err}"
        );
        assert!(matches!(interpret(b""), Err(ChunkError::InvalidJson(_))));
        assert!(matches!(
            interpret(b"{} x"),
            Err(ChunkError::InvalidJson(_))
        ));
        assert!(matches!(
            interpret(b"hello"),
            Err(ChunkError::InvalidJson(_))
        ));
    }

    #[test]
    fn invalid_utf8_is_an_error() {
        assert_eq!(
            interpret(b"{\"choices\":[{\"delta\":{\"content\":\"\xff\"}}]}"),
            Err(ChunkError::InvalidUtf8 { valid_up_to: 33 })
        );
    }

    #[test]
    fn json_that_is_not_an_object_is_an_error() {
        assert_eq!(interpret(b"[]"), Err(ChunkError::NotAnObject));
        assert_eq!(
            interpret(b"[null, null, null]"),
            Err(ChunkError::NotAnObject)
        );
        assert_eq!(interpret(b" 42 "), Err(ChunkError::NotAnObject));
        assert_eq!(interpret(b"\"[DONE]\""), Err(ChunkError::NotAnObject));
        assert_eq!(interpret(b"null"), Err(ChunkError::NotAnObject));
    }

    #[test]
    fn wrong_field_types_are_errors() {
        for data in [
            choice(r#"{"content":5}"#, "null"),
            choice(r#"{"content":{"text":"a"}}"#, "null"),
            choice(r#"{"reasoning_content":true}"#, "null"),
            choice(r#"{"tool_calls":{}}"#, "null"),
            choice(r#""hello""#, "null"),
            choice("{}", "3"),
            r#"{"choices":{}}"#.to_string(),
            r#"{"choices":[1]}"#.to_string(),
            r#"{"choices":[],"usage":"lots"}"#.to_string(),
            r#"{"choices":[],"usage":{"completion_tokens":"12"}}"#.to_string(),
            r#"{"choices":[],"usage":{"completion_tokens":-1}}"#.to_string(),
        ] {
            let err = interpret(data.as_bytes()).unwrap_err();
            assert!(
                matches!(err, ChunkError::UnexpectedShape(_)),
                "{data}: {err:?}"
            );
        }
    }

    #[test]
    fn error_messages_do_not_echo_long_input() {
        let long = "x".repeat(10_000);
        let err = interpret(choice(&format!(r#""{long}""#), "null").as_bytes()).unwrap_err();
        let message = err.to_string();
        assert!(
            message.len() < MAX_KEPT_BYTES + 100,
            "{} bytes: {message}",
            message.len()
        );
        assert!(
            message.contains(CUT_MARK) && message.contains("at line 1 column"),
            "{message}"
        );
    }

    /// Rough CPU cost of one typical chunk; run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_per_chunk() {
        let data = choice(r#"{"content":" the"}"#, "null");
        let rounds = 100_000;
        let start = std::time::Instant::now();
        let mut generated = 0;
        for _ in 0..rounds {
            if let Ok(Chunk::Data(i)) = interpret(std::hint::black_box(data.as_bytes())) {
                generated += usize::from(i.generated);
            }
        }
        println!("{:?} per chunk ({generated})", start.elapsed() / rounds);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = interpret(&bytes);
        }

        #[test]
        fn damaged_chunks_never_panic(
            cut in any::<prop::sample::Index>(),
            len in 0usize..12,
            insert in proptest::collection::vec(
                prop_oneof![Just(b'{'), Just(b'['), Just(b'"'), Just(b':'), Just(b','), Just(b'1'), any::<u8>()],
                0..12,
            ),
        ) {
            let base = r#"{"choices":[{"index":0,"delta":{"content":"a","tool_calls":[{"id":"c"}]},"finish_reason":"stop"}],"usage":{"prompt_tokens":1,"completion_tokens":2},"error":{"message":"m"}}"#;
            let start = cut.index(base.len() + 1);
            let end = (start + len).min(base.len());
            let mut data = base.as_bytes()[..start].to_vec();
            data.extend_from_slice(&insert);
            data.extend_from_slice(&base.as_bytes()[end..]);
            if let Err(err) = interpret(&data) {
                prop_assert!(err.to_string().len() < MAX_KEPT_BYTES + 100);
            }
        }
    }
}
