//! Every link between the repository's Markdown files leads somewhere.
//!
//! Walks every `*.md` file of the repository (not `target/`, `.git/`,
//! `node_modules/`, `fuzz/target/`) and checks, outside fenced code blocks and
//! inline code:
//!
//! - each relative link, `[text](path)`, `[text](path#anchor)`, `[text](#anchor)`
//!   and reference definitions `[label]: path`: the file or folder exists
//!   (relative to the linking file; a leading `/` is the repository root, as
//!   on GitHub), inside the repository; where an anchor points into a `.md`
//!   file, one of its headings produces that anchor (GitHub's slugs: lowercase,
//!   punctuation other than `-` and `_` dropped, each space a `-`, repeated
//!   headings numbered `-1`, `-2`...). `http:`, `https:`, `mailto:` and other
//!   `scheme:` links are not followed.
//! - each Markdown file named in plain prose (`see README-fleet.md`): it exists
//!   relative to the file or to the repository root.

mod support;

use std::collections::HashSet;
use std::ffi::OsStr;
use std::fs;
use std::path::{Component, Path, PathBuf};

use support::paths::repo;

#[test]
fn every_relative_link_in_the_markdown_files_resolves() {
    let root = repo();
    let mut files = Vec::new();
    markdown_files(&root, &root, &mut files);
    files.sort();
    assert!(
        files.iter().any(|f| f == &root.join("README.md")),
        "README.md not found among {files:?}"
    );

    let mut problems = Vec::new();
    let mut links = 0;
    for file in &files {
        let doc = Doc::read(file);
        for link in &doc.links {
            links += 1;
            if let Err(why) = check_link(&root, file, &doc, &link.dest) {
                problems.push(format!(
                    "{}:{}: ({}): {why}",
                    rel(&root, file),
                    link.line,
                    link.dest
                ));
            }
        }
        for mention in &doc.mentions {
            if !mention_exists(&root, file, &mention.dest) {
                problems.push(format!(
                    "{}:{}: names {}, which is neither beside it nor at the repository root",
                    rel(&root, file),
                    mention.line,
                    mention.dest
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "{} of the links in {} Markdown files lead nowhere:\n{}",
        problems.len(),
        files.len(),
        problems.join("\n")
    );
    assert!(links > 0, "no link found at all: the parser is broken");
}

// ---------------------------------------------------------------------------
// Files

fn markdown_files(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let entries = fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries {
        let entry = entry.unwrap();
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        let file_type = entry.file_type().unwrap();
        if file_type.is_dir() {
            let skipped = matches!(name.as_ref(), ".git" | "node_modules")
                || path == root.join("target")
                || path == root.join("fuzz").join("target");
            if !skipped {
                markdown_files(root, &path, out);
            }
        } else if file_type.is_file() && name.ends_with(".md") {
            out.push(path);
        }
    }
}

fn rel(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

// ---------------------------------------------------------------------------
// Checks

fn check_link(root: &Path, file: &Path, doc: &Doc, dest: &str) -> Result<(), String> {
    let (path, anchor) = match dest.split_once('#') {
        Some((p, a)) => (p, Some(percent_decode(a))),
        None => (dest, None),
    };
    let path = percent_decode(path);
    let target = if path.is_empty() {
        file.to_path_buf()
    } else {
        let base = if path.starts_with('/') {
            root.to_path_buf()
        } else {
            file.parent().unwrap().to_path_buf()
        };
        let joined = normalize(&base.join(path.trim_start_matches('/')));
        if !joined.starts_with(root) {
            return Err("leaves the repository".into());
        }
        if !joined.exists() {
            return Err(format!("{} does not exist", rel(root, &joined)));
        }
        joined
    };
    let Some(anchor) = anchor else { return Ok(()) };
    if anchor.is_empty() || target.extension() != Some(OsStr::new("md")) {
        return Ok(());
    }
    let anchors = if target == file {
        doc.anchors.clone()
    } else {
        Doc::read(&target).anchors
    };
    if anchors.contains(&anchor) {
        Ok(())
    } else {
        let mut known: Vec<_> = anchors.into_iter().collect();
        known.sort();
        Err(format!(
            "no heading of {} gives #{anchor} (it has: {})",
            rel(root, &target),
            known.join(", ")
        ))
    }
}

fn mention_exists(root: &Path, file: &Path, name: &str) -> bool {
    let name = name.trim_start_matches('/');
    [file.parent().unwrap(), root]
        .iter()
        .any(|base| normalize(&base.join(name)).exists())
}

/// `a/./b/../c` -> `a/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for part in path.components() {
        match part {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' && i + 2 < bytes.len() {
            let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap_or("");
            if let Ok(b) = u8::from_str_radix(hex, 16) {
                out.push(b);
                i += 3;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

// ---------------------------------------------------------------------------
// Parsing

struct Found {
    line: usize,
    dest: String,
}

struct Doc {
    /// Relative link destinations (external ones already left out).
    links: Vec<Found>,
    /// `*.md` names written in prose.
    mentions: Vec<Found>,
    /// Anchors the headings (and `id=`/`name=` attributes) produce.
    anchors: HashSet<String>,
}

impl Doc {
    fn read(path: &Path) -> Doc {
        let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        Doc::parse(&text)
    }

    fn parse(text: &str) -> Doc {
        let mut doc = Doc {
            links: Vec::new(),
            mentions: Vec::new(),
            anchors: HashSet::new(),
        };
        let mut slugs = Slugs::default();
        let mut fence: Option<(char, usize)> = None;
        let mut previous: Option<&str> = None;
        for (index, line) in text.lines().enumerate() {
            let number = index + 1;
            let trimmed = line.trim_start();
            let indent = line.len() - trimmed.len();
            if let Some((ch, len)) = fence {
                let run = trimmed.chars().take_while(|&c| c == ch).count();
                if run >= len && trimmed[run..].trim().is_empty() {
                    fence = None;
                }
                previous = None;
                continue;
            }
            if let Some(opening) = fence_opening(trimmed) {
                // A fence opens with up to three spaces of indentation in
                // CommonMark; list items indent theirs further, so any
                // indentation is accepted here.
                fence = Some(opening);
                previous = None;
                continue;
            }
            if trimmed.is_empty() {
                previous = None;
                continue;
            }

            if let Some(heading) = atx_heading(trimmed).filter(|_| indent <= 3) {
                doc.anchors.insert(slugs.next(heading));
                previous = None;
            } else if is_setext_underline(trimmed) && indent <= 3 {
                if let Some(text) = previous {
                    doc.anchors.insert(slugs.next(text.trim()));
                }
                previous = None;
            } else {
                let paragraph_text = !(trimmed.starts_with('|')
                    || trimmed.starts_with('>')
                    || trimmed.starts_with("- ")
                    || trimmed.starts_with("* ")
                    || trimmed.starts_with("+ ")
                    || trimmed.starts_with('<'));
                previous = paragraph_text.then_some(line);
            }

            for id in html_ids(line) {
                doc.anchors.insert(id);
            }
            let prose = without_code_spans(line);
            if let Some(dest) = reference_definition(&prose) {
                if !is_external(&dest) {
                    doc.links.push(Found { line: number, dest });
                }
                continue;
            }
            let (dests, rest) = inline_links(&prose);
            for dest in dests {
                if !is_external(&dest) {
                    doc.links.push(Found { line: number, dest });
                }
            }
            for name in md_mentions(&rest) {
                doc.mentions.push(Found {
                    line: number,
                    dest: name,
                });
            }
        }
        doc
    }
}

/// ```` ``` ```` or `~~~` (three or more) opens a fence: (its char, its length).
fn fence_opening(trimmed: &str) -> Option<(char, usize)> {
    let ch = trimmed.chars().next()?;
    if ch != '`' && ch != '~' {
        return None;
    }
    let run = trimmed.chars().take_while(|&c| c == ch).count();
    // A backtick fence's info string holds no backtick.
    (run >= 3 && !(ch == '`' && trimmed[run..].contains('`'))).then_some((ch, run))
}

fn atx_heading(trimmed: &str) -> Option<&str> {
    let hashes = trimmed.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&hashes) {
        return None;
    }
    let rest = &trimmed[hashes..];
    if !(rest.is_empty() || rest.starts_with(' ') || rest.starts_with('\t')) {
        return None;
    }
    let mut text = rest.trim();
    // An optional closing sequence of #s, after a space.
    let stripped = text.trim_end_matches('#');
    if stripped.is_empty() || stripped.ends_with(' ') {
        text = stripped.trim_end();
    }
    Some(text)
}

fn is_setext_underline(trimmed: &str) -> bool {
    let t = trimmed.trim_end();
    !t.is_empty() && (t.chars().all(|c| c == '=') || t.chars().all(|c| c == '-'))
}

/// GitHub's anchors for a file's headings, in order.
#[derive(Default)]
struct Slugs {
    seen: HashSet<String>,
}

impl Slugs {
    fn next(&mut self, heading: &str) -> String {
        let base = slug(heading);
        let mut candidate = base.clone();
        let mut n = 0;
        while self.seen.contains(&candidate) {
            n += 1;
            candidate = format!("{base}-{n}");
        }
        self.seen.insert(candidate.clone());
        candidate
    }
}

/// The anchor GitHub gives a heading: its rendered text, lowercase, with
/// everything but letters, digits, `-`, `_` and spaces dropped, and each
/// space turned into `-`.
fn slug(heading: &str) -> String {
    let rendered = rendered_text(heading);
    let mut out = String::new();
    for c in rendered.trim().chars().flat_map(char::to_lowercase) {
        if c == ' ' {
            out.push('-');
        } else if c.is_alphanumeric() || c == '-' || c == '_' {
            out.push(c);
        }
    }
    out
}

/// A heading's text as rendered: links reduced to their text, HTML tags gone.
/// (Backticks and emphasis markers are punctuation that `slug` drops anyway.)
fn rendered_text(heading: &str) -> String {
    let (_, text) = inline_links(heading);
    let mut out = String::new();
    let mut in_tag = false;
    for c in text.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => in_tag = false,
            _ if !in_tag => out.push(c),
            _ => {}
        }
    }
    out
}

/// `id="x"` and `name="x"` attributes of HTML elements: anchors too.
fn html_ids(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    for attr in [" id=\"", " name=\""] {
        let mut rest = line;
        while let Some(at) = rest.find(attr) {
            rest = &rest[at + attr.len()..];
            if let Some(end) = rest.find('"') {
                out.push(rest[..end].to_string());
                rest = &rest[end..];
            }
        }
    }
    out
}

/// The line with every inline code span (`` `...` ``, ``` `` ... `` ```)
/// replaced by one space.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let run = rest[start..].chars().take_while(|&c| c == '`').count();
        let after = &rest[start + run..];
        let closing = "`".repeat(run);
        let mut search = 0;
        let mut end = None;
        while let Some(at) = after[search..].find(&closing) {
            let at = search + at;
            let longer = after[at + run..].starts_with('`');
            if !longer && (at == 0 || !after[..at].ends_with('`')) {
                end = Some(at);
                break;
            }
            search = at + after[at..].chars().take_while(|&c| c == '`').count();
        }
        match end {
            Some(at) => {
                out.push(' ');
                rest = &after[at + run..];
            }
            None => {
                // No closing run: the backticks are literal.
                out.push_str(&rest[start..start + run]);
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// `[label]: destination` at the start of a line.
fn reference_definition(line: &str) -> Option<String> {
    let t = line.trim_start();
    if line.len() - t.len() > 3 || !t.starts_with('[') {
        return None;
    }
    let close = t.find("]:")?;
    if close < 2 || t[1..close].contains(']') {
        return None;
    }
    let dest = t[close + 2..].split_whitespace().next()?;
    Some(
        dest.trim_start_matches('<')
            .trim_end_matches('>')
            .to_string(),
    )
}

/// The destinations of the inline links `[text](dest "title")` of a line,
/// and the line with each `(dest ...)` part taken out (the texts stay).
fn inline_links(line: &str) -> (Vec<String>, String) {
    let mut dests = Vec::new();
    let mut rest_out = String::new();
    let mut rest = line;
    while let Some(at) = rest.find("](") {
        rest_out.push_str(&rest[..at + 1]);
        let after = &rest[at + 2..];
        // The destination runs to the matching `)`, parentheses balanced;
        // an optional title follows a space.
        let mut depth = 0usize;
        let mut end = None;
        for (i, c) in after.char_indices() {
            match c {
                '(' => depth += 1,
                ')' if depth == 0 => {
                    end = Some(i);
                    break;
                }
                ')' => depth -= 1,
                _ => {}
            }
        }
        let Some(end) = end else {
            rest_out.push_str("](");
            rest = after;
            continue;
        };
        let inside = after[..end].trim();
        let dest = if let Some(angled) = inside.strip_prefix('<') {
            angled.split('>').next().unwrap_or("")
        } else {
            inside.split_whitespace().next().unwrap_or("")
        };
        dests.push(dest.to_string());
        rest = &after[end + 1..];
    }
    rest_out.push_str(rest);
    (dests, rest_out)
}

fn is_external(dest: &str) -> bool {
    // A scheme: letters, digits, `+`, `-`, `.` before a `:` that comes before
    // any `/`, `?` or `#` (http:, https:, mailto:, ftp:...).
    match dest.find(':') {
        Some(colon) => {
            let scheme = &dest[..colon];
            !scheme.is_empty()
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        }
        None => dest.is_empty(),
    }
}

/// Names ending in `.md` written in prose: `README-fleet.md`, `docs/fleets.md`.
/// URLs (anything with `://`) are not names.
fn md_mentions(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for word in text.split_whitespace() {
        if word.contains("://") || word.contains("mailto:") {
            continue;
        }
        let is_name_char = |c: char| c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-');
        for piece in word.split(|c: char| !is_name_char(c)) {
            let piece = piece.trim_end_matches('.');
            if piece.len() > 3 && piece.ends_with(".md") && !piece.starts_with(".md") {
                out.push(piece.to_string());
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// The checker's own pieces

#[test]
fn slugs_follow_githubs_rules() {
    assert_eq!(slug("Two commands"), "two-commands");
    assert_eq!(
        slug("JSON output (`sweep --format json`)"),
        "json-output-sweep---format-json"
    );
    assert_eq!(
        slug("Fleets: discovered targets, sharded instances, Kubernetes"),
        "fleets-discovered-targets-sharded-instances-kubernetes"
    );
    assert_eq!(
        slug("Targets from files (`file_sd`)"),
        "targets-from-files-file_sd"
    );
    assert_eq!(slug("See [the docs](docs/README.md)"), "see-the-docs");
    let mut slugs = Slugs::default();
    assert_eq!(slugs.next("Tests"), "tests");
    assert_eq!(slugs.next("Tests"), "tests-1");
    assert_eq!(slugs.next("Tests"), "tests-2");
}

#[test]
fn links_outside_code_are_found_and_code_is_skipped() {
    let doc = Doc::parse(
        "# Title\n\
         See [a](a.md), [b](dir/b.md#part \"title\") and [c](#title).\n\
         Not `[x](in-code.md)`; [web](https://example.com/x.md), [m](mailto:a@b).\n\
         ```sh\n\
         [y](in-fence.md)\n\
         ```\n\
         \x20  ~~~\n\
         [z](in-indented-fence.md)\n\
         \x20  ~~~\n\
         [ref]: ref.md\n\
         Plain mention of README-fleet.md, and of `quoted.md`.\n\
         Setext\n\
         ------\n",
    );
    let links: Vec<_> = doc.links.iter().map(|f| f.dest.as_str()).collect();
    assert_eq!(links, ["a.md", "dir/b.md#part", "#title", "ref.md"]);
    let mentions: Vec<_> = doc.mentions.iter().map(|f| f.dest.as_str()).collect();
    assert_eq!(mentions, ["README-fleet.md"]);
    assert!(doc.anchors.contains("title"));
    assert!(doc.anchors.contains("setext"));
}

/// Source paths named in the documents (`src/probe/exchange.rs`), in code
/// spans or prose, exist: a file moved in a refactor must not leave the
/// reader looking for it.
#[test]
fn every_source_path_named_in_the_markdown_files_exists() {
    let root = repo();
    let mut files = Vec::new();
    markdown_files(&root, &root, &mut files);
    let mut missing = Vec::new();
    for file in &files {
        let text = fs::read_to_string(file).unwrap();
        for (n, line) in text.lines().enumerate() {
            let mut rest = line;
            while let Some(at) = rest.find("src/") {
                // Only a path that starts a word: not `foo/src/...`.
                let starts_word = at == 0
                    || !rest[..at].chars().next_back().is_some_and(|c| {
                        c.is_ascii_alphanumeric() || c == '/' || c == '_' || c == '-' || c == '.'
                    });
                let path: String = rest[at..]
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '_' | '.' | '-'))
                    .collect();
                let path = path.trim_end_matches('.');
                if starts_word && path.ends_with(".rs") && !root.join(path).exists() {
                    missing.push(format!("{}:{}: {path}", rel(&root, file), n + 1));
                }
                rest = &rest[at + 4..];
            }
        }
    }
    assert!(
        missing.is_empty(),
        "source paths that do not exist:\n{}",
        missing.join("\n")
    );
}
