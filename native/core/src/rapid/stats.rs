//! What a RapidCDC run counts ([`RapidStats`]) and dedup accounting in input order
//! ([`DedupCounter`]).

use super::table;
use crate::fingerprint::Digest;

/// Counters of a RapidCDC run (summed over files until [`Rapid::reset_stats`](super::Rapid::reset_stats)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RapidStats {
    /// Input bytes.
    pub bytes: u64,
    pub chunks: u64,
    /// Chunks whose end came from a hint.
    pub hinted_chunks: u64,
    /// Positions whose rolling hash stage 1 computed (fallback blocks).
    pub scanned_positions: u64,
    /// Window tests (FF+RWT, FF+RWT+FPT) and the bytes they hashed (W each).
    pub window_tests: u64,
    pub window_bytes: u64,
    /// Fingerprints computed for FPT tests that then failed, and their bytes.
    pub fpt_wasted: u64,
    pub fpt_wasted_bytes: u64,
    /// Hits and misses by list position.
    pub hits: Vec<u64>,
    pub misses: Vec<u64>,
    /// Times every hint of a list missed and chunking fell back to the rule.
    pub fallbacks: u64,
    /// Fallback blocks scanned.
    pub blocks: u64,
}

impl RapidStats {
    /// Positions never rolled over: bytes minus positions scanned.
    pub fn skipped_positions(&self) -> u64 {
        self.bytes.saturating_sub(self.scanned_positions)
    }
    /// Hits at list position `k` over the hints tried at that position.
    pub fn hit_ratio(&self, k: usize) -> Option<f64> {
        let h = *self.hits.get(k)?;
        let m = *self.misses.get(k)?;
        (h + m > 0).then(|| h as f64 / (h + m) as f64)
    }
    /// Adds another run's counters.
    pub fn add(&mut self, o: &RapidStats) {
        self.bytes += o.bytes;
        self.chunks += o.chunks;
        self.hinted_chunks += o.hinted_chunks;
        self.scanned_positions += o.scanned_positions;
        self.window_tests += o.window_tests;
        self.window_bytes += o.window_bytes;
        self.fpt_wasted += o.fpt_wasted;
        self.fpt_wasted_bytes += o.fpt_wasted_bytes;
        self.fallbacks += o.fallbacks;
        self.blocks += o.blocks;
        for (v, ov) in [(&mut self.hits, &o.hits), (&mut self.misses, &o.misses)] {
            if v.len() < ov.len() {
                v.resize(ov.len(), 0);
            }
            for (a, b) in v.iter_mut().zip(ov) {
                *a += b;
            }
        }
    }
}

/// Dedup accounting in input order: a chunk is unique the first time its fingerprint is seen.
#[derive(Default)]
pub struct DedupCounter {
    pub(super) seen: table::DigestSet,
    pub bytes: u64,
    pub unique_bytes: u64,
    pub chunks: u64,
    pub unique_chunks: u64,
}

impl DedupCounter {
    pub fn new() -> DedupCounter {
        DedupCounter::default()
    }
    /// Counts a chunk; returns whether it is new.
    pub fn add(&mut self, fp: &Digest, len: usize) -> bool {
        self.bytes += len as u64;
        self.chunks += 1;
        let new = self.seen.insert(table::Key(*fp));
        if new {
            self.unique_bytes += len as u64;
            self.unique_chunks += 1;
        }
        new
    }
    /// Bytes over unique bytes (1.0 for no input).
    pub fn ratio(&self) -> f64 {
        if self.unique_bytes == 0 {
            1.0
        } else {
            self.bytes as f64 / self.unique_bytes as f64
        }
    }
}
