//! Grafana dashboards read as Grafana reads them: the dashboards shipped in
//! `grafana/dashboards/`, their panels, queries and template variables, and
//! variables substituted into a query as Grafana's Prometheus data source
//! does.

use std::collections::BTreeMap;

use serde_json::Value;

use super::{paths, promql};

/// Every `grafana/dashboards/*.json`, by file name, sorted.
pub fn dashboards() -> Vec<(String, Value)> {
    let mut dashboards: Vec<(String, Value)> =
        std::fs::read_dir(paths::repo().join("grafana/dashboards"))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "json"))
            .map(|p| {
                let text = std::fs::read_to_string(&p).unwrap();
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                let json = serde_json::from_str(&text)
                    .unwrap_or_else(|e| panic!("{name} is not JSON: {e}"));
                (name, json)
            })
            .collect();
    dashboards.sort_by(|a, b| a.0.cmp(&b.0));
    dashboards
}

/// Every panel of a dashboard, rows and the panels inside collapsed rows
/// included.
pub fn panels(dashboard: &Value) -> Vec<&Value> {
    fn walk<'a>(panels: &'a Value, out: &mut Vec<&'a Value>) {
        for panel in panels.as_array().into_iter().flatten() {
            out.push(panel);
            walk(&panel["panels"], out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], &mut out);
    out
}

/// A variable's current value: one option, or several (multi-value or "All").
#[derive(Clone, Debug)]
pub enum Val {
    /// A single option, substituted as is.
    One(String),
    /// Several options, substituted as a regex alternation.
    Many(Vec<String>),
}

/// The value of each variable, by name.
pub type Binding = BTreeMap<String, Val>;

/// A binding in words, for failure messages.
pub fn describe(binding: &Binding) -> String {
    let parts: Vec<String> = binding
        .iter()
        .map(|(k, v)| match v {
            Val::One(s) => format!("{k}={s}"),
            Val::Many(vs) => format!("{k}=All{vs:?}"),
        })
        .collect();
    if parts.is_empty() {
        "no variables".into()
    } else {
        parts.join(" ")
    }
}

/// Grafana's escaping of a value used inside a Prometheus regex matcher
/// (`prometheusSpecialRegexEscape`): the regex escape is itself escaped for
/// the PromQL string, so `a.1` becomes `a\\.1` in the query text.
pub fn regex_escape(value: &str) -> String {
    let mut out = String::new();
    for c in value.chars() {
        if c == '\\' {
            out.push_str("\\\\\\\\");
        } else {
            if "^$*+?.()|{}[]'".contains(c) {
                out.push_str("\\\\");
            }
            out.push(c);
        }
    }
    out
}

/// Substitutes `$name` and `${name}` as Grafana's Prometheus data source does:
/// a single value as is, several values as `(a|b)` of regex-escaped values;
/// built-in `$__...` variables from `builtins`. An unknown variable, a
/// `${name:format}`, or the `[[name]]` syntax is an error: extend this
/// rather than let a query run half-substituted.
pub fn interpolate(
    expr: &str,
    vars: &Binding,
    builtins: &BTreeMap<&str, String>,
) -> Result<String, String> {
    if expr.contains("[[") {
        return Err(format!("[[var]] syntax is not supported here: {expr}"));
    }
    let mut out = String::new();
    let mut rest = expr;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, consumed) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .ok_or_else(|| format!("unclosed ${{ in {expr}"))?;
            (&braced[..end], end + 2)
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], end)
        };
        if name.is_empty() {
            // A literal `$` (end of a regex), which Grafana leaves alone too.
            out.push('$');
            rest = after;
            continue;
        }
        if name.contains(':') {
            return Err(format!("${{{name}}}: formats are not supported here"));
        }
        let value = if let Some(v) = builtins.get(name) {
            v.clone()
        } else {
            match vars.get(name) {
                Some(Val::One(v)) => v.clone(),
                Some(Val::Many(vs)) if vs.len() == 1 => regex_escape(&vs[0]),
                Some(Val::Many(vs)) => {
                    let escaped: Vec<String> = vs.iter().map(|v| regex_escape(v)).collect();
                    format!("({})", escaped.join("|"))
                }
                None => return Err(format!("unknown variable ${name} in {expr}")),
            }
        };
        out.push_str(&value);
        rest = &after[consumed..];
    }
    out.push_str(rest);
    Ok(out)
}

