//! The prompt memory a configuration needs, in words for `check-config`:
//! each workload's prompts are held once, and the request bodies built
//! from them (two serialised copies: the measured requests' and the
//! one-token requests that open a level's connections) once per distinct
//! model and request options that sweep them, shared by every sweep of
//! those at once (`sweep/shared_bodies.rs`). What the unit's `MemoryMax=`
//! must leave room for (docs/operating.md).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::config::{Config, Workload};

/// Parsed prompts take about this many times their JSON text in memory
/// (serde_json values: a map and a string per message).
const PARSED_FACTOR: u64 = 3;

/// Serialised copies of a workload's bodies per distinct model and options.
const BODY_COPIES: u64 = 2;

/// Bytes of prompt memory `config` needs at most: every workload's parsed
/// prompts, and their bodies for each distinct (model, options) sweeping
/// them, all at once.
pub fn prompt_bytes(config: &Config) -> u64 {
    let mut workloads: BTreeMap<&str, (&Workload, Vec<String>)> = BTreeMap::new();
    for t in &config.targets {
        // Two targets with the same model and options share the bodies.
        let key = format!("{:?}|{}|{:?}", t.api, t.model, t.request_options());
        for w in &t.workloads {
            let entry = workloads.entry(&w.name).or_insert((w, Vec::new()));
            if !entry.1.contains(&key) {
                entry.1.push(key.clone());
            }
        }
    }
    workloads
        .values()
        .map(|(w, bodies)| {
            let text = text_bytes(w);
            text * PARSED_FACTOR + text * BODY_COPIES * bodies.len() as u64
        })
        .sum()
}

/// The JSON text of a workload's prompts.
fn text_bytes(w: &Workload) -> u64 {
    w.prompts
        .iter()
        .map(|p| serde_json::to_string(&p.messages).map_or(0, |s| s.len() as u64))
        .sum()
}

/// The line `check-config` prints.
pub fn line(config: &Config) -> String {
    let bytes = prompt_bytes(config);
    let mut out = String::new();
    let _ = write!(
        out,
        "prompt memory: about {:.1} MiB at most (each workload's prompts once, and their request bodies twice per distinct model and options, shared by every sweep); see docs/operating.md for MemoryMax=",
        bytes as f64 / f64::from(1 << 20)
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(models: &[&str]) -> Config {
        let targets: String = models
            .iter()
            .enumerate()
            .map(|(i, m)| {
                format!("  - {{name: t{i}, base_url: 'http://127.0.0.1:9/v1', model: {m}, workloads: [w]}}\n")
            })
            .collect();
        let text = format!(
            "workloads:\n  w:\n    max_completion_tokens: 8\n    prompts: ['{}']\ntargets:\n{targets}",
            "x".repeat(1000)
        );
        let dir = std::env::temp_dir().join(format!(
            "llmprobe-prompt-memory-{}-{}",
            std::process::id(),
            models.len()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("llmprobe.yaml");
        std::fs::write(&path, text).unwrap();
        let c = crate::config::decode(&path, false)
            .and_then(|f| crate::config::resolve(&path, f, &crate::config::ProcessEnv))
            .unwrap_or_else(|e| panic!("{e}"));
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    #[test]
    fn bodies_count_once_per_distinct_model() {
        let one = prompt_bytes(&config(&["m"]));
        let same = prompt_bytes(&config(&["m", "m", "m"]));
        let two = prompt_bytes(&config(&["m", "n"]));
        // The text: 1000 x's in a one-message chat, about 1,030 bytes.
        assert!((1000 * 5..1100 * 5).contains(&one), "{one}");
        assert_eq!(same, one, "three targets of one model share the bodies");
        assert_eq!(two - one, one / 5 * 2, "a second model adds two copies");
        assert!(line(&config(&["m"])).starts_with("prompt memory: about 0.0 MiB"));
    }
}
