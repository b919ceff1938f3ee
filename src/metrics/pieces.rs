//! The text pieces result families are kept as: a target's (or pair's)
//! series in every family, written once when its report changes, and the
//! source a scrape copies them from, family by family, without parsing.

use std::fmt::Write;
use std::sync::Arc;

use crate::metrics::exposition::Source;
use crate::metrics::names::{self, Spec};

/// Number of result families.
const FAMILIES: usize = names::RESULT_FAMILIES.len();

/// The series of one target (or pair) in every result family, as text:
/// the lines of family `i` of [`names::RESULT_FAMILIES`] are
/// `text[offsets[i]..offsets[i + 1]]`, without the family's header.
#[derive(Debug)]
pub(crate) struct Piece {
    text: String,
    offsets: [u32; FAMILIES + 1],
}

// By hand: arrays derive Default only up to 32 entries.
impl Default for Piece {
    fn default() -> Self {
        Piece {
            text: String::new(),
            offsets: [0; FAMILIES + 1],
        }
    }
}

impl Piece {
    /// The lines of family `i`; empty when it has none.
    fn family(&self, i: usize) -> &str {
        let (Some(&start), Some(&end)) = (self.offsets.get(i), self.offsets.get(i + 1)) else {
            return "";
        };
        self.text.get(start as usize..end as usize).unwrap_or("")
    }
}

/// A piece being written: the lines of each family apart, joined at the end.
pub(crate) struct PieceWriter {
    families: [String; FAMILIES],
}

impl Default for PieceWriter {
    fn default() -> Self {
        PieceWriter {
            families: std::array::from_fn(|_| String::new()),
        }
    }
}

impl PieceWriter {
    /// The lines of `spec`'s family.
    fn lines(&mut self, spec: &Spec) -> Option<&mut String> {
        let i = names::RESULT_FAMILIES
            .iter()
            .position(|f| f.name == spec.name)?;
        self.families.get_mut(i)
    }

    /// Adds a gauge series whose label values follow `spec.labels`.
    pub(crate) fn add(&mut self, spec: &Spec, values: &[&str], value: f64) {
        if let Some(out) = self.lines(spec) {
            let labels = spec.labels.iter().copied().zip(values.iter().copied());
            write_series(out, spec.name, labels, value);
        }
    }

    /// Adds a gauge series with explicit label pairs.
    pub(crate) fn add_pairs<'l>(
        &mut self,
        spec: &Spec,
        labels: impl IntoIterator<Item = (&'l str, &'l str)>,
        value: f64,
    ) {
        if let Some(out) = self.lines(spec) {
            write_series(out, spec.name, labels, value);
        }
    }

    /// The piece, its families joined.
    pub(crate) fn finish(self) -> Piece {
        let mut text = String::with_capacity(self.families.iter().map(String::len).sum());
        let mut offsets = [0u32; FAMILIES + 1];
        for (i, lines) in self.families.iter().enumerate() {
            text.push_str(lines);
            // A piece is a few KB; saturate rather than wrap on the absurd.
            offsets[i + 1] = u32::try_from(text.len()).unwrap_or(u32::MAX);
        }
        Piece { text, offsets }
    }
}

/// The result families of one scrape, written from the pieces it holds:
/// family by family in name order, each with its header when it has at
/// least one series, then the lines of every piece.
pub(crate) struct ResultsSource {
    pieces: Vec<Arc<Piece>>,
    /// Indices into [`names::RESULT_FAMILIES`], by name.
    order: Vec<usize>,
    /// Position in `order` of the family being written.
    family: usize,
    /// The next piece to write lines of.
    piece: usize,
    header_written: bool,
}

impl ResultsSource {
    /// A source over `pieces`, in their order.
    pub(crate) fn new(pieces: Vec<Arc<Piece>>) -> Self {
        let mut order: Vec<usize> = (0..FAMILIES).collect();
        order.sort_by_key(|&i| names::RESULT_FAMILIES[i].name);
        ResultsSource {
            pieces,
            order,
            family: 0,
            piece: 0,
            header_written: false,
        }
    }
}

impl Source for ResultsSource {
    fn write_next(&mut self, out: &mut String) -> bool {
        while let Some(&f) = self.order.get(self.family) {
            while let Some(piece) = self.pieces.get(self.piece) {
                self.piece += 1;
                let lines = piece.family(f);
                if lines.is_empty() {
                    continue;
                }
                if !self.header_written {
                    family_header(out, &names::RESULT_FAMILIES[f], "gauge");
                    self.header_written = true;
                }
                out.push_str(lines);
                return true;
            }
            self.family += 1;
            self.piece = 0;
            self.header_written = false;
        }
        false
    }
}

/// Appends the `# HELP` and `# TYPE` lines of a family of type `kind`.
pub(crate) fn family_header(out: &mut String, spec: &Spec, kind: &str) {
    out.push_str("# HELP ");
    out.push_str(spec.name);
    out.push(' ');
    escape_into(out, spec.help, false);
    out.push_str("\n# TYPE ");
    out.push_str(spec.name);
    out.push(' ');
    out.push_str(kind);
    out.push('\n');
}

