//! The RapidCDC iterator over one input ([`RapidChunker`]): hint mode, its tests, and the SS-CDC
//! fallback blocks; the chunks it yields ([`RapidChunk`], [`Found`]).

use super::source::{FeedSource, Source};
use super::options::default_first_block;
use super::table::{self, Hint, NextHint, Slot};
use super::tape::{FingerprintTape, FingerprintTime, Stopwatch, FP_SAMPLE};
use super::{Criterion, Rapid, RapidStats};
use crate::engine::{Chunk, Engine, Resumed};
use crate::error::Error;
use crate::fingerprint::Digest;
use crate::rolling::Tables;
use std::collections::VecDeque;

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

/// The RapidCDC iterator over one input (see [`Rapid::chunks`] and [`Rapid::stream`]).
pub struct RapidChunker<'r, 'e, S: Source> {
    pub(super) rapid: &'r mut Rapid<'e>,
    pub(super) src: S,
    /// End of the last chunk produced: the current boundary.
    pub(super) s: usize,
    /// Fingerprint of the chunk that ends at `s` (none at the start of the input), and the slot
    /// of its table entry.
    pub(super) prev: Option<(Digest, Slot)>,
    /// The regular chunking in progress, in fallback mode.
    pub(super) slow: Option<Resumed>,
    /// The regular chunking set aside when a fallback block ended at a hinted chunk: if that
    /// chunk's hints all miss, chunking goes on from it and scans no position twice.
    pub(super) spare: Option<Resumed>,
    pub(super) block: usize,
    /// Fallback blocks since the last miss that ended without a hinted chunk.
    pub(super) novel_blocks: u32,
    pub(super) pending: VecDeque<RapidChunk>,
    pub(super) hints: Vec<NextHint>,
    pub(super) cuts: Vec<usize>,
    pub(super) batch: Vec<Chunk>,
    /// Last bytes of the chunks of `batch`.
    pub(super) lasts: Vec<u8>,
    pub(super) done: bool,
    pub(super) failed: bool,
    /// Fallback blocks of at least this many positions get their stage 1 from the caller
    /// (0: never); see [`RapidChunker::set_external_stage1`].
    pub(super) external_min: usize,
    /// The fallback block whose stage-1 candidates the caller is supplying.
    pub(super) awaiting: Option<Awaiting>,
    /// Cuts decided by the candidates supplied so far for the awaited block.
    pub(super) pending_cuts: Vec<usize>,
    /// How far the input has been prefetched along the predicted chunks (see
    /// [`RapidChunker::prefetch_ahead`]): the end of the last one and its entry index.
    pub(super) ahead: (usize, u32),
}

/// Hinted chunk ends up to this many average chunk sizes past the boundary are prefetched.
pub(super) const PREFETCH_CHUNKS: usize = 4;

/// A fallback block waiting for stage-1 candidates from the caller.
#[derive(Clone, Copy, Debug)]
pub(super) struct Awaiting {
    /// The block's positions `[p, q)`; `next`: the first not yet supplied.
    pub(super) p: usize,
    pub(super) q: usize,
    pub(super) next: usize,
    pub(super) at_end: bool,
}

impl<'r, 'e, S: Source> RapidChunker<'r, 'e, S> {
    pub(super) fn new(rapid: &'r mut Rapid<'e>, src: S) -> Self {
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

    pub(super) fn stage1_piece(&mut self, a: usize, b: usize, cands: Option<(&[u32], &[u32])>) -> Result<(), Error> {
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

    pub(super) fn first_block(&self) -> usize {
        match self.rapid.opts.first_block {
            0 => default_first_block(self.rapid.engine.profile()),
            n => n,
        }
    }

    /// The next fallback block while the region stays novel: the first size once more, then
    /// twice the last, up to the engine's block. (After a miss, the chunk with the change is
    /// novel and the one after it usually is not: a second small block finds its end more
    /// often than not, where a doubled one rolls past it.)
    pub(super) fn grown_block(&mut self) -> usize {
        self.novel_blocks += 1;
        if self.novel_blocks == 1 {
            return self.block;
        }
        self.block.saturating_mul(2).min(self.max_block())
    }

    /// The largest fallback block (never below the first).
    pub(super) fn max_block(&self) -> usize {
        let max = match self.rapid.opts.max_block {
            0 => self.rapid.engine.block_size(),
            n => n,
        };
        max.max(self.first_block())
    }

    pub(super) fn advance(&mut self) -> Result<(), Error> {
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
    pub(super) fn prev_slot(&mut self) -> Option<Slot> {
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
    pub(super) fn try_hints(&mut self) -> Result<bool, Error> {
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
    pub(super) fn prefetch_ahead(&mut self, slot: Slot) {
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

    pub(super) fn try_hint_list(&mut self, hints: &[NextHint]) -> Result<bool, Error> {
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
    pub(super) fn produce(&mut self, s: usize, e: usize, fp: Digest, slot: Option<Slot>, last: u8, regular: bool, found: Found) {
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
    pub(super) fn fallback_block(&mut self) -> Result<(), Error> {
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
    pub(super) fn end_block(&mut self, mut slow: Resumed, q: usize, at_end: bool) -> Result<(), Error> {
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
pub(super) fn window_test(engine: &Engine, t: &Tables, bytes: &[u8], at_end: bool, st: &mut RapidStats) -> bool {
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

pub(super) fn digest(engine: &Engine, bytes: &[u8]) -> Digest {
    engine.hash_alg().digest(bytes).unwrap_or([0; 32])
}

/// A chunk's fingerprint and its last byte (its marker as a hint), read right after the hash
/// has read it.
pub(super) fn digest_last(engine: &Engine, bytes: &[u8]) -> (Digest, u8) {
    (digest(engine, bytes), bytes[bytes.len() - 1])
}

/// A fingerprint (and the last byte) computed on the hint path; one in [`FP_SAMPLE`] is timed
/// (see [`Rapid::fingerprint_time`]).
pub(super) fn hint_digest(engine: &Engine, bytes: &[u8], ft: &mut FingerprintTime, tape: &mut Option<Box<FingerprintTape>>) -> (Digest, u8) {
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
