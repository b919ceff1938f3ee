//! The prompt memory a configuration needs at most: each workload's prompts
//! held once, and the request bodies built from them (two serialised
//! copies: the measured requests' and the one-token requests that open a
//! level's connections) once per distinct model and request options that
//! sweep them, shared by every sweep of those at once
//! (`sweep/shared_bodies.rs`). The daemon refuses a configuration that
//! needs more than `max_prompt_memory_mib`; `check-config` prints it.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::config::{Target, Workload};

/// Parsed prompts take about this many times their JSON text in memory
/// (serde_json values: a map and a string per message).
const PARSED_FACTOR: u64 = 3;

/// Serialised copies of a workload's bodies per distinct model and options.
const BODY_COPIES: u64 = 2;

/// Bytes of prompt memory `targets` need at most: every workload's parsed
/// prompts, and their bodies for each distinct (model, options) sweeping
/// them, all at once.
pub fn needed(targets: &[Arc<Target>]) -> u64 {
    let mut workloads: BTreeMap<&str, (&Workload, Vec<String>)> = BTreeMap::new();
    for t in targets {
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
