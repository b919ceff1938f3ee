//! Writes the bytes of OpenAI/vLLM-format responses: server-sent
//! `chat.completion.chunk` events and the non-streaming `chat.completion`.
//!
//! Chunks are written from a pre-rendered prefix instead of through
//! serde_json, because the stub engine must produce hundreds of thousands of
//! them per second; the only per-token input is a vocabulary piece that needs
//! no escaping.

use serde_json::json;

use super::request::ChatRequest;

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
}

impl ChunkWriter {
    /// A writer for one response with this id, creation time and model name.
    pub(crate) fn new(id: &str, created: u64, request: &ChatRequest) -> Self {
        // Serialising the strings escapes whatever the client sent as model name.
        let head = format!(
            "data: {{\"id\":{},\"object\":\"chat.completion.chunk\",\"created\":{created},\"model\":{},\"choices\":[",
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
        }
    }

    /// The first event: the assistant role with empty content, no token.
    pub(crate) fn role(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(
            br#"{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}"#,
        );
        out.extend_from_slice(self.tail.as_bytes());
    }

    /// One event carrying one token; the last one carries `finish_reason`.
    pub(crate) fn token(&self, out: &mut Vec<u8>, text: &str, finish: Option<&str>) {
        out.extend_from_slice(self.head.as_bytes());
        out.extend_from_slice(br#"{"index":0,"delta":{"content":""#);
        out.extend_from_slice(text.as_bytes());
        out.extend_from_slice(br#""},"logprobs":null,"finish_reason":"#);
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

    /// The whole non-streaming `chat.completion` object.
    pub(crate) fn completion(&self, request: &ChatRequest, content: &str, finish: &str) -> String {
        json!({
            "id": self.id,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [{
                "index": 0,
                "message": {"role": "assistant", "content": content},
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
        w.token(&mut out, " the", None);
        w.token(&mut out, " end", Some("length"));
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
    fn no_usage_unless_asked() {
        let req = request(false);
        let w = ChunkWriter::new("c", 1, &req);
        let mut out = Vec::new();
        w.token(&mut out, " the", None);
        w.end(&mut out, &req, 1);
        let events = events(&out);
        assert_eq!(events.len(), 2);
        let chunk: Value = serde_json::from_str(&events[0]).unwrap();
        assert!(chunk.get("usage").is_none());
    }
}
