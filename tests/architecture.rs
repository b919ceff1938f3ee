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
