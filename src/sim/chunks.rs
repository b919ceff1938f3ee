//! Writes the bytes of OpenAI/vLLM-format responses: server-sent
//! `chat.completion.chunk` events and the non-streaming `chat.completion`,
//! or for `/v1/completions` `text_completion` events and object.
//!
//! Chunks are written from a pre-rendered prefix instead of through
//! serde_json, because the stub engine must produce hundreds of thousands of
//! them per second; the only per-token input is a vocabulary piece that needs
//! no escaping.

use serde_json::json;

use super::request::ChatRequest;
use super::text::TextGen;
use crate::config::simulator::ReasoningField;

/// Renders the events of one response.
pub(crate) struct ChunkWriter {
    /// `data: {"id":..,"object":..,"created":..,"model":..,"choices":[`
    head: String,
    /// `]}` or `],"usage":null}`: OpenAI sends `usage: null` on every chunk
    /// but the last when usage was asked for.
    tail: &'static str,
    id: String,
    model: String,
    created: u64,
    /// Output tokens streamed as thinking before the answer.
    reasoning_tokens: u32,
    /// `{"index":0,"delta":{"reasoning":"` (or `reasoning_content`).
    reasoning_head: &'static str,
    /// Answering `/v1/completions`: text choices, no role, no reasoning.
    completions: bool,
}

/// The opening of a chunk's choice, up to the token text.
const CONTENT_HEAD: &str = r#"{"index":0,"delta":{"content":""#;
const REASONING_HEAD: &str = r#"{"index":0,"delta":{"reasoning":""#;
const REASONING_CONTENT_HEAD: &str = r#"{"index":0,"delta":{"reasoning_content":""#;
/// The opening of a completions choice, up to the token text.
const TEXT_HEAD: &str = r#"{"index":0,"text":""#;

impl ChunkWriter {
    /// A writer for one response with this id, creation time and model name.
    pub(crate) fn new(id: &str, created: u64, request: &ChatRequest) -> Self {
        // Serialising the strings escapes whatever the client sent as model name.
        let object = if request.completions {
            "text_completion"
        } else {
            "chat.completion.chunk"
        };
        let head = format!(
            "data: {{\"id\":{},\"object\":\"{object}\",\"created\":{created},\"model\":{},\"choices\":[",
            json!(id),
            json!(request.model),
        );
        ChunkWriter {
            head,
            tail: if request.include_usage {
                "],\"usage\":null}\n\n"
            } else {
                "]}\n\n"
            },
            id: id.to_string(),
            model: request.model.clone(),
            created,
            reasoning_tokens: request.reasoning_tokens,
            reasoning_head: match request.reasoning_field {
                ReasoningField::Reasoning => REASONING_HEAD,
                ReasoningField::ReasoningContent => REASONING_CONTENT_HEAD,
            },
            completions: request.completions,
        }
    }

    /// The first event: the assistant role with empty content, no token;
    /// a completions stream has no role, so an SSE comment stands in (the
    /// headers still leave before the first token).
    pub(crate) fn role(&self, out: &mut Vec<u8>) {
        if self.completions {
            out.extend_from_slice(b": started\n\n");
            return;
        }
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(
            br#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}"#,
        );
        out.extend_from_slice(self.tail.as_bytes());
    }

