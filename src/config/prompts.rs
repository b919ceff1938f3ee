//! Prompt sources of a workload: inline text and JSONL files.

use std::path::Path;

use serde_json::Value;

use super::env::read_limited;

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

    /// Puts a system message with `text` before the chat's messages.
    pub fn prepend_system(&mut self, text: &str) {
        if let Value::Array(messages) = &mut self.messages {
            messages.insert(0, serde_json::json!({ "role": "system", "content": text }));
        }
    }

    /// The prompt as one text: Some when the chat is a single user message
    /// whose content is a string (an inline prompt, a plain or quoted line,
    /// a document, a synthetic prompt), None for anything else (a chat).
    pub fn text(&self) -> Option<&str> {
        match self.messages.as_array().map(Vec::as_slice) {
            Some([only]) if only.get("role").and_then(Value::as_str) == Some("user") => {
                only.get("content").and_then(Value::as_str)
            }
            _ => None,
        }
    }

    /// Whether the chat starts with a system message.
    pub fn starts_with_system(&self) -> bool {
        self.messages
            .get(0)
            .and_then(|m| m.get("role"))
            .and_then(Value::as_str)
            == Some("system")
    }
}

/// Largest prompts file read: every prompt is kept in memory, as a request
/// body too, for the life of the configuration.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Reads a JSONL prompt file: each non-empty line is a chat
/// (`{"messages": [...]}`), a JSON string, or a plain-text prompt; each
/// comes with its line number. Errors name the line.
pub fn load_jsonl(path: &Path) -> Result<Vec<(usize, Prompt)>, String> {
    let shown = path.display();
    let bytes = read_limited(path, MAX_FILE_BYTES)
        .map_err(|e| format!("cannot read `{shown}`: {e}"))?
        .ok_or_else(|| format!("`{shown}` is larger than {} MiB", MAX_FILE_BYTES >> 20))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        let valid = &e.as_bytes()[..e.utf8_error().valid_up_to()];
        let line = valid.iter().filter(|&&b| b == b'\n').count() + 1;
        format!("`{shown}`: line {line}: not valid UTF-8")
    })?;
    parse_jsonl_lines(&text).map_err(|e| format!("`{shown}`: {e}"))
}

/// Parses the content of a JSONL prompt file.
pub fn parse_jsonl(text: &str) -> Result<Vec<Prompt>, String> {
    Ok(parse_jsonl_lines(text)?
        .into_iter()
        .map(|(_, p)| p)
        .collect())
}

/// [`parse_jsonl`], each prompt with the line it was written on.
pub fn parse_jsonl_lines(text: &str) -> Result<Vec<(usize, Prompt)>, String> {
    let mut prompts = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() {
            continue;
        }
        let n = i + 1;
        if line.starts_with('{') {
            let v: Value = serde_json::from_str(line).map_err(|e| json_error(n, "JSON", &e))?;
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
            prompts.push((
                n,
                Prompt {
                    messages: messages.clone(),
                },
            ));
        } else if line.starts_with('"') {
            let s: String =
                serde_json::from_str(line).map_err(|e| json_error(n, "JSON string", &e))?;
            prompts.push((n, Prompt::user(&s)));
        } else {
            prompts.push((n, Prompt::user(line)));
        }
    }
    if prompts.is_empty() {
        return Err("holds no prompts".into());
    }
    Ok(prompts)
}

