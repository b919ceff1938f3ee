//! `POST /completions`, the legacy text API (vLLM's benchmark default; TGI,
//! SGLang and llama.cpp serve it too): each prompt sent as one `prompt`
//! string, the answer a stream of `text_completion` chunks whose generated
//! text is `choices[].text`, the output limit in `max_tokens` (the only
//! field this API has).
//!
//! Only prompts of one user text are sent: the configuration refuses a
//! workload holding a chat for this kind (naming the file and line), since
//! flattening one would measure a prompt the operator did not write.

use serde_json::Value;

use super::kind::{insert_limit, shared_keys, BodyInput, EndpointKind};
use crate::config::{Api, MaxTokensField, PrefixCache};
use crate::stream::chunk::{self, Chunk, ChunkError};

/// The completions endpoint.
pub struct Completions;

impl EndpointKind for Completions {
    fn path(&self) -> &'static str {
        "/completions"
    }

    fn output_limit_fields(&self) -> &'static [MaxTokensField] {
        Api::Completions.output_limit_fields()
    }

    fn body(&self, input: &BodyInput<'_>) -> (Value, bool) {
        // A chat never gets here (refused at load); were one to, its text
        // is missing and the server says so with a 400.
        let text = input.prompt.text().unwrap_or_default();
        let marked = input.prefix_cache != PrefixCache::Shared;
        let prompt = if marked {
            format!("{}{text}", input.placeholder)
        } else {
            text.to_string()
        };
        let mut body = shared_keys(input);
        body.insert("prompt".into(), prompt.into());
        insert_limit(&mut body, input.field, input.max_tokens);
        (Value::Object(body), marked)
    }

    /// The OpenAI chunk reader, which takes a completions choice's `text`
    /// as generated output the way it takes a chat delta's `content`.
    fn read_chunk(&self) -> fn(&[u8]) -> Result<Chunk, ChunkError> {
        chunk::interpret
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::prompts::Prompt;
    use crate::config::RequestOptions;
    use crate::stream::chunk::{ChunkInfo, Usage};

    fn read(data: &str) -> ChunkInfo {
        match (Completions.read_chunk())(data.as_bytes()) {
            Ok(Chunk::Data(info)) => info,
            other => panic!("expected data for {data}, got {other:?}"),
        }
    }

    #[test]
    fn vllm_text_chunks_usage_and_done() {
        let token = r#"{"id":"cmpl-7","object":"text_completion","created":1718000000,"model":"m","choices":[{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}],"usage":null}"#;
        assert_eq!(
            read(token),
            ChunkInfo {
                generated: true,
                answered: true,
                ..ChunkInfo::default()
            }
        );
        let last = r#"{"id":"cmpl-7","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":" end","logprobs":null,"finish_reason":"length","stop_reason":null}],"usage":null}"#;
        let got = read(last);
        assert!(got.generated);
        assert_eq!(got.finish_reason.as_deref(), Some("length"));
        let usage = r#"{"id":"cmpl-7","object":"text_completion","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"total_tokens":21,"completion_tokens":16}}"#;
        assert_eq!(
            read(usage),
            ChunkInfo {
                usage: Some(Usage {
                    prompt_tokens: Some(5),
                    completion_tokens: Some(16),
                    cached_prompt_tokens: None,
                    reasoning_tokens: None,
                }),
                ..ChunkInfo::default()
            }
        );
        assert_eq!((Completions.read_chunk())(b"[DONE]"), Ok(Chunk::Done));
    }

    #[test]
    fn an_empty_text_is_not_output_and_a_finish_without_text_ends() {
        // llama.cpp ends with an empty text carrying the finish reason.
        let got = read(
            r#"{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],"object":"text_completion"}"#,
        );
        assert!(!got.generated);
        assert_eq!(got.finish_reason.as_deref(), Some("length"));
        assert!(!read(r#"{"choices":[{"index":0,"text":null}]}"#).generated);
    }

    #[test]
    fn errors_and_wrong_shapes_are_told() {
        let got = read(r#"{"object":"error","message":"prompt too long","code":400}"#);
        assert_eq!(got.error.as_deref(), Some("prompt too long"));
        assert!(matches!(
            (Completions.read_chunk())(br#"{"choices":[{"text":5}]}"#),
            Err(ChunkError::UnexpectedShape(_))
        ));
    }

    #[test]
    fn the_body_sends_the_text_as_prompt_with_max_tokens() {
        let options = RequestOptions {
            body_keys: [("top_p", 0.9.into())].into(),
            extra_body: [("ignore_eos".to_string(), Value::Bool(true))].into(),
            ..RequestOptions::default()
        };
        let prompt = Prompt::user("say \"hi\"");
        let input = BodyInput {
            model: "m",
            prompt: &prompt,
            temperature: 0.0,
            options: &options,
            field: MaxTokensField::MaxTokens,
            max_tokens: 16,
            prefix_cache: PrefixCache::Unique,
            placeholder: "@@",
        };
        let (body, marked) = Completions.body(&input);
        assert!(marked);
        assert_eq!(
            body,
            serde_json::json!({
                "model": "m",
                "prompt": "@@say \"hi\"",
                "stream": true,
                "stream_options": { "include_usage": true },
                "temperature": 0.0,
                "top_p": 0.9,
                "max_tokens": 16,
                "ignore_eos": true,
            })
        );
        let shared = BodyInput {
            prefix_cache: PrefixCache::Shared,
            ..input
        };
        let (body, marked) = Completions.body(&shared);
        assert!(!marked);
        assert_eq!(body["prompt"], "say \"hi\"");
    }
}
