//! Which request field bounds a server's output, watched on every answer
//! when the configuration does not say: some servers ignore
//! `max_completion_tokens` and only honour `max_tokens` (llama-cpp-python),
//! and without a limit a request runs until the context is full.
//!
//! A sweep starts with the default field (or the one its target's loop
//! found earlier, for at most [`RECHECK_EVERY_SWEEPS`] sweeps of the same
//! server), and every answer of it, warm-up, pool and counted alike, is
//! judged against the workload's limit: more output than that, or a 400 or
//! 422 naming the field, and the workload starts again with the next field
//! of the target's endpoint kind (for chat [`ORDER`]; `completions` has only
//! `max_tokens`); when none is left nothing bounds the output, and the sweep
//! says so. Pure: the sweep sends the requests and reports each answer here.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, PoisonError};

use crate::config::MaxTokensField;
use crate::stats::report::{FoundIn, OutputLimit, Setup};
use crate::stats::sample::{Outcome, Sample, TokenSource};

/// The fields tried for chat completions, in order.
pub const ORDER: [MaxTokensField; 3] = [
    MaxTokensField::MaxCompletionTokens,
    MaxTokensField::MaxTokens,
    MaxTokensField::Both,
];

/// A field found by an earlier sweep is kept for this many sweeps of the
/// same server; the next one starts from the default again, so that a
/// server that learned to honour it is seen to.
pub const RECHECK_EVERY_SWEEPS: u32 = 10;

/// What one answer says about the field it carried.
#[derive(Debug, Clone, PartialEq)]
pub enum Verdict {
    /// The output stayed within the limit.
    Bounded,
    /// The server ignored or refused the field: why.
    Unbounded(String),
    /// The request failed for another reason: nothing can be told.
    Unknown(String),
}

/// Tokens above the limit a server's own count may report before the
/// answer is taken as unbounded: some count the stop token, or round.
fn usage_slack(limit: u64) -> u64 {
    limit / 10 + 2
}