/// Grafana's built-in variables for a panel: `$__interval` is the panel's
/// minimum interval where it sets one (it wins on short time ranges), else a
/// minute; `$__range` the dashboard's time range.
pub fn builtins(panel_interval: Option<&str>, range: &str) -> BTreeMap<&'static str, String> {
    let interval = panel_interval.unwrap_or("1m").to_string();
    let range_s = humantime::parse_duration(range)
        .map(|d| d.as_secs())
        .unwrap_or(3600);
    BTreeMap::from([
        ("__interval", interval.clone()),
        (
            "__interval_ms",
            humantime::parse_duration(&interval)
                .map(|d| d.as_millis().to_string())
                .unwrap_or_else(|_| "60000".into()),
        ),
        ("__rate_interval", interval),
        ("__range", format!("{range_s}s")),
        ("__range_s", range_s.to_string()),
        ("__range_ms", (range_s * 1000).to_string()),
    ])
}

/// A template variable backed by a Prometheus query.
pub struct TemplateVar {
    /// Its name (`$name` in queries).
    pub name: String,
    /// What gives its options (`label_values(...)`).
    pub query: String,
    /// Multi-value or with "All": substituted with every option at once.
    pub many: bool,
}

/// The query-backed template variables of a dashboard, in order; panics on
/// a kind of variable that is not substituted here yet.
pub fn template_vars(dashboard: &Value, file: &str) -> Vec<TemplateVar> {
    let mut vars = Vec::new();
    for v in dashboard["templating"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        let name = v["name"].as_str().unwrap_or_default().to_string();
        match v["type"].as_str() {
            // Chooses the data source; never part of an expression.
            Some("datasource") => {}
            Some("query") => {
                let query = match &v["query"] {
                    Value::String(s) => s.clone(),
                    q => q["query"].as_str().unwrap_or_default().to_string(),
                };
                let many = v["multi"] == true || v["includeAll"] == true;
                vars.push(TemplateVar { name, query, many });
            }
            other => panic!(
                "{file}: variable {name} has type {other:?}, which the tests do not \
                 substitute yet: extend tests/support/grafana.rs"
            ),
        }
    }
    vars
}

/// One query of a dashboard.
pub struct PanelQuery {
    /// "file › panel title › refId".
    pub origin: String,
    /// The panel's title ("" for an annotation).
    pub title: String,
    /// The query's refId ("" for an annotation).
    pub ref_id: String,
    /// The PromQL, variables not yet substituted.
    pub expr: String,
    /// The panel's minimum interval, when it sets one.
    pub interval: Option<String>,
}

/// Every query of every panel, rows and collapsed rows included.
pub fn panel_queries(dashboard: &Value, file: &str) -> Vec<PanelQuery> {
    fn walk(panels: &Value, file: &str, out: &mut Vec<PanelQuery>) {
        for panel in panels.as_array().into_iter().flatten() {
            let title = panel["title"].as_str().unwrap_or("(untitled)").to_string();
            for target in panel["targets"].as_array().into_iter().flatten() {
                if let Some(expr) = target["expr"].as_str() {
                    let ref_id = target["refId"].as_str().unwrap_or("?").to_string();
                    out.push(PanelQuery {
                        origin: format!("{file} › {title} › {ref_id}"),
                        title: title.clone(),
                        ref_id,
                        expr: expr.to_string(),
                        interval: panel["interval"].as_str().map(str::to_string),
                    });
                }
            }
            walk(&panel["panels"], file, out);
        }
    }
    let mut out = Vec::new();
    walk(&dashboard["panels"], file, &mut out);
    // Prometheus annotations run queries too.
    for a in dashboard["annotations"]["list"]
        .as_array()
        .into_iter()
        .flatten()
    {
        // Saved by older Grafana at the top, by newer in `target`.
        if let Some(expr) = a["expr"].as_str().or(a["target"]["expr"].as_str()) {
            out.push(PanelQuery {
                origin: format!("{file} › annotation {}", a["name"]),
                title: String::new(),
                ref_id: String::new(),
                expr: expr.to_string(),
                interval: None,
            });
        }
    }
    out
}

