//! The engine's prefix cache, as vLLM's automatic prefix caching, SGLang's
//! radix cache and llama.cpp's slot cache behave: a prompt is cut into blocks
//! of [`BLOCK_BYTES`], each named by a hash of everything up to its end, and
//! the leading blocks of a new prompt that are still cached skip prefill.
//! The least recently used blocks are evicted beyond the capacity.

use std::collections::{BTreeMap, HashMap};

use super::text::fold;

/// Bytes of prompt text per cached block (16 tokens under the 4-characters
/// rule, vLLM's default block size).
pub const BLOCK_BYTES: usize = 64;

/// Tokens per block under the simulator's counting rule.
pub const BLOCK_TOKENS: u64 = (BLOCK_BYTES / 4) as u64;

/// The hash of each full block of `text`, each covering the text before it.
pub(crate) fn block_hashes(text: &[u8]) -> Vec<u64> {
    let mut hash = 0u64;
    text.chunks_exact(BLOCK_BYTES)
        .map(|block| {
            hash = fold(hash, block);
            hash
        })
        .collect()
}

/// Cached blocks, least recently used first out.
pub(crate) struct PrefixCache {
    capacity: usize,
    clock: u64,
    last_use: HashMap<u64, u64>,
    by_age: BTreeMap<u64, u64>,
}

impl PrefixCache {
    /// A cache of about `capacity_tokens` tokens.
    pub(crate) fn new(capacity_tokens: u64) -> Self {
        PrefixCache {
            capacity: usize::try_from(capacity_tokens / BLOCK_TOKENS).unwrap_or(usize::MAX),
            clock: 0,
            last_use: HashMap::new(),
            by_age: BTreeMap::new(),
        }
    }

    /// How many leading blocks of a prompt are cached; then every block of it
    /// is (as after its prefill), the oldest others evicted.
    pub(crate) fn admit(&mut self, blocks: &[u64]) -> usize {
        let hits = blocks
            .iter()
            .take_while(|b| self.last_use.contains_key(b))
            .count();
        for &b in blocks {
            self.clock += 1;
            if let Some(old) = self.last_use.insert(b, self.clock) {
                self.by_age.remove(&old);
            }
            self.by_age.insert(self.clock, b);
        }
        while self.last_use.len() > self.capacity {
            let Some((_, oldest)) = self.by_age.pop_first() else {
                break;
            };
            self.last_use.remove(&oldest);
        }
        hits
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_shared_prefix_hits_up_to_where_prompts_differ() {
        let base = "x".repeat(BLOCK_BYTES * 3);
        let a = block_hashes(format!("{base}{}", "a".repeat(BLOCK_BYTES)).as_bytes());
        let b = block_hashes(format!("{base}{}", "b".repeat(BLOCK_BYTES)).as_bytes());
        assert_eq!(a.len(), 4);
        let mut cache = PrefixCache::new(1000);
        assert_eq!(cache.admit(&a), 0);
        assert_eq!(cache.admit(&a), 4);
        assert_eq!(cache.admit(&b), 3);
        // A different first block: nothing after it can match.
        let c = block_hashes(format!("z{base}").as_bytes());
        assert_eq!(cache.admit(&c), 0);
    }

    #[test]
    fn oldest_blocks_are_evicted() {
        let mut cache = PrefixCache::new(2 * BLOCK_TOKENS);
        let a = block_hashes("a".repeat(BLOCK_BYTES * 2).as_bytes());
        let b = block_hashes("b".repeat(BLOCK_BYTES * 2).as_bytes());
        cache.admit(&a);
        cache.admit(&b);
        assert_eq!(cache.admit(&a), 0, "a was evicted by b");
        assert_eq!(PrefixCache::new(0).admit(&a), 0);
    }
}
