//! Sharding a fleet of targets over several llmprobe instances.
//!
//! Every instance reads the same configuration and discovery files, and keeps
//! only the targets it owns. Ownership is decided by rendezvous (highest
//! random weight) hashing: each (target, shard) pair gets a pseudo-random
//! weight, and the shard with the highest weight owns the target. No
//! coordination is needed, every target has exactly one owner whatever the
//! instances see of each other, and going from N to N+1 shards moves only the
//! targets that the new shard wins, about 1/(N+1) of them.
//!
//! The weights must be the same on every instance, every platform and every
//! release: a different hash would move targets between instances, or give
//! two instances of different versions overlapping shares. So the hash is
//! written out here (FNV-1a, then the MurmurHash3 finaliser) and pinned by a
//! test, never `std`'s `DefaultHasher`, whose keys are random per process.

use std::collections::BTreeMap;

pub use crate::config::ShardFile;
use crate::config::{defaults, Env};

/// Most shards accepted; beyond it a value is surely a typo.
pub const MAX_COUNT: u32 = 10_000;

/// Which share of the targets this instance measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shard {
    /// This instance's shard.
    pub index: u32,
    /// Number of shards.
    pub count: u32,
}

impl Default for Shard {
    fn default() -> Self {
        Shard { index: 0, count: 1 }
    }
}

impl Shard {
    /// Whether this shard owns the target placed under `key`.
    pub fn owns(&self, key: &str) -> bool {
        owner(key, self.count) == self.index
    }
}

/// FNV-1a, 64 bits: a fixed, documented hash of the name.
fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

/// MurmurHash3's 64-bit finaliser: spreads every input bit over the output,
/// which FNV alone does poorly for names differing in their last characters.
fn fmix64(mut k: u64) -> u64 {
    k ^= k >> 33;
    k = k.wrapping_mul(0xff51_afd7_ed55_8ccd);
    k ^= k >> 33;
    k = k.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
    k ^= k >> 33;
    k
}

/// Rendezvous weight of `key` on `shard`. Part of the sharding contract:
/// changing it moves targets between instances.
pub fn weight(key: &str, shard: u32) -> u64 {
    // Both the name's hash and the shard number go through the finaliser
    // before they are combined, so that similar names and consecutive shards
    // give unrelated weights.
    fmix64(fmix64(fnv1a64(key.as_bytes())) ^ fmix64(u64::from(shard) ^ 0x9e37_79b9_7f4a_7c15))
}

/// The shard, out of `count`, that owns `key` (0 when `count` is 0 or 1).
pub fn owner(key: &str, count: u32) -> u32 {
    let mut best = (0u64, 0u32);
    for shard in 0..count.max(1) {
        let w = weight(key, shard);
        // Ties (practically impossible) go to the lower shard on every instance.
        if shard == 0 || w > best.0 {
            best = (w, shard);
        }
    }
    best.1
}

/// The key each target is placed by: its own name, except that targets linked
/// (by a gateway pair, which compares two of them) share the smallest name of
/// their group, so that a pair and both its targets land on one instance.
pub fn placement_keys<'a>(
    names: impl IntoIterator<Item = &'a str>,
    links: &[(&'a str, &'a str)],
) -> BTreeMap<&'a str, &'a str> {
    // Union-find over the names; the root of a group is its smallest name.
    let mut parent: BTreeMap<&str, &str> = names.into_iter().map(|n| (n, n)).collect();
    fn root<'a>(parent: &BTreeMap<&'a str, &'a str>, mut n: &'a str) -> &'a str {
        while let Some(&p) = parent.get(n) {
            if p == n {
                break;
            }
            n = p;
        }
        n
    }
    for &(a, b) in links {
        if !parent.contains_key(a) || !parent.contains_key(b) {
            continue;
        }
        let (ra, rb) = (root(&parent, a), root(&parent, b));
        let (small, large) = if ra <= rb { (ra, rb) } else { (rb, ra) };
        parent.insert(large, small);
    }
    let names: Vec<&str> = parent.keys().copied().collect();
    names.into_iter().map(|n| (n, root(&parent, n))).collect()
}

