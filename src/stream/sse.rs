//! Incremental Server-Sent Events framing (WHATWG rules), bytes in, events out.
//!
//! Pure: no I/O and no clock. The caller timestamps bytes where they arrive and
//! feeds them here; events come back through a callback that borrows the
//! decoder's buffers, so steady-state decoding allocates nothing.

/// A line (or an event's data) exceeded the decoder's limit.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SseError {
    /// A line, or the data of one event, grew past `limit` bytes.
    #[error("SSE line longer than {limit} bytes")]
    LineTooLong {
        /// The configured `max_line_bytes`.
        limit: usize,
    },
}

/// One dispatched event; borrows the decoder's buffers until the callback returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SseEvent<'a> {
    /// The `event:` field, None when absent or empty (the default "message").
    pub event: Option<&'a [u8]>,
    /// The `data:` lines joined with `\n`; bytes, not validated as UTF-8.
    pub data: &'a [u8],
}

const BOM: &[u8] = b"\xEF\xBB\xBF";

/// Splits a byte stream into SSE events, holding at most a bounded amount of it.
#[derive(Debug)]
pub struct SseDecoder {
    max_line_bytes: usize,
    /// The start of a line whose end has not arrived yet.
    line: Vec<u8>,
    /// Data of the event being assembled.
    data: Vec<u8>,
    /// Distinguishes "no data line yet" from "one empty data line": only the
    /// latter dispatches an event.
    has_data: bool,
    event: Vec<u8>,
    /// The previous feed ended in `\r`, so a `\n` opening the next one belongs
    /// to the same line ending.
    pending_cr: bool,
    /// The WHATWG rules strip one byte-order mark at the start of the stream.
    at_start: bool,
    /// Sticky: after a limit is hit the rest of the stream cannot be framed
    /// reliably (we would resume in the middle of a line).
    failed: Option<SseError>,
}

impl SseDecoder {
    /// A decoder that rejects any line or event data longer than `max_line_bytes`.
    pub fn new(max_line_bytes: usize) -> Self {
        Self {
            max_line_bytes,
            line: Vec::new(),
            data: Vec::new(),
            has_data: false,
            event: Vec::new(),
            pending_cr: false,
            at_start: true,
            failed: None,
        }
    }

    /// Feeds bytes as they arrive from the network; calls `on_event` for each event completed by them, in order.
    ///
    /// After an error every later `feed` returns it again, until [`finish`](Self::finish)
    /// or [`reset`](Self::reset). Events completed before the error in the same
    /// feed have already been delivered.
    pub fn feed(
        &mut self,
        bytes: &[u8],
        mut on_event: impl FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        if let Some(err) = &self.failed {
            return Err(err.clone());
        }
        let result = self.feed_inner(bytes, &mut on_event);
        if let Err(err) = &result {
            self.fail(err.clone());
        }
        result
    }

    /// End of stream: a final line without newline and a pending event with data are dispatched (lenient: some servers end with `data: [DONE]\n` and no blank line).
    ///
    /// Returns any error the stream ended with; either way the decoder is then
    /// ready for a new stream, keeping its buffers.
    pub fn finish(&mut self, mut on_event: impl FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        let result = match self.failed.take() {
            Some(err) => Err(err),
            None => self.finish_inner(&mut on_event),
        };
        self.reset();
        result
    }

