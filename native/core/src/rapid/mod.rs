//! RapidCDC (Ni and Jiang, SoCC'19): chunking that exploits duplicate locality.
//!
//! After a chunk whose fingerprint is in the [`HintTable`], the next chunk is likely a duplicate
//! of the chunk that followed it before; its size (and last byte) are hints. RapidCDC jumps to
//! `start + size` and verifies the candidate with one of the paper's criteria ([`Criterion`]):
//!
//! * `ff` — accept without a test;
//! * `ff+mt` — accept when the candidate's last byte equals the hint's marker;
//! * `ff+rwt` — accept when the candidate end satisfies the boundary condition: the window
//!   hash there matches (strict class while the size is below AVG, loose from AVG on, as the
//!   profile's rule says), or the candidate ends the input, or the size is MAX and the
//!   candidate's last byte equals the hint's marker. A cut at MAX has no window to test (the
//!   rule cut there because no window matched); accepting every MAX-sized hint measured most of
//!   ff+rwt's dedup loss on real data (TypeScript releases, rabin:4k:8k:12k, where about a third
//!   of the chunks are cut at MAX: 0.69% loss, 0.06% with the marker); hints without a marker
//!   (from a recipe) are accepted at MAX as before;
//! * `ff+rwt+fpt` — the window test, then the candidate chunk's fingerprint must already be in
//!   the table *as a regular chunk* (below).
//!
//! Hints are tried in list order (most recently hit first). When every hint misses, chunking
//! falls back to the regular rule from the last boundary with the SS-CDC [`Engine`]
//! ([`Engine::resume`]): stage 1 on all the engine's threads and SIMD lanes, over blocks that
//! start at [`default_first_block`] positions and double while the region stays novel, so long novel regions
//! are chunked in parallel while a short miss costs little. After each block, if the last
//! chunk's fingerprint has hints, hint mode resumes from its end.
//!
//! The table learns as the paper's section 3.3 says: after every chunk, its size and last byte
//! enter (or move to) the front of the previous chunk's list; a hit moves the hint to the
//! front; lists keep `list_len` hints (default 2). One table serves every file of a run (hint
//! source 1); it can also be filled from a base file's [`Recipe`] (source 2) and from a
//! persisted hint cache (source 3, [`HintTable::read_cache`]).
//!
//! # Why FF+RWT+FPT gives exactly the regular boundaries
//!
//! The rule: a chunk starting at `s` ends at the first `e` with `e - s >= MIN` whose window hash
//! matches (class by `e - s`), else at `s + MAX`, else at the end of input `n`. Because
//! `MIN >= W`, the window of every position `s + j` with `j >= MIN` lies inside `[s, s + j)`:
//! whether a position qualifies depends only on the chunk's own bytes and `j`.
//!
//! Call a chunk *regular* when it was produced by the rule from its own start. Then no offset
//! `j` in `[MIN, L)` of its bytes qualifies (else the rule would have cut there), and
//! `L <= MAX`. This is a property of the bytes alone, so it holds for every chunk with the same
//! fingerprint (up to a hash collision).
//!
//! Suppose `s` is a regular-CDC boundary of the current input (true at 0). A hint of size `L` is
//! accepted only if (a) `e = s + L` passes the window test — it matches with the class of `L`,
//! or `L == MAX`, or `e == n` — and (b) the fingerprint of `[s, e)` is in the table flagged
//! regular. By (b) no position in `[s + MIN, e)` qualifies; by (a) `e` itself ends a chunk under
//! the rule. So `e` is exactly the next regular boundary, and by induction every boundary is.
//! The window test is needed (not just the fingerprint): a regular chunk that ended a file (cut
//! at the end of input) can reappear in the middle of another input, where its end need not
//! qualify. On a miss, the fallback runs the rule itself from `s`.
//!
//! So what the paper requires — "RapidCDC does not add any fingerprints obtained in its fast
//! forwarding mode to the system's fingerprint pool" — becomes a per-fingerprint flag: every
//! fingerprint enters the table (so that FF/MT/RWT runs keep their hints), but only chunks cut
//! by the rule (fallback blocks, or hints verified by FF+RWT+FPT, which are regular by the
//! argument above) are flagged regular, and only flagged ones pass the fingerprint test. A table
//! filled by an FF run, a hint cache or a recipe with `h` entries therefore cannot break the
//! guarantee. The flag is only meaningful for one profile: tables, caches and recipes are
//! tagged with the profile's canonical string and never cross profiles.
//!
//! # Statistics
//!
//! [`RapidStats`]: rolling-hash positions scanned by stage 1 versus skipped, window tests and
//! their bytes, fingerprints computed for failed FPT tests, hits and misses per list position,
//! fallbacks.