/// `label_values(selector, label)` or `label_values(label)`.
pub fn parse_label_values(call: &str) -> Result<(Option<String>, String), String> {
    let inner = call
        .trim()
        .strip_prefix("label_values(")
        .and_then(|s| s.strip_suffix(')'))
        .ok_or_else(|| {
            format!("unsupported variable query {call:?} (only label_values(...) is understood)")
        })?;
    // The label follows the last comma outside braces and strings.
    let b = inner.as_bytes();
    let (mut i, mut depth, mut split) = (0, 0i32, None);
    while i < b.len() {
        match b[i] {
            b'"' | b'\'' | b'`' => i = promql::end_of_string(b, i) - 1,
            b'{' | b'(' | b'[' => depth += 1,
            b'}' | b')' | b']' => depth -= 1,
            b',' if depth == 0 => split = Some(i),
            _ => {}
        }
        i += 1;
    }
    Ok(match split {
        Some(at) => (
            Some(inner[..at].trim().to_string()),
            inner[at + 1..].trim().to_string(),
        ),
        None => (None, inner.trim().to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn grafana_variables_are_substituted_like_grafana() {
        let vars = Binding::from([
            (
                "target".to_string(),
                Val::Many(vec!["a.1".into(), "b".into()]),
            ),
            ("one".to_string(), Val::Many(vec!["x+y".into()])),
            ("model".to_string(), Val::One("m".into())),
        ]);
        let b = builtins(Some("15m"), "7d");
        assert_eq!(
            interpolate(
                r#"x{target=~"$target",o=~"${one}",model="$model",r=~"a$"}[$__interval]"#,
                &vars,
                &b
            )
            .unwrap(),
            r#"x{target=~"(a\\.1|b)",o=~"x\\+y",model="m",r=~"a$"}[15m]"#
        );
        assert_eq!(b["__range"], "604800s");
        assert!(interpolate("$nope", &vars, &b).is_err());
        assert!(interpolate("${model:csv}", &vars, &b).is_err());
        assert_eq!(
            parse_label_values(r#"label_values(k{t="a,b"}, model)"#).unwrap(),
            (Some(r#"k{t="a,b"}"#.to_string()), "model".to_string())
        );
    }

    #[test]
    fn panels_and_queries_are_found_inside_rows() {
        let d = json!({
            "panels": [
                {"title": "row", "type": "row", "panels": [
                    {"title": "inner", "targets": [{"refId": "A", "expr": "a"}]}
                ]},
                {"title": "top", "interval": "1m", "targets": [{"refId": "B", "expr": "b"}]}
            ],
            "annotations": {"list": [
                {"name": "deploys", "expr": "c"},
                {"name": "reloads", "target": {"expr": "d"}}
            ]}
        });
        let titles: Vec<&str> = panels(&d)
            .iter()
            .map(|p| p["title"].as_str().unwrap())
            .collect();
        assert_eq!(titles, ["row", "inner", "top"]);
        let queries: Vec<(String, String, Option<String>)> = panel_queries(&d, "f.json")
            .into_iter()
            .map(|q| (q.origin, q.expr, q.interval))
            .collect();
        assert_eq!(
            queries,
            [
                ("f.json › inner › A".to_string(), "a".to_string(), None),
                (
                    "f.json › top › B".to_string(),
                    "b".to_string(),
                    Some("1m".to_string())
                ),
                (
                    "f.json › annotation \"deploys\"".to_string(),
                    "c".to_string(),
                    None
                ),
                (
                    "f.json › annotation \"reloads\"".to_string(),
                    "d".to_string(),
                    None
                ),
            ]
        );
    }
}
