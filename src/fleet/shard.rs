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
                    let owners: Vec<u32> = (0..count).filter(|&i| owner(n, count) == i).collect();
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
}
