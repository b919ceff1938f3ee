//! The prompt memory a configuration needs ([`crate::config::prompt_memory`]),
//! in words for `check-config`: what the unit's `MemoryMax=` must leave
//! room for (docs/operating.md).

use std::fmt::Write as _;

use crate::config::Config;

/// Bytes of prompt memory `config` needs at most (see
/// [`crate::config::prompt_memory`]).
pub fn prompt_bytes(config: &Config) -> u64 {
    crate::config::prompt_memory::needed(&config.targets)
}

/// The line `check-config` prints.
pub fn line(config: &Config) -> String {
    let bytes = prompt_bytes(config);
    let mut out = String::new();
    let _ = write!(
        out,
        "prompt memory: about {:.1} MiB at most of max_prompt_memory_mib {} (each workload's prompts once, and their request bodies twice per distinct model and options, shared by every sweep); see docs/operating.md for MemoryMax=",
        bytes as f64 / f64::from(1 << 20),
        config.max_prompt_memory_mib
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
        assert!(line(&config(&["m"]))
            .starts_with("prompt memory: about 0.0 MiB at most of max_prompt_memory_mib 384"));
    }
}
