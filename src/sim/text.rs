//! Token counting and the deterministic generated text.

/// Token counting rule used everywhere in the simulator: one token per 4
/// characters (Unicode scalar values), rounded up, so any non-empty text is at
/// least 1 token.
pub fn count_tokens(text: &str) -> u64 {
    (text.chars().count() as u64).div_ceil(4)
}

/// Output vocabulary: every piece is exactly 4 ASCII characters, so the
/// generated text counts as exactly one token per piece under [`count_tokens`],
/// and none needs JSON escaping (the chunk writer relies on that).
const VOCAB: [&str; 64] = [
    " the", " and", " for", " are", " but", " not", " you", " all", " any", " can", " had", " her",
    " was", " one", " our", " out", " day", " get", " has", " him", " his", " how", " man", " new",
    " now", " old", " see", " two", " way", " who", " boy", " did", " its", " let", " put", " say",
    " she", " too", " use", " GPU", " run", " big", " low", " key", " set", " top", " net", " far",
    " few", " own", " end", " why", " yes", " ask", " add", " fit", " map", " log", " bit", " row",
    " sum", " tag", " job", " API",
];

/// Deterministic stream of output tokens for one request.
pub(crate) struct TextGen {
    rng: fastrand::Rng,
}

impl TextGen {
    /// A generator whose output depends only on `seed`.
    pub(crate) fn new(seed: u64) -> Self {
        TextGen {
            rng: fastrand::Rng::with_seed(seed),
        }
    }

    /// The next token's text.
    pub(crate) fn next_token(&mut self) -> &'static str {
        VOCAB[self.rng.usize(..VOCAB.len())]
    }
}

/// SplitMix64 finaliser: a well-mixed, stable hash of two words (std's hasher
/// is not guaranteed stable across Rust versions, and output must be).
pub(crate) fn mix(a: u64, b: u64) -> u64 {
    let mut z = a ^ b.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// FNV-1a over bytes, folded into a running hash.
pub(crate) fn fold(hash: u64, bytes: &[u8]) -> u64 {
    bytes.iter().fold(hash ^ 0xCBF2_9CE4_8422_2325, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01B3)
    })
}

/// A uniform number in [0, 1) from a hash.
pub(crate) fn unit(hash: u64) -> f64 {
    (hash >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn four_characters_per_token_rounded_up() {
        assert_eq!(count_tokens(""), 0);
        assert_eq!(count_tokens("a"), 1);
        assert_eq!(count_tokens("abcd"), 1);
        assert_eq!(count_tokens("abcde"), 2);
        assert_eq!(count_tokens("éééé"), 1);
    }

    #[test]
    fn vocabulary_is_one_token_per_piece_and_json_safe() {
        for piece in VOCAB {
            assert_eq!(count_tokens(piece), 1);
            assert_eq!(piece.len(), 4);
            assert!(piece.chars().all(|c| c.is_ascii_alphanumeric() || c == ' '));
        }
    }

    #[test]
    fn same_seed_same_text() {
        let text = |seed| {
            let mut g = TextGen::new(seed);
            (0..20).map(|_| g.next_token()).collect::<String>()
        };
        assert_eq!(text(7), text(7));
        assert_ne!(text(7), text(8));
        assert_eq!(count_tokens(&text(7)), 20);
    }

    #[test]
    fn unit_is_in_range() {
        assert_eq!(unit(0), 0.0);
        assert!(unit(u64::MAX) < 1.0);
    }
}
