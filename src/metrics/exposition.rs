//! The exposition of one scrape, written in chunks of about 256 KB as the
//! response body is sent, from sources that each hold what they need (a
//! snapshot of numbers, pieces of text shared with the results).
//!
//! Why chunks: with a thousand targets the exposition is 10 MB, and writing
//! it into one string per scrape (or holding two renderings of the results
//! while a new one was written) made allocations of several megabytes that
//! glibc's allocator kept after the scrape (issue 14: RSS three times the
//! heap). A chunk is the largest allocation a scrape makes now.

use bytes::Bytes;
use prometheus::proto::MetricFamily;
use prometheus::TextEncoder;

/// Size at which a chunk is handed to the body. Each chunk is a frame of
/// the chunked response: with 64 KB chunks a 12.7 MB scrape took 10.5-11 ms
/// where whole families had taken 8 ms; with 256 KB, 8.4 ms
/// (`cargo bench --bench measurer -- --only footprint`).
const CHUNK_BYTES: usize = 256 * 1024;

/// Part of the exposition, written a little at a time.
pub(super) trait Source: Send {
    /// Appends the next part to `out`; returns false, having written
    /// nothing, once everything was written.
    fn write_next(&mut self, out: &mut String) -> bool;
}

/// Every source of one scrape, in exposition order, as chunks of text.
pub struct Exposition {
    sources: std::vec::IntoIter<Box<dyn Source>>,
    current: Option<Box<dyn Source>>,
}

impl Exposition {
    /// The exposition of `sources`, in that order.
    pub(super) fn new(sources: Vec<Box<dyn Source>>) -> Self {
        let mut sources = sources.into_iter();
        let current = sources.next();
        Exposition { sources, current }
    }

    /// The whole exposition in one string.
    pub fn into_string(self) -> String {
        let mut out = String::new();
        for chunk in self {
            // Chunks are whole lines of UTF-8 text.
            out.push_str(&String::from_utf8_lossy(&chunk));
        }
        out
    }

    /// Appends parts to `out` until it holds at least `limit` bytes or
    /// nothing is left.
    fn fill(&mut self, out: &mut String, limit: usize) {
        while out.len() < limit {
            let Some(source) = self.current.as_mut() else {
                return;
            };
            if !source.write_next(out) {
                self.current = self.sources.next();
            }
        }
    }
}

impl Iterator for Exposition {
    type Item = Bytes;

    fn next(&mut self) -> Option<Bytes> {
        let mut out = String::with_capacity(CHUNK_BYTES + CHUNK_BYTES / 8);
        self.fill(&mut out, CHUNK_BYTES);
        (!out.is_empty()).then(|| Bytes::from(out))
    }
}

/// One family gathered from the registry, encoded when its turn comes.
pub(super) struct Gathered(pub(super) Option<MetricFamily>);

impl Source for Gathered {
    fn write_next(&mut self, out: &mut String) -> bool {
        match self.0.take() {
            Some(family) => {
                encode_into(std::slice::from_ref(&family), out);
                true
            }
            None => false,
        }
    }
}

/// Appends `families` in the text format.
pub(super) fn encode_into(families: &[MetricFamily], out: &mut String) {
    // The encoder only fails on empty or unnamed families, which are never
    // built; log rather than lose the whole scrape.
    if let Err(e) = TextEncoder::new().encode_utf8(families, out) {
        tracing::error!(error = %e, "encoding metrics failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Text already written.
    struct Text(Option<String>);

    impl Source for Text {
        fn write_next(&mut self, out: &mut String) -> bool {
            match self.0.take() {
                Some(text) => {
                    out.push_str(&text);
                    true
                }
                None => false,
            }
        }
    }

    /// Writes `n` lines of `width` bytes, one per call.
    struct Lines {
        n: usize,
        width: usize,
    }

    impl Source for Lines {
        fn write_next(&mut self, out: &mut String) -> bool {
            if self.n == 0 {
                return false;
            }
            self.n -= 1;
            out.push_str(&"x".repeat(self.width - 1));
            out.push('\n');
            true
        }
    }

    #[test]
    fn chunks_hold_every_part_in_order_and_stay_near_the_chunk_size() {
        let sources: Vec<Box<dyn Source>> = vec![
            Box::new(Text(Some("# first\n".to_string()))),
            Box::new(Lines {
                n: 40_000,
                width: 100,
            }),
            Box::new(Text(None)),
            Box::new(Text(Some("# last\n".to_string()))),
        ];
        let chunks: Vec<Bytes> = Exposition::new(sources).collect();
        let total: usize = chunks.iter().map(|c| c.len()).sum();
        assert_eq!(total, 8 + 40_000 * 100 + 7);
        assert!(chunks.len() >= 15, "{} chunks", chunks.len());
        for c in &chunks[..chunks.len() - 1] {
            assert!(c.len() >= CHUNK_BYTES && c.len() < CHUNK_BYTES + 100);
            assert!(c.ends_with(b"\n"));
        }
        assert!(chunks[0].starts_with(b"# first\nxx"));
        assert!(chunks[chunks.len() - 1].ends_with(b"x\n# last\n"));
    }

    #[test]
    fn nothing_to_write_is_no_chunk() {
        let sources: Vec<Box<dyn Source>> = vec![Box::new(Text(None))];
        assert_eq!(Exposition::new(sources).count(), 0);
        assert_eq!(Exposition::new(Vec::new()).into_string(), "");
    }
}
