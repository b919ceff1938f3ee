//! Manifests and rule files read as YAML, with readable failures.

use yaml_rust2::{Yaml, YamlLoader};

use super::paths::read;

/// The one YAML document of the repository file `rel`.
pub fn yaml(rel: &str) -> Yaml {
    let mut docs = YamlLoader::load_from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    assert_eq!(docs.len(), 1, "{rel}: one document expected");
    docs.remove(0)
}

/// `node[a][b]...`, with a readable failure when a step is missing.
pub fn at<'a>(node: &'a Yaml, path: &[&str]) -> &'a Yaml {
    let mut n = node;
    for step in path {
        n = match step.parse::<usize>() {
            Ok(i) => &n[i],
            Err(_) => &n[*step],
        };
        assert!(!n.is_badvalue(), "no {} in {node:?}", path.join("."));
    }
    n
}

/// The string at `path`.
pub fn str_at<'a>(node: &'a Yaml, path: &[&str]) -> &'a str {
    at(node, path)
        .as_str()
        .unwrap_or_else(|| panic!("{} is not a string", path.join(".")))
}
