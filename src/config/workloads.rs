//! Validation of `workloads:`: each one's prompts read (relative to the
//! config) and checked, its defaults applied.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use super::defaults;
use super::file::WorkloadFile;
use super::prompts::{self, Prompt};
use super::resolved::Workload;
use super::values::PrefixCache;

/// Resolves the `written` workloads, reporting through `bad`.
pub fn resolve_workloads(
    written: &BTreeMap<String, WorkloadFile>,
    base_dir: &Path,
    bad: &mut dyn FnMut(&str, String),
) -> BTreeMap<String, Arc<Workload>> {
    let mut workloads: BTreeMap<String, Arc<Workload>> = BTreeMap::new();
    for (name, w) in written {
        let key = format!("workloads.{name}");
        let (mut prompts, mut chat_at) = read_prompts(&key, w, base_dir, bad);
        if let Some(system) = &w.system_prompt {
            if system.trim().is_empty() {
                bad(&format!("{key}.system_prompt"), "is empty".into());
            }
            for p in &mut prompts {
                p.prepend_system(system);
            }
            chat_at = Some(format!("`{key}.system_prompt`"));
        }
        let prefix_cache = w.prefix_cache.unwrap_or_default();
        if prefix_cache == PrefixCache::SharedSystemPrompt
            && !prompts.iter().all(Prompt::starts_with_system)
        {
            bad(
                &format!("{key}.prefix_cache"),
                "`shared_system_prompt` needs a system message first in every prompt: set `system_prompt`".into(),
            );
        }
        let max_completion_tokens = w
            .max_completion_tokens
            .unwrap_or(defaults::MAX_COMPLETION_TOKENS);
        if max_completion_tokens == 0 {
            bad(
                &format!("{key}.max_completion_tokens"),
                "must be at least 1".into(),
            );
        }
        let temperature = w.temperature.unwrap_or(defaults::TEMPERATURE);
        if !(0.0..=2.0).contains(&temperature) {
            bad(
                &format!("{key}.temperature"),
                "must be between 0 and 2".into(),
            );
        }
        workloads.insert(
            name.clone(),
            Arc::new(Workload {
                name: name.clone(),
                max_completion_tokens,
                temperature,
                prompts,
                prefix_cache,
                chat_at,
            }),
        );
    }
    workloads
}

/// The prompts of workload `w` (config key `key`) from each of its
/// sources, and where the first chat among them is (None: every prompt is
/// plain text); a workload without any source is reported.
fn read_prompts(
    key: &str,
    w: &WorkloadFile,
    base_dir: &Path,
    bad: &mut dyn FnMut(&str, String),
) -> (Vec<Prompt>, Option<String>) {
    let mut prompts = Vec::new();
    if let Some(inline) = &w.prompts {
        if inline.is_empty() {
            bad(&format!("{key}.prompts"), "is empty".into());
        }
        prompts.extend(inline.iter().map(|p| Prompt::user(p)));
    }
    let mut chat_at = None;
    if let Some(pf) = &w.prompts_file {
        let full = if pf.is_relative() {
            base_dir.join(pf)
        } else {
            pf.clone()
        };
        match prompts::load_jsonl(&full) {
            Ok(p) => {
                chat_at = p
                    .iter()
                    .find(|(_, p)| p.text().is_none())
                    .map(|(n, _)| format!("`{}` line {n}", full.display()));
                prompts.extend(p.into_iter().map(|(_, p)| p));
            }
            Err(e) => bad(&format!("{key}.prompts_file"), e),
        }
    }
    if let Some(dir) = &w.prompts_dir {
        let full = if dir.is_relative() {
            base_dir.join(dir)
        } else {
            dir.clone()
        };
        let instruction = w.instruction.as_deref().unwrap_or(defaults::INSTRUCTION);
        match prompts::load_dir(&full, instruction) {
            Ok(p) => prompts.extend(p),
            Err(e) => bad(&format!("{key}.prompts_dir"), e),
        }
    } else if w.instruction.is_some() {
        bad(
            &format!("{key}.instruction"),
            "only applies to `prompts_dir`".into(),
        );
    }
    if let Some(syn) = &w.synthetic {
        if syn.prompt_tokens == 0 || syn.prompt_tokens > 1_000_000 {
            bad(
                &format!("{key}.synthetic.prompt_tokens"),
                "must be between 1 and 1000000".into(),
            );
        } else if syn.count == 0 || syn.count > 1000 {
            bad(
                &format!("{key}.synthetic.count"),
                "must be between 1 and 1000".into(),
            );
        } else {
            prompts.extend(prompts::synthetic(syn.prompt_tokens, syn.count));
        }
    }
    if w.prompts.is_none()
        && w.prompts_file.is_none()
        && w.prompts_dir.is_none()
        && w.synthetic.is_none()
    {
        bad(
            key,
            "has no prompts: set `prompts`, `prompts_file`, `prompts_dir` or `synthetic`".into(),
        );
    }
    (prompts, chat_at)
}
