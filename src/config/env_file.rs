//! `--env-file PATH`: the `KEY=VALUE` lines of a systemd `EnvironmentFile=`
//! (the unit reads `/etc/default/llmprobe`), so that `llmprobe sweep` and
//! `check-config` at a terminal see the keys the service sees. The syntax is
//! systemd's: blank lines and lines starting with `#` or `;` are skipped,
//! whitespace around the key and the value is dropped, a value may be
//! `'single-quoted'` (verbatim) or `"double-quoted"` (with `\"`, `\\`,
//! `` \` ``, `\$` escapes), either spanning lines, and an unquoted value
//! takes `\` escapes and a trailing `\` continues it on the next line.
//! Stricter than systemd on purpose: a line without `=` or with a key that
//! is not a variable name is an error (systemd skips it silently), so a
//! typo does not become a missing key later. Errors name the file and line,
//! never a value (values are secrets).

use std::path::Path;

/// Largest file read (an environment file holds a few keys).
pub const MAX_BYTES: u64 = 1 << 20;

/// The assignments of the file at `path`, in order (a later one of the
/// same key wins when applied); an error names the file and the line.
pub fn read(path: &Path) -> Result<Vec<(String, String)>, String> {
    let bytes = super::env::read_limited(path, MAX_BYTES)
        .map_err(|e| format!("cannot read the environment file {}: {e}", path.display()))?
        .ok_or_else(|| {
            format!(
                "the environment file {} holds more than {MAX_BYTES} bytes",
                path.display()
            )
        })?;
    let text =
        String::from_utf8(bytes).map_err(|_| format!("{}: not UTF-8 text", path.display()))?;
    parse(&text).map_err(|(line, e)| format!("{}:{line}: {e}", path.display()))
}

/// The assignments of `text`; an error is the (1-based) line where the
/// faulty assignment starts, and what is wrong with it.
pub fn parse(text: &str) -> Result<Vec<(String, String)>, (usize, String)> {
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let mut chars = text.chars().peekable();
    let mut line = 1;
    let mut out = Vec::new();
    loop {
        // The start of a line: blank, a comment, or `KEY=`.
        while chars.next_if(|c| matches!(c, ' ' | '\t' | '\r')).is_some() {}
        match chars.peek() {
            None => return Ok(out),
            Some('\n') => {
                chars.next();
                line += 1;
                continue;
            }
            Some('#' | ';') => {
                while chars.next_if(|&c| c != '\n').is_some() {}
                continue;
            }
            Some(_) => {}
        }
        let start = line;
        let mut key = String::new();
        loop {
            match chars.next() {
                Some('=') => break,
                None | Some('\n') => {
                    return Err((start, "no `=`: not a KEY=VALUE line".into()));
                }
                Some(c) => key.push(c),
            }
        }
        let key = key.trim_end_matches([' ', '\t', '\r']).to_string();
        if !is_name(&key) {
            return Err((start, format!("`{key}` is not a variable name")));
        }
        while chars.next_if(|c| matches!(c, ' ' | '\t')).is_some() {}
        let value = match chars.peek() {
            Some('\'') => {
                chars.next();
                let v = quoted(&mut chars, &mut line, '\'', start)?;
                rest_blank(&mut chars, start)?;
                v
            }
            Some('"') => {
                chars.next();
                let v = quoted(&mut chars, &mut line, '"', start)?;
                rest_blank(&mut chars, start)?;
                v
            }
            _ => unquoted(&mut chars, &mut line),
        };
        if value.contains('\0') {
            return Err((start, format!("the value of `{key}` holds a NUL byte")));
        }
        out.push((key, value));
    }
}

type Chars<'a> = std::iter::Peekable<std::str::Chars<'a>>;

