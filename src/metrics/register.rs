//! Families made and registered with the daemon's registry in one step.

use prometheus::{IntCounterVec, Opts, Registry};

use crate::metrics::names::Spec;

/// A counter vec of `spec`, registered with `registry`.
pub(super) fn counter(
    registry: &Registry,
    spec: &Spec,
) -> Result<IntCounterVec, prometheus::Error> {
    let c = IntCounterVec::new(Opts::new(spec.name, spec.help), spec.labels)?;
    registry.register(Box::new(c.clone()))?;
    Ok(c)
}
