//! Why a workload stops where it is ([`Stop`]), and the setup check of its
//! first requests: the decision is `stats::setup_error`'s; this says which
//! requests it looks at (the warm-up's, else the first level's).

use crate::stats::report::{FoundIn, Setup};
use crate::stats::sample::Sample;
use crate::stats::setup_error::{self, Context, SetupError};
use crate::sweep::requests::Requests;

/// Why a workload was abandoned where it was.
pub(super) enum Stop {
    /// An answer showed that the field sent does not bound the output (why,
    /// and in which answers).
    Unbounded(String, FoundIn),
    /// Every request of the warm-up (or of the first level) failed with the
    /// same setup mistake: nothing was measured, nothing will be.
    Setup(SetupError),
}

/// The check of a workload's first requests, once.
pub(super) struct First<'a> {
    setup: &'a Setup,
    judged: bool,
}

impl<'a> First<'a> {
    /// Not judged yet; `setup` is what the server told of itself.
    pub(super) fn new(setup: &'a Setup) -> Self {
        First {
            setup,
            judged: false,
        }
    }

    /// Judges `samples` when they are the first the workload sent (and some
    /// were); Err: the setup mistake every one of them shows.
    pub(super) fn judge(&mut self, requests: &Requests, samples: &[Sample]) -> Result<(), Stop> {
        if self.judged || samples.is_empty() {
            return Ok(());
        }
        self.judged = true;
        let context = Context {
            model: &requests.target.model,
            url: requests.url(),
            served: &self.setup.models,
            model_listed: self.setup.model_listed,
        };
        match setup_error::judge(samples, &context) {
            Some(e) => Err(Stop::Setup(e)),
            None => Ok(()),
        }
    }
}
