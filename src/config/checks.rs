//! Checks of single values that more than one section uses, and the upper
//! bounds of sizes. A leaf: it imports no other part of config.

use std::collections::BTreeMap;
use std::time::Duration;

// Upper bounds, so that a typo is an error at load rather than a panic or an
// exhausted memory later: a level runs one task per request in flight and
// keeps one sample per request, and the interval is added to clock times.
/// Highest concurrency level.
pub const MAX_LEVEL: u32 = 10_000;
/// Most requests in one level (or warm-up).
pub const MAX_REQUESTS_PER_LEVEL: u64 = 1_000_000;
/// Longest interval between two sweeps.
pub const MAX_INTERVAL: Duration = Duration::from_secs(365 * 24 * 3600);
/// Shortest sweep time limit.
pub const MIN_SWEEP_TIMEOUT: Duration = Duration::from_secs(1);
/// Most shards.
pub const MAX_SHARDS: u32 = 10_000;

/// Whether `c` may not appear in a name: control characters (C0 such as
/// NUL and ESC, DEL, C1) and the invisible ones that reorder or hide text
/// (bidirectional overrides and isolates such as U+202E, zero-width ones).
/// A name is a label value on `/metrics`, a heading on `/` and a field of
/// every log line: such a character would rewrite what a reader sees.
fn forbidden_in_name(c: char) -> bool {
    c.is_control()
        || matches!(
            c,
            '\u{061C}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2069}' | '\u{FEFF}'
        )
}

/// A name (a target's, a gateway pair's) checked: no control or invisible
/// formatting character.
pub fn check_name(name: &str) -> Result<(), String> {
    match name.chars().find(|c| forbidden_in_name(*c)) {
        Some(c) => Err(format!(
            "holds the control or invisible character U+{:04X}: a name appears in metric labels, pages and logs",
            u32::from(c)
        )),
        None => Ok(()),
    }
}

/// `name` as a message shows it: each character [`check_name`] refuses
/// written `\u{..}`, so that the message itself stays clean.
pub fn shown_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if forbidden_in_name(c) {
                c.escape_unicode().to_string()
            } else {
                c.to_string()
            }
        })
        .collect()
}

/// Fewest characters an API key may have. No real key is shorter, and every
/// secret is redacted wherever it appears in a text that leaves the process:
/// a short one (`bad`) would be cut out of unrelated words (`vllm-badkey`).
pub const MIN_KEY_CHARS: usize = 8;

/// An API key long enough to be one (its value is never in the message).
pub fn check_key_length(key: &str) -> Result<(), String> {
    let n = key.chars().count();
    if n < MIN_KEY_CHARS {
        return Err(format!(
            "the key is {n} characters long: keys shorter than {MIN_KEY_CHARS} are refused \
             (no real key is that short, and redacting it would cut it out of unrelated words)"
        ));
    }
    Ok(())
}

/// A base URL checked (http or https, no credentials, no query), without
/// its trailing slash.
pub fn check_base_url(url: &str) -> Result<String, String> {
    let parsed = url::Url::parse(url).map_err(|e| format!("not a URL: {e}"))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err("must start with http:// or https://".into());
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        // Credentials in the URL would end up in logs and labels.
        return Err("must not hold credentials: use api_key_env or api_key_file".into());
    }
    if parsed.query().is_some() {
        return Err("must not have a query string".into());
    }
    if parsed.fragment().is_some() {
        // Everything after `#` is never sent: the request path would be lost.
        return Err("must not have a #fragment (it would swallow the request path)".into());
    }
    Ok(url.trim_end_matches('/').to_string())
}

/// Checks that every password is a bcrypt hash (a plain password would
/// never match, and would sit in the file in clear).
pub fn check_password_hashes(users: &BTreeMap<String, String>) -> Result<(), String> {
    for (user, hash) in users {
        if !hash.starts_with("$2") || hash.len() != 60 {
            return Err(format!(
                "password of `{user}` must be a bcrypt hash (`$2y$...`, 60 characters)"
            ));
        }
    }
    Ok(())
}
