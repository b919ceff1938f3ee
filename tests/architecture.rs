//! The layers of ARCHITECTURE.md, checked: the sources are parsed (`syn`),
//! every path they name (`use` trees, `super::`, `self::`, code, macro
//! bodies, attributes' tokens) resolved to the file that defines it, and the use graph held to
//! the layer table ARCHITECTURE.md carries, with no circle between the files
//! or folders of any folder. Test modules (`#[cfg(test)] mod`) are left out.

mod layers;

use std::collections::BTreeSet;
use std::path::Path;

/// Findings main still has that other branches are removing, each with the
/// branch (issue 20). The list can only shrink: an entry main no longer
/// needs fails the test, so that it is deleted.
#[rustfmt::skip]
const KNOWN: &[(&str, &str)] = &[
];

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn keys(findings: &[layers::rules::Finding]) -> BTreeSet<&str> {
    findings.iter().map(|f| f.key.as_str()).collect()
}

#[test]
fn src_keeps_the_layers_and_has_no_circles() {
    let findings = layers::check(repo());
    let known: BTreeSet<&str> = KNOWN.iter().map(|(key, _)| *key).collect();
    let new: Vec<String> = findings
        .iter()
        .filter(|f| !known.contains(f.key.as_str()))
        .map(|f| format!("{}\n    {}", f.key, f.detail))
        .collect();
    let found = keys(&findings);
    let gone: Vec<&str> = known.difference(&found).copied().collect();
    assert!(
        new.is_empty() && gone.is_empty(),
        "against ARCHITECTURE.md:\n{}\n\nknown exceptions no longer needed (delete them from KNOWN):\n{}",
        new.join("\n"),
        gone.join("\n"),
    );
}

#[test]
fn a_tree_that_breaks_the_rules_fails_naming_its_files() {
    let findings = layers::check(&repo().join("testdata/layers/bad"));
    let expected = BTreeSet::from([
        // An upward use, inline in code after a `#[cfg(test)]` item that is
        // not a module; the test modules' upward uses are not reported.
        "src/low/deep.rs uses src/high/mod.rs",
        // A path only a macro's tokens hold.
        "src/low/mod.rs uses src/pair/x.rs",
        // A path only an attribute's tokens hold.
        "src/low/attr.rs uses src/high/mod.rs",
        // Folders in a circle: high/ uses low/ as allowed, low/deep.rs back.
        "circle in src/: high/, low/",
        // Three files: a grouped `use super::{b::{..}}`, an inline
        // `crate::ring::c::fc()`, a `use self::super::a as first`.
        "circle in src/ring/: a.rs, b.rs, c.rs",
        // Two files through `super::` paths.
        "circle in src/pair/: x.rs, y.rs",
        "ARCHITECTURE.md lets `high/` use `ring/`, which it does not",
        "src/extra.rs is not in ARCHITECTURE.md's layer table",
        "src/orphan.rs is not declared by any mod",
    ]);
    assert_eq!(keys(&findings), expected, "{findings:#?}");
    let ring = findings
        .iter()
        .find(|f| f.key.starts_with("circle in src/ring/"))
        .unwrap();
    assert_eq!(
        ring.detail,
        "a.rs -> b.rs -> c.rs -> a.rs (src/ring/a.rs uses src/ring/b.rs; \
         src/ring/b.rs uses src/ring/c.rs; src/ring/c.rs uses src/ring/a.rs)"
    );
}

#[test]
fn a_forbidden_use_inside_an_attribute_fails() {
    // `#[command(version = crate::high::VERSION)]` in low/: the tokens of
    // any attribute are read, not only serde's.
    let findings = layers::check(&repo().join("testdata/layers/bad"));
    let attr = findings
        .iter()
        .find(|f| f.key == "src/low/attr.rs uses src/high/mod.rs")
        .unwrap_or_else(|| panic!("no finding for the attribute's use: {findings:#?}"));
    assert!(attr.detail.contains("high/"), "{}", attr.detail);
}

#[test]
fn a_tree_that_keeps_the_rules_passes() {
    // Children using mod.rs's re-exports through `super::` use the files
    // that define them: no circle with mod.rs.
    let findings = layers::check(&repo().join("testdata/layers/clean"));
    assert!(findings.is_empty(), "{findings:#?}");
}

#[test]
fn the_layer_table_is_read_as_written() {
    let table = layers::rules::read_table(
        "intro\n\n| layer | may use |\n|---|---|\n\
         | `a/`, `b.rs` | `c/` (why), `d/e/` |\n| `c/` | nothing |\n| `x.rs` | anything |\n\nafter\n| `z/` | nothing |\n",
    )
    .unwrap();
    let rows: Vec<(&str, Option<Vec<&str>>)> = table
        .layers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str(),
                v.as_ref().map(|v| v.iter().map(String::as_str).collect()),
            )
        })
        .collect();
    assert_eq!(
        rows,
        vec![
            ("a/", Some(vec!["c/", "d/e/"])),
            ("b.rs", Some(vec!["c/", "d/e/"])),
            ("c/", Some(vec![])),
            ("x.rs", None),
        ]
    );
    let err = layers::rules::read_table("| `a/` | `b/` |\n")
        .err()
        .unwrap();
    assert!(err.contains("no table"), "{err}");
    let err = layers::rules::read_table("| layer | may use |\n|---|---|\n| `a/` | b |\n")
        .err()
        .unwrap();
    assert!(err.contains("`anything`, `nothing`"), "{err}");
}

