//! Redaction: every secret the process holds ([`Secret`]) replaced in a
//! finished text, whether a server echoed it as written, JSON-escaped
//! (`\u0073`, `\/`), percent-encoded or as an HTML character reference,
//! nested escapes of those, and with whitespace, line breaks or invisible
//! characters inside it. The one mechanism every outgoing string passes
//! through: error messages ([`message`]), what a server tells of itself,
//! engine-signal notes, log lines and panic messages.
//!
//! Run on a text before it is cut: a key that straddles a cut would
//! otherwise be shown in part. A text from outside is kept whole up to a
//! bound of a few KiB; where it was cut short it says so with [`CUT_MARK`]
//! (or is the start of something longer: [`redact_start`]), and the start of
//! a key right before such a cut is replaced too. What survives of a key is
//! at most [`MIN_TAIL`] - 1 characters of its start at such a cut.

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
pub const MIN_TAIL: usize = 4;

/// Marks where a text from outside was cut short before it reached a
/// message (`stream/chunk.rs` and the probe append it): the start of a key
/// right before it is replaced as at the end of a cut text. The stream layer
/// writes the same character (it uses nothing from here); a probe test holds
/// the two together.
pub const CUT_MARK: char = '\u{2026}';

/// How many of the last cut marks of a text are honoured: the process puts
/// one or two into a message; more come from the server, and cost time.
const MAX_MARKS: usize = 4;

/// `text` from outside (a server's error, a parser's message, a note) as a
/// message: every form of every secret redacted first, then whitespace
/// collapsed to single spaces, other control characters replaced (no
/// terminal escapes into a log), and only then cut to `max_chars`
/// characters (`...` after a cut). The one place a message is made.
pub fn message(text: &str, max_chars: usize) -> String {
    one_line(&redact(text), max_chars)
}

/// [`message`] against the given secrets only.
pub fn message_with<S: AsRef<str>>(text: &str, secrets: &[S], max_chars: usize) -> String {
    one_line(&redact_with(text, secrets, false), max_chars)
}

