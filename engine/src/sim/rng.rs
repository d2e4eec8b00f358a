//! The simulation's one source of chance: SplitMix64, seeded. Every
//! choice of a seed's run — the plan, each provider's behaviour and
//! timing, where a process dies, what the person does — is drawn from it
//! in one order, so one seed is one run, every time.

pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 {
            return 0;
        }
        self.next() % n
    }

    /// A number in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi.saturating_sub(lo) + 1)
    }

    /// True `percent` times in a hundred.
    pub fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    /// One of `items`, by weight: the index of the one drawn.
    pub fn weighted(&mut self, weights: &[u64]) -> usize {
        let mut left = self.below(weights.iter().sum());
        for (i, &w) in weights.iter().enumerate() {
            if left < w {
                return i;
            }
            left -= w;
        }
        0
    }
}
