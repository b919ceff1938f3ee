//! Where log lines go: standard error, one line per event, with every secret
//! redacted. The last stop of anything logged, whatever field carried it: a
//! target name with a newline (from a discovered label) cannot split a line,
//! and a server's text cannot put escape sequences into a file or journald.

use std::io::{self, Write};
use std::sync::RwLock;

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

/// Runs a write of a log line: with a progress line drawn on the same
/// terminal, it is cleared first and drawn again after, else each log
/// line would land on top of it.
pub type AroundLines = Box<dyn Fn(&mut dyn FnMut()) + Send + Sync>;

/// What every log line is written inside, when anything.
static AROUND: RwLock<Option<AroundLines>> = RwLock::new(None);

/// Sets (or with `None`, removes) what log lines are written inside.
pub fn around_lines(around: Option<AroundLines>) {
    *AROUND
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = around;
}

impl<W: Write> Write for LineWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        // The formatter hands over one whole event per write.
        let text = String::from_utf8_lossy(buf);
        let line = clean_line(&text, self.ansi);
        let mut result = Ok(());
        let mut write = || result = self.inner.write_all(line.as_bytes());
        match &*AROUND
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
        {
            Some(around) => around(&mut write),
            None => write(),
        }
        result?;
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

/// Longest panic message written, in characters.
const PANIC_CHARS: usize = 4000;

/// Sends panic messages through the same door as log lines: the default
/// hook writes a panic's message (which may quote a server's text, and so a
/// key) straight to standard error. A backtrace, when `RUST_BACKTRACE` asks
/// for one, follows as the default hook would print it.
pub fn redact_panics() {
    std::panic::set_hook(Box::new(|info| {
        let thread = std::thread::current();
        let mut out = panic_line(thread.name().unwrap_or("<unnamed>"), &info.to_string());
        let trace = std::backtrace::Backtrace::capture();
        if trace.status() == std::backtrace::BacktraceStatus::Captured {
            out.push_str(&redact::redact(&trace.to_string()));
        }
        let _ = io::stderr().write_all(out.as_bytes());
    }));
}

/// A panic's text as one log line, made by [`redact::message`].
fn panic_line(thread: &str, text: &str) -> String {
    let said = redact::message(text, PANIC_CHARS);
    clean_line(&format!("thread '{thread}' {said}"), false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_written_inside_what_a_progress_display_sets() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::sync::Arc;
        let (before, after) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
        let (b, a) = (before.clone(), after.clone());
        around_lines(Some(Box::new(move |write| {
            b.fetch_add(1, Ordering::SeqCst);
            write();
            a.fetch_add(1, Ordering::SeqCst);
        })));
        let mut w = LineWriter {
            inner: Vec::new(),
            ansi: false,
        };
        let written = w.write(b"INFO level done\n").map(|_| w.inner.clone());
        around_lines(None);
        assert_eq!(written.unwrap(), b"INFO level done\n");
        assert!(before.load(Ordering::SeqCst) >= 1 && after.load(Ordering::SeqCst) >= 1);
    }

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

    #[test]
    fn a_panic_message_is_one_line_without_the_key() {
        let key = "sk-PANIC-LINE-1a2b3c4d5e6f";
        let _key = crate::config::secret::Secret::new(key.into());
        let text = format!(
            "panicked at src/x.rs:1:2:\nunexpected answer: Bearer {}\n{}",
            &key[..9],
            &key[9..]
        );
        assert_eq!(
            panic_line("worker", &text),
            "thread 'worker' panicked at src/x.rs:1:2: unexpected answer: Bearer [redacted]\n"
        );
    }
}
