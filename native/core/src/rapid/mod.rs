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

pub mod recipe;
pub mod table;

pub use recipe::{Recipe, RecipeEntry};
pub use table::{Hint, HintTable};
use table::{NextHint, Slot};

use crate::engine::{Chunk, Engine, Resumed};
use crate::error::Error;
use crate::fingerprint::{Digest, HashAlg};
use crate::hash::Tables;
use crate::profile::Profile;
use std::collections::VecDeque;
use std::io::Read;
use std::time::Duration;

/// The boundary acceptance criterion (paper, section 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Criterion {
    /// Fast-forwarding only: accept the hinted boundary.
    Ff,
    /// Marker test: the candidate's last byte equals the hint's marker.
    FfMt,
    /// Rolling-window test at the candidate end.
    FfRwt,
    /// Window test, then the candidate's fingerprint must be a known regular chunk. Boundaries
    /// equal regular CDC's.
    FfRwtFpt,
}

impl Criterion {
    pub const ALL: [Criterion; 4] = [Criterion::Ff, Criterion::FfMt, Criterion::FfRwt, Criterion::FfRwtFpt];

    pub fn name(self) -> &'static str {
        match self {
            Criterion::Ff => "ff",
            Criterion::FfMt => "ff+mt",
            Criterion::FfRwt => "ff+rwt",
            Criterion::FfRwtFpt => "ff+rwt+fpt",
        }
    }

    pub fn parse(s: &str) -> Result<Criterion, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ff" => Ok(Criterion::Ff),
            "ff+mt" | "mt" => Ok(Criterion::FfMt),
            "ff+rwt" | "rwt" => Ok(Criterion::FfRwt),
            "ff+rwt+fpt" | "fpt" => Ok(Criterion::FfRwtFpt),
            other => Err(Error::config(format!(
                "unknown RapidCDC criterion '{other}' (known: ff, ff+mt, ff+rwt, ff+rwt+fpt)"
            ))),
        }
    }
}

/// RapidCDC options.
#[derive(Clone, Debug)]
pub struct RapidOptions {
    pub criterion: Criterion,
    /// The paper's worst-case experiment (Figure 12): every hint is tested under the criterion
    /// and then rejected, so every chunk comes from the fallback.
    pub worst_case: bool,
    /// First fallback block in positions; 0 = [`default_first_block`]. While the region stays
    /// novel the next block is as large once more, then blocks double, up to `max_block`.
    pub first_block: usize,
    /// Largest fallback block in positions; 0 = the engine's block size
    /// ([`Engine::block_size`]). The boundaries of ff, ff+mt and ff+rwt depend on the block
    /// schedule, so runs that must agree (native and wasm) use the same value.
    pub max_block: usize,
}

impl Default for RapidOptions {
    fn default() -> Self {
        RapidOptions {
            criterion: Criterion::FfRwt,
            worst_case: false,
            first_block: 0,
            max_block: 0,
        }
    }
}

impl RapidOptions {
    pub fn new(criterion: Criterion) -> RapidOptions {
        RapidOptions {
            criterion,
            ..RapidOptions::default()
        }
    }
}

/// Default first fallback block, in positions: `MAX - MIN` (a block from `s + MIN` that long
/// always holds the next boundary), at most `2 × (AVG - MIN)` (twice the expected distance to it
/// for profiles whose MAX is far out) and at least [`MIN_FIRST_BLOCK`].
///
/// History, measured with `examples/rapid_bench` (rabin:4k:8k:12k, 10 files of 16 MiB, ff):
/// 64 Ki → 2.51× / 1.27× chunking speedup at 1000 / 5000 modifications, 16 Ki → 3.09× / 1.32×.
/// A fixed 8 Ki was the default for a while and was put back to 16 Ki when the worst case
/// (Figure 12 analog) measured 18–25% slower with it against 2–16%; that measurement
/// subtracted a separately timed hashing pass from a full run, which moves such figures by
/// 10–20 points. With the fingerprint tape (chunking timed alone), see the bench results.
pub fn default_first_block(p: &Profile) -> usize {
    (p.max - p.min).min(2 * (p.avg - p.min)).max(MIN_FIRST_BLOCK)
}

/// Smallest default first fallback block: 4 Ki positions.
pub const MIN_FIRST_BLOCK: usize = 4 << 10;

/// How a chunk's end was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// By the boundary rule (the SS-CDC fallback).
    Rule,
    /// By the hint at this list position.
    Hint(u8),
}

