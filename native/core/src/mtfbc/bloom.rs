//! The FBC filter stage: `v` Bloom filters of equal size, one probe each (a partitioned Bloom
//! filter). A key is present when its bit is set in every filter.
//!
//! The report generates the probes with Murmur3-128 (four 32-bit words, three used, one per
//! filter). Here the key is already a cryptographic digest, so its second 128 bits give the
//! probes directly: filter `i` is probed at `h1 + i * h2` (double hashing), reduced to the
//! filter's size by a multiply-shift.

use super::key::Key;

#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct BloomFilters {
    /// One bit array per filter.
    bits: Vec<Vec<u64>>,
    nbits: u64,
}

impl BloomFilters {
    /// `filters` filters of `bytes` bytes each (callers validate: `filters >= 1`,
    /// `8 <= bytes <= 512 MiB`).
    pub(crate) fn new(filters: usize, bytes: usize) -> BloomFilters {
        let words = bytes.div_ceil(8);
        BloomFilters { bits: vec![vec![0u64; words]; filters], nbits: words as u64 * 64 }
    }

    #[inline(always)]
    fn probe(&self, k: &Key, i: usize) -> (usize, u64) {
        let x = k.h1.wrapping_add((i as u64).wrapping_mul(k.h2 | 1));
        let bit = ((x >> 32) * self.nbits) >> 32;
        ((bit >> 6) as usize, 1u64 << (bit & 63))
    }

    /// Whether `k` is (probably) present: its bit is set in every filter.
    #[inline]
    pub(crate) fn contains(&self, k: &Key) -> bool {
        self.bits.iter().enumerate().all(|(i, f)| {
            let (w, m) = self.probe(k, i);
            f[w] & m != 0
        })
    }

    #[inline]
    pub(crate) fn insert(&mut self, k: &Key) {
        for i in 0..self.bits.len() {
            let (w, m) = self.probe(k, i);
            self.bits[i][w] |= m;
        }
    }

    /// Bits set over all filters (a fill gauge for stats).
    pub(crate) fn ones(&self) -> u64 {
        self.bits.iter().flatten().map(|w| w.count_ones() as u64).sum()
    }

    pub(crate) fn total_bits(&self) -> u64 {
        self.nbits * self.bits.len() as u64
    }
}
