//! The one reader of Prometheus' text exposition format that llmprobe has:
//! a server's own `/metrics`, as the idle gate and the engine signals read
//! it. Pure: text in, series out. A line it cannot read is skipped, never
//! an error: what a server sends is not ours to reject, and the callers
//! only look for the few families they know.
//!
//! Our own parser rather than a crate: the parsers on crates.io pull in
//! regex and chrono for what is a line split and a quoted-string scan here,
//! and the families read are gauges and counters (no histogram arithmetic).

use std::borrow::Cow;

/// One sample line: `name{labels} value [timestamp]`.
#[derive(Debug, Clone, PartialEq)]
pub struct Series<'a> {
    /// Metric name (for a counter, with its `_total`).
    pub name: &'a str,
    /// The text between the braces, unparsed ("" when there are none).
    labels: &'a str,
    /// The sample value (`NaN` and `±Inf` included, as written).
    pub value: f64,
}

impl Series<'_> {
    /// The value of label `key`, unescaped; None when absent.
    pub fn label(&self, key: &str) -> Option<Cow<'_, str>> {
        labels(self.labels).find(|(k, _)| *k == key).map(|(_, v)| v)
    }
}

/// Every sample line of `text` that reads as one, in order.
pub fn series(text: &str) -> impl Iterator<Item = Series<'_>> {
    text.lines().filter_map(line)
}

/// The sum of every finite sample of `metric`, or None when it has none.
pub fn sum(text: &str, metric: &str) -> Option<f64> {
    series(text)
        .filter(|s| s.name == metric && s.value.is_finite())
        .map(|s| s.value)
        .reduce(|a, b| a + b)
}

fn line(line: &str) -> Option<Series<'_>> {
    let line = line.trim_start();
    if line.is_empty() || line.starts_with('#') {
        return None;
    }
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return None;
    }
    let rest = &line[name_end..];
    let (labels, rest) = match rest.strip_prefix('{') {
        Some(inside) => {
            let end = closing_brace(inside)?;
            (&inside[..end], &inside[end + 1..])
        }
        None => ("", rest),
    };
    // A value must be separated from the name or the labels.
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let value = parse_value(rest.split_whitespace().next()?)?;
    Some(Series {
        name,
        labels,
        value,
    })
}

/// A sample value as the format writes it (Go's float syntax and `±Inf`).
fn parse_value(v: &str) -> Option<f64> {
    match v {
        "+Inf" | "Inf" => Some(f64::INFINITY),
        "-Inf" => Some(f64::NEG_INFINITY),
        _ => v.parse::<f64>().ok(),
    }
}

/// Index of the `}` closing a label set, skipping quoted values.
fn closing_brace(s: &str) -> Option<usize> {
    let mut in_quotes = false;
    let mut escaped = false;
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' if in_quotes => escaped = true,
            '"' => in_quotes = !in_quotes,
            '}' if !in_quotes => return Some(i),
            _ => {}
        }
    }
    None
}

/// The `key="value"` pairs of a label set, values unescaped; stops at the
/// first pair it cannot read.
fn labels(mut s: &str) -> impl Iterator<Item = (&str, Cow<'_, str>)> {
    std::iter::from_fn(move || {
        s = s.trim_start_matches([' ', ',']);
        let eq = s.find('=')?;
        let key = s[..eq].trim();
        let after = s[eq + 1..].trim_start().strip_prefix('"')?;
        let mut escaped = false;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '"' => {
                    end = Some(i);
                    break;
                }
                _ => {}
            }
        }
        let end = end?;
        let raw = &after[..end];
        s = &after[end + 1..];
        let value = if raw.contains('\\') {
            Cow::Owned(unescape(raw))
        } else {
            Cow::Borrowed(raw)
        };
        Some((key, value))
    })
}

fn unescape(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some(other) => out.push(other),
            None => out.push('\\'),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const VLLM: &str = r#"# HELP vllm:num_requests_running Number of requests currently running on GPU.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{model_name="qwen {7b}",engine="0"} 3.0
vllm:num_requests_running{model_name="other",engine="1"} 2.0
vllm:num_requests_running_total 99
vllm:num_requests_waiting{model_name="qwen"} 1.0
"#;

    #[test]
    fn sums_series_and_ignores_longer_names() {
        assert_eq!(sum(VLLM, "vllm:num_requests_running"), Some(5.0));
        assert_eq!(sum(VLLM, "vllm:num_requests_waiting"), Some(1.0));
        assert_eq!(sum(VLLM, "vllm:missing"), None);
        assert_eq!(sum("plain 7 1700000000000\n", "plain"), Some(7.0));
        assert_eq!(sum("broken{a=\"x 1\n", "broken"), None);
        assert_eq!(sum("nan_metric NaN\n", "nan_metric"), None);
        assert_eq!(sum("glued{a=\"1\"}7\n", "glued"), None);
    }

    #[test]
    fn labels_are_read_unescaped_whatever_they_hold() {
        let text = "m{a=\"x,y=\\\"z\\\"\", b=\"line\\nnext\",c=\"}\"} 2.5e0\n";
        let s: Vec<_> = series(text).collect();
        assert_eq!(s.len(), 1);
        assert_eq!(s[0].value, 2.5);
        assert_eq!(s[0].label("a").as_deref(), Some("x,y=\"z\""));
        assert_eq!(s[0].label("b").as_deref(), Some("line\nnext"));
        assert_eq!(s[0].label("c").as_deref(), Some("}"));
        assert_eq!(s[0].label("d"), None);
    }

    #[test]
    fn garbage_yields_nothing_and_never_panics() {
        let garbage = "\u{0}\u{1}{{{\n}}} 1\n=\"\n9abc 1\nname{\"\n{a=\"b\"} 3\né 1\n";
        assert_eq!(series(garbage).count(), 0);
        assert_eq!(series("+Inf_bad +Inf\nx +Inf\n").count(), 1);
    }
}
