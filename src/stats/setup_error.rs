//! Whether a sweep's first requests show a setup mistake rather than a
//! result: when every request of the warm-up (or, without one, of the first
//! level) fails with the same client-side cause (the key refused, the model
//! not served, no endpoint at the URL, a TLS or DNS failure), the server's
//! capacity was never measured, and a knee of 0 would be a false alarm.
//! Server errors under load (500, 503, 429, timeouts) stay results, and so
//! does a refused connection (a server that is down or restarting is an
//! outage, not a mistake in the configuration: the sweep fails as before).

use serde::{Deserialize, Serialize};

use crate::stats::sample::{Outcome, Sample};

/// What is wrong with a target's setup: the `cause` label of
/// `llmprobe_target_setup_error`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Cause {
    /// HTTP 401 or 403: the API key is missing, wrong or rotated.
    Key,
    /// The server does not serve the configured model.
    Model,
    /// HTTP 404 on the endpoint's path: `base_url` names no API there.
    Url,
    /// The TLS handshake failed (certificate, CA, protocol).
    Tls,
    /// The host name of `base_url` does not resolve.
    Dns,
}

impl Cause {
    /// Every cause, in exposition order.
    pub const ALL: [Cause; 5] = [Cause::Key, Cause::Model, Cause::Url, Cause::Tls, Cause::Dns];

    /// The label value, in metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::Key => "key",
            Cause::Model => "model",
            Cause::Url => "url",
            Cause::Tls => "tls",
            Cause::Dns => "dns",
        }
    }
}

/// A sweep stopped by a setup mistake: its cause and one line saying what
/// is wrong and what to do.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SetupError {
    /// What is wrong.
    pub cause: Cause,
    /// What is wrong and what to do, with what the server said.
    pub message: String,
}

/// What the line about a setup error names: the target as configured.
#[derive(Debug, Clone, Copy)]
pub struct Context<'a> {
    /// The configured model.
    pub model: &'a str,
    /// The endpoint's full URL.
    pub url: &'a str,
    /// The models the server lists, when it lists any.
    pub served: &'a [String],
    /// Whether the model is among them (None: no list).
    pub model_listed: Option<bool>,
}

/// Phrases of a "model not found" answer: vLLM ("The model `x` does not
/// exist."), OpenAI (`model_not_found`), Ollama ("model 'x' not found").
const MODEL_NOT_FOUND: [&str; 5] = [
    "does not exist",
    "model_not_found",
    "not found",
    "no such model",
    "unknown model",
];

/// Phrases of a failed TLS handshake in a connection error's text (rustls's
/// own words: "received corrupt message" is TLS spoken to a plain HTTP port).
const TLS_FAILED: [&str; 8] = [
    "certificate",
    "tls",
    "ssl",
    "handshake",
    "received corrupt message",
    "received fatal alert",
    "peer is incompatible",
    "peer misbehaved",
];

/// Phrases of a failed name lookup in a connection error's text.
const DNS_FAILED: [&str; 5] = [
    "dns error",
    "failed to lookup address",
    "name or service not known",
    "nodename nor servname",
    "no such host",
];

/// hyper's words for a request it never sent (its "canceled", which the
/// client counts as a connect error: `probe::client`): the connection it
/// was given closed first ("connection was not ready", "connection
/// closed"). A TLS 1.3 server that refuses the
/// client's certificate closes the connection after the client's side of
/// the handshake is over, and a request queued on that connection meets
/// this instead of the alert: the mutual-TLS test of tests/private_tls.rs
/// read no setup error in 4 of 40 runs beside two CPU-burning processes
/// (its other requests all named `CertificateRequired`), 0 of 60 since.
const NEVER_SENT: &str = "operation was canceled";

/// The setup mistake one request shows, if any.
pub fn cause_of(sample: &Sample, model_listed: Option<bool>) -> Option<Cause> {
    let said = sample.error.as_deref().unwrap_or("").to_lowercase();
    let names_model = said.contains("model") && MODEL_NOT_FOUND.iter().any(|p| said.contains(p));
    match (sample.outcome, sample.status) {
        (Outcome::HttpError, Some(401 | 403)) => Some(Cause::Key),
        (Outcome::HttpError, Some(404)) if names_model || model_listed == Some(false) => {
            Some(Cause::Model)
        }
        (Outcome::HttpError, Some(404)) => Some(Cause::Url),
        // Some servers answer an unknown model with 400 or 422.
        (Outcome::HttpError, Some(400 | 422)) if names_model => Some(Cause::Model),
        (Outcome::ConnectError, _) if TLS_FAILED.iter().any(|p| said.contains(p)) => {
            Some(Cause::Tls)
        }
        (Outcome::ConnectError, _) if DNS_FAILED.iter().any(|p| said.contains(p)) => {
            Some(Cause::Dns)
        }
        _ => None,
    }
}

