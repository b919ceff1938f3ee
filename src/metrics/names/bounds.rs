//! The daemon's own bounds at work: failed basic auth, refused reloads and
//! abandoned discovery reads, counted so that a flood or a hung file shows
//! on a dashboard rather than in the journal.

use super::spec::Spec;

/// Requests refused by basic auth, by reason.
pub const HTTP_AUTH_FAILURES: Spec = Spec {
    name: "llmprobe_http_auth_failures_total",
    help: "Requests the HTTP side refused with 401 (web.basic_auth_users): reason missing (no or malformed Basic credentials), wrong (the user or password did not verify), busy (not checked: too many password checks waiting, or this client's address already has its share of them).",
    labels: &["reason"],
};
/// `reason` values of [`HTTP_AUTH_FAILURES`], every one created at zero.
pub const AUTH_FAILURE_REASONS: [&str; 3] = ["missing", "wrong", "busy"];

/// `POST /-/reload` requests refused, by reason.
pub const RELOAD_REFUSED: Spec = Spec {
    name: "llmprobe_reload_refused_total",
    help: "POST /-/reload requests not acted on: reason disabled (web.enable_reload is false; 403), unauthorized (basic auth failed; 401), busy (a reload was already waiting its turn; 429). Reloads over HTTP run one at a time, at most one a second.",
    labels: &["reason"],
};
/// `reason` values of [`RELOAD_REFUSED`], every one created at zero.
pub const RELOAD_REFUSED_REASONS: [&str; 3] = ["disabled", "unauthorized", "busy"];

/// File_sd reads abandoned because they did not finish in time.
pub const FILE_SD_READ_TIMEOUTS: Spec = Spec {
    name: "llmprobe_file_sd_read_timeouts_total",
    help: "Reads of the file_sd files abandoned because they did not finish within 30 s (a hung network mount); the files keep the targets they gave last time and the read is tried again at the next refresh.",
    labels: &[],
};