/// A shell variable name: a letter or `_`, then letters, digits or `_`.
fn is_name(key: &str) -> bool {
    let mut c = key.chars();
    matches!(c.next(), Some(f) if f.is_ascii_alphabetic() || f == '_')
        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// A value after its opening `quote`, up to the closing one (lines
/// counted); single quotes take no escapes.
fn quoted(
    chars: &mut Chars<'_>,
    line: &mut usize,
    quote: char,
    start: usize,
) -> Result<String, (usize, String)> {
    let mut v = String::new();
    loop {
        match chars.next() {
            None => return Err((start, format!("no closing {quote} for the value"))),
            Some(c) if c == quote => return Ok(v),
            Some('\\') if quote == '"' => match chars.next() {
                Some('\n') => *line += 1,
                Some(c @ ('"' | '\\' | '`' | '$')) => v.push(c),
                Some(c) => {
                    v.push('\\');
                    v.push(c);
                    if c == '\n' {
                        *line += 1;
                    }
                }
                None => return Err((start, format!("no closing {quote} for the value"))),
            },
            Some(c) => {
                if c == '\n' {
                    *line += 1;
                }
                v.push(c);
            }
        }
    }
}

/// Only whitespace may follow a closing quote on its line.
fn rest_blank(chars: &mut Chars<'_>, start: usize) -> Result<(), (usize, String)> {
    while let Some(c) = chars.next_if(|&c| c != '\n') {
        if !matches!(c, ' ' | '\t' | '\r') {
            return Err((start, "text after the value's closing quote".into()));
        }
    }
    Ok(())
}

/// An unquoted value to the end of its line: `\` keeps the next character,
/// `\` at the end of a line continues the value on the next; trailing
/// whitespace is dropped (an escaped one is kept).
fn unquoted(chars: &mut Chars<'_>, line: &mut usize) -> String {
    let mut v = String::new();
    let mut kept = 0;
    while let Some(c) = chars.next_if(|&c| c != '\n') {
        match c {
            '\\' => match chars.next() {
                Some('\n') => *line += 1,
                Some(c) => {
                    v.push(c);
                    kept = v.len();
                }
                None => {}
            },
            ' ' | '\t' | '\r' => v.push(c),
            c => {
                v.push(c);
                kept = v.len();
            }
        }
    }
    v.truncate(kept);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(text: &str) -> Vec<(String, String)> {
        parse(text).unwrap()
    }

    fn one(text: &str) -> String {
        let p = pairs(text);
        assert_eq!(p.len(), 1, "{p:?}");
        p[0].1.clone()
    }

    #[test]
    fn comments_blank_lines_and_whitespace() {
        let text =
            "\u{feff}# keys for llmprobe\n\n; another comment\n  A = one \r\nB=two\n\t\nC=\n";
        assert_eq!(
            pairs(text),
            [
                ("A".to_string(), "one".to_string()),
                ("B".into(), "two".into()),
                ("C".into(), String::new()),
            ]
        );
    }

    #[test]
    fn quotes_and_escapes_as_systemd_reads_them() {
        assert_eq!(one("K='a \"b\" \\n $c'"), "a \"b\" \\n $c");
        assert_eq!(one("K=\"a \\\"b\\\" \\\\ \\$x \\n\""), "a \"b\" \\ $x \\n");
        assert_eq!(one("K=\"two\nlines\""), "two\nlines");
        assert_eq!(one("K=sk-abc#not-a-comment"), "sk-abc#not-a-comment");
        assert_eq!(one("K=a\"b\" c"), "a\"b\" c");
        assert_eq!(one("K=a\\ b\\\\"), "a b\\");
        assert_eq!(one("K=trail\\ "), "trail ");
        assert_eq!(one("K=con\\\ntinued"), "continued");
        assert_eq!(one("K=  'padded'  "), "padded");
    }

    #[test]
    fn a_later_line_is_counted_after_a_value_spanning_lines() {
        let e = parse("A='x\ny'\nB=1\nnot an assignment\n").unwrap_err();
        assert_eq!(e.0, 4, "{e:?}");
    }

    #[test]
    fn errors_name_the_line_never_the_value() {
        let cases = [
            ("A=1\nexport B=2\n", 2, "`export B` is not a variable name"),
            ("A=1\n\nWORKER_API_KEY\n", 3, "no `=`"),
            ("1A=x\n", 1, "not a variable name"),
            ("K='sk-secret\n", 1, "no closing '"),
            ("K=\"sk-secret", 1, "no closing \""),
            ("K='sk-secret' tail\n", 1, "after the value's closing quote"),
        ];
        for (text, line, says) in cases {
            let (l, e) = parse(text).unwrap_err();
            assert_eq!(l, line, "{text:?}: {e}");
            assert!(e.contains(says), "{text:?}: {e}");
            assert!(!e.contains("sk-secret"), "{text:?}: {e}");
        }
    }

    #[test]
    fn read_names_the_file_and_line() {
        let dir = std::env::temp_dir().join(format!("llmprobe-env-file-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("default");
        std::fs::write(&path, "A=1\nB\n").unwrap();
        let e = read(&path).unwrap_err();
        assert!(e.starts_with(&format!("{}:2: ", path.display())), "{e}");
        std::fs::write(&path, "A=1\n").unwrap();
        assert_eq!(read(&path).unwrap(), [("A".to_string(), "1".to_string())]);
        let e = read(&dir.join("missing")).unwrap_err();
        assert!(e.contains("cannot read the environment file"), "{e}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