//!
//! # Files
//!
//! This file holds the session ([`Rapid`]); `options.rs` the criterion and options,
//! `stats.rs` the counters, `source.rs` the input sources, `chunker.rs` the iterator over one
//! input (hint mode and the fallback), `tape.rs` fingerprint timing and the benchmarks' tape,
//! `table.rs` the hint table and `recipe.rs` recipes.

mod chunker;
mod options;
pub mod recipe;
mod source;
mod stats;
pub mod table;
mod tape;

pub use chunker::{Found, RapidChunk, RapidChunker};
pub use options::{default_first_block, Criterion, RapidOptions, MIN_FIRST_BLOCK};
pub use recipe::{Recipe, RecipeEntry};
pub use source::{FeedSource, ReadSource, SliceSource, Source};
pub use stats::{DedupCounter, RapidStats};
pub use table::{Hint, HintTable};
pub use tape::FingerprintTape;
use tape::FingerprintTime;

use crate::engine::Engine;
use crate::error::Error;
use crate::fingerprint::HashAlg;
use std::io::Read;
use std::time::Duration;

/// A RapidCDC session: an engine (profile, backend, threads, fingerprint), a hint table that
/// persists across the files chunked with it, a criterion, and statistics.
pub struct Rapid<'e> {
    engine: &'e Engine,
    table: HintTable,
    opts: RapidOptions,
    stats: RapidStats,
    fp_time: FingerprintTime,
    tape: Option<Box<FingerprintTape>>,
}

