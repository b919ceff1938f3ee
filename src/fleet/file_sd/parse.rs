//! A discovery file's text to its groups, strictly: JSON, or YAML through
//! [`super::yaml`]; unknown keys and non-string values make the whole file
//! invalid.

use std::collections::BTreeMap;

use serde_json::Value;

use super::yaml;
use crate::config::labels::is_label_name;
use crate::config::Format;

/// One `{targets, labels}` group of a discovery file.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Group {
    /// `host:port` addresses.
    pub targets: Vec<String>,
    /// Labels common to them.
    pub labels: BTreeMap<String, String>,
}

/// Parses a discovery file's text.
pub fn parse(text: &str, format: Format) -> Result<Vec<Group>, String> {
    let value = match format {
        // serde_json limits nesting itself (128 levels).
        Format::Json => serde_json::from_str::<Value>(text).map_err(|e| e.to_string())?,
        Format::Yaml => yaml::to_json(text)?,
    };
    groups(value)
}

/// The groups of a parsed file, strictly: unknown keys and non-string values
/// make the whole file invalid (as Prometheus does), since a typo would
/// otherwise silently drop labels.
fn groups(value: Value) -> Result<Vec<Group>, String> {
    let items = match value {
        Value::Array(items) => items,
        Value::Null => Vec::new(),
        _ => return Err("must be a list of `{targets: [...], labels: {...}}` groups".into()),
    };
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.into_iter().enumerate() {
        let Value::Object(map) = item else {
            return Err(format!(
                "[{i}]: must be a mapping with `targets` and `labels`"
            ));
        };
        let mut group = Group::default();
        for (key, v) in map {
            match (key.as_str(), v) {
                ("targets", Value::Null) | ("labels", Value::Null) => {}
                ("targets", Value::Array(ts)) => {
                    for (j, t) in ts.into_iter().enumerate() {
                        match t {
                            Value::String(s) => group.targets.push(s),
                            _ => return Err(format!("[{i}].targets[{j}]: must be a string")),
                        }
                    }
                }
                ("targets", _) => return Err(format!("[{i}].targets: must be a list")),
                ("labels", Value::Object(ls)) => {
                    for (name, v) in ls {
                        if !is_label_name(&name) {
                            return Err(format!("[{i}].labels: `{name}` is not a label name"));
                        }
                        match v {
                            Value::String(s) => {
                                group.labels.insert(name, s);
                            }
                            _ => return Err(format!("[{i}].labels.{name}: must be a string")),
                        }
                    }
                }
                ("labels", _) => return Err(format!("[{i}].labels: must be a mapping")),
                (other, _) => {
                    return Err(format!(
                        "[{i}]: unknown key `{other}` (a group has `targets` and `labels`)"
                    ))
                }
            }
        }
        out.push(group);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const JSON: &str = r#"[
      {"targets": ["10.0.0.1:8000", "10.0.0.2:8000"], "labels": {"model": "qwen", "gpu": "L40S", "rack": "r1"}},
      {"targets": ["10.0.0.3:8000"]},
      {"labels": {"model": "x"}}
    ]"#;

    const YAML: &str = r#"
# written by consul-template
- targets: ["10.0.0.1:8000", '10.0.0.2:8000']
  labels:
    model: qwen
    gpu: L40S
    rack: r1
- targets:
    - 10.0.0.3:8000
- labels: {model: x}
"#;

    #[test]
    fn json_and_yaml_give_the_same_groups() {
        let j = parse(JSON, Format::Json).unwrap();
        let y = parse(YAML, Format::Yaml).unwrap();
        assert_eq!(j, y);
        assert_eq!(j.len(), 3);
        assert_eq!(j[0].targets, ["10.0.0.1:8000", "10.0.0.2:8000"]);
        assert_eq!(j[0].labels["gpu"], "L40S");
        assert!(j[1].labels.is_empty());
        assert!(j[2].targets.is_empty());
    }

    #[test]
    fn yaml_scalars_are_strings_and_empty_is_no_targets() {
        let g = parse(
            "- targets: [h:1]\n  labels: {gpu_memory: 80, ok: true, f: 1.5}\n",
            Format::Yaml,
        )
        .unwrap();
        assert_eq!(g[0].labels["gpu_memory"], "80");
        assert_eq!(g[0].labels["ok"], "true");
        assert_eq!(g[0].labels["f"], "1.5");
        assert_eq!(parse("", Format::Yaml).unwrap(), vec![]);
        assert_eq!(parse("# nothing yet\n", Format::Yaml).unwrap(), vec![]);
        assert_eq!(parse("[]", Format::Json).unwrap(), vec![]);
    }

    #[test]
    fn bad_files_are_errors_not_panics() {
        for (text, format, want) in [
            ("{\"targets\": []}", Format::Json, "must be a list"),
            (
                "[{\"target\": [\"a:1\"]}]",
                Format::Json,
                "unknown key `target`",
            ),
            (
                "[{\"targets\": \"a:1\"}]",
                Format::Json,
                "[0].targets: must be a list",
            ),
            (
                "[{\"targets\": [1]}]",
                Format::Json,
                "[0].targets[0]: must be a string",
            ),
            (
                "[{\"labels\": {\"a\": 1}}]",
                Format::Json,
                "[0].labels.a: must be a string",
            ),
            (
                "[{\"labels\": {\"a-b\": \"1\"}}]",
                Format::Json,
                "not a label name",
            ),
            ("[{\"targets\": [\"a:1\"]", Format::Json, "EOF"),
            ("", Format::Json, "EOF"),
            ("- targets: [a:1\n", Format::Yaml, "line"),
            (
                "- &x {targets: [a:1]}\n- *x\n",
                Format::Yaml,
                "aliases are not supported",
            ),
            (
                "- targets: [a:1]\n  targets: [b:1]\n",
                Format::Yaml,
                "duplicate key",
            ),
            ("---\n[]\n---\n[]\n", Format::Yaml, "2 YAML documents"),
            ("? [a]\n: b\n", Format::Yaml, "keys must be plain strings"),
            ("targets: [a:1]\n", Format::Yaml, "must be a list"),
        ] {
            let e = parse(text, format).unwrap_err();
            assert!(e.contains(want), "{text:?}: {e}");
        }
        let deep = "[".repeat(100_000);
        assert!(parse(&deep, Format::Yaml).is_err());
        assert!(parse(&deep, Format::Json).is_err());
        let deep_block: String = (0..10_000)
            .map(|i| format!("{}- \n", " ".repeat(i * 2)))
            .collect();
        assert!(parse(&deep_block, Format::Yaml).is_err());
    }
}
