//! Prompt sources of a workload: inline text and JSONL files.

use std::path::Path;

use serde_json::Value;

/// One chat sent as a request's `messages`.
#[derive(Debug, Clone, PartialEq)]
pub struct Prompt {
    /// The OpenAI `messages` array.
    pub messages: Value,
}

impl Prompt {
    /// A chat of one user message.
    pub fn user(text: &str) -> Self {
        Prompt {
            messages: serde_json::json!([{ "role": "user", "content": text }]),
        }
    }
}

/// Reads a JSONL prompt file: each non-empty line is a chat
/// (`{"messages": [...]}`), a JSON string, or a plain-text prompt.
/// Errors name the line.
pub fn load_jsonl(path: &Path) -> Result<Vec<Prompt>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read `{}`: {e}", path.display()))?;
    parse_jsonl(&text).map_err(|e| format!("`{}`: {e}", path.display()))
}

/// Parses the content of a JSONL prompt file.
pub fn parse_jsonl(text: &str) -> Result<Vec<Prompt>, String> {
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let n = i + 1;
        if line.starts_with('{') {
            let v: Value =
                serde_json::from_str(line).map_err(|e| format!("line {n}: invalid JSON: {e}"))?;
            let messages = v
                .get("messages")
                .ok_or_else(|| format!("line {n}: object without `messages`"))?;
            let ok = messages.as_array().is_some_and(|m| {
                !m.is_empty()
                    && m.iter().all(|msg| {
                        msg.get("role").and_then(Value::as_str).is_some()
                            && msg.get("content").is_some()
                    })
            });
            if !ok {
                return Err(format!(
                    "line {n}: `messages` must be a non-empty array of {{\"role\", \"content\"}} objects"
                ));
            }
            prompts.push(Prompt {
                messages: messages.clone(),
            });
        } else if line.starts_with('"') {
            let s: String = serde_json::from_str(line)
                .map_err(|e| format!("line {n}: invalid JSON string: {e}"))?;
            prompts.push(Prompt::user(&s));
        } else {
            prompts.push(Prompt::user(line));
        }
    }
    if prompts.is_empty() {
        return Err("holds no prompts".into());
    }
    Ok(prompts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chats_strings_and_plain_lines() {
        let p = parse_jsonl(
            "{\"messages\": [{\"role\": \"system\", \"content\": \"be brief\"}, {\"role\": \"user\", \"content\": \"hi\"}]}\n\n\"quoted\"\nplain words\n",
        )
        .unwrap();
        assert_eq!(p.len(), 3);
        assert_eq!(p[0].messages[1]["content"], "hi");
        assert_eq!(p[1], Prompt::user("quoted"));
        assert_eq!(p[2], Prompt::user("plain words"));
    }

    #[test]
    fn errors_name_the_line() {
        assert!(parse_jsonl("ok\n{bad json\n")
            .unwrap_err()
            .starts_with("line 2: invalid JSON"));
        assert!(parse_jsonl("{\"messages\": []}")
            .unwrap_err()
            .starts_with("line 1: `messages`"));
        assert!(parse_jsonl("{\"prompt\": \"x\"}")
            .unwrap_err()
            .contains("without `messages`"));
        assert_eq!(parse_jsonl("\n  \n").unwrap_err(), "holds no prompts");
    }
}
