//! Timing the fingerprints a run computes, and the benchmarks' fingerprint tape.

use super::chunker::digest_last;
use crate::engine::Engine;
use crate::fingerprint::Digest;
use std::time::Duration;

/// Benchmarks only: the fingerprints one run computed (with each chunk's last byte, which the
/// pass that hashes a chunk reads), in order, replayed by a later run of the
/// same inputs with a fresh table and the same options, so that the later run's CPU time is
/// chunking alone (hint tests, the table, stage 1 and 2 of the fallback blocks): the paper's
/// chunking time, measured directly instead of as a run's time less a separately timed
/// hashing pass. Set with [`Rapid::set_fingerprint_tape`].
///
/// The fingerprints of failed FPT tests are part of chunking, so a replay computes those again
/// (and checks them). A replay trusts the recording otherwise: it checks only each chunk's
/// length; at the first mismatch it stops replaying, computes every fingerprint from then on,
/// and [`FingerprintTape::diverged`] says so. Replay only over the recorded inputs.
#[doc(hidden)]
#[derive(Clone, Debug, Default)]
pub struct FingerprintTape {
    /// Length, fingerprint, last byte, and whether a failed FPT test computed it.
    pub(super) entries: Vec<(usize, Digest, u8, bool)>,
    pub(super) pos: usize,
    pub(super) replaying: bool,
    pub(super) diverged: bool,
}

impl FingerprintTape {
    /// An empty tape that records.
    pub fn recorder() -> FingerprintTape {
        FingerprintTape::default()
    }
    /// The same fingerprints, replayed from the first.
    pub fn replay(&self) -> FingerprintTape {
        FingerprintTape {
            entries: self.entries.clone(),
            pos: 0,
            replaying: true,
            diverged: false,
        }
    }
    pub fn len(&self) -> usize {
        self.entries.len()
    }
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
    /// A replay met a fingerprint other than the recording's next (different inputs, table
    /// or options), or ran past its end, and computed the rest.
    pub fn diverged(&self) -> bool {
        self.diverged
    }

    /// The chunk's fingerprint and last byte: what a pass over its bytes gives.
    pub(super) fn digest(&mut self, engine: &Engine, bytes: &[u8]) -> (Digest, u8) {
        if self.replaying {
            match self.entries.get(self.pos) {
                Some(&(n, d, last, false)) if n == bytes.len() => {
                    self.pos += 1;
                    return (d, last);
                }
                Some(&(n, d, _, true)) if n == bytes.len() => {
                    self.pos += 1;
                    let x = digest_last(engine, bytes);
                    if x.0 == d {
                        return x;
                    }
                }
                _ => {}
            }
            self.replaying = false;
            self.diverged = true;
            return digest_last(engine, bytes);
        }
        let x = digest_last(engine, bytes);
        if !self.diverged {
            self.entries.push((bytes.len(), x.0, x.1, false));
        }
        x
    }

    /// The last fingerprint was a failed FPT test's.
    pub(super) fn mark_wasted(&mut self) {
        if !self.replaying && !self.diverged {
            if let Some(e) = self.entries.last_mut() {
                e.3 = true;
            }
        }
    }
}

/// Time spent fingerprinting produced chunks (see [`Rapid::fingerprint_time`]). A fallback
/// block's chunks are fingerprinted as a batch, timed whole. A hinted chunk is fingerprinted
/// alone, and two clock reads per chunk cost about as much as the rest of its bookkeeping, so
/// one in [`FP_SAMPLE`] of the fingerprints computed on the hint path is timed and the others
/// are counted at the rate (time per byte) of the timed ones.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct FingerprintTime {
    /// Fallback batches, timed whole.
    pub(super) batches: Duration,
    /// Hint-path fingerprints timed, and their bytes (all of them, produced or not: the rate).
    pub(super) sampled: Duration,
    pub(super) sampled_bytes: u64,
    /// Bytes of the hinted chunks produced (their fingerprints count at the sampled rate).
    pub(super) hinted_bytes: u64,
    /// Hint-path fingerprints computed so far (picks the ones timed).
    pub(super) count: u64,
}

/// One in this many hint-path fingerprints is timed (see [`Rapid::fingerprint_time`]).
pub(super) const FP_SAMPLE: u64 = 64;

impl FingerprintTime {
    pub(super) fn total(&self) -> Duration {
        if self.sampled_bytes == 0 {
            return self.batches;
        }
        let rate = self.sampled.as_secs_f64() / self.sampled_bytes as f64;
        self.batches + Duration::from_secs_f64(rate * self.hinted_bytes as f64)
    }
}

/// A clock for the statistics; it reads zero where the platform has none (wasm32 without WASI).
#[derive(Clone, Copy)]
pub(super) struct Stopwatch(#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))] std::time::Instant);

impl Stopwatch {
    pub(super) fn start() -> Stopwatch {
        Stopwatch(
            #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
            std::time::Instant::now(),
        )
    }
    pub(super) fn elapsed(self) -> Duration {
        #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
        return self.0.elapsed();
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        return Duration::ZERO;
    }
}