    /// One event carrying output token number `n` (from 1): thinking while
    /// `n` is within the reasoning tokens, answer after; the last one
    /// carries `finish_reason`.
    pub(crate) fn token(&self, out: &mut Vec<u8>, n: u32, text: &str, finish: Option<&str>) {
        out.extend_from_slice(self.head.as_bytes());
        if self.completions {
            out.extend_from_slice(TEXT_HEAD.as_bytes());
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(br#"","logprobs":null,"finish_reason":"#);
        } else {
            let head = if n <= self.reasoning_tokens {
                self.reasoning_head
            } else {
                CONTENT_HEAD
            };
            out.extend_from_slice(head.as_bytes());
            out.extend_from_slice(text.as_bytes());
            out.extend_from_slice(br#""},"logprobs":null,"finish_reason":"#);
        }
        match finish {
            Some(reason) => {
                out.push(b'"');
                out.extend_from_slice(reason.as_bytes());
                out.push(b'"');
            }
            None => out.extend_from_slice(b"null"),
        }
        out.push(b'}');
        out.extend_from_slice(self.tail.as_bytes());
    }

    /// The closing events: the usage chunk (`choices: []`) when asked for, then `[DONE]`.
    pub(crate) fn end(&self, out: &mut Vec<u8>, request: &ChatRequest, completion_tokens: u32) {
        if request.include_usage {
            let usage = usage(request, completion_tokens);
            out.extend_from_slice(self.head.as_bytes());
            out.extend_from_slice(format!("],\"usage\":{usage}}}\n\n").as_bytes());
        }
        out.extend_from_slice(b"data: [DONE]\n\n");
    }

    /// The whole non-streaming `chat.completion` object, its text drawn
    /// from `text` (thinking first, when the model reasons).
    pub(crate) fn completion(
        &self,
        request: &ChatRequest,
        text: &mut TextGen,
        finish: &str,
    ) -> String {
        if self.completions {
            let all: String = (0..request.max_tokens).map(|_| text.next_token()).collect();
            return json!({
                "id": self.id,
                "object": "text_completion",
                "created": self.created,
                "model": self.model,
                "choices": [{
                    "index": 0,
                    "text": all,
                    "logprobs": null,
                    "finish_reason": finish,
                }],
                "usage": usage(request, request.max_tokens),
            })
            .to_string();
        }
        let reasoning: String = (0..self.reasoning_tokens)
            .map(|_| text.next_token())
            .collect();
        let content: String = (self.reasoning_tokens..request.max_tokens)
            .map(|_| text.next_token())
            .collect();
        let mut message = json!({"role": "assistant", "content": content});
        if self.reasoning_tokens > 0 {
            message[request.reasoning_field.as_str()] = json!(reasoning);
        }
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": message,
                "logprobs": null,
                "finish_reason": finish,
            }],
            "usage": usage(request, request.max_tokens),
        })
        .to_string()
    }
}

