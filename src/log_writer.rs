//! Where log lines go: standard error, one line per event, with every secret
//! redacted. The last stop of anything logged, whatever field carried it: a
//! target name with a newline (from a discovered label) cannot split a line,
//! and a server's text cannot put escape sequences into a file or journald.

use std::io::{self, Write};

use tracing_subscriber::fmt::MakeWriter;

use crate::config::redact;

/// Makes a [`LineWriter`] per event.
#[derive(Debug, Clone, Copy)]
pub struct Stderr {
    /// Whether the formatter colours its output (stderr is a terminal):
    /// escape sequences then pass, else every control character is escaped.
    pub ansi: bool,
}

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = LineWriter<io::Stderr>;

    fn make_writer(&'a self) -> Self::Writer {
        LineWriter {
            inner: io::stderr(),
            ansi: self.ansi,
        }
    }
}

/// Writes each formatted event as one clean line.
pub struct LineWriter<W> {
    inner: W,
    ansi: bool,
}

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over one whole event per write.
        let text = String::from_utf8_lossy(buf);
        let line = clean_line(&text, self.ansi);
        self.inner.write_all(line.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

/// An event's text as one line: secrets redacted, inner line breaks and
/// (without colours) every control character escaped, one final newline.
pub fn clean_line(event: &str, ansi: bool) -> String {
    let body = event.strip_suffix('\n').unwrap_or(event);
    let body = redact::redact(body);
    let mut out = String::with_capacity(body.len() + 1);
    for c in body.chars() {
        match c {
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\x1b' if ansi => out.push(c),
            c if c.is_control() && c != '\t' => {
                out.push_str(&c.escape_unicode().to_string());
            }
            c => out.push(c),
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_event_stays_one_line_without_secrets() {
        let _key = crate::config::secret::Secret::new("sk-LOG-LINE-7a6b5c4d".into());
        let event =
            "WARN sweep failed target=a\nFAKE ERROR injected error=Bearer sk-LOG-LINE-7a6b5c4d\n";
        assert_eq!(
            clean_line(event, false),
            "WARN sweep failed target=a\\nFAKE ERROR injected error=Bearer [redacted]\n"
        );
        assert_eq!(
            clean_line("red \x1b[31mx\x07\n", false),
            "red \\u{1b}[31mx\\u{7}\n"
        );
        assert_eq!(clean_line("red \x1b[31mx\n", true), "red \x1b[31mx\n");
    }

    #[test]
    fn the_writer_writes_what_it_cleaned() {
        let mut w = LineWriter {
            inner: Vec::new(),
            ansi: false,
        };
        w.write_all(b"a\rb\n").unwrap();
        assert_eq!(w.inner, b"a\\rb\n");
    }
}