/// A chunk from RapidCDC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RapidChunk {
    pub offset: u64,
    pub length: usize,
    pub hash: Digest,
    /// The chunk's last byte (its marker as a hint).
    pub last: u8,
    /// Cut by the boundary rule: found by the rule, or by a hint verified with FF+RWT+FPT.
    pub regular: bool,
    pub found: Found,
}

impl From<RapidChunk> for Chunk {
    fn from(c: RapidChunk) -> Chunk {
        Chunk {
            offset: c.offset,
            length: c.length,
            hash: Some(c.hash),
        }
    }
}

/// Counters of a RapidCDC run (summed over files until [`Rapid::reset_stats`]).
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
    entries: Vec<(usize, Digest, u8, bool)>,
    pos: usize,
    replaying: bool,
    diverged: bool,
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
    fn digest(&mut self, engine: &Engine, bytes: &[u8]) -> (Digest, u8) {
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
    fn mark_wasted(&mut self) {
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
struct FingerprintTime {
    /// Fallback batches, timed whole.
    batches: Duration,
    /// Hint-path fingerprints timed, and their bytes (all of them, produced or not: the rate).
    sampled: Duration,
    sampled_bytes: u64,
    /// Bytes of the hinted chunks produced (their fingerprints count at the sampled rate).
    hinted_bytes: u64,
    /// Hint-path fingerprints computed so far (picks the ones timed).
    count: u64,
}

/// One in this many hint-path fingerprints is timed (see [`Rapid::fingerprint_time`]).
const FP_SAMPLE: u64 = 64;

impl FingerprintTime {
    fn total(&self) -> Duration {
        if self.sampled_bytes == 0 {
            return self.batches;
        }
        let rate = self.sampled.as_secs_f64() / self.sampled_bytes as f64;
        self.batches + Duration::from_secs_f64(rate * self.hinted_bytes as f64)
    }
}

/// A clock for the statistics; it reads zero where the platform has none (wasm32 without WASI).
#[derive(Clone, Copy)]
struct Stopwatch(#[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))] std::time::Instant);

impl Stopwatch {
    fn start() -> Stopwatch {
        Stopwatch(
            #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
            std::time::Instant::now(),
        )
    }
    fn elapsed(self) -> Duration {
        #[cfg(not(all(target_arch = "wasm32", target_os = "unknown")))]
        return self.0.elapsed();
        #[cfg(all(target_arch = "wasm32", target_os = "unknown"))]
        return Duration::ZERO;
    }
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

/// Where the chunker's bytes come from: a slice, or a reader through a bounded buffer.
pub trait Source {
    /// Makes the input's bytes up to `end` available, if it has them. Returns the end of the
    /// available bytes: `>= end`, or the input's length when it ends before `end`.
    fn ensure(&mut self, end: usize) -> Result<usize, Error>;
    /// The input's length, once its end has been seen.
    fn known_len(&self) -> Option<usize>;
    /// The buffered bytes and the offset of the first.
    fn window(&self) -> (&[u8], usize);
    /// Bytes before `pos` will not be asked for again.
    fn release(&mut self, pos: usize);
}

pub struct SliceSource<'a> {
    data: &'a [u8],
}

impl Source for SliceSource<'_> {
    fn ensure(&mut self, end: usize) -> Result<usize, Error> {
        let _ = end;
        Ok(self.data.len())
    }
    fn known_len(&self) -> Option<usize> {
        Some(self.data.len())
    }
    fn window(&self) -> (&[u8], usize) {
        (self.data, 0)
    }
    fn release(&mut self, _pos: usize) {}
}

pub struct ReadSource<R: Read> {
    reader: R,
    /// Bytes `[base, base + filled)` of the input are in `buf[..filled]`.
    buf: Vec<u8>,
    base: usize,
    filled: usize,
    eof: bool,
}

const READ_AHEAD: usize = 1 << 20;

impl<R: Read> Source for ReadSource<R> {
    fn ensure(&mut self, end: usize) -> Result<usize, Error> {
        while !self.eof && self.base + self.filled < end {
            let target = (end - self.base).max(self.filled + READ_AHEAD);
            if self.buf.len() < target {
                self.buf.resize(target, 0);
            }
            match self.reader.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(self.base + self.filled)
    }
    fn known_len(&self) -> Option<usize> {
        self.eof.then_some(self.base + self.filled)
    }
    fn window(&self) -> (&[u8], usize) {
        (&self.buf[..self.filled], self.base)
    }
    fn release(&mut self, pos: usize) {
        let drop = pos.saturating_sub(self.base).min(self.filled);
        // Move the tail down only when it pays off (a large or a majority prefix is dead).
        if drop > 0 && (drop >= READ_AHEAD || 2 * drop >= self.filled) {
            self.buf.copy_within(drop..self.filled, 0);
            self.filled -= drop;
            self.base += drop;
        }
    }
}

/// A [`Source`] whose bytes are pushed by the caller (see [`Rapid::feed`]). Holds the bytes from
/// the oldest one the chunker may still read (about one fallback block plus MAX behind the
/// newest), never the whole input.
#[derive(Default)]
pub struct FeedSource {
    buf: Vec<u8>,
    /// Input offset of `buf[0]`.
    base: usize,
    eof: bool,
}

impl FeedSource {
    /// Appends the next bytes of the input.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if self.eof {
            return Err(Error::config("bytes pushed after the end of the input"));
        }
        if (self.base + self.buf.len()).checked_add(bytes.len()).is_none() {
            return Err(Error::config("input too large for this platform's offsets"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
    /// No more bytes follow.
    pub fn end(&mut self) {
        self.eof = true;
    }
    /// Offset just past the last byte pushed.
    pub fn pushed(&self) -> usize {
        self.base + self.buf.len()
    }
    pub fn ended(&self) -> bool {
        self.eof
    }
}

impl Source for FeedSource {
    fn ensure(&mut self, _end: usize) -> Result<usize, Error> {
        Ok(self.pushed())
    }
    fn known_len(&self) -> Option<usize> {
        self.eof.then(|| self.pushed())
    }
    fn window(&self) -> (&[u8], usize) {
        (&self.buf, self.base)
    }
    fn release(&mut self, pos: usize) {
        let drop = pos.saturating_sub(self.base).min(self.buf.len());
        if drop > 0 && (drop >= READ_AHEAD || 2 * drop >= self.buf.len()) {
            self.buf.drain(..drop);
            self.base += drop;
        }
    }
}

/// The RapidCDC iterator over one input (see [`Rapid::chunks`] and [`Rapid::stream`]).
pub struct RapidChunker<'r, 'e, S: Source> {
    rapid: &'r mut Rapid<'e>,
    src: S,
    /// End of the last chunk produced: the current boundary.
    s: usize,
    /// Fingerprint of the chunk that ends at `s` (none at the start of the input), and the slot
    /// of its table entry.
    prev: Option<(Digest, Slot)>,
    /// The regular chunking in progress, in fallback mode.
    slow: Option<Resumed>,
    /// The regular chunking set aside when a fallback block ended at a hinted chunk: if that
    /// chunk's hints all miss, chunking goes on from it and scans no position twice.
    spare: Option<Resumed>,
    block: usize,
    /// Fallback blocks since the last miss that ended without a hinted chunk.
    novel_blocks: u32,
    pending: VecDeque<RapidChunk>,
    hints: Vec<NextHint>,
    cuts: Vec<usize>,
    batch: Vec<Chunk>,
    /// Last bytes of the chunks of `batch`.
    lasts: Vec<u8>,
    done: bool,
    failed: bool,
    /// Fallback blocks of at least this many positions get their stage 1 from the caller
    /// (0: never); see [`RapidChunker::set_external_stage1`].
    external_min: usize,
    /// The fallback block whose stage-1 candidates the caller is supplying.
    awaiting: Option<Awaiting>,
    /// Cuts decided by the candidates supplied so far for the awaited block.
    pending_cuts: Vec<usize>,
    /// How far the input has been prefetched along the predicted chunks (see
    /// [`RapidChunker::prefetch_ahead`]): the end of the last one and its entry index.
    ahead: (usize, u32),
}

/// Hinted chunk ends up to this many average chunk sizes past the boundary are prefetched.
const PREFETCH_CHUNKS: usize = 4;

/// A fallback block waiting for stage-1 candidates from the caller.
#[derive(Clone, Copy, Debug)]
struct Awaiting {
    /// The block's positions `[p, q)`; `next`: the first not yet supplied.
    p: usize,
    q: usize,
    next: usize,
    at_end: bool,
}

impl<'r, 'e, S: Source> RapidChunker<'r, 'e, S> {
    fn new(rapid: &'r mut Rapid<'e>, src: S) -> Self {
        RapidChunker {
            rapid,
            src,
            s: 0,
            prev: None,
            slow: None,
            spare: None,
            block: 0,
            novel_blocks: 0,
            pending: VecDeque::new(),
            hints: Vec::new(),
            cuts: Vec::new(),
            batch: Vec::new(),
            lasts: Vec::new(),
            done: false,
            failed: false,
            external_min: 0,
            awaiting: None,
            pending_cuts: Vec::new(),
            ahead: (0, 0),
        }
    }

    /// Lets the caller run stage 1 of large fallback blocks (for instance in other workers,
    /// where the chunker itself has one thread): from now on, when a fallback block of at
    /// least `min_positions` positions is due (0: never, the default), the chunker stops
    /// before scanning it. [`RapidChunker::stage1_needed`] then names its positions `[a, q)`,
    /// whose bytes `[a - W, q)` are held ([`RapidChunker::input`]), and the caller supplies
    /// their candidates with [`RapidChunker::supply_stage1`], in order, in one or more
    /// pieces; after the last, the block's chunks are decided as if the engine had scanned
    /// it. The chunks and statistics are the same as without this, for every criterion. While
    /// candidates are awaited, [`RapidChunker::ready`] is false and `next()` returns `None`
    /// without the input being done: a caller that sets this tells the two apart with
    /// [`RapidChunker::stage1_needed`].
    pub fn set_external_stage1(&mut self, min_positions: usize) {
        self.external_min = min_positions;
    }

    /// The positions `[a, q)` of the fallback block whose stage-1 candidates are awaited
    /// (`a`: the first not yet supplied), if any (see [`RapidChunker::set_external_stage1`]).
    pub fn stage1_needed(&self) -> Option<(usize, usize)> {
        self.awaiting.map(|w| (w.next, w.q))
    }

    /// The input bytes `[a, b)`, if the chunker still holds them (it holds at least
    /// `[a - W, q)` of the block in [`RapidChunker::stage1_needed`]).
    pub fn input(&self, a: usize, b: usize) -> Option<&[u8]> {
        let (buf, base) = self.src.window();
        (a >= base && a <= b && b <= base + buf.len()).then(|| &buf[a - base..b - base])
    }

    /// Stage-1 candidates of the positions `[a, b)` of the awaited block (`a` as
    /// [`RapidChunker::stage1_needed`] says, `b` at most its end): the strict (or only) class
    /// and the loose class, as offsets from `a` — what the core's stage 1 finds over the bytes
    /// `[a - W, b)` (the WebAssembly `Stage1`'s `strictOffsets` / `looseOffsets`). When `b`
    /// ends the block, its chunks are decided (then `next()` returns them).
    pub fn supply_stage1(&mut self, a: usize, b: usize, strict: &[u32], loose: &[u32]) -> Result<(), Error> {
        self.stage1_piece(a, b, Some((strict, loose)))
    }

    /// Stage 1 of the positions `[a, b)` of the awaited block by the chunker's own engine, as if
    /// their candidates were supplied ([`RapidChunker::supply_stage1`]): lets the caller keep a
    /// share of the block while others scan the rest.
    pub fn scan_stage1(&mut self, a: usize, b: usize) -> Result<(), Error> {
        self.stage1_piece(a, b, None)
    }

    fn stage1_piece(&mut self, a: usize, b: usize, cands: Option<(&[u32], &[u32])>) -> Result<(), Error> {
        let Some(mut w) = self.awaiting else {
            return Err(Error::config("no stage-1 candidates are awaited"));
        };
        if a != w.next || b < a || b > w.q {
            return Err(Error::config(format!(
                "stage-1 candidates of positions [{a}, {b}) supplied; positions [{}, {}) are awaited",
                w.next, w.q
            )));
        }
        let slow = self.slow.as_mut().expect("a block is awaited in fallback mode");
        self.cuts.clear();
        let r = match cands {
            Some((strict, loose)) => slow.select_offsets(a, b, strict, loose, &mut self.cuts),
            None => {
                let (buf, base) = self.src.window();
                self.rapid.engine.scan_resumed(slow, buf, base, b, &mut self.cuts).map(|_| ())
            }
        };
        if let Err(e) = r {
            self.failed = true;
            self.awaiting = None;
            return Err(e);
        }
        // The block's cuts gather until its last piece, then are fingerprinted together.
        self.pending_cuts.extend_from_slice(&self.cuts);
        w.next = b;
        if b < w.q {
            self.awaiting = Some(w);
            return Ok(());
        }
        self.awaiting = None;
        let slow = self.slow.take().expect("fallback mode");
        self.cuts = std::mem::take(&mut self.pending_cuts);
        self.rapid.stats.scanned_positions += (w.q - w.p) as u64;
        let r = self.end_block(slow, w.q, w.at_end);
        if r.is_err() {
            self.failed = true;
        }
        r
    }

    /// Bytes of input held in memory now (for a stream: at most about one fallback block, the
    /// engine's block size, plus MAX and the read-ahead; never the whole input).
    pub fn buffered(&self) -> usize {
        self.src.window().0.len()
    }

    /// The session (statistics, table) while the chunker runs.
    pub fn rapid(&self) -> &Rapid<'e> {
        self.rapid
    }

    /// The source (to push bytes into a [`FeedSource`]).
    pub fn source_mut(&mut self) -> &mut S {
        &mut self.src
    }

    /// End of the last chunk decided (the current boundary).
    pub fn boundary(&self) -> usize {
        self.s
    }

    /// Chunks decided and not yet returned.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// The input end that must be available before the next step when no chunk is pending:
    /// a hint test reads up to `s + MAX + 1`; a fallback block starts before `s + MAX` and
    /// reads one block (at most the largest block) and one byte more.
    pub fn demand(&self) -> usize {
        let largest = self.max_block();
        self.s
            .saturating_add(self.rapid.engine.profile().max)
            .saturating_add(largest)
            .saturating_add(1)
    }

    fn first_block(&self) -> usize {
        match self.rapid.opts.first_block {
            0 => default_first_block(self.rapid.engine.profile()),
            n => n,
        }
    }

    /// The next fallback block while the region stays novel: the first size once more, then
    /// twice the last, up to the engine's block. (After a miss, the chunk with the change is
    /// novel and the one after it usually is not: a second small block finds its end more
    /// often than not, where a doubled one rolls past it.)
    fn grown_block(&mut self) -> usize {
        self.novel_blocks += 1;
        if self.novel_blocks == 1 {
            return self.block;
        }
        self.block.saturating_mul(2).min(self.max_block())
    }

    /// The largest fallback block (never below the first).
    fn max_block(&self) -> usize {
        let max = match self.rapid.opts.max_block {
            0 => self.rapid.engine.block_size(),
            n => n,
        };
        max.max(self.first_block())
    }

    fn advance(&mut self) -> Result<(), Error> {
        let w = self.rapid.engine.profile().window;
        let keep = match self.slow.as_ref().or(self.spare.as_ref()) {
            Some(r) => self.s.min(r.next_position().saturating_sub(w)),
            None => self.s,
        };
        self.src.release(keep);
        if self.src.ensure(self.s + 1)? <= self.s {
            self.done = true;
            return Ok(());
        }
        if self.slow.is_none() {
            if self.try_hints()? {
                self.spare = None;
                return Ok(());
            }
            self.slow = Some(match self.spare.take() {
                // The hints at the end of the last fallback block missed too: go on where it
                // stopped, with a larger block, as in a novel region.
                Some(r) if r.start() == self.s => {
                    self.block = self.grown_block();
                    r
                }
                _ => {
                    self.block = self.first_block();
                    self.novel_blocks = 0;
                    self.rapid.engine.resume(self.s)
                }
            });
        }
        self.fallback_block()
    }

    /// The table slot of the previous chunk (looked up again only after an eviction).
    fn prev_slot(&mut self) -> Option<Slot> {
        let (fp, slot) = self.prev.as_mut()?;
        let t = &mut self.rapid.table;
        if !t.check(*slot) {
            // An eviction since: the entry just used is never evicted, so this finds it.
            *slot = t.find(fp).unwrap_or_else(|| t.learn_slot(fp, false));
        }
        Some(*slot)
    }

    /// Tries the hints of the previous chunk at the current boundary; on a hit, produces the
    /// chunk.
    fn try_hints(&mut self) -> Result<bool, Error> {
        let Some(slot) = self.prev_slot() else {
            return Ok(false);
        };
        self.prefetch_ahead(slot);
        let mut hints = std::mem::take(&mut self.hints);
        self.rapid.table.slot_next_hints_into(slot, &mut hints);
        let r = self.try_hint_list(&hints);
        self.hints = hints;
        r
    }

    /// Starts loading the input where the next chunks will be tested, if hints keep hitting.
    /// A hinted chunk is skipped, not read, so each one's end (its window, its last byte) is a
    /// cache miss, and usually a TLB miss, that nothing else overlaps when fingerprints are
    /// computed elsewhere; measured as most of the per-chunk time of hint mode. The chunks
    /// that followed last time form a chain through the table (each hint's `next` entry); a
    /// cursor walks it a few chunks ahead of the boundary and prefetches each predicted end.
    /// It restarts from the boundary when the boundary passes it (a miss or a fallback).
    ///
    /// With ff, chunking reads nothing of a hinted chunk (its last byte comes with its
    /// fingerprint, from the pass that hashes it), so only the table's entries are prefetched.
    /// Replayed ff at 1000 insert/delete modifications: 3.6-3.9x -> 4.7-4.8x with both; the
    /// page walks move to the hashing pass, which reads those pages anyway (the full-run "cpu
    /// speedup" stayed at 1.4x).
    fn prefetch_ahead(&mut self, slot: Slot) {
        let p = self.rapid.engine.profile();
        let (mut pos, mut idx) = self.ahead;
        if pos <= self.s {
            (pos, idx) = (self.s, slot.idx());
        }
        let limit = self.s + PREFETCH_CHUNKS * p.avg;
        let data = self.rapid.opts.criterion != Criterion::Ff;
        let t = &self.rapid.table;
        let (buf, base) = self.src.window();
        while pos < limit {
            let Some(NextHint { hint, next }) = t.first_next_hint(idx) else {
                break;
            };
            let e = pos + hint.size as usize;
            let size = hint.size as usize;
            if size == 0 || e > base + buf.len() {
                break;
            }
            if data {
                table::prefetch(&buf[e - 1 - base]);
                table::prefetch(&buf[e - size.min(p.window) - base]);
            }
            pos = e;
            match next {
                Some(n) => {
                    t.prefetch(n);
                    idx = n;
                }
                None => break,
            }
        }
        self.ahead = (pos, idx);
    }

    fn try_hint_list(&mut self, hints: &[NextHint]) -> Result<bool, Error> {
        if hints.is_empty() {
            return Ok(false);
        }
        let s = self.s;
        let far = s + hints.iter().map(|h| h.hint.size as usize).max().unwrap_or(0);
        // One byte more, so that a candidate at the end of a stream is known to be there.
        let avail = self.src.ensure(far + 1)?;
        let len = self.src.known_len();
        let engine = self.rapid.engine;
        let crit = self.rapid.opts.criterion;
        for (k, &NextHint { hint: h, next }) in hints.iter().enumerate() {
            let size = h.size as usize;
            let e = s + size;
            // The fingerprint an FPT test computed, and the candidate's table slot.
            let mut fp: Option<(Digest, u8, Option<Slot>)> = None;
            let ok = size > 0 && e <= avail && {
                let (buf, base) = self.src.window();
                let bytes = &buf[s - base..e - base];
                match crit {
                    Criterion::Ff => true,
                    Criterion::FfMt => h.marker == Some(bytes[size - 1]),
                    Criterion::FfRwt | Criterion::FfRwtFpt => {
                        let st = &mut self.rapid.stats;
                        let pass = window_test(engine, engine.tables(), bytes, Some(e) == len, st)
                            && (size != engine.profile().max || Some(e) == len || h.marker.is_none_or(|m| m == bytes[size - 1]));
                        pass && (crit == Criterion::FfRwt || {
                            let t = &self.rapid.table;
                            if let Some(i) = next {
                                t.prefetch(i);
                            }
                            let (d, last) = hint_digest(engine, bytes, &mut self.rapid.fp_time, &mut self.rapid.tape);
                            let slot = next.and_then(|i| t.predicted(i, &d)).or_else(|| t.find(&d));
                            let known = slot.is_some_and(|x| t.slot_regular(x));
                            if !known {
                                if let Some(tape) = self.rapid.tape.as_mut() {
                                    tape.mark_wasted();
                                }
                                self.rapid.stats.fpt_wasted += 1;
                                self.rapid.stats.fpt_wasted_bytes += size as u64;
                            }
                            fp = Some((d, last, slot));
                            known
                        })
                    }
                }
            };
            if ok && !self.rapid.opts.worst_case {
                self.rapid.stats.hits[k] += 1;
                let (buf, base) = self.src.window();
                let bytes = &buf[s - base..e - base];
                // The last byte comes with the fingerprint: the pass that hashes a chunk reads
                // it (with ff, chunking itself reads nothing of a hinted chunk).
                let (d, last, slot) = match fp {
                    Some(x) => x,
                    None => {
                        let t = &self.rapid.table;
                        if let Some(i) = next {
                            t.prefetch(i);
                        }
                        let (d, last) = hint_digest(engine, bytes, &mut self.rapid.fp_time, &mut self.rapid.tape);
                        (d, last, next.and_then(|i| t.predicted(i, &d)))
                    }
                };
                self.rapid.fp_time.hinted_bytes += size as u64;
                let regular = crit == Criterion::FfRwtFpt;
                self.produce(s, e, d, slot, last, regular, Found::Hint(k as u8));
                return Ok(true);
            }
            self.rapid.stats.misses[k] += 1;
        }
        self.rapid.stats.fallbacks += 1;
        Ok(false)
    }

    /// Records a chunk: links it to the previous one, makes its fingerprint known, queues it.
    /// `slot`: the fingerprint's table slot if it is known already (saves a lookup).
    #[allow(clippy::too_many_arguments)]
    fn produce(&mut self, s: usize, e: usize, fp: Digest, slot: Option<Slot>, last: u8, regular: bool, found: Found) {
        let prev = self.prev_slot();
        let t = &mut self.rapid.table;
        // The chunk's entry first (created if new; nothing is evicted before `learn_at`), so
        // that the link records which entry followed; then the link and the learning, stamped
        // in that order.
        let slot = match slot {
            Some(x) if t.check(x) => x,
            _ => t.entry(&fp),
        };
        if let Some(p) = prev {
            t.link_at(
                p,
                Hint {
                    size: (e - s) as u32,
                    marker: Some(last),
                },
                Some(slot.idx()),
            );
        }
        let slot = t.learn_at(slot, regular);
        let st = &mut self.rapid.stats;
        st.bytes += (e - s) as u64;
        st.chunks += 1;
        if matches!(found, Found::Hint(_)) {
            st.hinted_chunks += 1;
        }
        self.pending.push_back(RapidChunk {
            offset: s as u64,
            length: e - s,
            hash: fp,
            last,
            regular,
            found,
        });
        self.s = e;
        self.prev = Some((fp, slot));
    }

    /// One block of regular chunking from the current boundary.
    fn fallback_block(&mut self) -> Result<(), Error> {
        let engine = self.rapid.engine;
        let mut slow = self.slow.take().expect("fallback mode");
        debug_assert_eq!(slow.start(), self.s);
        let p = slow.next_position();
        // One byte more than the block, so that a block ending the input knows it does.
        let avail = self.src.ensure(p.saturating_add(self.block).saturating_add(1))?;
        let q = avail.min(p.saturating_add(self.block));
        let at_end = self.src.known_len() == Some(q);
        self.cuts.clear();
        if self.external_min > 0 && q > p && q - p >= self.external_min {
            // The caller scans it (see `set_external_stage1`); the bytes stay held meanwhile.
            let (buf, base) = self.src.window();
            let w = engine.profile().window;
            debug_assert!(p >= w && p - w >= base && q <= base + buf.len());
            self.pending_cuts.clear();
            self.awaiting = Some(Awaiting { p, q, next: p, at_end });
            self.slow = Some(slow);
            return Ok(());
        }
        {
            let (buf, base) = self.src.window();
            let scanned = engine.scan_resumed(&mut slow, buf, base, q, &mut self.cuts)?;
            self.rapid.stats.scanned_positions += scanned as u64;
        }
        self.end_block(slow, q, at_end)
    }

    /// The rest of a fallback block once stage 2 has put its cuts in `self.cuts`: the end of
    /// input, fingerprints, the chunks, and whether hint mode resumes.
    fn end_block(&mut self, mut slow: Resumed, q: usize, at_end: bool) -> Result<(), Error> {
        let engine = self.rapid.engine;
        if at_end {
            slow.finish(q, &mut self.cuts);
        }
        self.rapid.stats.blocks += 1;
        self.batch.clear();
        let mut a = self.s;
        for &c in &self.cuts {
            self.batch.push(Chunk {
                offset: a as u64,
                length: c - a,
                hash: None,
            });
            a = c;
        }
        let mut batch = std::mem::take(&mut self.batch);
        let mut lasts = std::mem::take(&mut self.lasts);
        lasts.clear();
        {
            let (buf, base) = self.src.window();
            match self.rapid.tape.as_mut() {
                None => {
                    let clock = Stopwatch::start();
                    engine.fingerprint_chunks(buf, base as u64, &mut batch)?;
                    self.rapid.fp_time.batches += clock.elapsed();
                }
                Some(tape) => {
                    for c in batch.iter_mut() {
                        let a = c.offset as usize - base;
                        c.hash = Some(tape.digest(engine, &buf[a..a + c.length]).0);
                    }
                }
            }
            lasts.extend(batch.iter().map(|c| buf[c.offset as usize + c.length - 1 - base]));
        }
        for (c, &last) in batch.iter().zip(&lasts) {
            let (s, e) = (c.offset as usize, c.offset as usize + c.length);
            let d = c.hash.ok_or_else(|| Error::config("fingerprint missing"))?;
            self.produce(s, e, d, None, last, true, Found::Rule);
        }
        let cut_any = !batch.is_empty();
        self.batch = batch;
        self.lasts = lasts;
        let hinted = cut_any && self.prev_slot().is_some_and(|p| self.rapid.table.slot_has_hints(p));
        if at_end {
        } else if hinted {
            // Back to hint mode: the next advance tries the hints at the last cut.
            self.spare = Some(slow);
        } else {
            self.block = self.grown_block();
            self.slow = Some(slow);
        }
        Ok(())
    }
}

/// The FF+RWT test for the candidate chunk `bytes` (from the current boundary to the hinted
/// end): the boundary condition at its end. `at_end`: the candidate ends the input.
fn window_test(engine: &Engine, t: &Tables, bytes: &[u8], at_end: bool, st: &mut RapidStats) -> bool {
    let p = engine.profile();
    let size = bytes.len();
    if size > p.max {
        return false;
    }
    if size == p.max || at_end {
        return true;
    }
    if size < p.min {
        return false;
    }
    st.window_tests += 1;
    st.window_bytes += p.window as u64;
    let h = t.hash_window(&bytes[size - p.window..]);
    if size < p.avg || !p.two_classes() {
        t.is_strict(h)
    } else {
        t.is_loose(h)
    }
}

fn digest(engine: &Engine, bytes: &[u8]) -> Digest {
    engine.hash_alg().digest(bytes).unwrap_or([0; 32])
}

/// A chunk's fingerprint and its last byte (its marker as a hint), read right after the hash
/// has read it.
fn digest_last(engine: &Engine, bytes: &[u8]) -> (Digest, u8) {
    (digest(engine, bytes), bytes[bytes.len() - 1])
}

/// A fingerprint (and the last byte) computed on the hint path; one in [`FP_SAMPLE`] is timed
/// (see [`Rapid::fingerprint_time`]).
fn hint_digest(engine: &Engine, bytes: &[u8], ft: &mut FingerprintTime, tape: &mut Option<Box<FingerprintTape>>) -> (Digest, u8) {
    const { assert!(FP_SAMPLE.is_power_of_two()) };
    if let Some(t) = tape {
        return t.digest(engine, bytes);
    }
    let timed = ft.count & (FP_SAMPLE - 1) == 0;
    ft.count += 1;
    if !timed {
        return digest_last(engine, bytes);
    }
    let clock = Stopwatch::start();
    let d = digest_last(engine, bytes);
    ft.sampled += clock.elapsed();
    ft.sampled_bytes += bytes.len() as u64;
    d
}

impl RapidChunker<'_, '_, FeedSource> {
    /// Whether `next()` may run now: a chunk is pending, the input has ended, or enough bytes
    /// past the boundary have been pushed ([`RapidChunker::demand`]).
    pub fn ready(&self) -> bool {
        !self.pending.is_empty()
            || self.done
            || self.failed
            || (self.awaiting.is_none() && (self.src.ended() || self.src.pushed() >= self.demand()))
    }
}

impl<S: Source> Iterator for RapidChunker<'_, '_, S> {
    type Item = Result<RapidChunk, Error>;
    fn next(&mut self) -> Option<Result<RapidChunk, Error>> {
        loop {
            if let Some(c) = self.pending.pop_front() {
                return Some(Ok(c));
            }
            if self.done || self.failed {
                return None;
            }
            if self.awaiting.is_some() {
                // Not the end: the chunks go on once the caller supplies the candidates.
                return None;
            }
            if let Err(e) = self.advance() {
                self.failed = true;
                return Some(Err(e));
            }
        }
    }
}

/// Dedup accounting in input order: a chunk is unique the first time its fingerprint is seen.
#[derive(Default)]
pub struct DedupCounter {
    seen: table::DigestSet,
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

#[cfg(test)]
mod tests {
    use super::*;
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