/// Every `.rs` file under `dir`, as a path relative to `src`.
fn source_files(src: &Path, dir: &Path, out: &mut Vec<String>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(src, &path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(src).unwrap();
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

#[test]
fn the_diagram_names_every_source_file() {
    // A folder's mod.rs is named by its folder; every other file by name,
    // in the diagram of ARCHITECTURE.md, so that a newcomer finds it there.
    let architecture = std::fs::read_to_string(repo().join("ARCHITECTURE.md")).unwrap();
    let diagram = architecture
        .split("```")
        .nth(1)
        .expect("a diagram between ``` fences");
    let named = |name: &str| {
        diagram.match_indices(name).any(|(i, _)| {
            let before = diagram[..i].chars().next_back();
            !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
        })
    };
    let mut files = Vec::new();
    let src = repo().join("src");
    source_files(&src, &src, &mut files);
    let missing: Vec<&String> = files
        .iter()
        .filter(|f| {
            let name = f.rsplit('/').next().unwrap_or(f);
            let shown = if name == "mod.rs" {
                f.trim_end_matches("mod.rs")
                    .rsplit('/')
                    .nth(1)
                    .unwrap_or("")
            } else {
                name
            };
            !named(shown)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "not in ARCHITECTURE.md's diagram: {missing:?}"
    );
}

#[test]
fn results_reach_metrics_only_through_the_prometheus_sink() {
    // `Metrics`'s methods that take results; its daemon-state ones
    // (postponed sweeps, requests in flight, reloads, the fleet) are called
    // where that state changes.
    const RESULT_METHODS: [&str; 6] = [
        ".observe_request(",
        ".publish_sweep(",
        ".publish_pair(",
        ".describe_target(",
        ".set_target_limits(",
        ".set_target_info(",
    ];
    let src = repo().join("src");
    let mut files = Vec::new();
    source_files(&src, &src, &mut files);
    let callers: Vec<String> = files
        .iter()
        .filter(|f| !f.starts_with("metrics/") && *f != "sinks/prometheus.rs")
        .flat_map(|f| {
            let text = std::fs::read_to_string(src.join(f)).unwrap();
            RESULT_METHODS
                .iter()
                .filter(|m| text.contains(*m))
                .map(|m| format!("{f} calls {m}"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(callers.is_empty(), "{callers:#?}");
}

/// Lines of code a source file may hold outside its test module.
const MAX_FILE_CODE_LINES: usize = 600;
/// Lines a function may span, signature to closing brace.
const MAX_FUNCTION_LINES: usize = 120;

/// The lines of a source file before its test module (by convention last).
fn outside_tests(text: &str) -> Vec<&str> {
    let lines: Vec<&str> = text.lines().collect();
    let end = lines
        .windows(2)
        .position(|w| w[0] == "#[cfg(test)]" && w[1].starts_with("mod "))
        .unwrap_or(lines.len());
    lines[..end].to_vec()
}

/// Functions longer than `max` lines, as (name, first line, length). The
/// sources are rustfmt's: a function's body closes with a `}` at the
/// indentation its `fn` line has.
fn long_functions(lines: &[&str], max: usize) -> Vec<(String, usize, usize)> {
    let mut long = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let body = line.trim_start();
        let indent = &line[..line.len() - body.len()];
        let item = [
            "pub(crate) ",
            "pub(super) ",
            "pub ",
            "async ",
            "const ",
            "unsafe ",
        ]
        .iter()
        .fold(body, |b, p| b.strip_prefix(p).unwrap_or(b));
        let item = ["async ", "const ", "unsafe "]
            .iter()
            .fold(item, |b, p| b.strip_prefix(p).unwrap_or(b));
        let Some(rest) = item.strip_prefix("fn ") else {
            continue;
        };
        if line.trim_end().ends_with(';') || line.trim_end().ends_with('}') {
            continue;
        }
        let close = format!("{indent}}}");
        let Some(len) = lines[i + 1..].iter().position(|l| *l == close) else {
            continue;
        };
        if len + 2 > max {
            let name: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_')
                .collect();
            long.push((name, i + 1, len + 2));
        }
    }
    long
}

#[test]
fn no_source_file_is_over_600_lines_of_code_nor_a_function_over_120_lines() {
    let mut files = Vec::new();
    source_files(&repo().join("src"), &repo().join("src"), &mut files);
    let mut found = Vec::new();
    // A module of tests in a file of its own (`#[cfg(test)] mod tests;`).
    for file in files.iter().filter(|f| !f.ends_with("tests.rs")) {
        let text = std::fs::read_to_string(repo().join("src").join(file)).unwrap();
        let lines = outside_tests(&text);
        let code = lines
            .iter()
            .map(|l| l.trim())
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .count();
        if code > MAX_FILE_CODE_LINES {
            found.push(format!("src/{file}: {code} lines of code"));
        }
        for (name, at, len) in long_functions(&lines, MAX_FUNCTION_LINES) {
            found.push(format!("src/{file}:{at}: fn {name} spans {len} lines"));
        }
    }
    assert!(
        found.is_empty(),
        "ARCHITECTURE.md's size rules (files at most {MAX_FILE_CODE_LINES} lines of code, \
         functions at most {MAX_FUNCTION_LINES} lines):\n{}",
        found.join("\n")
    );
}

#[test]
fn a_long_function_is_found_at_its_own_indentation() {
    let mut text = vec![
        "impl X {",
        "    pub async fn long(",
        "        a: u32,",
        "    ) -> u32 {",
    ];
    text.extend(std::iter::repeat_n("        a += 1;", 130));
    text.extend(["    }", "    fn short() {}", "}"]);
    let found = long_functions(&text, MAX_FUNCTION_LINES);
    assert_eq!(found, vec![("long".to_string(), 2, 134)]);
    assert!(long_functions(&text[..20], MAX_FUNCTION_LINES).is_empty());
}
