//! What a stopped target loop leaves for the loop a reload starts in its
//! place: its memory, taken by the next loop of the same name when the
//! target's identity ([`state::identity`]: name, model, endpoint, SLO) did
//! not change, so that a reload keeps what a loop learnt even without a
//! `state_dir`. A removed target's memory is forgotten with its series.

use std::collections::BTreeMap;
use std::sync::Mutex;

use crate::config::Target;
use crate::schedule::state::{self, Saved};

/// Memories left by stopped loops, by target name.
#[derive(Default)]
pub(crate) struct Handoff(Mutex<BTreeMap<String, (String, Saved)>>);

impl Handoff {
    /// Leaves the memory of `target`'s loop, which is ending.
    pub(crate) fn leave(&self, target: &Target, saved: Saved) {
        self.lock()
            .insert(target.name.clone(), (state::identity(target), saved));
    }

    /// The memory the last loop of `target`'s name left, if its identity is
    /// the same (taken: a loop starts from it once).
    pub(crate) fn take(&self, target: &Target) -> Option<Saved> {
        let (identity, saved) = self.lock().remove(&target.name)?;
        (identity == state::identity(target)).then_some(saved)
    }

    /// Drops what a removed target's loop left.
    pub(crate) fn forget(&self, name: &str) {
        self.lock().remove(name);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<String, (String, Saved)>> {
        // A panic while holding it leaves a map that is still whole.
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::schedule::memory::Memory;

    fn target(model: &str) -> Target {
        let yaml = format!(
            "targets:\n  - name: w1\n    base_url: http://10.0.0.5:8000/v1\n    model: {model}\n    \
             workloads: [w]\nworkloads:\n  w:\n    prompts: [\"hi\"]\n"
        );
        let file = crate::config::load::decode_text(&yaml, "t.yaml", false).unwrap();
        let config = crate::config::resolve(std::path::Path::new("/t.yaml"), file, &NoEnv)
            .unwrap_or_else(|e| panic!("{e}"));
        (*config.targets[0]).clone()
    }

    struct NoEnv;
    impl crate::config::Env for NoEnv {
        fn var(&self, _: &str) -> Option<String> {
            None
        }
    }

    #[test]
    fn a_memory_is_taken_once_by_the_same_identity_only() {
        let h = Handoff::default();
        let t = target("m");
        h.leave(&t, Memory::new(&t).saved());
        assert!(h.take(&t).is_some());
        assert!(h.take(&t).is_none(), "taken once");
        h.leave(&t, Memory::new(&t).saved());
        assert!(h.take(&target("other")).is_none(), "another model");
        assert!(h.take(&t).is_none(), "dropped by the mismatch");
        h.leave(&t, Memory::new(&t).saved());
        h.forget("w1");
        assert!(h.take(&t).is_none(), "forgotten");
    }
}