/// Reads a folder of documents (sorted by file name; hidden files and
/// subfolders skipped): each becomes one prompt, the instruction followed
/// by the document. A link that leads nowhere (missing, or a loop) and an
/// entry that is not a regular file (a FIFO, a socket) are errors naming
/// it: skipping them would measure a workload without a document the
/// operator put there, and say nothing.
pub fn load_dir(dir: &Path, instruction: &str) -> Result<Vec<Prompt>, String> {
    let entries = std::fs::read_dir(dir)
        .map_err(|e| format!("cannot read folder `{}`: {e}", dir.display()))?;
    let mut files = Vec::new();
    for entry in entries {
        let path = entry
            .map_err(|e| format!("cannot read folder `{}`: {e}", dir.display()))?
            .path();
        let hidden = path
            .file_name()
            .is_some_and(|n| n.to_string_lossy().starts_with('.'));
        if hidden {
            continue;
        }
        // Followed: a link to a document is a document.
        match std::fs::metadata(&path) {
            Ok(m) if m.is_dir() => continue,
            Ok(_) => files.push(path),
            Err(e) => {
                return Err(format!(
                    "`{}`: a link that leads nowhere (its target is missing, or a loop): {e}",
                    path.display()
                ))
            }
        }
    }
    files.sort();
    let mut prompts = Vec::new();
    // Every document is kept in memory: the folder as a whole is bounded
    // like one prompts file (one 300 MB document took 5.85 GB).
    let mut left = MAX_FILE_BYTES;
    for f in files {
        let too_big = || {
            format!(
                "`{}`: the folder's documents are larger than {} MiB together",
                f.display(),
                MAX_FILE_BYTES >> 20
            )
        };
        let bytes = read_limited(&f, left)
            .map_err(|e| format!("cannot read `{}`: {e}", f.display()))?
            .ok_or_else(too_big)?;
        left -= bytes.len() as u64;
        let text =
            String::from_utf8(bytes).map_err(|_| format!("`{}` is not UTF-8 text", f.display()))?;
        if text.trim().is_empty() {
            return Err(format!("`{}` is empty", f.display()));
        }
        prompts.push(Prompt::user(&format!("{instruction}\n\n{}", text.trim())));
    }
    if prompts.is_empty() {
        return Err(format!("folder `{}` holds no documents", dir.display()));
    }
    Ok(prompts)
}

const WORDS: [&str; 16] = [
    "capacity",
    "server",
    "latency",
    "token",
    "request",
    "batch",
    "memory",
    "gateway",
    "model",
    "stream",
    "queue",
    "worker",
    "prompt",
    "throughput",
    "cache",
    "engine",
];