/// Appends one series line: `name{label="value",...} value`.
pub(crate) fn write_series<'l>(
    out: &mut String,
    name: &str,
    labels: impl IntoIterator<Item = (&'l str, &'l str)>,
    value: f64,
) {
    out.push_str(name);
    let mut separator = '{';
    for (label, v) in labels {
        out.push(separator);
        out.push_str(label);
        out.push_str("=\"");
        escape_into(out, v, true);
        out.push('"');
        separator = ',';
    }
    if separator == ',' {
        out.push('}');
    }
    // Writing to a String cannot fail.
    let _ = writeln!(out, " {value}");
}

/// Appends `s` escaped as the text format wants: backslash and newline,
/// and in label values the double quote.
fn escape_into(out: &mut String, s: &str, quote: bool) {
    if !s.contains(['\\', '\n', '"']) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '"' if quote => out.push_str("\\\""),
            c => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus::proto::{self, LabelPair, MetricFamily, MetricType};

    /// The result families of `pieces`, as a scrape writes them.
    fn text_of(pieces: Vec<PieceWriter>) -> String {
        let pieces = pieces.into_iter().map(|p| Arc::new(p.finish())).collect();
        let source = ResultsSource::new(pieces);
        crate::metrics::exposition::Exposition::new(vec![Box::new(source)]).into_string()
    }

    /// The same series through the prometheus crate's protobuf and encoder.
    fn through_the_crate(spec: &Spec, series: &[(Vec<(&str, &str)>, f64)]) -> String {
        let mut mf = MetricFamily::default();
        mf.set_name(spec.name.to_string());
        mf.set_help(spec.help.to_string());
        mf.set_field_type(MetricType::GAUGE);
        for (labels, value) in series {
            let pairs = labels
                .iter()
                .map(|(n, v)| {
                    let mut p = LabelPair::default();
                    p.set_name(n.to_string());
                    p.set_value(v.to_string());
                    p
                })
                .collect();
            let mut gauge = proto::Gauge::default();
            gauge.set_value(*value);
            let mut m = proto::Metric::from_label(pairs);
            m.set_gauge(gauge);
            mf.mut_metric().push(m);
        }
        let mut out = String::new();
        crate::metrics::exposition::encode_into(&[mf], &mut out);
        out
    }

    #[test]
    fn text_is_written_as_the_prometheus_encoder_writes_it() {
        let spec = Spec {
            name: "llmprobe_test_gauge",
            help: "A help with a \\ backslash\nand a newline \"quoted\".",
            labels: &["target", "workload"],
        };
        let series: Vec<(Vec<(&str, &str)>, f64)> = vec![
            (vec![("target", "a"), ("workload", "chat")], 0.25),
            (
                vec![("target", "q\"uo\\te"), ("workload", "new\nline")],
                3.0,
            ),
            (vec![("target", "é"), ("workload", "")], 1e-7),
            (vec![("target", "big"), ("workload", "x")], 12345678901.5),
            (vec![("target", "inf"), ("workload", "x")], f64::INFINITY),
            (vec![("target", "nan"), ("workload", "x")], f64::NAN),
            (vec![("target", "neg"), ("workload", "x")], -0.0),
        ];
        let mut text = String::new();
        family_header(&mut text, &spec, "gauge");
        for (labels, value) in &series {
            write_series(&mut text, spec.name, labels.iter().copied(), *value);
        }
        assert_eq!(text, through_the_crate(&spec, &series));
    }

    #[test]
    fn a_family_without_labels_has_no_braces() {
        let spec = Spec {
            name: "llmprobe_test_plain",
            help: "Plain.",
            labels: &[],
        };
        let mut text = String::new();
        family_header(&mut text, &spec, "gauge");
        write_series(&mut text, spec.name, [], 2.0);
        assert_eq!(text, through_the_crate(&spec, &[(vec![], 2.0)]));
        assert!(text.ends_with("\nllmprobe_test_plain 2\n"), "{text}");
    }

    #[test]
    fn families_go_in_name_order_with_the_lines_of_every_piece() {
        let mut a = PieceWriter::default();
        a.add(&names::SWEEP_SUCCESS, &["a"], 1.0);
        a.add(&names::CAPACITY_KNEE, &["a", "m", "w"], 4.0);
        let mut b = PieceWriter::default();
        b.add(&names::SWEEP_SUCCESS, &["b"], 0.0);
        let text = text_of(vec![a, PieceWriter::default(), b]);
        let lines: Vec<&str> = text.lines().filter(|l| !l.starts_with('#')).collect();
        assert_eq!(
            lines,
            [
                "llmprobe_capacity_knee_concurrency{target=\"a\",model=\"m\",workload=\"w\"} 4",
                "llmprobe_sweep_success{target=\"a\"} 1",
                "llmprobe_sweep_success{target=\"b\"} 0",
            ]
        );
        // One header per family with series, none for the others.
        assert_eq!(text.matches("# TYPE").count(), 2);
    }
}
