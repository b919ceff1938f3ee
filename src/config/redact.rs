//! Redaction: every secret the process holds ([`Secret`]) replaced in a
//! finished text, whether a server echoed it as written, JSON-escaped
//! (`\u0073`, `\/`), percent-encoded or as an HTML character reference, and
//! nested escapes of those. The one mechanism every outgoing string passes
//! through: error messages, what a server tells of itself, log lines.
//!
//! Run on a text before it is cut: a key that straddles a cut would
//! otherwise be shown in part. Where the text itself is the start of
//! something longer (a body read up to a limit), [`redact_start`] also
//! replaces the start of a key at its end.

use std::borrow::Cow;
use std::ops::Range;
use std::sync::{Arc, Mutex};

use aho_corasick::{AhoCorasick, MatchKind};

use crate::config::secret;

/// What replaces a secret.
pub const REDACTED: &str = "[redacted]";

/// How many times escapes are decoded (a JSON string inside a JSON string,
/// percent-encoded inside JSON).
const DECODE_ROUNDS: usize = 3;

/// A key start shorter than this at the end of a cut text is left alone:
/// shorter ones match ordinary words, and say almost nothing of a key.
const MIN_TAIL: usize = 4;

/// `text` with every secret the process holds replaced by [`REDACTED`].
pub fn redact(text: &str) -> Cow<'_, str> {
    match current() {
        Some(m) => m.redact(text, false),
        None => Cow::Borrowed(text),
    }
}

/// [`redact`] for a text that is the start of a longer one (a body read up
/// to a limit): a key's start at the very end is replaced too.
pub fn redact_start(text: &str) -> Cow<'_, str> {
    match current() {
        Some(m) => m.redact(text, true),
        None => Cow::Borrowed(text),
    }
}

/// [`redact`] against the given secrets only; `cut` as [`redact_start`].
pub fn redact_with<'a, S: AsRef<str>>(text: &'a str, secrets: &[S], cut: bool) -> Cow<'a, str> {
    match Matcher::new(secrets) {
        Some(m) => m.redact(text, cut),
        None => Cow::Borrowed(text),
    }
}

/// The matcher for the secrets alive now, rebuilt only when they change:
/// one search finds every key at once, however many targets have one.
fn current() -> Option<Arc<Matcher>> {
    static CACHE: Mutex<Option<(u64, Option<Arc<Matcher>>)>> = Mutex::new(None);
    let generation = secret::generation();
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((g, m)) = cache.as_ref() {
        if *g == generation {
            return m.clone();
        }
    }
    let m = Matcher::new(&secret::live()).map(Arc::new);
    *cache = Some((generation, m.clone()));
    m
}

/// Every secret to look for, in one automaton.
struct Matcher {
    secrets: Vec<Vec<u8>>,
    search: AhoCorasick,
}

impl Matcher {
    fn new<S: AsRef<str>>(secrets: &[S]) -> Option<Matcher> {
        let secrets: Vec<Vec<u8>> = secrets
            .iter()
            .map(|s| s.as_ref().as_bytes().to_vec())
            .filter(|s| !s.is_empty())
            .collect();
        if secrets.is_empty() {
            return None;
        }
        let search = AhoCorasick::builder()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&secrets)
            .ok()?;
        Some(Matcher { secrets, search })
    }

    fn redact<'a>(&self, text: &'a str, cut: bool) -> Cow<'a, str> {
        // A cut can end inside an escape (`\u00`, `%7`): that part cannot be
        // decoded, so it goes first, and with it a key's start hidden in it.
        let (whole, dropped) = if cut {
            split_partial_escape(text)
        } else {
            (text, "")
        };
        let mut hits: Vec<Range<usize>> = Vec::new();
        let mut view = View::identity(whole.as_bytes());
        for round in 0..=DECODE_ROUNDS {
            hits.extend(
                self.search
                    .find_iter(&view.bytes)
                    .map(|m| view.span(m.range())),
            );
            if cut {
                for s in &self.secrets {
                    hits.extend(view.tail_prefix(s, whole.len()));
                }
            }
            if round == DECODE_ROUNDS {
                break;
            }
            match view.decoded() {
                Some(next) => view = next,
                None => break,
            }
        }
        if hits.is_empty() && dropped.is_empty() {
            return Cow::Borrowed(text);
        }
        if hits.is_empty() {
            return Cow::Borrowed(whole);
        }
        Cow::Owned(replace(whole, hits))
    }
}

