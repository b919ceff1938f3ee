//! `POST /chat/completions`: prompts sent as `messages`, the answer a stream
//! of `chat.completion.chunk`s, the output limit in `max_completion_tokens`,
//! `max_tokens` or both.

use serde_json::{json, Value};

use super::kind::{insert_limit, shared_keys, BodyInput, EndpointKind};
use crate::config::{Api, MaxTokensField, PrefixCache};
use crate::stream::chunk::{self, Chunk, ChunkError};

/// The chat-completions endpoint.
pub struct Chat;

impl EndpointKind for Chat {
    fn path(&self) -> &'static str {
        "/chat/completions"
    }

    fn output_limit_fields(&self) -> &'static [MaxTokensField] {
        Api::Chat.output_limit_fields()
    }

    fn body(&self, input: &BodyInput<'_>) -> (Value, bool) {
        let mut messages = input.prompt.messages.clone();
        let marked = insert_placeholder(&mut messages, input.prefix_cache, input.placeholder);
        let mut body = shared_keys(input);
        body.insert("messages".into(), messages);
        insert_limit(&mut body, input.field, input.max_tokens);
        (Value::Object(body), marked)
    }

    fn read_chunk(&self) -> fn(&[u8]) -> Result<Chunk, ChunkError> {
        chunk::interpret
    }
}

/// Puts the placeholder at the start of the message where the marker goes;
/// false when the workload wants no marker (or no message takes one).
fn insert_placeholder(messages: &mut Value, mode: PrefixCache, placeholder: &str) -> bool {
    let Value::Array(list) = messages else {
        return false;
    };
    let index = match mode {
        PrefixCache::Shared => return false,
        PrefixCache::Unique => 0,
        PrefixCache::SharedSystemPrompt => list
            .iter()
            .position(|m| m.get("role").and_then(Value::as_str) != Some("system"))
            .unwrap_or(list.len().saturating_sub(1)),
    };
    let Some(Value::Object(message)) = list.get_mut(index) else {
        return false;
    };
    let content = message.entry("content").or_insert(Value::Null);
    match content {
        Value::String(text) => text.insert_str(0, placeholder),
        Value::Array(parts) => parts.insert(0, json!({ "type": "text", "text": placeholder })),
        other => *other = Value::String(placeholder.to_string()),
    }
    true
}