/// Judges an answer to a request that asked for at most `limit` tokens in
/// `field`.
pub fn judge(sample: &Sample, field: MaxTokensField, limit: u64) -> Verdict {
    let error = sample.error.as_deref().unwrap_or("");
    let names_field = match field {
        MaxTokensField::Both => {
            error.contains("max_tokens") || error.contains("max_completion_tokens")
        }
        f => error.contains(f.as_str()),
    };
    // 400 from most servers; 422 from FastAPI/pydantic ones, whose body
    // names the field in `loc` (`extra_forbidden`).
    if matches!(sample.status, Some(400 | 422)) && names_field {
        return Verdict::Unbounded(format!("the server refused it: {error}"));
    }
    let usage = (sample.outcome == Outcome::Ok && sample.token_source == TokenSource::Usage)
        .then_some(sample.output_tokens);
    match usage {
        Some(n) if n > limit + usage_slack(limit) => {
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

/// What a server is, for what was learned about it: a field found on one
/// server says nothing of another behind the same URL.
fn identity(model: &str, setup: &Setup) -> (String, String, String, Vec<String>) {
    (
        model.to_string(),
        setup.server.clone(),
        setup.server_version.clone(),
        setup.models.clone(),
    )
}

/// Where an earlier sweep of the same loop left the field, and what it
/// measured then.
#[derive(Debug, Clone, Copy)]
pub struct Earlier<'a> {
    /// The model it asked for.
    pub model: &'a str,
    /// What the server told of itself then.
    pub setup: &'a Setup,
    /// The field it used, and how it came to it.
    pub output_limit: &'a OutputLimit,
}

/// The field of one sweep: where it started, what the answers said.
#[derive(Debug, Clone)]
pub struct Choice {
    field: MaxTokensField,
    /// The endpoint kind's fields, in the order they are tried.
    order: &'static [MaxTokensField],
    /// Configured: used as it is, never switched.
    configured: bool,
    /// Sweeps the field has been kept since it was found (0: found now,
    /// or the default).
    kept_sweeps: u32,
    /// Found by an earlier sweep, or now.
    detected: bool,
    /// What the answers said of the fields left behind.
    seen: Vec<String>,
    /// Which answers showed the last field left behind unbounded.
    found_in: Option<FoundIn>,
    /// Set when nothing bounds the output.
    unbounded: bool,
}

impl Choice {
    /// The field a sweep starts with: the configured one, else the one an
    /// `earlier` sweep of the same server found (not older than
    /// [`RECHECK_EVERY_SWEEPS`]), else the default. `model` and `setup`
    /// say which server this sweep measures.
    pub fn start(
        configured: Option<MaxTokensField>,
        model: &str,
        setup: &Setup,
        earlier: Option<Earlier<'_>>,
    ) -> Self {
        Self::start_for(&ORDER, configured, model, setup, earlier)
    }

    /// [`Choice::start`] for an endpoint kind whose fields are `order`.
    pub fn start_for(
        order: &'static [MaxTokensField],
        configured: Option<MaxTokensField>,
        model: &str,
        setup: &Setup,
        earlier: Option<Earlier<'_>>,
    ) -> Self {
        let mut choice = Choice {
            field: order.first().copied().unwrap_or(ORDER[0]),
            order,
            configured: false,
            kept_sweeps: 0,
            detected: false,
            seen: Vec::new(),
            found_in: None,
            unbounded: false,
        };
        if let Some(field) = configured {
            choice.field = field;
            choice.configured = true;
            return choice;
        }
        let Some(e) = earlier else {
            return choice;
        };
        let o = e.output_limit;
        let same_server = identity(e.model, e.setup) == identity(model, setup);
        let found = order.iter().find(|f| f.as_str() == o.field).copied();
        match found {
            Some(field)
                if same_server
                    && o.source == "detected"
                    && o.kept_sweeps + 1 < RECHECK_EVERY_SWEEPS =>
            {
                choice.field = field;
                choice.detected = true;
                choice.kept_sweeps = o.kept_sweeps + 1;
                choice.seen = o.note.iter().cloned().collect();
                choice.found_in = o.found_in;
            }
            _ => {}
        }
        choice
    }

    /// The field to send now.
    pub fn field(&self) -> MaxTokensField {
        self.field
    }

    /// A watch of the answers sent with the current field and `limit`; None
    /// when the field is configured (the operator's word is taken).
    pub fn watch(&self, limit: u64) -> Option<Watch> {
        (!self.configured).then(|| Watch {
            field: self.field,
            limit,
            unbounded: Mutex::new(None),
            bounded: AtomicU64::new(0),
        })
    }

    /// An answer (one of those `found_in`) showed that the current field
    /// does not bound the output (`why`): the next field to try, or Err with
    /// the sentence that says nothing bounds it.
    pub fn unbounded(
        &mut self,
        why: String,
        found_in: FoundIn,
        limit: u64,
    ) -> Result<MaxTokensField, String> {
        self.seen
            .push(format!("with `{}`, {why}", self.field.as_str()));
        self.found_in = Some(found_in);
        let next = self
            .order
            .iter()
            .skip_while(|f| **f != self.field)
            .nth(1)
            .copied();
        match next {
            Some(field) => {
                self.field = field;
                self.detected = true;
                self.kept_sweeps = 0;
                Ok(field)
            }
            None => {
                self.unbounded = true;
                Err(format!(
                    "nothing bounds the server's output: {} kept it within {limit} tokens ({})",
                    none_of(self.order),
                    self.seen.join("; ")
                ))
            }
        }
    }

    /// What the sweep reports: the field used, how it was chosen, what the
    /// answers said; `checked` answers were judged within the limit.
    pub fn report(&self, checked: u64) -> OutputLimit {
        let source = if self.configured {
            "configured"
        } else if self.unbounded {
            "unbounded"
        } else if self.detected {
            "detected"
        } else {
            "default"
        };
        let note = if self.seen.is_empty() {
            (!self.configured && checked == 0)
                .then(|| "not checked: no answer completed".to_string())
        } else {
            Some(self.seen.join("; "))
        };
        OutputLimit {
            field: self.field.as_str().into(),
            source: source.into(),
            note,
            kept_sweeps: self.kept_sweeps,
            found_in: self.found_in.filter(|_| source != "configured"),
        }
    }
}

/// "neither `a`, nor `b`, nor both", or "`a` never" for a kind of one field.
fn none_of(fields: &[MaxTokensField]) -> String {
    let named: Vec<String> = fields
        .iter()
        .map(|f| match f {
            MaxTokensField::Both => "both".to_string(),
            f => format!("`{}`", f.as_str()),
        })
        .collect();
    match named.as_slice() {
        [one] => format!("{one} never"),
        many => format!("neither {}", many.join(", nor ")),
    }
}

/// Judges the answers sent with one field, from the tasks that send them.
#[derive(Debug)]
pub struct Watch {
    field: MaxTokensField,
    limit: u64,
    unbounded: Mutex<Option<String>>,
    bounded: AtomicU64,
}

impl Watch {
    /// Judges one answer; true when it shows the field does not bound the
    /// output (the first such answer's reason is kept).
    pub fn check(&self, sample: &Sample) -> bool {
        match judge(sample, self.field, self.limit) {
            Verdict::Bounded => {
                self.bounded.fetch_add(1, Ordering::Relaxed);
                false
            }
            Verdict::Unknown(_) => false,
            Verdict::Unbounded(why) => {
                self.unbounded
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .get_or_insert(why);
                true
            }
        }
    }

    /// Why the field does not bound the output, once an answer showed it.
    pub fn unbounded(&self) -> Option<String> {
        self.unbounded
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Answers judged within the limit so far.
    pub fn bounded(&self) -> u64 {
        self.bounded.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_refusal_names_every_field_of_the_kind() {
        assert_eq!(
            none_of(&ORDER),
            "neither `max_completion_tokens`, nor `max_tokens`, nor both"
        );
        assert_eq!(
            none_of(crate::config::Api::Chat.output_limit_fields()),
            none_of(&ORDER)
        );
        let only = crate::config::Api::Completions.output_limit_fields();
        assert_eq!(none_of(only), "`max_tokens` never");
        let mut c = Choice::start_for(only, None, "m", &Setup::default(), None);
        assert_eq!(c.field(), MaxTokensField::MaxTokens);
        let e = c
            .unbounded("too long".into(), FoundIn::WarmUp, 4)
            .unwrap_err();
        assert!(
            e.starts_with("nothing bounds the server's output: `max_tokens` never"),
            "{e}"
        );
    }

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
        // A server that counts its stop token: one over is no runaway.
        assert_eq!(judge(&ok(257, Some(257)), f, 256), Verdict::Bounded);
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
    fn a_400_or_422_naming_the_field_is_unbounded_another_failure_unknown() {
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
        let pydantic = Sample::failed(
            Outcome::HttpError,
            Some(422),
            r#"HTTP 422: {"detail":[{"type":"extra_forbidden","loc":["body","max_completion_tokens"],"msg":"Extra inputs are not permitted"}]}"#,
        );
        assert!(matches!(judge(&pydantic, f, 4), Verdict::Unbounded(_)));
        assert!(matches!(
            judge(&pydantic, MaxTokensField::Both, 4),
            Verdict::Unbounded(_)
        ));
        let other = Sample::failed(Outcome::HttpError, Some(422), "HTTP 422: bad messages");
        assert!(matches!(judge(&other, f, 4), Verdict::Unknown(_)));
        let busy = Sample::failed(Outcome::Shed, Some(503), "HTTP 503: busy");
        assert!(matches!(judge(&busy, f, 4), Verdict::Unknown(_)));
    }

    fn setup(server: &str) -> Setup {
        Setup {
            server: server.into(),
            server_version: "1".into(),
            models: vec!["m".into()],
            model_listed: Some(true),
            ..Setup::default()
        }
    }

    #[test]
    fn fields_are_tried_in_order_until_none_is_left() {
        let mut c = Choice::start(None, "m", &setup("vllm"), None);
        assert_eq!(c.field(), MaxTokensField::MaxCompletionTokens);
        assert_eq!(c.report(3).source, "default");
        assert_eq!(c.report(3).note, None);
        assert_eq!(c.report(3).found_in, None);
        assert_eq!(
            c.report(0).note.as_deref(),
            Some("not checked: no answer completed")
        );
        assert_eq!(
            c.unbounded("90 tokens".into(), FoundIn::WarmUp, 8),
            Ok(MaxTokensField::MaxTokens)
        );
        assert_eq!(
            c.unbounded("91 tokens".into(), FoundIn::Counted, 8),
            Ok(MaxTokensField::Both)
        );
        let r = c.report(5);
        assert_eq!((r.field.as_str(), r.source.as_str()), ("both", "detected"));
        assert_eq!(
            r.found_in,
            Some(FoundIn::Counted),
            "the last switch's answers"
        );
        assert!(r.note.unwrap().contains("with `max_tokens`, 91 tokens"));
        let e = c
            .unbounded("92 tokens".into(), FoundIn::Pool, 8)
            .unwrap_err();
        assert!(e.starts_with("nothing bounds the server's output"), "{e}");
        assert!(e.contains("with `both`, 92 tokens"), "{e}");
        assert_eq!(c.report(0).source, "unbounded");
        // A configured field is never watched.
        let c = Choice::start(Some(MaxTokensField::MaxTokens), "m", &setup("vllm"), None);
        assert!(c.watch(8).is_none());
        assert_eq!(c.report(0).source, "configured");
        assert_eq!(c.report(0).note, None);
    }

    #[test]
    fn what_was_found_is_kept_for_the_same_server_only_and_rechecked() {
        let found = |kept_sweeps| OutputLimit {
            field: "max_tokens".into(),
            source: "detected".into(),
            note: Some("with `max_completion_tokens`, 90 tokens".into()),
            kept_sweeps,
            found_in: Some(FoundIn::Pool),
        };
        let vllm = setup("vllm");
        let start = |model: &str, now: &Setup, o: &OutputLimit| {
            let earlier = Earlier {
                model: "m",
                setup: &vllm,
                output_limit: o,
            };
            Choice::start(None, model, now, Some(earlier))
        };
        let c = start("m", &vllm, &found(0));
        assert_eq!(c.field(), MaxTokensField::MaxTokens);
        let r = c.report(4);
        assert_eq!((r.source.as_str(), r.kept_sweeps), ("detected", 1));
        assert_eq!(r.found_in, Some(FoundIn::Pool), "kept with the field");
        assert!(r.note.unwrap().contains("90 tokens"));
        // Another server (or version, or model list) behind the URL, or
        // another model: forgotten.
        let default = MaxTokensField::MaxCompletionTokens;
        assert_eq!(start("m", &setup("llama.cpp"), &found(0)).field(), default);
        assert_eq!(start("m2", &vllm, &found(0)).field(), default);
        // Kept for RECHECK_EVERY_SWEEPS sweeps in all, then the default again.
        let kept = start("m", &vllm, &found(RECHECK_EVERY_SWEEPS - 2));
        assert_eq!(kept.field(), MaxTokensField::MaxTokens);
        let again = start("m", &vllm, &found(RECHECK_EVERY_SWEEPS - 1));
        assert_eq!(again.field(), default);
    }

    #[test]
    fn a_watch_keeps_the_first_reason_and_counts_the_bounded() {
        let c = Choice::start(None, "m", &setup("vllm"), None);
        let w = c.watch(4).unwrap();
        assert!(!w.check(&ok(4, Some(4))));
        assert!(!w.check(&Sample::failed(Outcome::Shed, Some(503), "busy")));
        assert_eq!(w.unbounded(), None);
        assert!(w.check(&ok(3, Some(90))));
        assert!(w.check(&ok(40, None)));
        assert!(w.unbounded().unwrap().contains("90 tokens"));
        assert_eq!(w.bounded(), 1);
    }
}
