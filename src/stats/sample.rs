//! One measured request: its outcome class and its timestamps.

use std::time::Duration;

/// How a request ended; exactly one per request (the `outcome` label).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Completed stream with generated content.
    Ok,
    /// HTTP 503: the server declined for load.
    Shed,
    /// HTTP 429: a rate limiter declined.
    RateLimited,
    /// Any other non-2xx status.
    HttpError,
    /// The per-request time limit expired.
    Timeout,
    /// The connection could not be opened (refused, DNS, TLS), or closed
    /// before the request was written.
    ConnectError,
    /// The request was to go through a proxy (`proxy: environment`) that
    /// could not be reached or refused the tunnel: the server was not reached.
    ProxyError,
    /// Bad stream, bad JSON, missing fields, error event, reset mid-stream.
    ProtocolError,
    /// Stopped by shutdown or reload before it finished.
    Cancelled,
}

impl Outcome {
    /// Every outcome, in exposition order.
    pub const ALL: [Outcome; 9] = [
        Outcome::Ok,
        Outcome::Shed,
        Outcome::RateLimited,
        Outcome::HttpError,
        Outcome::Timeout,
        Outcome::ConnectError,
        Outcome::ProxyError,
        Outcome::ProtocolError,
        Outcome::Cancelled,
    ];

    /// The label value used in metrics and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Shed => "shed",
            Outcome::RateLimited => "rate_limited",
            Outcome::HttpError => "http_error",
            Outcome::Timeout => "timeout",
            Outcome::ConnectError => "connect_error",
            Outcome::ProxyError => "proxy_error",
            Outcome::ProtocolError => "protocol_error",
            Outcome::Cancelled => "cancelled",
        }
    }

    /// Position in [`Outcome::ALL`], for fixed-size counters.
    pub fn index(self) -> usize {
        self as usize
    }

    /// Shed and rate-limited requests count against the shed ratio.
    pub fn is_shed(self) -> bool {
        matches!(self, Outcome::Shed | Outcome::RateLimited)
    }
}

/// Where the output token count of a request came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// `usage.completion_tokens` reported by the server.
    Usage,
    /// Number of content chunks (the server reported no usage).
    Chunks,
}

/// Which delta fields carried a reasoning model's thinking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
pub struct ReasoningFields {
    /// `delta.reasoning` (current vLLM).
    pub reasoning: bool,
    /// `delta.reasoning_content` (older vLLM, SGLang, DeepSeek).
    pub reasoning_content: bool,
}

impl ReasoningFields {
    /// Both sets together.
    pub fn union(self, other: ReasoningFields) -> ReasoningFields {
        ReasoningFields {
            reasoning: self.reasoning || other.reasoning,
            reasoning_content: self.reasoning_content || other.reasoning_content,
        }
    }

    /// The field names, as `setup.reasoning_field` says them: "" when none,
    /// "reasoning", "reasoning_content", or both joined by ", ".
    pub fn names(self) -> &'static str {
        match (self.reasoning, self.reasoning_content) {
            (false, false) => "",
            (true, false) => "reasoning",
            (false, true) => "reasoning_content",
            (true, true) => "reasoning, reasoning_content",
        }
    }
}

/// What a stream said of a reasoning model's thinking. Default: no thinking
/// streamed, so the first output was the answer.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Thinking {
    /// Send to the first chunk carrying the answer (content, a tool call,
    /// legacy text) after the thinking; None when no answer came. Read
    /// through [`Sample::answer_ttft`], which is the TTFT when nothing was
    /// thought aloud.
    pub answer_ttft: Option<Duration>,
    /// Chunks that carried thinking.
    pub chunks: u64,
    /// `usage.completion_tokens_details.reasoning_tokens`, when reported.
    pub usage_tokens: Option<u64>,
    /// The delta fields the thinking came in.
    pub fields: ReasoningFields,
}

/// The measurement of one request. Durations are measured from the moment
/// the request was sent (after it got its concurrency slot).
#[derive(Debug, Clone)]
pub struct Sample {
    /// How the request ended.
    pub outcome: Outcome,
    /// HTTP status when one was received.
    pub status: Option<u16>,
    /// Send to first chunk carrying generated content.
    pub ttft: Option<Duration>,
    /// Send to last chunk carrying generated content.
    pub latency: Option<Duration>,
    /// Gaps between consecutive content chunks.
    pub inter_token: Vec<Duration>,
    /// Output tokens (see `token_source`).
    pub output_tokens: u64,
    /// Where `output_tokens` came from.
    pub token_source: TokenSource,
    /// `usage.prompt_tokens` when reported.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens the server said it served from its prefix cache
    /// (`usage.prompt_tokens_details.cached_tokens`), when reported.
    pub cached_prompt_tokens: Option<u64>,
    /// Number of chunks that carried generated content.
    pub content_chunks: u64,
    /// Whether a `finish_reason` was seen (a stream cut off without one is flagged).
    pub finish_reason_seen: bool,
    /// Short description of what went wrong, for logs (never holds a secret).
    pub error: Option<String>,
    /// Send to the end of the request: the end of its stream (`[DONE]`, or
    /// `finish_reason` and usage), or its failure; a timeout counts its
    /// whole time limit. This is how long it held its place.
    pub elapsed: Duration,
    /// Time spent opening a new connection (DNS, TCP, TLS) for this request;
    /// None when it reused a pooled connection (or never got one).
    pub connect: Option<Duration>,
    /// The server's usage report was not trusted: `completion_tokens` of 0
    /// on a stream that carried content, or above what its content chunks
    /// could carry (chunks were counted instead), or `prompt_tokens` above
    /// what the request could hold, or cached tokens above the prompt (those
    /// counts were dropped).
    pub usage_disagreed: bool,
    /// A reasoning model's thinking, and when its answer began.
    pub thinking: Thinking,
}

