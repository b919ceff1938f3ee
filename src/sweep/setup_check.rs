//! The setup check of a workload's first requests: the decision is
//! `stats::setup_error`'s; this says which requests it looks at.

use crate::stats::report::Setup;
use crate::stats::sample::Sample;
use crate::stats::setup_error::{self, Context, SetupError};
use crate::sweep::requests::Requests;

/// Judges `samples` when they are the first the workload sent (`judged`
/// false, and some were sent); Err: the setup mistake every one of them shows.
pub(super) fn first(
    judged: &mut bool,
    requests: &Requests,
    setup: &Setup,
    samples: &[Sample],
) -> Result<(), SetupError> {
    if *judged || samples.is_empty() {
        return Ok(());
    }
    *judged = true;
    let context = Context {
        model: &requests.target.model,
        url: requests.url(),
        served: &setup.models,
        model_listed: setup.model_listed,
    };
    match setup_error::judge(samples, &context) {
        Some(e) => Err(e),
        None => Ok(()),
    }
}