impl<'e> Rapid<'e> {
    /// The table must be for the engine's profile and fingerprint algorithm.
    pub fn new(engine: &'e Engine, table: HintTable, opts: RapidOptions) -> Result<Rapid<'e>, Error> {
        if engine.hash_alg() == HashAlg::None {
            return Err(Error::config(
                "RapidCDC needs chunk fingerprints: use blake3 or sha256, not 'none'",
            ));
        }
        if table.profile() != engine.profile() {
            return Err(Error::config(format!(
                "the hint table is for profile {}, the engine uses {}",
                table.profile(),
                engine.profile()
            )));
        }
        if table.hash_alg() != engine.hash_alg() {
            return Err(Error::config(format!(
                "the hint table holds {} fingerprints, the engine computes {}",
                table.hash_alg().name(),
                engine.hash_alg().name()
            )));
        }
        let n = table.list_len();
        Ok(Rapid {
            engine,
            table,
            opts,
            stats: RapidStats {
                hits: vec![0; n],
                misses: vec![0; n],
                ..RapidStats::default()
            },
            fp_time: FingerprintTime::default(),
            tape: None,
        })
    }

    /// A session with a fresh table with lists of `list_len` hints.
    pub fn with_new_table(engine: &'e Engine, list_len: usize, opts: RapidOptions) -> Result<Rapid<'e>, Error> {
        let t = HintTable::new(engine.profile(), engine.hash_alg(), list_len)?;
        Rapid::new(engine, t, opts)
    }

    pub fn engine(&self) -> &'e Engine {
        self.engine
    }
    pub fn options(&self) -> &RapidOptions {
        &self.opts
    }
    pub fn table(&self) -> &HintTable {
        &self.table
    }
    pub fn table_mut(&mut self) -> &mut HintTable {
        &mut self.table
    }
    pub fn into_table(self) -> HintTable {
        self.table
    }
    pub fn stats(&self) -> &RapidStats {
        &self.stats
    }
    /// Time spent computing the fingerprints of the chunks produced (not those of failed FPT
    /// tests, which are part of chunking), since the last [`Rapid::reset_stats`]. Chunking time is
    /// the rest. Zero on platforms without a clock.
    ///
    /// Fallback blocks' fingerprints (computed as a batch per block) are timed exactly; those
    /// of hinted chunks are estimated: one in 64 fingerprints computed on the hint path is
    /// timed, and the hinted chunks' bytes are counted at the time per byte of those (reading
    /// the clock around every hinted chunk cost as much as the rest of its bookkeeping: a clock
    /// read took about 0.1 µs on the VM measured). The estimate is a ratio estimate over an even
    /// sample of the chunk sizes, so it is close for runs of a few thousand hinted chunks and
    /// more; the first hint-path fingerprint is always timed. Nothing is timed while a
    /// [`FingerprintTape`] is set (it stands in for the fingerprinting).
    pub fn fingerprint_time(&self) -> Duration {
        self.fp_time.total()
    }

    /// Benchmarks only: records fingerprints to, or replays them from, a tape (see
    /// [`FingerprintTape`]); `None` computes them (the default).
    #[doc(hidden)]
    pub fn set_fingerprint_tape(&mut self, tape: Option<FingerprintTape>) {
        self.tape = tape.map(Box::new);
    }
    #[doc(hidden)]
    pub fn take_fingerprint_tape(&mut self) -> Option<FingerprintTape> {
        self.tape.take().map(|t| *t)
    }

    pub fn reset_stats(&mut self) {
        self.fp_time = FingerprintTime::default();
        let n = self.table.list_len();
        self.stats = RapidStats {
            hits: vec![0; n],
            misses: vec![0; n],
            ..RapidStats::default()
        };
    }

    /// Chunks of `data` (one file; hints learned from it stay in the table).
    pub fn chunks<'a>(&'a mut self, data: &'a [u8]) -> RapidChunker<'a, 'e, SliceSource<'a>> {
        RapidChunker::new(self, SliceSource { data })
    }

    /// Chunks of a reader with bounded memory: the bytes of one fallback block (at most the
    /// engine's block size) and one MAX-sized chunk are buffered, never the whole input.
    pub fn stream<R: Read>(&mut self, reader: R) -> RapidChunker<'_, 'e, ReadSource<R>> {
        RapidChunker::new(
            self,
            ReadSource {
                reader,
                buf: Vec::new(),
                base: 0,
                filled: 0,
                eof: false,
            },
        )
    }

    /// Chunks of an input pushed in pieces ([`FeedSource::push`] through
    /// [`RapidChunker::source_mut`], then [`FeedSource::end`]), for callers that cannot block in
    /// a `Read` (WebAssembly driven by JavaScript). The caller calls `next()` only while
    /// [`RapidChunker::ready`] says so; then the chunks equal those of [`Rapid::chunks`] over
    /// the whole input, since every decision sees the bytes it would see in a slice.
    pub fn feed(&mut self) -> RapidChunker<'_, 'e, FeedSource> {
        RapidChunker::new(self, FeedSource::default())
    }

    /// All chunks of `data`.
    pub fn chunk_all(&mut self, data: &[u8]) -> Result<Vec<RapidChunk>, Error> {
        self.chunks(data).collect()
    }

    /// Chunk end offsets of `data`.
    pub fn cuts(&mut self, data: &[u8]) -> Result<Vec<usize>, Error> {
        self.chunks(data)
            .map(|c| c.map(|c| c.offset as usize + c.length))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::chunker::digest;
    use super::*;
    use crate::fingerprint::Digest;
    use crate::datagen::{self, ModKind, VersionSpec};
    use crate::Options;

    fn files() -> Vec<Vec<u8>> {
        let spec = VersionSpec {
            base_size: 1 << 20,
            versions: 4,
            mods: 40,
            mod_size: 100,
            region_percent: 100.0,
            kind: ModKind::InsertDelete,
            seed: 7,
        };
        datagen::versions_in_memory(&spec).unwrap()
    }

    /// One thread, BLAKE3, rabin:1k:4k:12k.
    fn engine() -> Engine {
        let o = Options {
            threads: 1,
            hash: HashAlg::Blake3,
            ..Options::default()
        };
        Engine::new("rabin:1k:4k:12k".parse().unwrap(), o).unwrap()
    }

    /// Hint lists remember which entry followed (to skip a lookup); with a bounded table
    /// evicting all the time, entry indices are reused: the exact criterion must stay exact and
    /// the others must produce what they produce with the same table managed by lookups alone
    /// (the debug assertion in `HintTable::predicted` checks every prediction against a lookup).
    #[test]
    fn bounded_table_with_evictions() {
        let e = engine();
        let files = files();
        for max in [0, 40, 300] {
            for c in Criterion::ALL {
                let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(c)).unwrap();
                r.table_mut().set_max_entries(max);
                let mut hinted = 0;
                for f in &files {
                    let chunks = r.chunk_all(f).unwrap();
                    let mut at = 0;
                    for ch in &chunks {
                        assert_eq!(ch.offset as usize, at);
                        assert_eq!(ch.hash, digest(&e, &f[at..at + ch.length]));
                        at += ch.length;
                    }
                    assert_eq!(at, f.len());
                    if c == Criterion::FfRwtFpt {
                        let ends: Vec<usize> = chunks.iter().map(|c| c.offset as usize + c.length).collect();
                        assert_eq!(ends, e.cuts(f), "max {max}");
                    }
                    hinted += chunks.iter().filter(|c| matches!(c.found, Found::Hint(_))).count();
                }
                assert!(max > 0 && max < 100 || hinted > 100, "{max} {c:?}: {hinted} hinted");
                if max > 0 {
                    assert!(r.table().len() <= max);
                }
            }
        }
    }

    /// A replayed tape gives the recording run's chunks without diverging, for every criterion
    /// (FPT's failed tests are recomputed); replayed over inputs of other chunk sizes it
    /// notices.
    #[test]
    fn fingerprint_tape_replays_and_detects_divergence() {
        let e = engine();
        let files = files();
        let run = |tape: Option<FingerprintTape>, files: &[Vec<u8>], c: Criterion| {
            let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(c)).unwrap();
            r.set_fingerprint_tape(tape);
            let chunks: Vec<Vec<RapidChunk>> = files.iter().map(|f| r.chunk_all(f).unwrap()).collect();
            (chunks, r.take_fingerprint_tape(), r.stats().fpt_wasted)
        };
        for c in Criterion::ALL {
            let (want, tape, wasted) = run(Some(FingerprintTape::recorder()), &files, c);
            let tape = tape.unwrap();
            let produced: usize = want.iter().map(|f| f.len()).sum();
            assert_eq!(tape.len() as u64, produced as u64 + wasted, "{c:?}");
            let (got, replayed, _) = run(Some(tape.replay()), &files, c);
            assert!(!replayed.unwrap().diverged(), "{c:?}");
            // The last bytes too: a replay takes them from the tape.
            let key = |v: &Vec<Vec<RapidChunk>>| -> Vec<(u64, usize, Digest, u8)> {
                v.iter().flatten().map(|c| (c.offset, c.length, c.hash, c.last)).collect()
            };
            assert_eq!(key(&got), key(&want), "{c:?}");
            // Other inputs: the replay notices.
            let mut other = files.clone();
            other[1].insert(1000, 7);
            let (_, replayed, _) = run(Some(tape.replay()), &other, c);
            assert!(replayed.unwrap().diverged(), "{c:?}");
        }
    }
}
