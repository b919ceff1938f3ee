//! The layers of ARCHITECTURE.md, checked: each folder of `src/` may use only
//! the layers listed for it, and no two modules use each other. Read from the
//! `crate::` paths in the source, so a new arrow fails here before review.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Each layer and the layers it may use. The application layer (`lib.rs`,
/// `main.rs`, `cli.rs`, `signals.rs`) wires everything and may use any.
#[rustfmt::skip]
const ALLOWED: &[(&str, &[&str])] = &[
    ("config", &[]),
    ("stream", &[]),
    // The simulator reads its plain-data settings from config, nothing else.
    ("sim", &["config"]),
    ("stats", &["config"]),
    ("probe", &["config", "stream", "stats"]),
    ("sweep", &["config", "probe", "stats"]),
    ("metrics", &["config", "stats"]),
    ("fleet", &["config"]),
    ("schedule", &["config", "fleet", "sweep", "probe", "stats", "metrics", "sim"]),
    ("http", &["config", "metrics", "stats", "faces"]),
    // The faces: what a person reads. The progress line is a sweep observer;
    // check-config's text tells the fleet's.
    ("faces", &["config", "fleet", "stats", "sweep"]),
];

const APP: &[&str] = &[
    "lib",
    "main",
    "cli",
    "signals",
    "manual",
    "build_info",
    "memory",
    "systemd",
];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in fs::read_dir(dir).unwrap().flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The module path of a source file: `src/sweep/pair.rs` -> `sweep::pair`.
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let parts: Vec<_> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    let parts: Vec<_> = parts.into_iter().filter(|p| p != "mod").collect();
    parts.join("::")
}

/// The `crate::a::b` paths a file names, outside its `#[cfg(test)]` module.
fn crate_paths(text: &str) -> BTreeSet<String> {
    let code = match text.find("#[cfg(test)]") {
        Some(i) => &text[..i],
        None => text,
    };
    let mut found = BTreeSet::new();
    for line in code.lines() {
        let line = line.trim_start();
        if line.starts_with("//") {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("crate::") {
            let tail = &rest[i + "crate::".len()..];
            let path: String = tail
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let path = path.trim_end_matches(':').to_string();
            if !path.is_empty() {
                found.insert(path);
            }
            rest = tail;
        }
    }
    found
}

fn layer(module: &str) -> &str {
    module.split("::").next().unwrap_or(module)
}

fn src_graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    let mut modules: BTreeSet<String> = files.iter().map(|f| module_of(&src, f)).collect();
    modules.insert(String::new());
    let mut graph = BTreeMap::new();
    for file in &files {
        let from = module_of(&src, file);
        let text = fs::read_to_string(file).unwrap();
        let mut to = BTreeSet::new();
        for path in crate_paths(&text) {
            // The longest prefix of the path that is a module of its own.
            let segments: Vec<&str> = path.split("::").collect();
            let target = (1..=segments.len())
                .rev()
                .map(|n| segments[..n].join("::"))
                .find(|m| modules.contains(m));
            if let Some(target) = target {
                if target != from {
                    to.insert(target);
                }
            }
        }
        graph.insert(from, to);
    }
    graph
}

#[test]
fn every_layer_uses_only_the_layers_below_it() {
    let allowed: BTreeMap<&str, &[&str]> = ALLOWED.iter().copied().collect();
    let mut problems = Vec::new();
    for (from, targets) in src_graph() {
        let from_layer = layer(&from);
        if APP.contains(&from_layer) {
            continue;
        }
        let Some(may) = allowed.get(from_layer) else {
            problems.push(format!(
                "src/{from}: layer {from_layer:?} is not in ARCHITECTURE.md"
            ));
            continue;
        };
        for to in targets {
            let to_layer = layer(&to);
            if to_layer != from_layer && !may.contains(&to_layer) {
                problems.push(format!(
                    "{from} uses {to}: {from_layer} may not use {to_layer}"
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "layer violations:\n{}",
        problems.join("\n")
    );
}

#[test]
fn no_two_modules_use_each_other() {
    let graph = src_graph();
    let mut circles = Vec::new();
    for (from, targets) in &graph {
        for to in targets {
            let back = graph.get(to).is_some_and(|t| t.contains(from));
            // A folder's mod.rs declaring its children is not a use.
            let parent =
                to.starts_with(&format!("{from}::")) || from.starts_with(&format!("{to}::"));
            if back && from < to && !parent {
                circles.push(format!("{from} <-> {to}"));
            }
        }
    }
    assert!(
        circles.is_empty(),
        "modules that use each other:\n{}",
        circles.join("\n")
    );
}

#[test]
fn the_checker_sees_paths() {
    let paths = crate_paths("use crate::stats::report::{A, B};\nlet x = crate::probe::client::Client::new();\n// crate::nope\n");
    assert!(paths.contains("stats::report"), "{paths:?}");
    assert!(
        paths.iter().any(|p| p.starts_with("probe::client::Client")),
        "{paths:?}"
    );
    assert!(!paths.iter().any(|p| p.starts_with("nope")), "{paths:?}");
}
