//! PromQL read as text: the vector selectors of an expression, the
//! `llmprobe_*` names in it, and the queries inside alert annotations. A
//! scanner, not a parser, but enough for the PromQL shipped here; the tests
//! that use it run what it finds through Prometheus, so a scanning mistake
//! shows up as a failed query, not as a pass.

use std::collections::BTreeMap;
use std::fmt::Write as _;

/// Index just past the string literal that starts at `start`.
pub fn end_of_string(b: &[u8], start: usize) -> usize {
    let quote = b[start];
    let mut i = start + 1;
    while i < b.len() {
        if b[i] == b'\\' && quote != b'`' {
            i += 2;
            continue;
        }
        if b[i] == quote {
            return i + 1;
        }
        i += 1;
    }
    b.len()
}

/// Index just past the bracket that closes the one at `start`, skipping
/// string literals.
fn end_of_group(b: &[u8], start: usize) -> usize {
    let (open, close) = (b[start], matching_bracket(b[start]));
    let (mut i, mut depth) = (start, 0);
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' | b'`' => {
                i = end_of_string(b, i);
                continue;
            }
            c if c == open => depth += 1,
            c if c == close => {
                depth -= 1;
                if depth == 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

fn matching_bracket(c: u8) -> u8 {
    match c {
        b'(' => b')',
        b'[' => b']',
        _ => b'}',
    }
}

/// Words followed by a parenthesised label list, not by an expression.
const GROUPING: &[&str] = &[
    "by",
    "without",
    "on",
    "ignoring",
    "group_left",
    "group_right",
];

/// Words that are neither metric names nor functions called with `(`:
/// operators, modifiers, aggregations written `sum by (l) (x)`, literals.
const NOT_METRICS: &[&str] = &[
    "and",
    "or",
    "unless",
    "bool",
    "offset",
    "atan2",
    "inf",
    "nan",
    "sum",
    "avg",
    "count",
    "min",
    "max",
    "group",
    "stddev",
    "stdvar",
    "topk",
    "bottomk",
    "quantile",
    "count_values",
    "limitk",
    "limit_ratio",
];

/// The vector selectors of a PromQL expression as written (`name{...}`,
/// `name`, or `{...}`). A scanner, not a parser, but enough for PromQL as
/// shipped here; every selector it returns is itself run through Prometheus,
/// so a scanning mistake shows up as a failed query, not as a pass.
pub fn selectors(expr: &str) -> Vec<String> {
    let b = expr.as_bytes();
    let next_non_space = |mut j: usize| {
        while j < b.len() && b[j].is_ascii_whitespace() {
            j += 1;
        }
        j
    };
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if matches!(c, b'"' | b'\'' | b'`') {
            i = end_of_string(b, i);
        } else if c == b'[' {
            // A range or subquery: durations and variables like $__interval.
            i = end_of_group(b, i);
        } else if c == b'{' {
            let end = end_of_group(b, i);
            out.push(expr[i..end].to_string());
            i = end;
        } else if c.is_ascii_alphabetic() || c == b'_' || c == b':' {
            let start = i;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] == b':') {
                i += 1;
            }
            let word = &expr[start..i];
            let lower = word.to_ascii_lowercase();
            let next = next_non_space(i);
            let followed_by = |c: u8| next < b.len() && b[next] == c;
            if GROUPING.contains(&lower.as_str()) {
                if followed_by(b'(') {
                    i = end_of_group(b, next);
                }
            } else if NOT_METRICS.contains(&lower.as_str()) || followed_by(b'(') {
                // An operator, or a function or aggregation call.
            } else if followed_by(b'{') {
                let end = end_of_group(b, next);
                out.push(format!("{word}{}", &expr[next..end]));
                i = end;
            } else {
                out.push(word.to_string());
            }
        } else if c.is_ascii_digit() || c == b'.' {
            // Numbers and durations (`offset 5m`, `1e3`, `0x1f`).
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                i += 1;
            }
        } else {
            i += 1;
        }
    }
    out
}

/// Every `llmprobe_*` identifier in a PromQL expression, strings included
/// (`label_values(llmprobe_x, target)`).
pub fn llmprobe_metrics(expr: &str) -> Vec<String> {
    let mut names = Vec::new();
    let bytes = expr.as_bytes();
    let mut i = 0;
    while let Some(pos) = expr[i..].find("llmprobe_") {
        let start = i + pos;
        let boundary =
            start == 0 || !(bytes[start - 1].is_ascii_alphanumeric() || bytes[start - 1] == b'_');
        let mut end = start;
        while end < bytes.len() && (bytes[end].is_ascii_alphanumeric() || bytes[end] == b'_') {
            end += 1;
        }
        if boundary {
            names.push(expr[start..end].to_string());
        }
        i = end;
    }
    names
}

/// The PromQL inside alert annotations: `printf "fmt" $labels.a ... | query`,
/// with each `%q` given a quoted label value of a real series.
pub fn annotation_queries(rules_yaml: &str, labels: &BTreeMap<&str, &str>) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = rules_yaml;
    while let Some(at) = rest.find("printf \"") {
        let b = rest.as_bytes();
        let start = at + "printf ".len();
        let end = end_of_string(b, start);
        let format = rest[start + 1..end - 1].replace("\\\"", "\"");
        let args_end = rest[end..].find('|').map_or(rest.len(), |p| end + p);
        let args: Vec<&str> = rest[end..args_end]
            .split_whitespace()
            .map(|a| {
                let name = a.strip_prefix("$labels.").unwrap_or_else(|| {
                    panic!("annotation printf argument {a:?} is not $labels.NAME: extend the test")
                });
                *labels
                    .get(name)
                    .unwrap_or_else(|| panic!("no sample value for label {name}"))
            })
            .collect();
        let mut query = String::new();
        let mut pieces = format.split("%q");
        query.push_str(pieces.next().unwrap_or_default());
        for (piece, arg) in pieces.zip(args.iter().chain(std::iter::repeat(&"MISSING"))) {
            let _ = write!(query, "{arg:?}{piece}");
        }
        assert!(
            !query.contains('%'),
            "only %q is understood in annotation printf formats: {format}"
        );
        out.push(query);
        rest = &rest[args_end..];
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_are_found_in_promql() {
        let found = selectors(
            r#"max by (target) (increase(a_total{x="}", y=~"$t"}[$__interval])) / on(target) group_left() b
               or label_replace(c{d="1"}, "l", "v", "", "") > 0.7 * max_over_time(e[7d]) and {job="j"}
               unless sum without (le) (f offset 5m) == bool 1e3"#,
        );
        assert_eq!(
            found,
            [
                r#"a_total{x="}", y=~"$t"}"#,
                "b",
                r#"c{d="1"}"#,
                "e",
                r#"{job="j"}"#,
                "f"
            ]
        );
    }

    #[test]
    fn llmprobe_names_are_found_on_word_boundaries() {
        assert_eq!(
            llmprobe_metrics("sum(llmprobe_a_total) / x_llmprobe_b + llmprobe_c{d=\"llmprobe_e\"}"),
            ["llmprobe_a_total", "llmprobe_c", "llmprobe_e"]
        );
    }

    #[test]
    fn annotation_lookups_get_real_label_values() {
        let yaml = r#"description: >-
  max {{ with printf "max_over_time(k{target=%q,model=%q}[7d])" $labels.target $labels.model | query }}{{ . | first | value }}{{ end }}"#;
        let labels = BTreeMap::from([("target", "t"), ("model", "m")]);
        assert_eq!(
            annotation_queries(yaml, &labels),
            [r#"max_over_time(k{target="t",model="m"}[7d])"#]
        );
    }
}