    /// Forgets the current stream (and any error), keeping the allocated buffers.
    pub fn reset(&mut self) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.event.clear();
        self.pending_cr = false;
        self.at_start = true;
        self.failed = None;
    }

    fn fail(&mut self, err: SseError) {
        self.line.clear();
        self.data.clear();
        self.has_data = false;
        self.event.clear();
        self.failed = Some(err);
    }

    fn feed_inner(
        &mut self,
        bytes: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        let mut rest = bytes;
        if self.pending_cr && !rest.is_empty() {
            self.pending_cr = false;
            if rest[0] == b'\n' {
                rest = &rest[1..];
            }
        }
        while let Some(end) = rest.iter().position(|&b| b == b'\n' || b == b'\r') {
            let mut next = end + 1;
            if rest[end] == b'\r' {
                match rest.get(next) {
                    Some(b'\n') => next += 1,
                    Some(_) => {}
                    None => self.pending_cr = true,
                }
            }
            let content = &rest[..end];
            if self.line.is_empty() {
                // Common case: the whole line is in this feed; skip the copy.
                if content.len() > self.max_line_bytes {
                    return Err(self.too_long());
                }
                self.process_line(content, on_event)?;
            } else {
                extend_bounded(&mut self.line, content, self.max_line_bytes)?;
                let line = std::mem::take(&mut self.line);
                let result = self.process_line(&line, on_event);
                self.line = line;
                self.line.clear();
                result?;
            }
            rest = &rest[next..];
        }
        extend_bounded(&mut self.line, rest, self.max_line_bytes)
    }

    fn finish_inner(&mut self, on_event: &mut impl FnMut(SseEvent<'_>)) -> Result<(), SseError> {
        if !self.line.is_empty() {
            let line = std::mem::take(&mut self.line);
            let result = self.process_line(&line, on_event);
            self.line = line;
            result?;
        }
        self.dispatch(on_event);
        Ok(())
    }

    fn process_line(
        &mut self,
        line: &[u8],
        on_event: &mut impl FnMut(SseEvent<'_>),
    ) -> Result<(), SseError> {
        let mut line = line;
        if self.at_start {
            self.at_start = false;
            line = line.strip_prefix(BOM).unwrap_or(line);
        }
        if line.is_empty() {
            self.dispatch(on_event);
            return Ok(());
        }
        if line[0] == b':' {
            return Ok(());
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &[][..]),
        };
        match field {
            b"data" => {
                let separator = usize::from(self.has_data);
                if self.data.len() + separator + value.len() > self.max_line_bytes {
                    return Err(self.too_long());
                }
                if self.has_data {
                    extend_bounded(&mut self.data, b"\n", self.max_line_bytes)?;
                }
                extend_bounded(&mut self.data, value, self.max_line_bytes)?;
                self.has_data = true;
            }
            b"event" => {
                self.event.clear();
                extend_bounded(&mut self.event, value, self.max_line_bytes)?;
            }
            // id and retry only matter to a reconnecting browser.
            _ => {}
        }
        Ok(())
    }

    fn dispatch(&mut self, on_event: &mut impl FnMut(SseEvent<'_>)) {
        if self.has_data {
            on_event(SseEvent {
                event: (!self.event.is_empty()).then_some(self.event.as_slice()),
                data: &self.data,
            });
        }
        self.data.clear();
        self.has_data = false;
        self.event.clear();
    }

    fn too_long(&self) -> SseError {
        SseError::LineTooLong {
            limit: self.max_line_bytes,
        }
    }
}

/// Appends while keeping both length and capacity within `limit`: plain
/// `Vec` growth doubles, which could reserve up to twice the limit.
fn extend_bounded(buf: &mut Vec<u8>, bytes: &[u8], limit: usize) -> Result<(), SseError> {
    let needed = buf.len() + bytes.len();
    if needed > limit {
        return Err(SseError::LineTooLong { limit });
    }
    if needed > buf.capacity() {
        let target = needed.max(buf.capacity() * 2).max(64).min(limit);
        buf.reserve_exact(target - buf.len());
    }
    buf.extend_from_slice(bytes);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An owned copy of an event, for comparing.
    #[derive(Debug, Clone, PartialEq, Eq)]
    struct Ev {
        event: Option<Vec<u8>>,
        data: Vec<u8>,
    }

    fn ev(data: &str) -> Ev {
        Ev {
            event: None,
            data: data.as_bytes().to_vec(),
        }
    }

    fn named(event: &str, data: &str) -> Ev {
        Ev {
            event: Some(event.as_bytes().to_vec()),
            data: data.as_bytes().to_vec(),
        }
    }

    fn collect(out: &mut Vec<Ev>) -> impl FnMut(SseEvent<'_>) + '_ {
        |e| {
            out.push(Ev {
                event: e.event.map(<[u8]>::to_vec),
                data: e.data.to_vec(),
            })
        }
    }

    /// Feeds each piece in turn, then finishes.
    fn decode_pieces(limit: usize, pieces: &[&[u8]]) -> Result<Vec<Ev>, SseError> {
        let mut dec = SseDecoder::new(limit);
        let mut out = Vec::new();
        for piece in pieces {
            dec.feed(piece, collect(&mut out))?;
        }
        dec.finish(collect(&mut out))?;
        Ok(out)
    }

    fn decode(input: &str) -> Vec<Ev> {
        decode_pieces(1 << 20, &[input.as_bytes()]).unwrap()
    }

    #[test]
    fn event_split_across_feeds_is_delivered_when_complete() {
        let mut dec = SseDecoder::new(1024);
        let mut out = Vec::new();
        dec.feed(b"da", collect(&mut out)).unwrap();
        dec.feed(b"ta: {\"a\":", collect(&mut out)).unwrap();
        dec.feed(b"1}\n", collect(&mut out)).unwrap();
        assert!(out.is_empty(), "no blank line yet: {out:?}");
        dec.feed(b"\n", collect(&mut out)).unwrap();
        assert_eq!(out, vec![ev("{\"a\":1}")]);
    }

    #[test]
    fn several_events_in_one_feed_come_in_order() {
        assert_eq!(
            decode("data: one\n\ndata: two\n\ndata: three\n\n"),
            vec![ev("one"), ev("two"), ev("three")]
        );
    }

    #[test]
    fn one_leading_space_is_stripped_from_values() {
        assert_eq!(
            decode("data:a\n\ndata: b\n\ndata:  c\n\ndata\n\n"),
            vec![ev("a"), ev("b"), ev(" c"), ev("")]
        );
    }

    #[test]
    fn comments_and_keep_alives_are_ignored() {
        assert_eq!(
            decode(": ping\n\n:\n\ndata: x\n: in the middle\ndata: y\n\n: trailing\n\n"),
            vec![ev("x\ny")]
        );
    }

    #[test]
    fn event_field_names_the_event_and_resets_after_dispatch() {
        assert_eq!(
            decode("event: error\ndata: {}\n\ndata: plain\n\nevent:\ndata: empty\n\n"),
            vec![named("error", "{}"), ev("plain"), ev("empty")]
        );
    }

    #[test]
    fn event_without_data_is_not_dispatched_and_does_not_leak() {
        assert_eq!(decode("event: lonely\n\ndata: next\n\n"), vec![ev("next")]);
    }

    #[test]
    fn multi_line_data_is_joined_with_newlines() {
        assert_eq!(
            decode("data: first\ndata:\ndata: third\n\n"),
            vec![ev("first\n\nthird")]
        );
    }

    #[test]
    fn id_retry_and_unknown_fields_are_ignored() {
        assert_eq!(
            decode("id: 7\nretry: 1000\nfoo: bar\nnocolon\ndata: d\n\n"),
            vec![ev("d")]
        );
    }

    #[test]
    fn crlf_cr_and_lf_endings_all_end_lines() {
        let expected = vec![ev("a\nb"), ev("c")];
        assert_eq!(
            decode("data: a\r\ndata: b\r\n\r\ndata: c\r\n\r\n"),
            expected
        );
        assert_eq!(decode("data: a\rdata: b\r\rdata: c\r\r"), expected);
        assert_eq!(decode("data: a\ndata: b\n\ndata: c\n\n"), expected);
        assert_eq!(decode("data: a\r\ndata: b\r\rdata: c\n\r\n"), expected);
    }

    #[test]
    fn crlf_split_across_feeds_is_one_line_ending() {
        // Counted as two endings, the `\n` would be a blank line and split
        // the event in two.
        let mut dec = SseDecoder::new(64);
        let mut out = Vec::new();
        dec.feed(b"data: a\r", collect(&mut out)).unwrap();
        dec.feed(b"\n", collect(&mut out)).unwrap();
        assert_eq!(out, vec![], "no blank line yet");
        dec.feed(b"data: b\r", collect(&mut out)).unwrap();
        dec.feed(b"\n\r", collect(&mut out)).unwrap();
        assert_eq!(out, vec![ev("a\nb")]);
        dec.feed(b"\ndata: c\r\n\r\n", collect(&mut out)).unwrap();
        assert_eq!(out, vec![ev("a\nb"), ev("c")]);
        // An empty feed between the halves must not forget the pending `\r`.
        let pieces: [&[u8]; 4] = [b"data: a\r", b"", b"\ndata: b\r\n", b"\n"];
        assert_eq!(decode_pieces(64, &pieces).unwrap(), vec![ev("a\nb")]);
    }

    #[test]
    fn done_without_blank_line_is_dispatched_by_finish() {
        let mut dec = SseDecoder::new(64);
        let mut out = Vec::new();
        dec.feed(b"data: {}\n\ndata: [DONE]\n", collect(&mut out))
            .unwrap();
        assert_eq!(out, vec![ev("{}")]);
        dec.finish(collect(&mut out)).unwrap();
        assert_eq!(out, vec![ev("{}"), ev("[DONE]")]);
    }

    #[test]
    fn finish_dispatches_a_final_line_without_newline() {
        assert_eq!(decode("data: [DONE]"), vec![ev("[DONE]")]);
        assert_eq!(decode("data: a\ndata: b"), vec![ev("a\nb")]);
        assert_eq!(decode(": only a comment"), vec![]);
    }

    #[test]
    fn finish_leaves_the_decoder_ready_for_another_stream() {
        let mut dec = SseDecoder::new(64);
        let mut out = Vec::new();
        dec.feed(b"event: x\ndata: partial", collect(&mut out))
            .unwrap();
        dec.finish(collect(&mut out)).unwrap();
        dec.feed(b"data: second\n\n", collect(&mut out)).unwrap();
        assert_eq!(out, vec![named("x", "partial"), ev("second")]);
    }

    #[test]
    fn byte_order_mark_is_stripped_only_at_stream_start() {
        assert_eq!(decode("\u{FEFF}data: a\n\n"), vec![ev("a")]);
        let pieces: [&[u8]; 2] = [b"\xEF\xBB", b"\xBFdata: a\n\n"];
        assert_eq!(decode_pieces(64, &pieces).unwrap(), vec![ev("a")]);
        // Later on it is part of the field name, which is then unknown.
        assert_eq!(decode("data: a\n\n\u{FEFF}data: b\n\n"), vec![ev("a")]);
    }

    #[test]
    fn line_at_the_limit_passes_and_one_byte_more_fails() {
        let limit = 16;
        let ok = format!("data:{}\n\n", "x".repeat(limit - 5));
        assert_eq!(
            decode_pieces(limit, &[ok.as_bytes()]).unwrap(),
            vec![ev(&"x".repeat(limit - 5))]
        );
        let long = format!("data:{}\n\n", "x".repeat(limit - 4));
        assert_eq!(
            decode_pieces(limit, &[long.as_bytes()]),
            Err(SseError::LineTooLong { limit })
        );
        // The same line arriving in pieces, so it goes through the buffer.
        let pieces: Vec<&[u8]> = long.as_bytes().chunks(3).collect();
        assert_eq!(
            decode_pieces(limit, &pieces),
            Err(SseError::LineTooLong { limit })
        );
    }

    #[test]
    fn accumulated_data_is_bounded_too() {
        let limit = 16;
        // Each line fits; together with the joining newlines they do not.
        let input = "data: 12345\ndata: 12345\ndata: 12345\n\n";
        assert_eq!(
            decode_pieces(limit, &[input.as_bytes()]),
            Err(SseError::LineTooLong { limit })
        );
        let input = "data: 12345\ndata: 12345\ndata: 1234\n\n";
        assert_eq!(
            decode_pieces(limit, &[input.as_bytes()]).unwrap(),
            vec![ev("12345\n12345\n1234")]
        );
    }

    #[test]
    fn ten_megabyte_line_errors_with_bounded_memory() {
        let limit = 1 << 20;
        let piece = vec![b'a'; 64 * 1024];
        let mut dec = SseDecoder::new(limit);
        let mut events = 0;
        dec.feed(b"data: ", |_| events += 1).unwrap();
        let mut failed_at = None;
        for i in 0..160 {
            let result = dec.feed(&piece, |_| events += 1);
            assert!(
                dec.line.capacity() <= limit,
                "buffer grew to {} at piece {i}",
                dec.line.capacity()
            );
            if result.is_err() {
                assert_eq!(result, Err(SseError::LineTooLong { limit }));
                failed_at.get_or_insert(i);
            }
        }
        // 6 + 15 * 64 KiB fits; the sixteenth piece crosses the limit.
        assert_eq!(failed_at, Some(15));
        assert_eq!(events, 0);
        assert_eq!(
            dec.feed(b"\n\ndata: later\n\n", |_| events += 1),
            Err(SseError::LineTooLong { limit }),
            "the error is sticky"
        );
        assert_eq!(
            dec.finish(|_| events += 1),
            Err(SseError::LineTooLong { limit })
        );
        assert_eq!(events, 0);
    }

    /// A vLLM-like stream: role chunk, content chunks, finish, usage, [DONE],
    /// with a keep-alive, CRLF and a named event mixed in.
    fn realistic_stream() -> (Vec<u8>, Vec<Ev>) {
        let mut stream = String::new();
        let mut expected = Vec::new();
        let head = r#"{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"#;
        for i in 0..20 {
            let data = match i {
                0 => format!(r#"{head}"delta":{{"role":"assistant","content":""}},"finish_reason":null}}]}}"#),
                17 => format!(r#"{head}"delta":{{}},"finish_reason":"stop"}}]}}"#),
                18 => r#"{"id":"chatcmpl-1","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":16}}"#.to_string(),
                19 => "[DONE]".to_string(),
                _ => format!(r#"{head}"delta":{{"content":"tok{i} \u00e9"}},"finish_reason":null}}]}}"#),
            };
            match i {
                5 => {
                    stream.push_str(": keep-alive\r\n\r\n");
                    stream.push_str(&format!("data: {data}\r\ndata: more\r\n\r\n"));
                }
                9 => stream.push_str(&format!("event: message\ndata:{data}\n\n")),
                _ => stream.push_str(&format!("data: {data}\n\n")),
            }
            expected.push(match i {
                5 => ev(&format!("{data}\nmore")),
                9 => named("message", &data),
                _ => ev(&data),
            });
        }
        (stream.into_bytes(), expected)
    }

    #[test]
    fn realistic_stream_split_at_every_position_matches_one_feed() {
        let (stream, expected) = realistic_stream();
        let whole = decode_pieces(4096, &[&stream]).unwrap();
        assert_eq!(whole.len(), 20);
        assert_eq!(whole, expected);
        for split in 0..=stream.len() {
            let (a, b) = stream.split_at(split);
            let split_result = decode_pieces(4096, &[a, b]).unwrap();
            assert_eq!(split_result, whole, "split at {split}");
        }
    }

    #[test]
    fn steady_state_does_not_grow_buffers() {
        let (stream, _) = realistic_stream();
        let mut dec = SseDecoder::new(4096);
        let mut n = 0;
        let mut feed_all = |dec: &mut SseDecoder| {
            for piece in stream.chunks(97) {
                dec.feed(piece, |_| n += 1).unwrap();
            }
        };
        feed_all(&mut dec);
        let capacities = (dec.line.capacity(), dec.data.capacity());
        assert!(capacities.0 > 0 && capacities.1 > 0);
        feed_all(&mut dec);
        feed_all(&mut dec);
        assert_eq!(n, 60);
        assert_eq!((dec.line.capacity(), dec.data.capacity()), capacities);
    }

    /// Rough CPU cost per event; run with `--ignored --nocapture`.
    #[test]
    #[ignore]
    fn cost_per_event() {
        let (stream, _) = realistic_stream();
        let pieces: Vec<&[u8]> = stream.split_inclusive(|&b| b == b'\n').collect();
        let mut dec = SseDecoder::new(1 << 16);
        let mut n = 0u64;
        let rounds = 20_000;
        let start = std::time::Instant::now();
        for _ in 0..rounds {
            for piece in &pieces {
                dec.feed(piece, |e| n += e.data.len() as u64).unwrap();
            }
        }
        let per_event = start.elapsed() / (rounds * 20);
        println!("{per_event:?} per event ({n})");
    }

    /// One generated event: optional name, data lines, and how it is written.
    fn arb_event() -> impl Strategy<Value = (Option<String>, Vec<String>, usize, bool)> {
        (
            proptest::option::of("[a-z]{1,8}"),
            proptest::collection::vec("[ -~]{0,30}", 1..4),
            0usize..3,
            any::<bool>(),
        )
    }

    fn render(events: &[(Option<String>, Vec<String>, usize, bool)]) -> (Vec<u8>, Vec<Ev>) {
        let mut out = String::new();
        let mut expected = Vec::new();
        for (name, lines, ending, comment) in events {
            let eol = ["\n", "\r\n", "\r"][*ending];
            if *comment {
                out.push_str(&format!(": keep-alive{eol}"));
            }
            if let Some(name) = name {
                out.push_str(&format!("event: {name}{eol}"));
            }
            for line in lines {
                out.push_str(&format!("data: {line}{eol}"));
            }
            out.push_str(eol);
            expected.push(Ev {
                event: name.as_ref().map(|n| n.as_bytes().to_vec()),
                data: lines.join("\n").into_bytes(),
            });
        }
        (out.into_bytes(), expected)
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(
            bytes in proptest::collection::vec(any::<u8>(), 0..512),
            mut splits in proptest::collection::vec(0usize..512, 0..6),
            limit in 0usize..64,
        ) {
            splits.iter_mut().for_each(|s| *s = (*s).min(bytes.len()));
            splits.sort_unstable();
            let mut dec = SseDecoder::new(limit);
            let mut prev = 0;
            for &s in splits.iter().chain(std::iter::once(&bytes.len())) {
                let _ = dec.feed(&bytes[prev..s], |e| {
                    assert!(e.data.len() <= limit);
                });
                prev = s;
            }
            let _ = dec.finish(|e| assert!(e.data.len() <= limit));
        }

        #[test]
        fn split_stream_yields_the_same_events(
            events in proptest::collection::vec(arb_event(), 0..8),
            mut splits in proptest::collection::vec(any::<prop::sample::Index>(), 0..8),
        ) {
            let (stream, expected) = render(&events);
            let mut cuts: Vec<usize> = splits.drain(..).map(|i| i.index(stream.len() + 1)).collect();
            cuts.sort_unstable();
            let mut pieces = Vec::new();
            let mut prev = 0;
            for &cut in cuts.iter().chain(std::iter::once(&stream.len())) {
                pieces.push(&stream[prev..cut]);
                prev = cut;
            }
            let whole = decode_pieces(1024, &[&stream]).unwrap();
            prop_assert_eq!(&whole, &expected);
            prop_assert_eq!(decode_pieces(1024, &pieces).unwrap(), whole);
        }
    }
}
