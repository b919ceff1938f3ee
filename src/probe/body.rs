//! The request bodies of a workload for one endpoint kind, serialised once
//! per sweep so that no JSON is built on the measuring path. What a body
//! holds is the kind's ([`super::api`]); where the workload wants nothing
//! shared with earlier requests (`prefix_cache: unique`, the default), each
//! body is kept in two pieces and a request's own marker is copied in
//! between.

use bytes::{Bytes, BytesMut};

use crate::config::{MaxTokensField, PrefixCache, RequestOptions, Workload};
use crate::probe::api::{self, BodyInput, EndpointKind};

/// Stands where the marker goes while a body is serialised; found again in
/// the JSON text to cut the body in two.
const PLACEHOLDER: &str = "@@llmprobe-marker-3f0c9d@@";

/// The marker that starts a request's prompt: short, unique per request, so
/// no server has a cached prefix for it.
pub fn marker(unique: u64) -> String {
    format!("[{unique:016x}]\n")
}

/// One body, whole or cut where the marker goes.
#[derive(Debug, Clone)]
enum Template {
    Whole(Bytes),
    Cut { head: Bytes, tail: Bytes },
}

/// Every request body of one workload for one target.
#[derive(Debug, Clone)]
pub struct Bodies {
    templates: Vec<Template>,
}

impl Bodies {
    /// One chat-completions body per prompt of `workload`, for `model`,
    /// with `max_tokens` as the output limit in the field(s) `field` names,
    /// and no request options.
    pub fn new(model: &str, workload: &Workload, field: MaxTokensField, max_tokens: u32) -> Self {
        let kind = api::kind(crate::config::Api::Chat);
        Self::for_kind(
            kind,
            model,
            workload,
            &RequestOptions::default(),
            field,
            max_tokens,
        )
    }

    /// One body of endpoint `kind` per prompt of `workload`, for `model`,
    /// with the target's `options` and `max_tokens` as the output limit in
    /// the field(s) `field` names.
    pub fn for_kind(
        kind: &dyn EndpointKind,
        model: &str,
        workload: &Workload,
        options: &RequestOptions,
        field: MaxTokensField,
        max_tokens: u32,
    ) -> Self {
        let templates = workload
            .prompts
            .iter()
            .map(|prompt| {
                let (body, marked) = kind.body(&BodyInput {
                    model,
                    prompt,
                    temperature: workload.temperature,
                    options,
                    field,
                    max_tokens,
                    prefix_cache: workload.prefix_cache,
                    placeholder: PLACEHOLDER,
                });
                let body = serde_json::to_vec(&body).unwrap_or_default();
                let cut = marked
                    .then(|| find(&body, PLACEHOLDER.as_bytes()))
                    .flatten();
                match cut {
                    Some(at) => Template::Cut {
                        head: Bytes::copy_from_slice(&body[..at]),
                        tail: Bytes::copy_from_slice(&body[at + PLACEHOLDER.len()..]),
                    },
                    None => Template::Whole(Bytes::from(body)),
                }
            })
            .collect();
        Bodies { templates }
    }

    /// Number of distinct prompts.
    pub fn len(&self) -> usize {
        self.templates.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.templates.is_empty()
    }

    /// The body of request `i` (prompts round robin), carrying `unique`'s
    /// marker where the workload puts one.
    pub fn body(&self, i: u64, unique: u64) -> Bytes {
        let Some(t) = self
            .templates
            .get((i as usize) % self.templates.len().max(1))
        else {
            return Bytes::new();
        };
        match t {
            Template::Whole(b) => b.clone(),
            Template::Cut { head, tail } => {
                // The marker is ASCII without quotes or backslashes except
                // its newline, written as JSON's escape.
                let m = marker(unique).replace('\n', "\\n");
                let mut out = BytesMut::with_capacity(head.len() + m.len() + tail.len());
                out.extend_from_slice(head);
                out.extend_from_slice(m.as_bytes());
                out.extend_from_slice(tail);
                out.freeze()
            }
        }
    }
}

/// Position of the first `needle` in `haystack`.
fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// One body per prompt of `workload`, for `model`, as its prompts are
/// written (no marker): for callers that send each prompt once.
pub fn bodies(model: &str, workload: &Workload, field: MaxTokensField) -> Vec<Bytes> {
    let shared = Workload {
        prefix_cache: PrefixCache::Shared,
        ..workload.clone()
    };
    let all = Bodies::new(model, &shared, field, workload.max_completion_tokens);
    (0..all.len() as u64).map(|i| all.body(i, 0)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::prompts::Prompt;
    use serde_json::{json, Value};

    fn workload(prefix_cache: PrefixCache, prompts: Vec<Prompt>) -> Workload {
        Workload {
            name: "w".into(),
            max_completion_tokens: 64,
            temperature: 0.0,
            prompts,
            prefix_cache,
            chat_at: None,
        }
    }

    #[test]
    fn body_has_stream_usage_and_chosen_token_field() {
        let w = workload(
            PrefixCache::Shared,
            vec![Prompt::user("hi"), Prompt::user("there")],
        );
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

    #[test]
    fn unique_puts_a_marker_first_in_the_first_message() {
        let mut p = Prompt::user("say \"hi\"");
        p.prepend_system("be brief");
        let w = workload(PrefixCache::Unique, vec![p.clone()]);
        let b = Bodies::new("m", &w, MaxTokensField::MaxCompletionTokens, 8);
        let one: Value = serde_json::from_slice(&b.body(0, 0xabc)).unwrap();
        let two: Value = serde_json::from_slice(&b.body(0, 0xdef)).unwrap();
        assert_eq!(
            one["messages"][0]["content"],
            format!("{}be brief", marker(0xabc))
        );
        assert_eq!(one["messages"][1]["content"], "say \"hi\"");
        assert_ne!(one, two);
        assert_eq!(one["max_completion_tokens"], 8);

        let w = workload(PrefixCache::SharedSystemPrompt, vec![p.clone()]);
        let b = Bodies::new("m", &w, MaxTokensField::MaxCompletionTokens, 8);
        let v: Value = serde_json::from_slice(&b.body(0, 1)).unwrap();
        assert_eq!(v["messages"][0]["content"], "be brief");
        assert_eq!(
            v["messages"][1]["content"],
            format!("{}say \"hi\"", marker(1))
        );

        let w = workload(PrefixCache::Shared, vec![p]);
        let b = Bodies::new("m", &w, MaxTokensField::MaxCompletionTokens, 8);
        assert_eq!(b.body(0, 1), b.body(0, 2));
    }

    #[test]
    fn a_marker_goes_into_parts_and_null_content_too() {
        let parts = Prompt {
            messages: json!([{ "role": "user", "content": [{ "type": "text", "text": "x" }] }]),
        };
        let null = Prompt {
            messages: json!([{ "role": "user", "content": null }]),
        };
        let w = workload(PrefixCache::Unique, vec![parts, null]);
        let b = Bodies::new("m", &w, MaxTokensField::MaxTokens, 4);
        let v: Value = serde_json::from_slice(&b.body(0, 7)).unwrap();
        assert_eq!(v["messages"][0]["content"][0]["text"], marker(7));
        assert_eq!(v["messages"][0]["content"][1]["text"], "x");
        let v: Value = serde_json::from_slice(&b.body(1, 7)).unwrap();
        assert_eq!(v["messages"][0]["content"], marker(7));
    }
}
