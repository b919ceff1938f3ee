//! A workload's serialised bodies held once, however many sweeps use them:
//! every sweep (and probe stream, and gateway pair) that asks for the
//! bodies of the same endpoint kind, model, workload, request options and
//! output limit while another holds them gets the same copy. A 58 MB
//! prompts folder swept by 20 targets of one model at once took 2.99 GB
//! with a copy per sweep (issue 29). Entries hold weak references only:
//! the bodies go when the last sweep using them ends. One sweep builds a
//! copy while the others asking for it wait and take it: targets whose
//! sweeps start together (every target at the daemon's start) built a copy
//! each at once, and held them all for a moment.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use crate::config::{Api, MaxTokensField, RequestOptions, Workload};
use crate::probe::api;
use crate::probe::body::Bodies;

/// What makes two sets of bodies the same.
struct Entry {
    api: Api,
    model: String,
    workload: Weak<Workload>,
    options: RequestOptions,
    field: MaxTokensField,
    max_tokens: u32,
    slot: Arc<Slot>,
}

/// Where one set of bodies is: its lock is held while they are built, so
/// that a second sweep asking for them waits for the copy rather than
/// building its own.
#[derive(Default)]
struct Slot {
    bodies: Mutex<Weak<Bodies>>,
}

impl Slot {
    /// Whether anyone holds or builds (or waits for) these bodies.
    fn in_use(self: &Arc<Self>) -> bool {
        Arc::strong_count(self) > 1
            || match self.bodies.try_lock() {
                Ok(bodies) => bodies.strong_count() > 0,
                Err(_) => true,
            }
    }
}

/// The bodies in use, looked up by a scan: there are as many as distinct
/// (model, workload, options) pairs in flight, a few dozen at most.
static IN_USE: Mutex<Vec<Entry>> = Mutex::new(Vec::new());

impl Entry {
    fn matches(
        &self,
        api: Api,
        model: &str,
        workload: &Arc<Workload>,
        options: &RequestOptions,
        field: MaxTokensField,
        max_tokens: u32,
    ) -> bool {
        self.api == api
            && self.model == model
            && self.workload.as_ptr() == Arc::as_ptr(workload)
            && &self.options == options
            && self.field == field
            && self.max_tokens == max_tokens
    }
}

/// [`bodies`], built (or waited for) on a blocking thread: a big prompts
/// folder takes a while to serialise, and a runtime worker held meanwhile
/// would read other sweeps' streams late, which they would time as the
/// server's.
pub(crate) async fn built_aside(
    api: Api,
    model: String,
    workload: Arc<Workload>,
    options: RequestOptions,
    field: MaxTokensField,
    max_tokens: u32,
) -> Arc<Bodies> {
    let build = {
        let (model, workload, options) = (model.clone(), workload.clone(), options.clone());
        move || bodies(api, &model, &workload, &options, field, max_tokens)
    };
    match tokio::task::spawn_blocking(build).await {
        Ok(built) => built,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        // The runtime is shutting down: build here rather than fail a sweep
        // that is about to be cancelled anyway.
        Err(_) => bodies(api, &model, &workload, &options, field, max_tokens),
    }
}

/// The bodies of `workload` for endpoint `api` and `model`, with `options`
/// and `max_tokens` in `field`: the copy another sweep holds (or is
/// building: then after it is built), else a new one.
pub(crate) fn bodies(
    api: Api,
    model: &str,
    workload: &Arc<Workload>,
    options: &RequestOptions,
    field: MaxTokensField,
    max_tokens: u32,
) -> Arc<Bodies> {
    let slot = {
        let mut in_use = lock();
        in_use.retain(|e| e.slot.in_use() && e.workload.strong_count() > 0);
        match in_use
            .iter()
            .find(|e| e.matches(api, model, workload, options, field, max_tokens))
        {
            Some(e) => e.slot.clone(),
            None => {
                let slot = Arc::new(Slot::default());
                in_use.push(Entry {
                    api,
                    model: model.to_string(),
                    workload: Arc::downgrade(workload),
                    options: options.clone(),
                    field,
                    max_tokens,
                    slot: slot.clone(),
                });
                slot
            }
        }
    };
    // Built under the slot's lock only (a big folder takes a while): other
    // bodies are found and built meanwhile; these are waited for.
    let mut held = slot.bodies.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(found) = held.upgrade() {
        return found;
    }
    let built = Arc::new(Bodies::for_kind(
        api::kind(api),
        model,
        workload,
        options,
        field,
        max_tokens,
    ));
    *held = Arc::downgrade(&built);
    built
}

fn lock() -> MutexGuard<'static, Vec<Entry>> {
    IN_USE.lock().unwrap_or_else(PoisonError::into_inner)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::prompts::Prompt;
    use crate::config::PrefixCache;

    fn workload(prompt: &str) -> Arc<Workload> {
        Arc::new(Workload {
            name: "w".into(),
            max_completion_tokens: 64,
            temperature: 0.0,
            prompts: vec![Prompt::user(prompt)],
            prefix_cache: PrefixCache::Unique,
            chat_at: None,
        })
    }

    fn get(model: &str, w: &Arc<Workload>, max_tokens: u32) -> Arc<Bodies> {
        let field = MaxTokensField::MaxCompletionTokens;
        bodies(
            Api::Chat,
            model,
            w,
            &RequestOptions::default(),
            field,
            max_tokens,
        )
    }

    #[test]
    fn sweeps_of_one_workload_share_one_copy_while_any_holds_it() {
        let w = workload("a long document");
        let first = get("shared-model-1", &w, 64);
        let second = get("shared-model-1", &w, 64);
        assert!(Arc::ptr_eq(&first, &second), "one copy for both sweeps");
        assert!(
            !Arc::ptr_eq(&first, &get("shared-model-1", &w, 1)),
            "another limit"
        );
        assert!(
            !Arc::ptr_eq(&first, &get("shared-model-2", &w, 64)),
            "another model"
        );
        let other = workload("a long document");
        assert!(
            !Arc::ptr_eq(&first, &get("shared-model-1", &other, 64)),
            "another workload"
        );
        // Gone with the last sweep that held it: the next one builds anew.
        let weak = Arc::downgrade(&first);
        drop((first, second));
        assert_eq!(weak.strong_count(), 0);
        let again = get("shared-model-1", &w, 64);
        assert_eq!(again.len(), 1);
    }

    #[test]
    fn entries_go_with_their_bodies() {
        let w = workload("x");
        drop(get("shared-model-3", &w, 64));
        let _held = get("shared-model-4", &w, 64);
        assert!(!lock().iter().any(|e| e.model == "shared-model-3"));
        assert!(lock().iter().any(|e| e.model == "shared-model-4"));
    }
}