/// The setup error `samples` show: Some when every one of them (those
/// cancelled by shutdown and those never sent aside, at least one) failed
/// with the same cause.
pub fn judge(samples: &[Sample], context: &Context<'_>) -> Option<SetupError> {
    // A request never sent says nothing of the setup, either way.
    let mut sent = samples.iter().filter(|s| {
        s.outcome != Outcome::Cancelled
            && !s.error.as_deref().is_some_and(|e| e.contains(NEVER_SENT))
    });
    let first = sent.next()?;
    let cause = cause_of(first, context.model_listed)?;
    if !sent.all(|s| cause_of(s, context.model_listed) == Some(cause)) {
        return None;
    }
    let said = first.error.as_deref().unwrap_or("");
    Some(SetupError {
        cause,
        message: line(cause, said, context),
    })
}

/// What is wrong and what to do, then what the server said.
fn line(cause: Cause, said: &str, c: &Context<'_>) -> String {
    let what = match cause {
        Cause::Key => "the server refused the API key: check `api_key_env` / `api_key_file` \
                       (a rotated or missing key?)"
            .to_string(),
        Cause::Model => {
            let served = if c.served.is_empty() {
                String::new()
            } else {
                // A server may list hundreds: the first few say enough.
                let shown: Vec<&str> = c.served.iter().take(5).map(String::as_str).collect();
                let more = if c.served.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                };
                format!(" (it lists: {}{more})", shown.join(", "))
            };
            format!(
                "the server does not serve the model `{}`{served}: set `model:` to a model it serves",
                c.model
            )
        }
        Cause::Url => {
            let hint = if c.url.contains("/v1/") {
                ""
            } else {
                " (is `/v1` missing from `base_url`?)"
            };
            format!("no API at {}{hint}: check `base_url` and `api`", c.url)
        }
        Cause::Tls => "the TLS handshake failed: check `base_url`'s scheme (https to a plain \
                       HTTP port?) and host, `ca_file` for a private CA, `cert_file` and \
                       `key_file` for a client certificate"
            .to_string(),
        Cause::Dns => {
            "the host name of `base_url` does not resolve: check its spelling and DNS".to_string()
        }
    };
    // A TLS or DNS failure is the client's own error: no server spoke.
    let who = match cause {
        Cause::Tls | Cause::Dns => "the connection failed",
        _ => "the server said",
    };
    format!("setup error ({}): {what}; {who}: {said}", cause.as_str())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn http(status: u16, body: &str) -> Sample {
        Sample::failed(
            Outcome::HttpError,
            Some(status),
            format!("HTTP {status}: {body}"),
        )
    }

    fn connect(text: &str) -> Sample {
        Sample::failed(Outcome::ConnectError, None, text)
    }

    const OPENAI_401: &str = r#"{"error":{"message":"Incorrect API key provided: sk-...","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
    const VLLM_404: &str = r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","param":null,"code":404}"#;
    const NO_ROUTE: &str = r#"{"detail":"Not Found"}"#;

    fn context(listed: Option<bool>) -> Context<'static> {
        Context {
            model: "x",
            url: "http://h:8000/chat/completions",
            served: &[],
            model_listed: listed,
        }
    }

    #[test]
    fn each_answer_has_its_cause() {
        let table: &[(Sample, Option<bool>, Option<Cause>)] = &[
            (http(401, OPENAI_401), None, Some(Cause::Key)),
            (http(403, "forbidden"), None, Some(Cause::Key)),
            (http(404, VLLM_404), None, Some(Cause::Model)),
            (http(404, NO_ROUTE), None, Some(Cause::Url)),
            (http(404, NO_ROUTE), Some(true), Some(Cause::Url)),
            // The list says the model is not served: a bare 404 is the model's.
            (http(404, "Not Found"), Some(false), Some(Cause::Model)),
            (http(400, "model 'x' not found"), None, Some(Cause::Model)),
            (http(400, "prompt too long"), None, None),
            (http(500, "internal error"), None, None),
            (Sample::failed(Outcome::Shed, Some(503), "HTTP 503: busy"), None, None),
            (Sample::failed(Outcome::RateLimited, Some(429), "HTTP 429"), None, None),
            (Sample::failed(Outcome::Timeout, None, "timed out"), None, None),
            (
                connect("client error (Connect): dns error: failed to lookup address information: Name or service not known"),
                None,
                Some(Cause::Dns),
            ),
            (
                connect("client error (Connect): invalid peer certificate: UnknownIssuer"),
                None,
                Some(Cause::Tls),
            ),
            (
                connect("error sending request: client error (Connect): received corrupt message of type InvalidContentType"),
                None,
                Some(Cause::Tls),
            ),
            // Nothing listening is an outage, not a setup mistake.
            (connect("client error (Connect): tcp connect error: Connection refused (os error 111)"), None, None),
        ];
        for (sample, listed, cause) in table {
            assert_eq!(cause_of(sample, *listed), *cause, "{:?}", sample.error);
        }
    }

    #[test]
    fn every_request_must_fail_alike() {
        let c = context(None);
        let all = vec![http(401, OPENAI_401); 4];
        let e = judge(&all, &c).expect("a setup error");
        assert_eq!(e.cause, Cause::Key);
        assert!(
            e.message
                .starts_with("setup error (key): the server refused the API key"),
            "{}",
            e.message
        );
        assert!(e.message.contains("invalid_api_key"), "{}", e.message);

        let mut one_ok = all.clone();
        one_ok[2] = Sample::failed(Outcome::Ok, Some(200), "");
        assert_eq!(judge(&one_ok, &c), None, "one answer: a result");
        let mut mixed = all.clone();
        mixed[1] = http(404, VLLM_404);
        assert_eq!(judge(&mixed, &c), None, "two causes: no single mistake");
        // A client certificate refused: the requests that met the alert say
        // so, and one queued on the closing connection, never sent, says
        // nothing either way.
        let alert = connect(
            "error sending request: client error (SendRequest): connection error: \
             received fatal alert: CertificateRequired",
        );
        let never_sent = Sample::failed(
            Outcome::ConnectError,
            None,
            "error sending request: client error (Canceled): operation was canceled: \
             connection was not ready",
        );
        let refused = vec![alert.clone(), never_sent.clone(), alert.clone(), alert];
        assert_eq!(judge(&refused, &c).map(|e| e.cause), Some(Cause::Tls));
        assert_eq!(
            judge(&[never_sent], &c),
            None,
            "nothing sent: nothing known"
        );
        assert_eq!(judge(&[], &c), None, "nothing sent: nothing shown");
        let cancelled = vec![Sample::failed(Outcome::Cancelled, None, "cancelled"); 3];
        assert_eq!(judge(&cancelled, &c), None);
        let mut some_cancelled = all;
        some_cancelled[0] = Sample::failed(Outcome::Cancelled, None, "cancelled");
        assert_eq!(
            judge(&some_cancelled, &c).map(|e| e.cause),
            Some(Cause::Key)
        );
    }

    #[test]
    fn the_line_says_what_to_do() {
        let served = vec!["a".to_string(), "b".to_string()];
        let c = Context {
            served: &served,
            ..context(Some(false))
        };
        let e = judge(&[http(404, VLLM_404)], &c).unwrap();
        assert!(
            e.message.starts_with("setup error (model): the server does not serve the model `x` (it lists: a, b): set `model:`"),
            "{}",
            e.message
        );
        let e = judge(&[http(404, NO_ROUTE)], &context(Some(true))).unwrap();
        assert_eq!(
            e.message,
            "setup error (url): no API at http://h:8000/chat/completions (is `/v1` missing from \
             `base_url`?): check `base_url` and `api`; the server said: HTTP 404: {\"detail\":\"Not Found\"}"
        );
        let with_v1 = Context {
            url: "http://h:8000/v1/chat/completions",
            ..context(None)
        };
        let e = judge(&[http(404, NO_ROUTE)], &with_v1).unwrap();
        assert!(!e.message.contains("missing"), "{}", e.message);
    }

    #[test]
    fn labels_are_distinct() {
        let mut labels: Vec<&str> = Cause::ALL.iter().map(|c| c.as_str()).collect();
        labels.sort_unstable();
        labels.dedup();
        assert_eq!(labels.len(), Cause::ALL.len());
    }
}
