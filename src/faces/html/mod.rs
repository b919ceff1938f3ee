//! Sweep reports as one self-contained HTML page: charts against
//! concurrency, the verdict beside them, the terminal's table below. Used by
//! `sweep --format html`, `llmprobe report results.json` and the daemon's
//! `/` and `/targets/NAME` pages.
//!
//! The charts are SVG written by hand (`charts`), not drawn with `plotters`:
//! every chart here is a few polylines over two axes, about 300 lines of
//! code, while `plotters` would add a dependency tree (and minutes of build
//! on a 2-core machine) to produce the same lines, with less control over
//! what a test can read back: each marker here carries its exact value.
//! The page needs no network and no JavaScript: inline CSS and SVG only.
//!
//! Every string that comes from a server, a configuration or a JSON
//! document passes through [`escape`] before it reaches the page.

pub mod charts;
pub mod page;
pub mod settings;

pub use page::{document, report, target_section};
pub use settings::{Settings, TargetSettings};

/// Escapes text for HTML element content and quoted attribute values (and
/// SVG, which is parsed as part of the HTML).
pub fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// Percent-encodes one URL path segment (a target name in a link): every
/// byte but the unreserved ones of RFC 3986.
pub fn path_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_markup_and_quotes() {
        assert_eq!(
            escape("<a href=\"x\" title='y'>&</a>"),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;&lt;/a&gt;"
        );
        assert_eq!(escape("plain é"), "plain é");
    }

    #[test]
    fn path_segments_are_percent_encoded() {
        assert_eq!(path_segment("gpu-1.a_b~"), "gpu-1.a_b~");
        assert_eq!(path_segment("a b/c?\"é"), "a%20b%2Fc%3F%22%C3%A9");
    }
}
