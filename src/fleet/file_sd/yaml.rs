//! YAML to a JSON value for discovery files, built from the parser's events
//! rather than yaml-rust2's own loader, which would not do: it copies every
//! alias (exponential input), bounds no nesting, and types scalars (`0x10`
//! would become the label value "16", `True` "true"). Here nesting is
//! bounded, aliases are refused, and every scalar stays the string written:
//! a `file_sd` file holds nothing else, and Prometheus reads an unquoted
//! `80` as the label value "80" too.

use serde_json::Value;

/// Deepest nesting a discovery file needs (list, group, labels) plus slack;
/// deeper input is refused before it can exhaust the stack.
const MAX_DEPTH: usize = 8;

/// The JSON value of a one-document YAML text (an empty text is an empty
/// list); errors name the line.
pub fn to_json(text: &str) -> Result<Value, String> {
    use yaml_rust2::parser::{Event, Parser};
    use yaml_rust2::scanner::TScalarStyle;

    enum Frame {
        Seq(Vec<Value>),
        Map(serde_json::Map<String, Value>, Option<String>),
    }
    let mut parser = Parser::new_from_str(text);
    let mut stack: Vec<Frame> = Vec::new();
    let mut docs: Vec<Value> = Vec::new();
    loop {
        let (event, mark) = parser.next_token().map_err(|e| e.to_string())?;
        let at = |msg: &str| format!("line {}: {msg}", mark.line());
        let value = match event {
            Event::StreamEnd => break,
            Event::Nothing | Event::StreamStart | Event::DocumentStart | Event::DocumentEnd => {
                continue
            }
            Event::Alias(_) => return Err(at("YAML aliases are not supported")),
            Event::SequenceStart(..) | Event::MappingStart(..) => {
                if stack.len() >= MAX_DEPTH {
                    return Err(at("nested too deeply for a target list"));
                }
                stack.push(if matches!(event, Event::SequenceStart(..)) {
                    Frame::Seq(Vec::new())
                } else {
                    Frame::Map(serde_json::Map::new(), None)
                });
                continue;
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq(items)) => Value::Array(items),
                _ => return Err(at("unbalanced sequence")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map(map, None)) => Value::Object(map),
                _ => return Err(at("unbalanced mapping")),
            },
            Event::Scalar(s, style, _, _) => {
                let null = style == TScalarStyle::Plain
                    && matches!(s.as_str(), "" | "~" | "null" | "Null" | "NULL");
                if null {
                    Value::Null
                } else {
                    Value::String(s)
                }
            }
        };
        match stack.last_mut() {
            None => docs.push(value),
            Some(Frame::Seq(items)) => items.push(value),
            Some(Frame::Map(map, key)) => match key.take() {
                None => match value {
                    Value::String(k) => *key = Some(k),
                    _ => return Err(at("mapping keys must be plain strings")),
                },
                Some(k) => {
                    if map.contains_key(&k) {
                        return Err(at(&format!("duplicate key `{k}`")));
                    }
                    map.insert(k, value);
                }
            },
        }
    }
    match docs.len() {
        // An empty YAML file is an empty list, as in Prometheus.
        0 => Ok(Value::Array(Vec::new())),
        1 => Ok(docs.pop().unwrap_or(Value::Null)),
        n => Err(format!("holds {n} YAML documents; write one list")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_stay_strings_and_plain_nulls_are_null() {
        let v = to_json("a: 80\nb: True\nc: 0x10\nd: ~\ne: '~'\nf: [1.5]\n").unwrap();
        assert_eq!(
            v,
            serde_json::json!({"a": "80", "b": "True", "c": "0x10", "d": null, "e": "~", "f": ["1.5"]})
        );
        assert_eq!(to_json("").unwrap(), serde_json::json!([]));
        assert_eq!(to_json("# nothing yet\n").unwrap(), serde_json::json!([]));
    }

    #[test]
    fn nesting_is_bounded_and_aliases_are_refused() {
        let e = to_json("[[[[[[[[[[]]]]]]]]]]").unwrap_err();
        assert!(e.contains("line 1: nested too deeply"), "{e}");
        let e = to_json("- &x {targets: [a:1]}\n- *x\n").unwrap_err();
        assert!(e.contains("line 2: YAML aliases are not supported"), "{e}");
    }
}
