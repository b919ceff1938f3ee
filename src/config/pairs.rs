//! Validation of `gateway_pairs:` against the targets and workloads
//! already resolved.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::checks::{check_name, shown_name};
use super::defaults;
use super::file::FileConfig;
use super::resolved::{GatewayPair, Target, Workload};

/// Validates `gateway_pairs` against the targets and workloads already
/// resolved (a target whose own problems kept it out is only named once).
pub fn resolve_gateway_pairs(
    file: &FileConfig,
    targets: &[Arc<Target>],
    workloads: &BTreeMap<String, Arc<Workload>>,
    bad: &mut dyn FnMut(&str, String),
) -> Vec<GatewayPair> {
    let mut pairs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (i, p) in file.gateway_pairs.iter().enumerate() {
        let key = if p.name.is_empty() {
            format!("gateway_pairs[{i}]")
        } else {
            format!("gateway_pairs[{i}] ({})", shown_name(&p.name))
        };
        let k = |field: &str| format!("{key}.{field}");
        let mut ok = true;
        if p.name.trim().is_empty() {
            bad(&k("name"), "must not be empty".into());
            ok = false;
        } else if let Err(e) = check_name(&p.name) {
            bad(&k("name"), e);
            ok = false;
        } else if !seen.insert(p.name.clone()) {
            bad(&k("name"), format!("duplicate pair name `{}`", p.name));
            ok = false;
        }
        for (field, name) in [("direct", &p.direct), ("through", &p.through)] {
            if !file.targets.iter().any(|t| &t.name == name) {
                bad(&k(field), format!("target `{name}` is not defined"));
                ok = false;
            }
        }
        if p.direct == p.through {
            bad(
                &k("through"),
                format!(
                    "must differ from `direct` (both are `{}`): the pair compares two paths to the stub engine",
                    p.through
                ),
            );
            ok = false;
        }
        let concurrency = p.concurrency.unwrap_or(defaults::PAIR_CONCURRENCY);
        if concurrency == 0 {
            bad(&k("concurrency"), "must be at least 1".into());
            ok = false;
        }
        let requests = p.requests.unwrap_or(defaults::PAIR_REQUESTS);
        if requests == 0 {
            bad(&k("requests"), "must be at least 1".into());
            ok = false;
        }
        let direct = targets.iter().find(|t| t.name == p.direct);
        let workload = match &p.workload {
            Some(w) => match workloads.get(w) {
                Some(w) => Some(w.clone()),
                None => {
                    bad(
                        &k("workload"),
                        format!("workload `{w}` is not defined under `workloads`"),
                    );
                    None
                }
            },
            // An invalid direct target was reported already; its workloads are unknown.
            None => direct.and_then(|t| t.workloads.first().cloned()),
        };
        if let (true, Some(workload)) = (ok, workload) {
            pairs.push(GatewayPair {
                name: p.name.clone(),
                direct: p.direct.clone(),
                through: p.through.clone(),
                concurrency,
                requests,
                workload,
            });
        }
    }
    pairs
}
