//! Text made safe for the page: HTML escaping and URL path segments.

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