/// `text` split before an escape left unfinished at its end.
fn split_partial_escape(text: &str) -> (&str, &str) {
    let b = text.as_bytes();
    let n = b.len();
    // `\uXXX` at most 5 bytes, `%X` 2, `&#x` + digits up to 10.
    for back in 1..=12.min(n) {
        let start = n - back;
        let rest = &b[start..];
        let unfinished = match rest[0] {
            b'\\' => {
                rest.len() == 1
                    || (rest[1] == b'u'
                        && rest.len() < 6
                        && rest[2..].iter().all(u8::is_ascii_hexdigit))
            }
            b'%' => rest.len() < 3 && rest[1..].iter().all(u8::is_ascii_hexdigit),
            b'&' => {
                rest.len() == 1
                    || (rest[1] == b'#'
                        && rest[2..]
                            .iter()
                            .enumerate()
                            .all(|(i, c)| c.is_ascii_hexdigit() || (i == 0 && *c == b'x')))
            }
            _ => false,
        };
        if unfinished && text.is_char_boundary(start) {
            return (&text[..start], &text[start..]);
        }
    }
    (text, "")
}

/// `text` with the given byte ranges (any order, may overlap) replaced.
fn replace(text: &str, mut hits: Vec<Range<usize>>) -> String {
    hits.sort_by_key(|r| r.start);
    let mut merged: Vec<Range<usize>> = Vec::with_capacity(hits.len());
    for r in hits {
        match merged.last_mut() {
            Some(last) if r.start < last.end => last.end = last.end.max(r.end),
            _ => merged.push(r),
        }
    }
    let mut out = String::with_capacity(text.len());
    let mut at = 0;
    for r in merged {
        let start = floor_char(text, r.start).max(at);
        out.push_str(&text[at..start]);
        out.push_str(REDACTED);
        at = ceil_char(text, r.end).max(start);
    }
    out.push_str(&text[at..]);
    out
}

