//! The chat-completions request bodies of a workload, serialised once per
//! sweep so that no JSON is built on the measuring path.

use bytes::Bytes;
use serde_json::{json, Value};

use crate::config::{MaxTokensField, Workload};

/// One body per prompt of `workload`, for `model`.
pub fn bodies(model: &str, workload: &Workload, field: MaxTokensField) -> Vec<Bytes> {
    workload
        .prompts
        .iter()
        .map(|p| {
            let mut body = json!({
                "model": model,
                "messages": p.messages,
                "stream": true,
                "stream_options": { "include_usage": true },
                "temperature": workload.temperature,
            });
            let max = Value::from(workload.max_completion_tokens);
            if let Some(obj) = body.as_object_mut() {
                if matches!(
                    field,
                    MaxTokensField::MaxCompletionTokens | MaxTokensField::Both
                ) {
                    obj.insert("max_completion_tokens".into(), max.clone());
                }
                if matches!(field, MaxTokensField::MaxTokens | MaxTokensField::Both) {
                    obj.insert("max_tokens".into(), max);
                }
            }
            Bytes::from(serde_json::to_vec(&body).unwrap_or_default())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::prompts::Prompt;

    #[test]
    fn body_has_stream_usage_and_chosen_token_field() {
        let w = Workload {
            name: "w".into(),
            max_completion_tokens: 64,
            temperature: 0.0,
            prompts: vec![Prompt::user("hi"), Prompt::user("there")],
        };
        let b = bodies("m", &w, MaxTokensField::MaxTokens);
        assert_eq!(b.len(), 2);
        let v: Value = serde_json::from_slice(&b[1]).unwrap();
        assert_eq!(v["model"], "m");
        assert_eq!(v["stream"], true);
        assert_eq!(v["stream_options"]["include_usage"], true);
        assert_eq!(v["messages"][0]["content"], "there");
        assert_eq!(v["max_tokens"], 64);
        assert!(v.get("max_completion_tokens").is_none());
        let v: Value = serde_json::from_slice(&bodies("m", &w, MaxTokensField::Both)[0]).unwrap();
        assert_eq!(
            (
                v["max_tokens"].as_u64(),
                v["max_completion_tokens"].as_u64()
            ),
            (Some(64), Some(64))
        );
    }
}