/// A redacted text on one line, cut.
fn one_line(text: &str, max_chars: usize) -> String {
    let collapsed: String = text
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .map(|c| if c.is_control() { '\u{FFFD}' } else { c })
        .collect();
    match collapsed.char_indices().nth(max_chars) {
        Some((end, _)) => format!("{}...", &collapsed[..end]),
        None => collapsed,
    }
}

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
        let mut hits = self.scan(whole, true, cut.then_some(whole.len()));
        // Where the text says it was cut short, a key's start before the
        // mark (and any escape the cut left unfinished) goes too.
        let marks = whole.rmatch_indices(CUT_MARK).take(MAX_MARKS);
        for (at, _) in marks {
            let (before, _) = split_partial_escape(&whole[..at]);
            hits.extend(self.scan(before, false, Some(at)));
        }
        if hits.is_empty() && dropped.is_empty() {
            return Cow::Borrowed(text);
        }
        if hits.is_empty() {
            return Cow::Borrowed(whole);
        }
        Cow::Owned(replace(whole, hits))
    }

    /// The ranges of `text` to replace: every whole secret (when `whole`) in
    /// every decoded form, with and without the invisible characters; and
    /// with `tail_end`, a secret's start ending the text, replaced up to it.
    fn scan(&self, text: &str, whole: bool, tail_end: Option<usize>) -> Vec<Range<usize>> {
        let mut hits: Vec<Range<usize>> = Vec::new();
        let mut view = View::identity(text.as_bytes());
        for round in 0..=DECODE_ROUNDS {
            let stripped = view.stripped();
            for v in std::iter::once(&view).chain(stripped.as_ref()) {
                if whole {
                    hits.extend(self.search.find_iter(&v.bytes).map(|m| v.span(m.range())));
                }
                if let Some(end) = tail_end {
                    for s in &self.secrets {
                        hits.extend(v.tail_prefix(s, end));
                    }
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
        hits
    }
}

/// `text` split before the escapes left unfinished at its end: a cut inside
/// a doubly escaped character (`\\u00`) leaves one in another.
fn split_partial_escape(text: &str) -> (&str, &str) {
    let mut kept = text;
    for _ in 0..DECODE_ROUNDS {
        match split_one_escape(kept) {
            (_, "") => break,
            (before, _) => kept = before,
        }
    }
    (kept, &text[kept.len()..])
}

/// `text` split before one escape left unfinished at its end.
fn split_one_escape(text: &str) -> (&str, &str) {
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

    /// The view without whitespace, line breaks, control and invisible
    /// characters (a key a server wrapped or split), or None when it has none.
    fn stripped(&self) -> Option<View> {
        let b = &self.bytes;
        let mut bytes = Vec::with_capacity(b.len());
        let mut from = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            let len = utf8_len(b[i]);
            if i + len > b.len() {
                // A character cut in two at the end (a cut inside an encoded
                // invisible one) says nothing, and hides a key's start.
                break;
            }
            let c = std::str::from_utf8(&b[i..i + len])
                .ok()
                .and_then(|s| s.chars().next());
            match c {
                Some(c) if invisible(c) => i += len,
                _ => {
                    bytes.push(b[i]);
                    from.push(self.from[i].clone());
                    i += 1;
                }
            }
        }
        (bytes.len() < b.len()).then_some(View { bytes, from })
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
                b'b' => '\u{8}',
                b'f' => '\u{c}',
                _ => return None,
            };
            Some((Some(c), 2))
        }
        [b'&', rest @ ..] if rest.first() != Some(&b'#') => {
            let named: [(&[u8], char); 5] = [
                (b"amp;", '&'),
                (b"lt;", '<'),
                (b"gt;", '>'),
                (b"quot;", '"'),
                (b"apos;", '\''),
            ];
            let (name, c) = named.iter().find(|(n, _)| rest.starts_with(n))?;
            Some((Some(*c), 1 + name.len()))
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

/// The length of the UTF-8 sequence a byte starts (1 for a stray byte).
fn utf8_len(first: u8) -> usize {
    match first {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => 1,
    }
}

/// A character a reader does not see as part of a word: what a server can
/// put inside a key (wrapping it, or on purpose) without hiding it.
fn invisible(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || matches!(
            c,
            '\u{00AD}' | '\u{200B}'..='\u{200F}' | '\u{2060}' | '\u{FEFF}'
        )
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

    #[test]
    fn a_key_with_a_line_break_or_spaces_inside_is_replaced() {
        let table: Vec<(&str, String, &str)> = vec![
            (
                "line break",
                format!("Bearer {}\n{} no", &KEY[..7], &KEY[7..]),
                "Bearer [redacted] no",
            ),
            (
                "CRLF and indent",
                format!("{}\r\n    {}", &KEY[..3], &KEY[3..]),
                "[redacted]",
            ),
            (
                "zero-width space",
                format!("{}\u{200B}{}", &KEY[..9], &KEY[9..]),
                "[redacted]",
            ),
            (
                "JSON \\n",
                format!("{}\\n{}", &KEY[..7], &KEY[7..]),
                "[redacted]",
            ),
            (
                "percent %0A",
                format!("{}%0A{}", &KEY[..7], &KEY[7..]),
                "[redacted]",
            ),
            (
                "HTML &#10;",
                format!("{}&#10;{}", &KEY[..7], &KEY[7..]),
                "[redacted]",
            ),
        ];
        for (case, text, want) in table {
            assert_eq!(r(&text), want, "{case}: {text:?}");
        }
    }

    #[test]
    fn a_key_cut_before_a_cut_mark_is_replaced() {
        let text = format!("x Bearer {}{CUT_MARK} at line 1 column 9", &KEY[..11]);
        assert_eq!(
            r(&text),
            format!("x Bearer [redacted]{CUT_MARK} at line 1 column 9")
        );
        let text = format!("x {}\\u00{CUT_MARK}", escaped_u(&KEY[..6]));
        assert_eq!(r(&text), format!("x [redacted]{CUT_MARK}"));
        // Doubly escaped, cut inside a character: nothing of it is left.
        let text = format!(
            "x {}\\\\u00{CUT_MARK}",
            escaped_u(&KEY[..6]).replace('\\', "\\\\")
        );
        assert_eq!(r(&text), format!("x [redacted]{CUT_MARK}"));
        // Percent-encoded, cut inside an encoded zero-width space that
        // split the key: the half character at the cut hides nothing.
        let text = format!("x {}%E2{CUT_MARK}", percent(&KEY[..6]));
        assert_eq!(r(&text), format!("x [redacted]{CUT_MARK}"));
        // Three characters say almost nothing, and match ordinary words.
        assert_eq!(r(&format!("sk-{CUT_MARK}")), format!("sk-{CUT_MARK}"));
    }

    #[test]
    fn a_message_is_redacted_before_it_is_cut() {
        let text = format!("{} Bearer {KEY} rejected", "w".repeat(30));
        // A cut inside the key leaves nothing of it.
        for max in 0..60 {
            let m = message_with(&text, &[KEY], max);
            assert!(!m.contains("sk-T"), "{max}: {m}");
        }
        assert_eq!(
            message_with(&format!("a\n\n b {KEY}\x1b[2J"), &[KEY], 100),
            "a b [redacted]\u{FFFD}[2J"
        );
        assert_eq!(message_with("abcdef", &[KEY], 3), "abc...");
        assert_eq!(message_with("鍵は鍵", &[KEY], 2), "鍵は...");
    }

    mod property {
        use super::*;
        use proptest::prelude::*;

        /// What a message may show of a secret: at most this many of its
        /// characters in a row, the start of a key cut before [`MIN_TAIL`].
        const MOST_SHOWN: usize = MIN_TAIL - 1;

        /// A secret's forms: how a server may echo it.
        fn form(secret: &str, which: usize) -> String {
            match which {
                0 => secret.to_string(),
                1 => secret
                    .chars()
                    .map(|c| format!("\\u{:04x}", c as u32))
                    .collect(),
                2 => secret
                    .chars()
                    .map(|c| format!("\\\\u{:04X}", c as u32))
                    .collect(),
                3 => secret.bytes().map(|b| format!("%{b:02X}")).collect(),
                4 => secret.chars().map(|c| format!("&#{};", c as u32)).collect(),
                5 => secret
                    .chars()
                    .map(|c| format!("&#x{:x};", c as u32))
                    .collect(),
                _ => {
                    let json = serde_json::to_string(secret).unwrap_or_default();
                    json.trim_matches('"').replace('/', "\\/")
                }
            }
        }

        /// `text` as a reader sees it: every escape decoded, invisible
        /// characters gone.
        fn as_read(text: &str) -> Vec<u8> {
            let mut view = View::identity(text.as_bytes());
            for _ in 0..=DECODE_ROUNDS {
                view = view.stripped().unwrap_or(view);
                match view.decoded() {
                    Some(next) => view = next,
                    None => break,
                }
            }
            view.stripped().unwrap_or(view).bytes
        }

        fn shown(output: &str, secret: &str) -> usize {
            let read = as_read(output);
            let s = secret.as_bytes();
            (1..=s.len())
                .rev()
                .find(|&n| s.windows(n).any(|w| read.windows(n).any(|r| r == w)))
                .unwrap_or(0)
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(1024))]

            /// Any secret at any offset of any message, in any form, with a
            /// break inside or not, cut short on the way in (marked) and cut
            /// at any length on the way out: at most [`MOST_SHOWN`] of its
            /// characters in a row are left. The secret's letters are none of
            /// `[redacted]`'s, nor hex digits, nor those of escapes, and the
            /// message's other text shares none, so any run found is the key's.
            #[test]
            fn no_secret_survives_any_cut_in_any_form(
                secret in "[ghijklmnopqsvwyzGHIJKLMNOPQRSTVWYZ_~=+/-]{8,80}",
                before in "[abcdefrtux0-9 ,:;!?()\n\té日]{0,300}",
                after in "[abcdefrtux0-9 ,:;!?()\n\té日]{0,60}",
                which in 0usize..7,
                split in prop::option::of((any::<prop::sample::Index>(), prop_oneof![
                    Just("\n"), Just("\r\n"), Just(" "), Just("\t  "), Just("\u{200B}"),
                ])),
                cut_in in prop::option::of(any::<prop::sample::Index>()),
                cut_out in 0usize..500,
            ) {
                let inner = match &split {
                    Some((at, brk)) => {
                        let at = at.index(secret.len() + 1);
                        format!("{}{brk}{}", &secret[..at], &secret[at..])
                    }
                    None => secret.clone(),
                };
                let mut text = format!("{before}Bearer {}{after}", form(&inner, which));
                if let Some(cut) = cut_in {
                    let mut at = cut.index(text.len() + 1);
                    while !text.is_char_boundary(at) {
                        at -= 1;
                    }
                    text.truncate(at);
                    text.push(CUT_MARK);
                }
                let out = message_with(&text, &[secret.as_str()], cut_out);
                let n = shown(&out, &secret);
                prop_assert!(n <= MOST_SHOWN, "{n} characters shown: {out:?} from {text:?}");
                let redacted = redact_with(&text, &[secret.as_str()], false);
                let n = shown(&redacted, &secret);
                prop_assert!(n <= MOST_SHOWN, "{n} characters left: {redacted:?} from {text:?}");
            }
        }
    }
}