/// `count` deterministic prompts of about `prompt_tokens` tokens each (about
/// four characters per token). Each starts differently, so that a server's
/// prefix cache cannot serve one from another.
pub fn synthetic(prompt_tokens: u32, count: u32) -> Vec<Prompt> {
    let target_chars = prompt_tokens as usize * 4;
    (0..count)
        .map(|i| {
            let mut text = format!("Document {i}. Summarise it in three sentences.\n");
            let mut state = (i as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
            while text.len() < target_chars {
                // xorshift: cheap, deterministic, no dependency.
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                text.push_str(WORDS[(state % WORDS.len() as u64) as usize]);
                text.push(' ');
            }
            text.truncate(target_chars.max(1));
            Prompt::user(&text)
        })
        .collect()
}

/// `line N, column C: invalid WHAT: why`. serde_json counts lines within
/// the one line it was given, so its own "at line 1 column C" would mislead.
fn json_error(line: usize, what: &str, e: &serde_json::Error) -> String {
    let msg = e.to_string();
    let position = format!(" at line {} column {}", e.line(), e.column());
    let msg = msg.strip_suffix(&position).unwrap_or(&msg);
    format!("line {line}, column {}: invalid {what}: {msg}", e.column())
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
    fn only_one_user_text_is_a_text() {
        let p = parse_jsonl_lines(
            "plain\n{\"messages\": [{\"role\": \"user\", \"content\": \"one\"}]}\n\n{\"messages\": [{\"role\": \"user\", \"content\": [{\"type\": \"text\", \"text\": \"x\"}]}]}\n{\"messages\": [{\"role\": \"system\", \"content\": \"s\"}]}\n",
        )
        .unwrap();
        let got: Vec<_> = p.iter().map(|(n, p)| (*n, p.text())).collect();
        assert_eq!(
            got,
            [(1, Some("plain")), (2, Some("one")), (4, None), (5, None)]
        );
        let mut chat = Prompt::user("hi");
        chat.prepend_system("be brief");
        assert_eq!(chat.text(), None);
    }

    #[test]
    fn synthetic_prompts_are_deterministic_sized_and_distinct() {
        let a = synthetic(1000, 3);
        assert_eq!(a, synthetic(1000, 3));
        assert_eq!(a.len(), 3);
        for p in &a {
            assert_eq!(p.messages[0]["content"].as_str().unwrap().len(), 4000);
        }
        assert_ne!(a[0], a[1]);
        assert!(a[1].messages[0]["content"]
            .as_str()
            .unwrap()
            .starts_with("Document 1."));
    }

    #[test]
    fn documents_from_a_folder() {
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-docs-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("b.txt"), "second doc").unwrap();
        std::fs::write(dir.join("a.txt"), "first doc\n").unwrap();
        std::fs::write(dir.join(".hidden"), "x").unwrap();
        let p = load_dir(&dir, "Summarise:").unwrap();
        assert_eq!(p.len(), 2);
        assert_eq!(p[0], Prompt::user("Summarise:\n\nfirst doc"));
        std::fs::write(dir.join("c.txt"), "  ").unwrap();
        assert!(load_dir(&dir, "x")
            .unwrap_err()
            .ends_with("c.txt` is empty"));
        std::fs::remove_dir_all(&dir).ok();
        assert!(load_dir(&dir, "x")
            .unwrap_err()
            .starts_with("cannot read folder"));
    }

    #[cfg(unix)]
    #[test]
    fn a_link_that_leads_nowhere_in_a_folder_is_an_error() {
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-docs-links-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join("a.txt"), "a doc").unwrap();
        std::fs::write(dir.join("sub/x.txt"), "not read").unwrap();
        std::os::unix::fs::symlink(dir.join("a.txt"), dir.join("b.txt")).unwrap();
        // A link to a document is read; a subfolder is not.
        assert_eq!(load_dir(&dir, "S").unwrap().len(), 2);
        std::os::unix::fs::symlink(dir.join("gone.txt"), dir.join("c.txt")).unwrap();
        let e = load_dir(&dir, "S").unwrap_err();
        assert!(
            e.starts_with(&format!(
                "`{}`: a link that leads nowhere",
                dir.join("c.txt").display()
            )),
            "{e}"
        );
        std::fs::remove_file(dir.join("c.txt")).unwrap();
        std::os::unix::fs::symlink(dir.join("d.txt"), dir.join("d.txt")).unwrap();
        let e = load_dir(&dir, "S").unwrap_err();
        assert!(e.contains("d.txt`: a link that leads nowhere"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn errors_name_the_line() {
        assert_eq!(
            parse_jsonl("ok\n{bad json\n").unwrap_err(),
            "line 2, column 2: invalid JSON: key must be a string"
        );
        assert_eq!(
            parse_jsonl("\"unterminated\n").unwrap_err(),
            "line 1, column 13: invalid JSON string: EOF while parsing a string"
        );
        assert!(parse_jsonl("{\"messages\": []}")
            .unwrap_err()
            .starts_with("line 1: `messages`"));
        assert!(parse_jsonl("{\"prompt\": \"x\"}")
            .unwrap_err()
            .contains("without `messages`"));
        assert_eq!(parse_jsonl("\n  \n").unwrap_err(), "holds no prompts");
    }

    #[test]
    fn files_are_read_within_a_limit_and_bad_utf8_names_the_line() {
        let dir = std::env::temp_dir().join(format!("llmprobe-prompts-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.jsonl");
        std::fs::write(&path, b"one\ntwo \xff\n").unwrap();
        let e = load_jsonl(&path).unwrap_err();
        assert!(e.ends_with("p.jsonl`: line 2: not valid UTF-8"), "{e}");
        assert_eq!(read_limited(&path, 9).unwrap(), None);
        assert_eq!(read_limited(&path, 10).unwrap().unwrap().len(), 10);
        let e = load_jsonl(Path::new("/dev/zero")).unwrap_err();
        assert_eq!(
            e,
            "cannot read `/dev/zero`: not a regular file (a character device)"
        );
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_folder_of_documents_is_bounded_like_a_prompts_file() {
        let dir = std::env::temp_dir().join(format!("llmprobe-docs-cap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        // Sparse: 40 MiB each, two of them over the 64 MiB bound together.
        for name in ["a.txt", "b.txt"] {
            let f = std::fs::File::create(dir.join(name)).unwrap();
            f.set_len(40 << 20).unwrap();
        }
        let e = load_dir(&dir, "Summarise").unwrap_err();
        assert!(
            e.ends_with("b.txt`: the folder's documents are larger than 64 MiB together"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