/// The usage report, with the prompt tokens served from the prefix cache
/// as OpenAI and vLLM report them.
fn usage(request: &ChatRequest, completion_tokens: u32) -> serde_json::Value {
    json!({
        "prompt_tokens": request.prompt_tokens,
        "completion_tokens": completion_tokens,
        "total_tokens": request.prompt_tokens + u64::from(completion_tokens),
        "prompt_tokens_details": { "cached_tokens": request.cached_tokens },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    fn request(include_usage: bool) -> ChatRequest {
        ChatRequest {
            model: "m\"x".into(),
            prompt_tokens: 3,
            max_tokens: 2,
            stream: true,
            include_usage,
            text_seed: 0,
            prefix_blocks: Vec::new(),
            cached_tokens: 0,
            reasoning_tokens: 0,
            reasoning_field: ReasoningField::Reasoning,
            completions: false,
        }
    }

    fn events(bytes: &[u8]) -> Vec<String> {
        let text = std::str::from_utf8(bytes).unwrap();
        assert!(text.ends_with("\n\n"));
        text.split_terminator("\n\n")
            .map(|e| e.strip_prefix("data: ").unwrap().to_string())
            .collect()
    }

    #[test]
    fn every_event_is_valid_json_in_openai_shape() {
        let req = request(true);
        let w = ChunkWriter::new("chatcmpl-1", 42, &req);
        let mut out = Vec::new();
        w.role(&mut out);
        w.token(&mut out, 1, " the", None);
        w.token(&mut out, 2, " end", Some("length"));
        w.end(&mut out, &req, 2);
        let events = events(&out);
        assert_eq!(events.len(), 5);
        assert_eq!(events[4], "[DONE]");
        let json: Vec<Value> = events[..4]
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        for chunk in &json {
            assert_eq!(chunk["object"], "chat.completion.chunk");
            assert_eq!(chunk["model"], "m\"x");
            assert_eq!(chunk["created"], 42);
        }
        assert_eq!(json[0]["choices"][0]["delta"]["role"], "assistant");
        assert_eq!(json[0]["usage"], Value::Null);
        assert_eq!(json[1]["choices"][0]["delta"]["content"], " the");
        assert_eq!(json[2]["choices"][0]["finish_reason"], "length");
        assert_eq!(json[3]["choices"], serde_json::json!([]));
        assert_eq!(json[3]["usage"]["completion_tokens"], 2);
        assert_eq!(json[3]["usage"]["total_tokens"], 5);
    }

    #[test]
    fn completions_events_carry_text() {
        let req = ChatRequest {
            completions: true,
            ..request(true)
        };
        let w = ChunkWriter::new("cmpl-1", 42, &req);
        let mut out = Vec::new();
        w.role(&mut out);
        assert_eq!(out, b": started\n\n");
        out.clear();
        w.token(&mut out, 1, " the", Some("length"));
        w.end(&mut out, &req, 1);
        let events = events(&out);
        let token: Value = serde_json::from_str(&events[0]).unwrap();
        assert_eq!(token["object"], "text_completion");
        assert_eq!(token["choices"][0]["text"], " the");
        assert_eq!(token["choices"][0]["finish_reason"], "length");
        let usage: Value = serde_json::from_str(&events[1]).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 1);
        assert_eq!(events[2], "[DONE]");
        let whole: Value =
            serde_json::from_str(&w.completion(&req, &mut TextGen::new(0), "length")).unwrap();
        assert_eq!(whole["choices"][0]["text"].as_str().unwrap().len(), 8);
    }

    #[test]
    fn no_usage_unless_asked() {
        let req = request(false);
        let w = ChunkWriter::new("c", 1, &req);
        let mut out = Vec::new();
        w.token(&mut out, 1, " the", None);
        w.end(&mut out, &req, 1);
        let events = events(&out);
        assert_eq!(events.len(), 2);
        let chunk: Value = serde_json::from_str(&events[0]).unwrap();
        assert!(chunk.get("usage").is_none());
    }

    #[test]
    fn thinking_comes_first_in_the_field_asked_for() {
        for (field, name, other) in [
            (ReasoningField::Reasoning, "reasoning", "reasoning_content"),
            (
                ReasoningField::ReasoningContent,
                "reasoning_content",
                "reasoning",
            ),
        ] {
            let req = ChatRequest {
                max_tokens: 3,
                reasoning_tokens: 2,
                reasoning_field: field,
                ..request(false)
            };
            let w = ChunkWriter::new("c", 1, &req);
            let mut out = Vec::new();
            for n in 1..=3 {
                w.token(&mut out, n, " the", (n == 3).then_some("length"));
            }
            let chunks: Vec<Value> = events(&out)
                .iter()
                .map(|e| serde_json::from_str(e).unwrap())
                .collect();
            let deltas: Vec<&Value> = chunks.iter().map(|c| &c["choices"][0]["delta"]).collect();
            assert_eq!(deltas[0][name], " the", "{field:?}");
            assert_eq!(deltas[1][name], " the");
            assert!(deltas[0].get("content").is_none() && deltas[0].get(other).is_none());
            assert_eq!(deltas[2]["content"], " the");
            assert!(deltas[2].get(name).is_none());
            assert_eq!(chunks[2]["choices"][0]["finish_reason"], "length");

            let whole: Value =
                serde_json::from_str(&w.completion(&req, &mut TextGen::new(0), "length")).unwrap();
            let message = &whole["choices"][0]["message"];
            assert_eq!(
                message[name].as_str().unwrap().len(),
                8,
                "two 4-character tokens"
            );
            assert_eq!(message["content"].as_str().unwrap().len(), 4);
        }
    }
}