fn floor_char(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

fn ceil_char(text: &str, mut i: usize) -> usize {
    while i < text.len() && !text.is_char_boundary(i) {
        i += 1;
    }
    i
}

/// Bytes decoded from a text, each with the range of the text it came from.
struct View {
    bytes: Vec<u8>,
    from: Vec<Range<usize>>,
}

impl View {
    fn identity(text: &[u8]) -> View {
        View {
            bytes: text.to_vec(),
            from: (0..text.len()).map(|i| i..i + 1).collect(),
        }
    }

    /// The range of the original text that `bytes[r]` came from.
    fn span(&self, r: Range<usize>) -> Range<usize> {
        self.from[r.start].start..self.from[r.end - 1].end
    }

    /// The longest start of `secret` (at least [`MIN_TAIL`] bytes, or all of
    /// a shorter secret) that ends this view, as a range up to `end`.
    fn tail_prefix(&self, secret: &[u8], end: usize) -> Option<Range<usize>> {
        let min = MIN_TAIL.min(secret.len());
        let longest = secret.len().saturating_sub(1).min(self.bytes.len());
        (min..=longest)
            .rev()
            .find(|&k| self.bytes.ends_with(&secret[..k]))
            .map(|k| self.from[self.bytes.len() - k].start..end)
    }

    /// One round of unescaping, or None when nothing was escaped.
    fn decoded(&self) -> Option<View> {
        let b = &self.bytes;
        let mut bytes = Vec::with_capacity(b.len());
        let mut from = Vec::with_capacity(b.len());
        let mut changed = false;
        let mut i = 0;
        while i < b.len() {
            if let Some((chars, used)) = escape_at(&b[i..]) {
                let span = self.from[i].start..self.from[i + used - 1].end;
                let mut buf = [0u8; 4];
                if let Some(c) = chars {
                    for byte in c.encode_utf8(&mut buf).bytes() {
                        bytes.push(byte);
                        from.push(span.clone());
                    }
                }
                changed = true;
                i += used;
            } else if let Some((byte, used)) = percent_at(&b[i..]) {
                bytes.push(byte);
                from.push(self.from[i].start..self.from[i + used - 1].end);
                changed = true;
                i += used;
            } else {
                bytes.push(b[i]);
                from.push(self.from[i].clone());
                i += 1;
            }
        }
        changed.then_some(View { bytes, from })
    }
}

/// A JSON escape or an HTML character reference at the start of `b`: the
/// characters it stands for and the bytes it takes.
fn escape_at(b: &[u8]) -> Option<(Option<char>, usize)> {
    match b {
        [b'\\', b'u', rest @ ..] => {
            let hi = hex4(rest)?;
            if (0xD800..0xDC00).contains(&hi) {
                if let [b'\\', b'u', low @ ..] = &rest[4..] {
                    let lo = hex4(low)?;
                    if (0xDC00..0xE000).contains(&lo) {
                        let c = 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
                        return Some((char::from_u32(c), 12));
                    }
                }
                return None;
            }
            Some((char::from_u32(hi), 6))
        }
        [b'\\', c, ..] => {
            let c = match c {
                b'/' => '/',
                b'\\' => '\\',
                b'"' => '"',
                b'\'' => '\'',
                b'n' => '\n',
                b't' => '\t',
                b'r' => '\r',
                _ => return None,
            };
            Some((Some(c), 2))
        }
        [b'&', b'#', rest @ ..] => {
            let (hex, digits) = match rest.first() {
                Some(b'x' | b'X') => (true, &rest[1..]),
                _ => (false, rest),
            };
            let len = digits
                .iter()
                .take(8)
                .take_while(|c| {
                    if hex {
                        c.is_ascii_hexdigit()
                    } else {
                        c.is_ascii_digit()
                    }
                })
                .count();
            if len == 0 || digits.get(len) != Some(&b';') {
                return None;
            }
            let text = std::str::from_utf8(&digits[..len]).ok()?;
            let n = u32::from_str_radix(text, if hex { 16 } else { 10 }).ok()?;
            Some((char::from_u32(n), 2 + usize::from(hex) + len + 1))
        }
        _ => None,
    }
}

fn hex4(b: &[u8]) -> Option<u32> {
    let digits = b.get(..4)?;
    u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
}

/// A `%XX` at the start of `b`: the byte and the 3 bytes it takes.
fn percent_at(b: &[u8]) -> Option<(u8, usize)> {
    match b {
        [b'%', h, l, ..] if h.is_ascii_hexdigit() && l.is_ascii_hexdigit() => {
            let s = [*h, *l];
            let s = std::str::from_utf8(&s).ok()?;
            Some((u8::from_str_radix(s, 16).ok()?, 3))
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-TABLE-9f8e7d6c5b4a";

    fn r(text: &str) -> String {
        redact_with(text, &[KEY], false).into_owned()
    }

    fn escaped_u(s: &str) -> String {
        s.chars().map(|c| format!("\\u{:04x}", c as u32)).collect()
    }

    fn percent(s: &str) -> String {
        s.bytes().map(|b| format!("%{b:02X}")).collect()
    }

    #[test]
    fn every_echo_form_is_replaced() {
        let half = KEY.len() / 2;
        let table: Vec<(&str, String, &str)> = vec![
            (
                "as written",
                format!("Bearer {KEY} rejected"),
                "Bearer [redacted] rejected",
            ),
            (
                "twice, touching",
                format!("{KEY}{KEY}"),
                "[redacted][redacted]",
            ),
            (
                "\\u-escaped",
                format!("key \\\"{}\\\"", escaped_u(KEY)),
                "key \\\"[redacted]\\\"",
            ),
            (
                "half \\u-escaped",
                format!("{}{}.", &KEY[..half], escaped_u(&KEY[half..])),
                "[redacted].",
            ),
            (
                "upper-case \\u",
                escaped_u(KEY).to_uppercase().replace("\\U", "\\u"),
                "[redacted]",
            ),
            (
                "percent-encoded",
                format!("?auth={}&x=1", percent(KEY)),
                "?auth=[redacted]&x=1",
            ),
            (
                "percent, lower hex",
                percent(KEY).to_lowercase(),
                "[redacted]",
            ),
            (
                "only the dash encoded",
                KEY.replace('-', "%2D"),
                "[redacted]",
            ),
            (
                "escaped twice (JSON in JSON)",
                escaped_u(KEY).replace('\\', "\\\\"),
                "[redacted]",
            ),
            (
                "HTML references",
                KEY.chars().map(|c| format!("&#{};", c as u32)).collect(),
                "[redacted]",
            ),
            (
                "HTML hex references",
                KEY.chars().map(|c| format!("&#x{:x};", c as u32)).collect(),
                "[redacted]",
            ),
            ("absent", "nothing to see".into(), "nothing to see"),
            (
                "a key's start is kept when whole",
                "sk-TABLE".into(),
                "sk-TABLE",
            ),
        ];
        for (case, text, want) in table {
            assert_eq!(r(&text), want, "{case}: {text}");
        }
    }

    #[test]
    fn slash_escapes_inside_a_key_are_decoded() {
        let key = "sk/with/slashes-123456";
        let text = r#"{"k":"sk\/with\/slashes-123456"}"#;
        assert_eq!(redact_with(text, &[key], false), r#"{"k":"[redacted]"}"#);
    }

    #[test]
    fn a_key_cut_at_the_end_is_replaced_in_any_form() {
        let cut = |t: &str| redact_with(t, &[KEY], true).into_owned();
        assert_eq!(cut(&format!("Bearer {}", &KEY[..20])), "Bearer [redacted]");
        assert_eq!(cut(&format!("Bearer {}", &KEY[..5])), "Bearer [redacted]");
        // Too short a start to say anything: kept.
        assert_eq!(cut("Bearer sk-"), "Bearer sk-");
        let u = escaped_u(&KEY[..12]);
        assert_eq!(cut(&format!("x {u}")), "x [redacted]");
        // Cut inside an escape.
        assert_eq!(
            cut(&format!("x {}\\u00", escaped_u(&KEY[..6]))),
            "x [redacted]"
        );
        assert_eq!(cut(&format!("x {}%2", percent(&KEY[..6]))), "x [redacted]");
        // An unfinished escape with no key is dropped only when cut.
        assert_eq!(cut("plain \\u00"), "plain ");
        assert_eq!(r("plain \\u00"), "plain \\u00");
    }

    #[test]
    fn multibyte_text_around_a_key_stays_valid() {
        let text = format!("鍵は{KEY}です");
        assert_eq!(r(&text), "鍵は[redacted]です");
        let text = format!("鍵は{}", &KEY[..10]);
        assert_eq!(redact_with(&text, &[KEY], true), "鍵は[redacted]");
    }

    #[test]
    fn no_secret_borrows() {
        assert!(matches!(
            redact_with("text", &[""; 0], false),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            redact_with("text", &[KEY], false),
            Cow::Borrowed(_)
        ));
        assert!(matches!(
            redact_with("text \\u0041", &[KEY], false),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn every_live_secret_is_redacted_and_dropped_ones_are_forgotten() {
        let held = secret::Secret::new("sk-LIVE-REGISTRY-0a1b2c".into());
        assert_eq!(redact("x sk-LIVE-REGISTRY-0a1b2c y"), "x [redacted] y");
        drop(held);
        assert_eq!(
            redact("x sk-LIVE-REGISTRY-0a1b2c y"),
            "x sk-LIVE-REGISTRY-0a1b2c y"
        );
    }
}
