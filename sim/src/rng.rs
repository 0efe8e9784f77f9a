//! A tiny deterministic PRNG (SplitMix64): the simulator's only source of
//! randomness, seeded per run, so a seed gives byte-identical output.

/// SplitMix64 (Steele, Lea and Flood, "Fast splittable pseudorandom number
/// generators", OOPSLA 2014): one 64-bit state word, good enough for
/// workload jitter and random steal starts.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator for `seed`.
    pub fn new(seed: u64) -> Self {
        Rng(seed ^ 0x6A09_E667_F3BC_C909)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            0
        } else {
            self.next_u64() % n
        }
    }

    /// `base` with a uniform jitter of +-`pct` percent.
    pub fn jitter(&mut self, base: u64, pct: u64) -> u64 {
        if pct == 0 || base == 0 {
            return base;
        }
        let span = base * pct / 100;
        base - span + self.below(2 * span + 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_stream_and_jitter_stays_in_range() {
        let (mut a, mut b) = (Rng::new(7), Rng::new(7));
        for _ in 0..100 {
            assert_eq!(a.next_u64(), b.next_u64());
        }
        assert_ne!(Rng::new(7).next_u64(), Rng::new(8).next_u64());
        for _ in 0..1000 {
            let j = a.jitter(1000, 10);
            assert!((900..=1100).contains(&j), "{j}");
        }
    }
}
