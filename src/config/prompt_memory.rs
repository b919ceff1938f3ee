//! The prompt memory a configuration needs at most: each workload's prompts
//! held once, and the request bodies built from them (two serialised
//! copies: the measured requests' and the one-token requests that open a
//! level's connections) once per distinct model and request options that
//! sweep them, shared by every sweep of those at once
//! (`sweep/shared_bodies.rs`). The daemon refuses a configuration that
//! needs more than `max_prompt_memory_mib`; `check-config` prints it.

use std::collections::{BTreeMap, BTreeSet};
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
    let mut tally = Tally::default();
    for t in targets {
        tally.add(t);
    }
    tally.total()
}

/// The prompt memory of targets counted one at a time (the daemon's
/// targets, then each discovered one while it fits under the cap), in time
/// linear in the targets: each workload's text is measured once.
#[derive(Debug, Default)]
pub struct Tally {
    /// Each workload's prompt text, and whether its parsed prompts are
    /// counted.
    texts: BTreeMap<String, (u64, bool)>,
    /// The (workload, endpoint, model, options) whose bodies are counted.
    bodies: BTreeSet<(String, String)>,
    total: u64,
}

impl Tally {
    /// Bytes counted so far.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// Counts `target`; returns the bytes it added: the prompts of a
    /// workload not counted yet, and bodies for a model and options not
    /// counted yet for it.
    pub fn add(&mut self, target: &Target) -> u64 {
        let added = self.extra(target);
        let key = body_key(target);
        for w in &target.workloads {
            if let Some((_, counted)) = self.texts.get_mut(&w.name) {
                *counted = true;
            }
            self.bodies.insert((w.name.clone(), key.clone()));
        }
        self.total += added;
        added
    }

    /// Counts `target` when the total stays within `cap` bytes; true when
    /// counted.
    pub fn add_within(&mut self, target: &Target, cap: u64) -> bool {
        if self.total + self.extra(target) > cap {
            return false;
        }
        self.add(target);
        true
    }

    /// Bytes `target` would add.
    fn extra(&mut self, target: &Target) -> u64 {
        let key = body_key(target);
        let mut extra = 0;
        for w in &target.workloads {
            let (text, counted) = *self
                .texts
                .entry(w.name.clone())
                .or_insert_with(|| (text_bytes(w), false));
            if !counted {
                extra += text * PARSED_FACTOR;
            }
            if !self.bodies.contains(&(w.name.clone(), key.clone())) {
                extra += text * BODY_COPIES;
            }
        }
        extra
    }
}

/// Two targets with the same endpoint kind, model and options share the
/// bodies.
fn body_key(t: &Target) -> String {
    format!("{:?}|{}|{:?}", t.api, t.model, t.request_options())
}

/// The JSON text of a workload's prompts.
fn text_bytes(w: &Workload) -> u64 {
    w.prompts
        .iter()
        .map(|p| serde_json::to_string(&p.messages).map_or(0, |s| s.len() as u64))
        .sum()
}