/// The trailing `-N` of a host name (`llmprobe-2`, `llmprobe-2.llmprobe.ns`).
pub fn index_from_hostname(hostname: &str) -> Option<u32> {
    let short = hostname.trim().split('.').next()?;
    let (_, n) = short.rsplit_once('-')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    n.parse().ok()
}

/// This machine's host name: `HOSTNAME` (set in every Kubernetes container),
/// else the kernel's.
fn hostname(env: &dyn Env) -> Option<String> {
    env.var("HOSTNAME")
        .filter(|h| !h.trim().is_empty())
        .or_else(|| {
            std::fs::read_to_string("/proc/sys/kernel/hostname")
                .ok()
                .map(|h| h.trim().to_string())
        })
}

/// Validates `shard:`, reporting problems through `bad(key, message)`.
pub fn resolve(
    file: Option<&ShardFile>,
    env: &dyn Env,
    bad: &mut dyn FnMut(&str, String),
) -> Shard {
    let Some(f) = file else {
        return Shard::default();
    };
    let count = f.count.unwrap_or(defaults::SHARD_COUNT);
    if count == 0 || count > MAX_COUNT {
        bad("shard.count", format!("must be between 1 and {MAX_COUNT}"));
        return Shard::default();
    }
    let index = match (f.index, f.index_from_hostname) {
        (Some(_), true) => {
            bad(
                "shard",
                "set either `index` or `index_from_hostname`, not both".into(),
            );
            return Shard::default();
        }
        (Some(i), false) => i,
        (None, false) if count == 1 => 0,
        (None, false) => {
            bad(
                "shard.index",
                format!(
                    "missing: with `count: {count}`, set `index` or `index_from_hostname: true`"
                ),
            );
            return Shard::default();
        }
        (None, true) => {
            let host = hostname(env).unwrap_or_default();
            match index_from_hostname(&host) {
                Some(i) => i,
                None => {
                    bad(
                        "shard.index_from_hostname",
                        format!(
                            "host name `{host}` does not end in `-N` (a StatefulSet pod ordinal)"
                        ),
                    );
                    return Shard::default();
                }
            }
        }
    };
    if index >= count {
        bad(
            if f.index_from_hostname {
                "shard.index_from_hostname"
            } else {
                "shard.index"
            },
            format!(
                "shard {index} does not exist with `count: {count}` (shards are 0 to {})",
                count - 1
            ),
        );
        return Shard::default();
    }
    Shard { index, count }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1,000 names in each of the shapes targets are usually named.
    fn name_sets() -> Vec<Vec<String>> {
        vec![
            (0..1000)
                .map(|i| format!("10.{}.{}.{}:8000", i / 65536, (i / 256) % 256, i % 256))
                .collect(),
            (0..1000).map(|i| format!("worker-{i}")).collect(),
            (0..1000)
                .map(|i| format!("gpu-node-{i:04}.dc1.example.com:8000"))
                .collect(),
            (0..1000)
                .map(|i| format!("127.0.0.1:{}", 40000 + i))
                .collect(),
        ]
    }

    #[test]
    fn weights_are_pinned() {
        // These values are the sharding contract: if this test fails, targets
        // would move between instances of different versions.
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(owner("worker-1", 1), 0);
        let pinned: Vec<u32> = ["worker-1", "worker-2", "worker-3", "10.0.0.5:8000"]
            .iter()
            .map(|n| owner(n, 5))
            .collect();
        assert_eq!(pinned, [4, 3, 4, 0]);
        assert_eq!(weight("worker-1", 0), PINNED_WEIGHT);
    }

    const PINNED_WEIGHT: u64 = 6_217_929_115_209_061_464;

    #[test]
    fn each_name_has_exactly_one_owner_and_shares_are_balanced() {
        for names in name_sets() {
            for count in 1..=8u32 {
                let mut per_shard = vec![0usize; count as usize];
                for n in &names {
                    let owners: Vec<u32> = (0..count)
                        .filter(|&i| Shard { index: i, count }.owns(n))
                        .collect();
                    assert_eq!(owners.len(), 1, "{n} with {count} shards: {owners:?}");
                    per_shard[owners[0] as usize] += 1;
                }
                let mean = names.len() as f64 / count as f64;
                for (i, &k) in per_shard.iter().enumerate() {
                    assert!(
                        (k as f64 - mean).abs() <= 0.2 * mean,
                        "{count} shards: shard {i} owns {k}, mean {mean:.1}: {per_shard:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn adding_a_shard_moves_about_one_over_n_plus_one() {
        for names in name_sets() {
            for count in 1..=7u32 {
                let moved = names
                    .iter()
                    .filter(|n| owner(n, count) != owner(n, count + 1))
                    .count();
                // Only the new shard takes targets; none move between old ones.
                for n in &names {
                    let (before, after) = (owner(n, count), owner(n, count + 1));
                    assert!(
                        after == before || after == count,
                        "{n}: {before} -> {after}"
                    );
                }
                let share = moved as f64 / names.len() as f64;
                let expected = 1.0 / (count as f64 + 1.0);
                assert!(
                    (share - expected).abs() <= 0.03,
                    "{count} -> {}: moved {share:.3}, expected {expected:.3}",
                    count + 1
                );
            }
        }
    }

    #[test]
    fn linked_targets_share_a_placement_key() {
        let keys = placement_keys(
            ["gw-b", "direct", "gw-a", "alone", "other"],
            &[("direct", "gw-b"), ("direct", "gw-a"), ("x", "alone")],
        );
        assert_eq!(keys["direct"], "direct");
        assert_eq!(keys["gw-a"], "direct");
        assert_eq!(keys["gw-b"], "direct");
        assert_eq!(
            keys["alone"], "alone",
            "a link to an unknown name is ignored"
        );
        assert_eq!(keys["other"], "other");
    }

    #[test]
    fn hostname_ordinals() {
        assert_eq!(index_from_hostname("llmprobe-2"), Some(2));
        assert_eq!(
            index_from_hostname("llmprobe-12.llmprobe.monitoring.svc"),
            Some(12)
        );
        assert_eq!(index_from_hostname("my-llm-probe-0"), Some(0));
        assert_eq!(index_from_hostname("llmprobe"), None);
        assert_eq!(index_from_hostname("llmprobe-"), None);
        assert_eq!(index_from_hostname("llmprobe-x1"), None);
        assert_eq!(index_from_hostname("llmprobe-+1"), None);
    }

    struct FakeEnv(Option<&'static str>);
    impl Env for FakeEnv {
        fn var(&self, name: &str) -> Option<String> {
            (name == "HOSTNAME")
                .then_some(self.0)
                .flatten()
                .map(String::from)
        }
    }

    fn resolve_with(f: ShardFile, host: Option<&'static str>) -> Result<Shard, Vec<String>> {
        let mut problems = Vec::new();
        let s = resolve(Some(&f), &FakeEnv(host), &mut |k, m| {
            problems.push(format!("{k}: {m}"))
        });
        if problems.is_empty() {
            Ok(s)
        } else {
            Err(problems)
        }
    }

    #[test]
    fn resolve_checks_every_combination() {
        let f = |index, count, from_host| ShardFile {
            index,
            count,
            index_from_hostname: from_host,
        };
        assert_eq!(
            resolve_with(f(None, None, false), None),
            Ok(Shard::default())
        );
        assert_eq!(
            resolve_with(f(Some(2), Some(3), false), None),
            Ok(Shard { index: 2, count: 3 })
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("llmprobe-1")),
            Ok(Shard { index: 1, count: 3 })
        );
        assert_eq!(
            resolve_with(f(Some(3), Some(3), false), None),
            Err(vec![
                "shard.index: shard 3 does not exist with `count: 3` (shards are 0 to 2)".into()
            ])
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("llmprobe-3")),
            Err(vec![
                "shard.index_from_hostname: shard 3 does not exist with `count: 3` (shards are 0 to 2)"
                    .into()
            ])
        );
        assert_eq!(
            resolve_with(f(None, Some(3), true), Some("probe")),
            Err(vec![
                "shard.index_from_hostname: host name `probe` does not end in `-N` (a StatefulSet pod ordinal)"
                    .into()
            ])
        );
        assert!(resolve_with(f(Some(0), Some(3), true), None).is_err());
        assert!(resolve_with(f(None, Some(3), false), None).is_err());
        assert!(resolve_with(f(Some(0), Some(0), false), None).is_err());
    }
}
