//! What an endpoint kind is ([`EndpointKind`]), and the body keys every
//! kind sends alike: the model, streaming with usage, the sampling options
//! and the target's `extra_body`.

use serde_json::{Map, Value};

use crate::config::prompts::Prompt;
use crate::config::{MaxTokensField, PrefixCache, RequestOptions};
use crate::stream::chunk::{Chunk, ChunkError};

/// Everything one request body is built from.
#[derive(Debug, Clone, Copy)]
pub struct BodyInput<'a> {
    /// Model id.
    pub model: &'a str,
    /// The prompt, as the workload holds it.
    pub prompt: &'a Prompt,
    /// The workload's temperature.
    pub temperature: f64,
    /// The target's request options.
    pub options: &'a RequestOptions,
    /// The field(s) that carry the output limit.
    pub field: MaxTokensField,
    /// The output limit.
    pub max_tokens: u32,
    /// What the workload lets requests share for a server's prefix cache.
    pub prefix_cache: PrefixCache,
    /// The text put where the request's own marker goes (the caller finds
    /// it again in the JSON to copy each request's marker in).
    pub placeholder: &'a str,
}

/// One kind of OpenAI endpoint: what a request to it looks like and how its
/// streamed answer is read.
pub trait EndpointKind: Sync {
    /// Path under the target's base URL.
    fn path(&self) -> &'static str;

    /// The request fields that can carry the output limit, in the order
    /// warm-up tries them; the first is the default.
    fn output_limit_fields(&self) -> &'static [MaxTokensField];

    /// The body of one request, and whether the placeholder was put in it
    /// (the workload may want no marker, or the prompt take none).
    fn body(&self, input: &BodyInput<'_>) -> (Value, bool);

    /// Reads the data of one event of the answer's stream.
    fn read_chunk(&self) -> fn(&[u8]) -> Result<Chunk, ChunkError>;
}

/// The keys every kind sends: `extra_body` first, so that nothing in it can
/// replace a key llmprobe sets (the configuration refuses such keys too).
pub fn shared_keys(input: &BodyInput<'_>) -> Map<String, Value> {
    let mut body: Map<String, Value> = input
        .options
        .extra_body
        .iter()
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    body.insert("model".into(), input.model.into());
    body.insert("stream".into(), true.into());
    body.insert(
        "stream_options".into(),
        serde_json::json!({ "include_usage": true }),
    );
    body.insert("temperature".into(), input.temperature.into());
    for (key, value) in &input.options.body_keys {
        body.insert((*key).into(), value.clone());
    }
    body
}

/// Puts the output limit in the field(s) `field` names.
pub fn insert_limit(body: &mut Map<String, Value>, field: MaxTokensField, max_tokens: u32) {
    let max = Value::from(max_tokens);
    if matches!(
        field,
        MaxTokensField::MaxCompletionTokens | MaxTokensField::Both
    ) {
        body.insert("max_completion_tokens".into(), max.clone());
    }
    if matches!(field, MaxTokensField::MaxTokens | MaxTokensField::Both) {
        body.insert("max_tokens".into(), max);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn extra_body_adds_keys_and_replaces_none_of_llmprobe_s() {
        // The configuration refuses such keys; the body holds even so.
        let options = RequestOptions {
            extra_body: [
                ("model".to_string(), json!("other")),
                ("stream".to_string(), json!(false)),
                ("min_p".to_string(), json!(0.05)),
            ]
            .into(),
            ..RequestOptions::default()
        };
        let prompt = Prompt::user("hi");
        let input = BodyInput {
            model: "m",
            prompt: &prompt,
            temperature: 0.0,
            options: &options,
            field: MaxTokensField::Both,
            max_tokens: 4,
            prefix_cache: PrefixCache::Shared,
            placeholder: "@@",
        };
        let mut body = shared_keys(&input);
        insert_limit(&mut body, input.field, input.max_tokens);
        let body = Value::Object(body);
        assert_eq!(
            (&body["model"], &body["stream"]),
            (&json!("m"), &json!(true))
        );
        assert_eq!(body["min_p"], 0.05);
        assert_eq!(
            (&body["max_tokens"], &body["max_completion_tokens"]),
            (&json!(4), &json!(4))
        );
        assert!(body.get("top_p").is_none());
    }
}