impl Sample {
    /// A sample for a request that failed before any content arrived.
    pub fn failed(outcome: Outcome, status: Option<u16>, error: impl Into<String>) -> Self {
        Sample {
            outcome,
            status,
            ttft: None,
            latency: None,
            inter_token: Vec::new(),
            output_tokens: 0,
            token_source: TokenSource::Chunks,
            prompt_tokens: None,
            cached_prompt_tokens: None,
            content_chunks: 0,
            finish_reason_seen: false,
            error: Some(error.into()),
            elapsed: Duration::ZERO,
            connect: None,
            usage_disagreed: false,
            thinking: Thinking::default(),
        }
    }

    /// Send to the first answer chunk: the TTFT when no thinking was
    /// streamed (the first output was the answer), None when the stream
    /// thought and never answered (its output limit spent on thinking).
    pub fn answer_ttft(&self) -> Option<Duration> {
        if self.thinking.chunks == 0 {
            self.ttft
        } else {
            self.thinking.answer_ttft
        }
    }

    /// Reasoning tokens and where the count came from: the usage report's
    /// `reasoning_tokens` when given, else the chunks that carried thinking
    /// (one token each). A report of 0 for a stream that streamed thinking
    /// is not trusted, as for the output tokens.
    pub fn reasoning_tokens(&self) -> (u64, TokenSource) {
        match self.thinking.usage_tokens {
            Some(n) if n > 0 || self.thinking.chunks == 0 => (n, TokenSource::Usage),
            _ => (self.thinking.chunks, TokenSource::Chunks),
        }
    }

    /// Whether the request counts in the latency that decides a level: every
    /// request that was sent, except those declined for load (they have their
    /// own ratio) and those cancelled by llmprobe itself.
    pub fn counts_in_decision(&self) -> bool {
        !self.outcome.is_shed() && self.outcome != Outcome::Cancelled
    }

    /// The latency this request contributes to the decision: its latency when
    /// it succeeded, else how long it took to fail (a timeout: at least its
    /// time limit), so failures cannot make a level look faster.
    pub fn decision_latency(&self) -> Duration {
        match (self.outcome, self.latency) {
            (Outcome::Ok, Some(l)) => l,
            _ => self.elapsed,
        }
    }

    /// The decision latency in seconds, when the request counts in the
    /// decision (None: shed, or cancelled by llmprobe). The verdicts read
    /// this one definition.
    pub fn decision_seconds(&self) -> Option<f64> {
        self.counts_in_decision()
            .then(|| self.decision_latency().as_secs_f64())
    }

    /// Generation speed: (output tokens - 1) / (latency - TTFT), in tokens/s.
    pub fn generation_speed(&self) -> Option<f64> {
        let (ttft, latency) = (self.ttft?, self.latency?);
        let decode = latency.checked_sub(ttft)?.as_secs_f64();
        if self.output_tokens < 2 || decode <= 0.0 {
            return None;
        }
        Some((self.output_tokens - 1) as f64 / decode)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(ttft_ms: u64) -> Sample {
        let mut s = Sample::failed(Outcome::Ok, Some(200), "");
        s.error = None;
        s.ttft = Some(Duration::from_millis(ttft_ms));
        s
    }

    #[test]
    fn the_answer_begins_at_the_first_output_unless_thinking_came_first() {
        let plain = ok(40);
        assert_eq!(plain.answer_ttft(), Some(Duration::from_millis(40)));
        let mut thought = ok(40);
        thought.thinking.chunks = 6;
        thought.thinking.answer_ttft = Some(Duration::from_millis(90));
        assert_eq!(thought.answer_ttft(), Some(Duration::from_millis(90)));
        thought.thinking.answer_ttft = None;
        assert_eq!(thought.answer_ttft(), None, "thought and never answered");
    }

    #[test]
    fn reasoning_tokens_prefer_the_usage_report() {
        let mut s = ok(1);
        assert_eq!(s.reasoning_tokens(), (0, TokenSource::Chunks));
        s.thinking.chunks = 6;
        assert_eq!(s.reasoning_tokens(), (6, TokenSource::Chunks));
        s.thinking.usage_tokens = Some(24);
        assert_eq!(s.reasoning_tokens(), (24, TokenSource::Usage));
        s.thinking.usage_tokens = Some(0);
        assert_eq!(
            s.reasoning_tokens(),
            (6, TokenSource::Chunks),
            "0 reported for streamed thinking is a placeholder"
        );
        // Hidden thinking (reported, never streamed) counts as reported.
        s.thinking.chunks = 0;
        s.thinking.usage_tokens = Some(300);
        assert_eq!(s.reasoning_tokens(), (300, TokenSource::Usage));
    }

    #[test]
    fn reasoning_fields_are_named_and_joined() {
        let r = ReasoningFields {
            reasoning: true,
            reasoning_content: false,
        };
        let c = ReasoningFields {
            reasoning: false,
            reasoning_content: true,
        };
        assert_eq!(ReasoningFields::default().names(), "");
        assert_eq!(r.names(), "reasoning");
        assert_eq!(c.names(), "reasoning_content");
        assert_eq!(r.union(c).names(), "reasoning, reasoning_content");
    }
}
