//! Which request field bounds a server's output, found at warm-up when the
//! configuration does not say: some servers ignore `max_completion_tokens`
//! and only honour `max_tokens` (llama-cpp-python), and without a limit a
//! request runs until the context is full. One warm-up request per field
//! tried, with the workload's own limit: more output than that (or a 400
//! naming the field) means the field is not honoured. The verdict on one
//! request is pure; trying the fields in turn sends requests.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::config::{MaxTokensField, Target, Workload};
use crate::stats::report::OutputLimit;
use crate::stats::sample::{Outcome, Sample, TokenSource};
use crate::sweep::{Requests, SweepEnv};

/// The fields tried, in order.
const ORDER: [MaxTokensField; 3] = [
    MaxTokensField::MaxCompletionTokens,
    MaxTokensField::MaxTokens,
    MaxTokensField::Both,
];

/// What one warm-up request says about the field it carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The output stayed within the limit.
    Bounded,
    /// The server ignored or refused the field: why.
    Unbounded(String),
    /// The request failed for another reason: nothing can be told.
    Unknown(String),
}

/// Judges a request that asked for at most `limit` tokens in `field`.
pub fn judge(sample: &Sample, field: MaxTokensField, limit: u64) -> Verdict {
    let error = sample.error.as_deref().unwrap_or("");
    let names_field = match field {
        MaxTokensField::Both => {
            error.contains("max_tokens") || error.contains("max_completion_tokens")
        }
        f => error.contains(f.as_str()),
    };
    if sample.status == Some(400) && names_field {
        return Verdict::Unbounded(format!("the server refused it: {error}"));
    }
    let usage = (sample.outcome == Outcome::Ok && sample.token_source == TokenSource::Usage)
        .then_some(sample.output_tokens);
    match usage {
        Some(n) if n > limit => {
            return Verdict::Unbounded(format!(
                "the server generated {n} tokens for a limit of {limit}"
            ))
        }
        // The server's own count is exact; chunks may split tokens.
        Some(_) => {}
        None if sample.content_chunks > 2 * limit => {
            return Verdict::Unbounded(format!(
                "the server sent {} content chunks for a limit of {limit} tokens",
                sample.content_chunks
            ))
        }
        None => {}
    }
    match sample.outcome {
        Outcome::Ok => Verdict::Bounded,
        o => Verdict::Unknown(format!("{}: {error}", o.as_str())),
    }
}

/// The field to use for `target`: configured, learned by an earlier sweep,
/// or found now by trying each in turn. Err: nothing bounds the output (the
/// sweep fails with that sentence).
pub(crate) async fn choose(
    env: &SweepEnv,
    cancel: &CancellationToken,
    target: &Arc<Target>,
    workload: &Arc<Workload>,
    base_url: &str,
) -> Result<(MaxTokensField, OutputLimit), String> {
    if let Some(field) = target.max_tokens_field {
        return Ok((field, limit(field, "configured", None)));
    }
    let key = super::learned_key(&target.name, base_url);
    if let Some((field, note)) = env.learned.get(&key) {
        let source = if note.is_some() {
            "detected"
        } else {
            "default"
        };
        return Ok((field, limit(field, source, note)));
    }
    let mut seen = Vec::new();
    for field in ORDER {
        let requests = Requests::for_sweep(target, workload, base_url, field);
        let Some((sample, _)) = requests.send(env, cancel, 0, false).await else {
            // Cancelled: the sweep ends anyway.
            return Ok((ORDER[0], limit(ORDER[0], "default", None)));
        };
        match judge(&sample, field, u64::from(workload.max_completion_tokens)) {
            Verdict::Bounded => {
                let note = (!seen.is_empty()).then(|| seen.join("; "));
                if let Some(note) = &note {
                    tracing::warn!(
                        target_name = %target.name,
                        field = field.as_str(),
                        seen = %note,
                        "the server does not honour max_completion_tokens: sending the output limit as `{}` (set max_tokens_field to say so)",
                        field.as_str()
                    );
                }
                env.learned.insert(key, field, note.clone());
                let source = if note.is_some() {
                    "detected"
                } else {
                    "default"
                };
                return Ok((field, limit(field, source, note)));
            }
            Verdict::Unbounded(why) => seen.push(format!("with `{}`, {why}", field.as_str())),
            // A server that fails for another reason tells nothing: keep the
            // default for this sweep, and look again at the next one.
            Verdict::Unknown(why) => {
                let field = ORDER[0];
                let note = format!("not checked: the warm-up request failed ({why})");
                return Ok((field, limit(field, "default", Some(note))));
            }
        }
    }
    Err(format!(
        "nothing bounds the server's output: neither `max_completion_tokens`, nor `max_tokens`, \
         nor both kept it within {} tokens ({})",
        workload.max_completion_tokens,
        seen.join("; ")
    ))
}

fn limit(field: MaxTokensField, source: &'static str, note: Option<String>) -> OutputLimit {
    OutputLimit {
        field: field.as_str().into(),
        source: source.into(),
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(chunks: u64, usage: Option<u64>) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.content_chunks = chunks;
        (s.output_tokens, s.token_source) = match usage {
            Some(n) => (n, TokenSource::Usage),
            None => (chunks, TokenSource::Chunks),
        };
        s
    }

    #[test]
    fn within_the_limit_is_bounded() {
        let f = MaxTokensField::MaxCompletionTokens;
        assert_eq!(judge(&ok(4, Some(4)), f, 4), Verdict::Bounded);
        assert_eq!(judge(&ok(2, None), f, 4), Verdict::Bounded);
        // Chunks that split tokens, with the server's count within the limit.
        assert_eq!(judge(&ok(12, Some(4)), f, 4), Verdict::Bounded);
    }

    #[test]
    fn more_output_than_asked_is_unbounded() {
        let f = MaxTokensField::MaxCompletionTokens;
        assert!(
            matches!(judge(&ok(3, Some(90)), f, 4), Verdict::Unbounded(w) if w.contains("90 tokens"))
        );
        assert!(
            matches!(judge(&ok(40, None), f, 4), Verdict::Unbounded(w) if w.contains("40 content chunks"))
        );
        // Cut off by the server at its context limit, after many chunks.
        let mut cut = Sample::failed(Outcome::ProtocolError, Some(200), "stream broken");
        cut.content_chunks = 200;
        assert!(matches!(judge(&cut, f, 4), Verdict::Unbounded(_)));
    }

    #[test]
    fn a_400_naming_the_field_is_unbounded_another_failure_unknown() {
        let refused = Sample::failed(
            Outcome::HttpError,
            Some(400),
            "HTTP 400: Unrecognized request argument supplied: max_completion_tokens",
        );
        let f = MaxTokensField::MaxCompletionTokens;
        assert!(matches!(judge(&refused, f, 4), Verdict::Unbounded(_)));
        assert!(matches!(
            judge(&refused, MaxTokensField::MaxTokens, 4),
            Verdict::Unknown(_)
        ));
        let busy = Sample::failed(Outcome::Shed, Some(503), "HTTP 503: busy");
        assert!(matches!(judge(&busy, f, 4), Verdict::Unknown(_)));
    }
}
