//! The SS-CDC engine: blocks of input flow through stage 1 (parallel over threads and
//! segments, SIMD within a thread) and stage 2 (sequential selection), then fingerprints are
//! computed in parallel and emitted in input order.
//!
//! A block is cut into spans (1 MiB by default) that the threads take in turn; stage 2 follows
//! the spans in order on whichever thread is free, so there is one barrier per block.
//!
//! For gear profiles the engine may instead run the skip-MIN loop ([`crate::skipmin`]), which
//! hashes only from `s + MIN - 64` after each boundary `s` (about 79% of the bytes at
//! `gear:2k:8k:64k`): on one thread sequentially; on several, each thread chunks a part of the
//! block speculatively from the part's start and the parts are joined where the true chain of
//! cuts meets a speculative one (see [`Engine::skip_min`]). It is chosen when the dispatch
//! calibration measured it faster than the family's fastest stage-1 kernel and no backend was
//! forced. The boundaries are the same either way.
//!
//! Memory is bounded: a block of positions at a time ([`Engine::spans_per_block`] spans: 4 per
//! thread, at most 16, at least one per thread), its bitmaps (1/8 of that, kept by the engine
//! for the next run), and for streams the bytes of the current chunk (at most MAX) carried over
//! to the next block; [`Engine::stream_prefetch`] holds up to three blocks (one being read, one
//! handed over, one being chunked).

use crate::backend::{self, Backend};
use crate::error::Error;
use crate::fingerprint::{Digest, HashAlg};
use crate::profile::{Family, Profile};
use crate::rolling::Tables;
use crate::skipmin::SkipMin;
use crate::stage1::Stage1Fn;
use crate::stage2::{Bits, Selector};
use std::io::Read;
#[cfg(feature = "parallel")]
use std::sync::Arc;

/// One chunk of the input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Chunk {
    pub offset: u64,
    pub length: usize,
    pub hash: Option<Digest>,
}

/// Engine options. `Default` gives: detected backend, all cores, automatic segments, BLAKE3.
#[derive(Clone, Debug, Default)]
pub struct Options {
    /// Stage-1 backend; `None` = [`backend::detect`].
    pub backend: Option<Backend>,
    /// Threads for stage 1 and fingerprinting; 0 = all available cores.
    pub threads: usize,
    /// Lane segment: bytes of positions one SIMD lane of the stage-1 kernel scans in one go;
    /// `None` = each span split into as many lane segments as the backend has lanes.
    /// (CLI `--lane-segment`; TypeScript `laneSegment`.)
    pub lane_segment: Option<usize>,
    /// Span: bytes of positions in one stage-1 job, the piece of a block a thread takes at a
    /// time; 0 = 1 MiB. (TypeScript `span`, a worker's job.)
    pub span: usize,
    /// Fingerprint algorithm.
    pub hash: HashAlg,
}

/// A configured chunker for one profile. Cheap to share (`&Engine` is `Sync`).
pub struct Engine {
    profile: Profile,
    tables: Box<Tables>,
    backend: Backend,
    kernel: Stage1Fn,
    threads: usize,
    lane_segment: Option<usize>,
    span: usize,
    hash: HashAlg,
    /// Chunk with the skip-MIN loop instead of the two stages (gear only).
    skip_min: bool,
    #[cfg(feature = "parallel")]
    pool: Option<Arc<rayon::ThreadPool>>,
    /// Bitmaps kept from the last [`Engine::cuts`] call, so that repeated calls do not
    /// allocate (and page-fault in) fresh ones each time.
    spare: std::sync::Mutex<(Vec<u64>, Vec<u64>)>,
}

const DEFAULT_SPAN: usize = 1 << 20;

impl Engine {
    pub fn new(profile: Profile, opts: Options) -> Result<Engine, Error> {
        profile.validate()?;
        // The skip-MIN loop replaces stage 1: used when the calibration measured it faster and
        // no stage-1 backend was asked for (by the options or CUTPOINT_BACKEND).
        let skip_min = profile.family == Family::Gear
            && opts.backend.is_none()
            && backend::env_override().is_none()
            && backend::calibration(Family::Gear).skip_min_chosen;
        let backend = match opts.backend {
            Some(b) if !b.is_supported() => {
                return Err(Error::config(format!("backend '{}' is not supported on this CPU", b.name())))
            }
            Some(b) => b,
            None => backend::detect_for(profile.family)?,
        };
        if opts.lane_segment == Some(0) {
            return Err(Error::config("lane segment must be at least 1 byte"));
        }
        let threads = if opts.threads == 0 { default_threads() } else { opts.threads };
        if threads > 1024 {
            return Err(Error::config(format!("{threads} threads is too many (at most 1024)")));
        }
        let span = if opts.span == 0 { DEFAULT_SPAN } else { opts.span.max(64) };
        #[cfg(feature = "parallel")]
        let pool = if threads > 1 {
            Some(Arc::new(
                rayon::ThreadPoolBuilder::new()
                    .num_threads(threads)
                    .thread_name(|i| format!("cutpoint-{i}"))
                    .build()
                    .map_err(|e| Error::config(format!("cannot start {threads} threads: {e}")))?,
            ))
        } else {
            None
        };
        Ok(Engine {
            tables: Tables::new(&profile),
            kernel: backend.kernel(),
            profile,
            backend,
            threads,
            lane_segment: opts.lane_segment,
            span,
            hash: opts.hash,
            skip_min,
            #[cfg(feature = "parallel")]
            pool,
            spare: std::sync::Mutex::new((Vec::new(), Vec::new())),
        })
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }
    pub fn backend(&self) -> Backend {
        self.backend
    }
    pub fn threads(&self) -> usize {
        self.threads
    }
    pub fn hash_alg(&self) -> HashAlg {
        self.hash
    }

    /// Whether this engine chunks with the skip-MIN loop ([`crate::skipmin`]) rather than
    /// stage 1 + stage 2. Then [`Engine::backend`] is the stage-1 kernel it would use
    /// otherwise, and the segment size and span options do not apply.
    ///
    /// With one thread the loop runs sequentially. With several, a block is cut into one part
    /// per thread (each at least 8 × MAX positions, else fewer parts); the first part is
    /// chunked from the true chunk start and each other part speculatively, as if a chunk
    /// started at the part's first position. The parts are then joined in order: from the true
    /// open chunk, true cuts are computed one by one into the next part until one equals a cut
    /// of that part's speculative list; from there on the lists agree (a cut decides the next
    /// one), so the rest is taken as is. The join usually takes a chunk or two; on input where
    /// the chains do not meet (no candidates for long runs, so every chunk is MAX long and the
    /// two chains stay offset) it continues sequentially to the part's end: the same cuts,
    /// at one thread's speed.
    pub fn skip_min(&self) -> bool {
        self.skip_min
    }

    /// This engine with the skip-MIN loop on or off (overriding what [`Engine::new`] chose;
    /// the boundaries are the same either way). Only gear profiles have it.
    pub fn with_skip_min(mut self, on: bool) -> Result<Engine, Error> {
        if on && self.profile.family != Family::Gear {
            return Err(Error::config(format!(
                "the skip-MIN engine is for gear profiles only (profile {})",
                self.profile
            )));
        }
        self.skip_min = on;
        Ok(self)
    }

    /// What chunks: `skip-min` or the stage-1 backend's name.
    pub fn kernel_name(&self) -> &'static str {
        if self.skip_min {
            "skip-min"
        } else {
            self.backend.name()
        }
    }
    /// The rolling-hash tables of the profile.
    pub(crate) fn tables(&self) -> &Tables {
        &self.tables
    }
    /// Bytes of positions per block: [`Engine::spans_per_block`] spans.
    pub fn block_size(&self) -> usize {
        self.span * Engine::spans_per_block(self.threads)
    }

    /// Spans in a block for `threads` threads: four per thread (so that threads taking spans in
    /// turn even out) up to 16 spans, and at least one per thread.
    pub fn spans_per_block(threads: usize) -> usize {
        (4 * threads).min(16).max(threads)
    }

    /// Chunk end offsets of `data` (no fingerprints). Equal to
    /// [`crate::reference_cuts`] for every backend, thread count and segment size.
    pub fn cuts(&self, data: &[u8]) -> Vec<usize> {
        let mut sc = self.scanner();
        let mut out = Vec::with_capacity(data.len() / self.profile.avg + 1);
        let mut p = self.profile.window.min(data.len());
        while p < data.len() {
            let q = (p + self.block_size()).min(data.len());
            self.scan(&mut sc, data, 0, p, q, &mut out);
            p = q;
        }
        sc.sel.finish(data.len(), &mut out);
        self.recycle(&mut sc);
        out
    }

    /// A fresh scanner, with the bitmaps the last finished run left if no one else took them.
    /// (Fresh bitmaps cost a page fault per 4 KiB on first touch, and faults taken by several
    /// threads at once contend in the kernel: that cost 15-30% of two-thread throughput on
    /// repeated calls.)
    fn scanner(&self) -> Scanner {
        let mut sc = Scanner::new(&self.profile);
        if let Ok(mut spare) = self.spare.try_lock() {
            (sc.strict, sc.loose) = std::mem::take(&mut *spare);
        }
        sc
    }

    /// Keeps `sc`'s bitmaps for the next run (see [`Engine::scanner`]).
    fn recycle(&self, sc: &mut Scanner) {
        if let Ok(mut spare) = self.spare.try_lock() {
            if spare.0.capacity() < sc.strict.capacity() {
                *spare = (std::mem::take(&mut sc.strict), std::mem::take(&mut sc.loose));
            }
        }
    }

    /// Chunks of `data` with fingerprints, lazily, block by block.
    pub fn chunks<'a>(&'a self, data: &'a [u8]) -> Chunker<'a> {
        Chunker {
            engine: self,
            data,
            sc: self.scanner(),
            p: self.profile.window.min(data.len()),
            last_cut: 0,
            cuts: Vec::new(),
            batch: Vec::new().into_iter(),
            done: false,
        }
    }

    /// Chunks of a reader, streaming with bounded memory. Any read sizes give the same chunks.
    pub fn stream<R: Read>(&self, reader: R) -> StreamChunker<'_, Direct<R>> {
        self.stream_from(Direct(reader))
    }

    /// [`Engine::stream`] with the reading done ahead by a thread of its own, so reading the
    /// next block overlaps chunking this one (the same chunks; two blocks in memory).
    pub fn stream_prefetch<R: Read + Send + 'static>(&self, reader: R) -> StreamChunker<'_, Prefetch> {
        let block = self.block_size() + self.profile.window;
        self.stream_from(Prefetch::start(reader, self.profile.max.max(self.profile.window), block))
    }

    fn stream_from<S: BlockSource>(&self, src: S) -> StreamChunker<'_, S> {
        StreamChunker {
            engine: self,
            src,
            win: Window { buf: Vec::new(), off: 0, filled: 0, base: 0, eof: false },
            q: 0,
            failed: false,
            sc: self.scanner(),
            cuts: Vec::new(),
            last_cut: 0,
            batch: Vec::new().into_iter(),
        }
    }

    /// Stage 1 and stage 2 over positions `[p, q)` (absolute). `buf` holds the bytes
    /// `[base, base + buf.len())`, which include `[p - W, q - 1)`.
    ///
    /// With several threads the positions are cut into spans (64-aligned, so each span owns
    /// whole bitmap words) that the threads take in turn from a shared counter; stage 2 runs
    /// over the spans in order, on whichever thread finishes the span the selector waits for.
    /// So threads never wait for each other inside the call (a slower thread just takes fewer
    /// spans) and stage 2 overlaps stage 1 of later spans; the only barrier is the call's end.
    fn scan(&self, sc: &mut Scanner, buf: &[u8], base: usize, p: usize, q: usize, out: &mut Vec<usize>) {
        if self.skip_min {
            return self.scan_skip(sc, buf, base, p, q, out);
        }
        let n = q - p;
        let words = n.div_ceil(64);
        // Resized without clearing: whoever runs stage 1 over a span zeroes its words first.
        sc.strict.resize(words, 0);
        sc.strict.truncate(words);
        let two = self.profile.two_classes();
        if two {
            sc.loose.resize(words, 0);
            sc.loose.truncate(words);
        }
        let span = if self.threads == 1 { n } else { self.span.min(n.div_ceil(self.threads)) };
        let span = (span.div_ceil(64) * 64).max(64);
        let spans = n.div_ceil(span);
        let stage1 = |j: usize, s: &mut [u64], l: &mut [u64]| {
            let r = j * span..((j + 1) * span).min(n);
            s.fill(0);
            l.fill(0);
            let rel_p = p - base;
            let seg = self.lane_segment.unwrap_or_else(|| r.len().div_ceil(self.backend.lanes()).max(1));
            let mut segs = Vec::with_capacity(r.len() / seg + 1);
            let mut a = r.start;
            while a < r.end {
                let b = (a + seg).min(r.end);
                segs.push(rel_p + a..rel_p + b);
                a = b;
            }
            // SAFETY: `self.kernel` came from `Backend::kernel`, which only hands out kernels
            // the CPU supports (is_supported() checked the ISA); every segment lies in
            // [W, buf.len()] because p >= W and q - 1 <= buf.len(); the span's bitmap slices
            // start at word (r.start / 64) and cover r. The kernel re-checks the bounds.
            unsafe { (self.kernel)(&self.tables, buf, &segs, rel_p + r.start, s, l) };
        };
        let select = |sel: &mut Selector, j: usize, s: &[u64], l: &[u64], out: &mut Vec<usize>| {
            let a = p + j * span;
            let b = (a + span).min(q);
            sel.select(Bits { words: s, origin: a }, Bits { words: l, origin: a }, a, b, out);
        };
        let words_per = span / 64;
        let mut loose_parts: Vec<&mut [u64]> =
            if two { sc.loose.chunks_mut(words_per).collect() } else { (0..spans).map(|_| &mut [][..]).collect() };
        let parts: Vec<(&mut [u64], &mut [u64])> =
            sc.strict.chunks_mut(words_per).zip(loose_parts.iter_mut()).map(|(s, l)| (s, std::mem::take(l))).collect();
        let sel = &mut sc.sel;
        #[cfg(feature = "parallel")]
        if let Some(pool) = self.pool.as_ref().filter(|_| spans > 1) {
            use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
            use std::sync::Mutex;
            let parts: Vec<Mutex<(&mut [u64], &mut [u64])>> = parts.into_iter().map(Mutex::new).collect();
            let done: Vec<AtomicBool> = (0..spans).map(|_| AtomicBool::new(false)).collect();
            let next = AtomicUsize::new(0);
            // The selector, the next span it consumes, and the cuts so far.
            let order = Mutex::new((sel, 0usize, out));
            // Runs stage 2 over the finished spans that come next in order, unless another
            // thread is at it; re-checks after letting go, so a span finished meanwhile by a
            // thread that found the lock taken is not left behind.
            let drive = || loop {
                let Ok(mut g) = order.try_lock() else { return };
                let (sel, k, out) = &mut *g;
                while *k < spans && done[*k].load(Ordering::Acquire) {
                    let part = parts[*k].lock().unwrap();
                    select(sel, *k, part.0, part.1, out);
                    *k += 1;
                }
                let k = *k;
                drop(g);
                if k >= spans || !done[k].load(Ordering::Acquire) {
                    return;
                }
            };
            let work = || loop {
                let j = next.fetch_add(1, Ordering::Relaxed);
                if j >= spans {
                    return;
                }
                {
                    let mut part = parts[j].lock().unwrap();
                    let (s, l) = &mut *part;
                    stage1(j, s, l);
                }
                done[j].store(true, Ordering::Release);
                drive();
            };
            pool.scope(|s| {
                for _ in 0..self.threads.min(spans) {
                    s.spawn(|_| work());
                }
            });
            // Every span is done; select what the last finishers left (lock found taken).
            let (sel, k, out) = order.into_inner().unwrap();
            for (j, part) in parts.iter().enumerate().skip(k) {
                let part = part.lock().unwrap();
                select(sel, j, part.0, part.1, out);
            }
            return;
        }
        for (j, (s, l)) in parts.into_iter().enumerate() {
            stage1(j, s, l);
            select(sel, j, s, l, out);
        }
    }

    /// [`Engine::scan`] with the skip-MIN loop (see [`Engine::skip_min`]): the same contract,
    /// the same cuts. The selector keeps only the open chunk's start.
    fn scan_skip(&self, sc: &mut Scanner, buf: &[u8], base: usize, p: usize, q: usize, out: &mut Vec<usize>) {
        let sm = SkipMin::new(&self.profile, &self.tables).expect("the skip-MIN engine is gear only");
        let start = sc.sel.start();
        let n = q - p;
        let parts = if self.threads > 1 { self.threads.min(n / (8 * self.profile.max)) } else { 1 };
        #[cfg(feature = "parallel")]
        if let Some(pool) = self.pool.as_ref().filter(|_| parts > 1) {
            let piece = n.div_ceil(parts);
            let ranges: Vec<(usize, usize)> = (0..parts).map(|k| (p + k * piece, (p + (k + 1) * piece).min(q))).collect();
            // Per part: its cuts and the chunk start it leaves open at its end.
            let mut found: Vec<(Vec<usize>, usize)> = vec![(Vec::new(), 0); parts];
            pool.scope(|s| {
                for (k, f) in found.iter_mut().enumerate() {
                    let ((a, b), sm) = (ranges[k], &sm);
                    s.spawn(move |_| {
                        // Part 0 from the true start, the others as if a chunk started at a.
                        let from = if k == 0 { start } else { a };
                        f.0.reserve(piece / self.profile.avg + 1);
                        f.1 = sm.cuts_in(buf, base, from, a, b, &mut f.0);
                    });
                }
            });
            let mut s = found[0].1;
            out.extend_from_slice(&found[0].0);
            for k in 1..parts {
                let ((a, b), (cuts, open)) = (ranges[k], &found[k]);
                // True cuts from s (positions before a decided none) until one is in the
                // speculative list; from there the list is the truth.
                while let Some(c) = sm.next_cut_in(buf, base, s, a, b) {
                    if let Ok(i) = cuts.binary_search(&c) {
                        out.extend_from_slice(&cuts[i..]);
                        s = *open;
                        break;
                    }
                    out.push(c);
                    s = c;
                }
            }
            sc.sel.restart(s);
            return;
        }
        let _ = parts;
        let s = sm.cuts_in(buf, base, start, p, q, out);
        sc.sel.restart(s);
    }

    /// Fingerprints `chunks` (bytes from `buf`, whose first byte is at `base`) in parallel;
    /// the order of `chunks` is kept.
    fn fingerprint(&self, buf: &[u8], base: usize, chunks: &mut [Chunk]) {
        if self.hash == HashAlg::None {
            return;
        }
        let alg = self.hash;
        let one = |c: &mut Chunk| {
            let a = c.offset as usize - base;
            c.hash = alg.digest(&buf[a..a + c.length]);
        };
        #[cfg(feature = "parallel")]
        if let Some(pool) = &self.pool {
            if chunks.len() > 1 {
                use rayon::prelude::*;
                pool.install(|| chunks.par_iter_mut().with_min_len(4).for_each(one));
                return;
            }
        }
        chunks.iter_mut().for_each(one);
    }

    /// Fingerprints `chunks` with this engine's algorithm and threads, in place, keeping their
    /// order; `buf` holds the bytes `[base, base + buf.len())`, which must cover every chunk.
    pub fn fingerprint_chunks(&self, buf: &[u8], base: u64, chunks: &mut [Chunk]) -> Result<(), Error> {
        let end = base + buf.len() as u64;
        if let Some(c) = chunks.iter().find(|c| c.offset < base || c.offset + c.length as u64 > end) {
            return Err(Error::config(format!(
                "chunk [{}, {}) is outside the buffer [{base}, {end})",
                c.offset,
                c.offset + c.length as u64
            )));
        }
        let base = usize::try_from(base).map_err(|_| Error::config("offset too large for this platform"))?;
        self.fingerprint(buf, base, chunks);
        Ok(())
    }

    /// Regular chunking resumed at a boundary `start` (e.g. RapidCDC's fallback after a missed
    /// hint): the chunks [`Engine::scan_resumed`] then finds are the ones the boundary rule
    /// gives for an input whose chunk starts at `start`, whatever blocks the caller scans.
    pub fn resume(&self, start: usize) -> Resumed {
        let mut sc = Scanner::new(&self.profile);
        sc.sel.restart(start);
        Resumed { sc, next: start + self.profile.min, min: self.profile.min }
    }

    /// Stage 1 (on this engine's threads) and stage 2 over positions
    /// `[r.next_position(), q)`, appending the cuts found to `out`. `buf` holds the bytes
    /// `[base, base + buf.len())`, which must include `[r.next_position() - W, q - 1)`.
    /// Returns the number of positions scanned (0 when `q <= r.next_position()`).
    pub fn scan_resumed(&self, r: &mut Resumed, buf: &[u8], base: usize, q: usize, out: &mut Vec<usize>) -> Result<usize, Error> {
        let p = r.next_position();
        if q <= p {
            return Ok(0);
        }
        let w = self.profile.window;
        if p < w || p - w < base || q - 1 > base + buf.len() {
            return Err(Error::config(format!(
                "positions [{p}, {q}) need bytes [{}, {}); the buffer holds [{base}, {})",
                p.saturating_sub(w),
                q - 1,
                base + buf.len()
            )));
        }
        self.scan(&mut r.sc, buf, base, p, q, out);
        r.next = q;
        Ok(q - p)
    }
}

/// State of a resumed regular chunking (see [`Engine::resume`]).
pub struct Resumed {
    sc: Scanner,
    /// Positions before `next` have been scanned.
    next: usize,
    min: usize,
}

impl Resumed {
    /// Start of the current, not yet cut, chunk.
    pub fn start(&self) -> usize {
        self.sc.sel.start()
    }

    /// The first position the next scan examines: positions below `start + MIN` cannot cut,
    /// so a scan never begins before it.
    pub fn next_position(&self) -> usize {
        self.next.max(self.sc.sel.start() + self.min)
    }

    /// End of input at `n`: the open chunk, if any, ends there.
    pub fn finish(&mut self, n: usize, out: &mut Vec<usize>) {
        self.sc.sel.finish(n, out);
    }

    /// Stage 2 over positions `[a, b)` with candidates found elsewhere (stage 1 run by the
    /// caller, e.g. in other workers): `strict` and `loose` are the candidate positions as
    /// offsets from `a` (the format of `Stage1` in the WebAssembly binding; `loose` is ignored
    /// for one-class profiles). Appends the cuts decided to `out`, as
    /// [`Engine::scan_resumed`] would over the same positions. `a` must continue the positions
    /// consumed so far: at least the end of the last range, and at most
    /// [`Resumed::next_position`] (positions in between cannot cut).
    pub fn select_offsets(&mut self, a: usize, b: usize, strict: &[u32], loose: &[u32], out: &mut Vec<usize>) -> Result<(), Error> {
        if a < self.next || a > self.next_position() || b < a {
            return Err(Error::config(format!(
                "candidates of positions [{a}, {b}) do not continue the run (next position {})",
                self.next_position()
            )));
        }
        let n = b - a;
        let two = self.sc.sel.two_classes();
        let outside = |o: usize| Error::config(format!("candidate offset {o} outside positions [{a}, {b})"));
        crate::stage2::bits_from_offsets(&mut self.sc.strict, n, strict).map_err(outside)?;
        crate::stage2::bits_from_offsets(&mut self.sc.loose, n, if two { loose } else { &[] }).map_err(outside)?;
        let sc = &mut self.sc;
        sc.sel.select(Bits { words: &sc.strict, origin: a }, Bits { words: &sc.loose, origin: a }, a, b, out);
        self.next = b;
        Ok(())
    }
}

/// Cores available to this process.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1)
}

/// Per-run state: the stage-2 selector and reusable bitmaps.
struct Scanner {
    sel: Selector,
    strict: Vec<u64>,
    loose: Vec<u64>,
}

impl Scanner {
    fn new(p: &Profile) -> Scanner {
        Scanner { sel: Selector::new(p.min, p.avg, p.max, p.two_classes()), strict: Vec::new(), loose: Vec::new() }
    }
}

fn to_chunks(cuts: &[usize], last_cut: &mut usize) -> Vec<Chunk> {
    cuts.iter()
        .map(|&c| {
            let ch = Chunk { offset: *last_cut as u64, length: c - *last_cut, hash: None };
            *last_cut = c;
            ch
        })
        .collect()
}

/// Iterator over the chunks of a slice (see [`Engine::chunks`]).
pub struct Chunker<'a> {
    engine: &'a Engine,
    data: &'a [u8],
    sc: Scanner,
    p: usize,
    last_cut: usize,
    cuts: Vec<usize>,
    batch: std::vec::IntoIter<Chunk>,
    done: bool,
}

impl Iterator for Chunker<'_> {
    type Item = Chunk;
    fn next(&mut self) -> Option<Chunk> {
        loop {
            if let Some(c) = self.batch.next() {
                return Some(c);
            }
            if self.done {
                return None;
            }
            self.cuts.clear();
            let n = self.data.len();
            if self.p < n {
                let q = (self.p + self.engine.block_size()).min(n);
                self.engine.scan(&mut self.sc, self.data, 0, self.p, q, &mut self.cuts);
                self.p = q;
            }
            if self.p >= n {
                self.sc.sel.finish(n, &mut self.cuts);
                self.done = true;
            }
            let mut chunks = to_chunks(&self.cuts, &mut self.last_cut);
            self.engine.fingerprint(self.data, 0, &mut chunks);
            self.batch = chunks.into_iter();
        }
    }
}

/// Where a [`StreamChunker`] gets its bytes (see [`Engine::stream`] and
/// [`Engine::stream_prefetch`]).
pub trait BlockSource {
    /// Makes `st` hold at least `want` new bytes after the ones it holds (fewer at the end of
    /// input, which sets `st.eof`).
    #[doc(hidden)]
    fn fill(&mut self, st: &mut Window, want: usize) -> Result<(), Error>;
}

/// The bytes a stream holds: `[base, base + filled)` of the input are `buf[off..off + filled]`.
#[doc(hidden)]
pub struct Window {
    buf: Vec<u8>,
    off: usize,
    filled: usize,
    base: usize,
    eof: bool,
}

impl Window {
    fn bytes(&self) -> &[u8] {
        &self.buf[self.off..self.off + self.filled]
    }
    /// Forgets the bytes before absolute offset `from`.
    fn drop_before(&mut self, from: usize) {
        let drop = from - self.base;
        self.off += drop;
        self.filled -= drop;
        self.base = from;
    }
}

/// A reader read on the caller's thread, into one buffer.
pub struct Direct<R>(R);

impl<R: Read> BlockSource for Direct<R> {
    fn fill(&mut self, st: &mut Window, want: usize) -> Result<(), Error> {
        // Keep the carried bytes at the front, then read behind them.
        if st.off > 0 {
            st.buf.copy_within(st.off..st.off + st.filled, 0);
            st.off = 0;
        }
        let target = st.filled + want;
        if st.buf.len() < target {
            st.buf.resize(target, 0);
        }
        while !st.eof && st.filled < target {
            match self.0.read(&mut st.buf[st.filled..target]) {
                Ok(0) => st.eof = true,
                Ok(k) => st.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(())
    }
}

/// A reader read ahead by a thread of its own: while the engine chunks one block, the next is
/// read into a second buffer; buffers are handed over, not copied (only the carried bytes of
/// the open chunk, at most MAX, move to the front of the next buffer).
/// A block read ahead: the buffer, the bytes read into it after the head room, end of input.
type ReadBlock = Result<(Vec<u8>, usize, bool), std::io::Error>;

pub struct Prefetch {
    full: Option<std::sync::mpsc::Receiver<ReadBlock>>,
    /// Why the read-ahead thread could not start (reported by the first read).
    failed: Option<std::io::Error>,
    empty: std::sync::mpsc::SyncSender<Vec<u8>>,
    /// Room kept before each block for the carried bytes.
    head: usize,
}

impl Prefetch {
    fn start<R: Read + Send + 'static>(mut reader: R, head: usize, block: usize) -> Prefetch {
        use std::sync::mpsc::sync_channel;
        let (full_tx, full_rx) = sync_channel(1);
        let (empty_tx, empty_rx) = sync_channel::<Vec<u8>>(2);
        // The reader stops when the input ends, fails, or the chunker is dropped (a send
        // fails); it may stay blocked in a read until then.
        let started = std::thread::Builder::new()
            .name("cutpoint-read".into())
            .spawn(move || {
                let mut spare = 2; // buffers it may allocate before reusing returned ones
                loop {
                    let mut buf = if spare > 0 {
                        spare -= 1;
                        vec![0u8; head + block]
                    } else {
                        match empty_rx.recv() {
                            Ok(mut b) => {
                                b.resize(head + block, 0); // the chunker's first buffer is empty
                                b
                            }
                            Err(_) => return,
                        }
                    };
                    let mut n = 0;
                    let mut eof = false;
                    while n < block {
                        match reader.read(&mut buf[head + n..head + block]) {
                            Ok(0) => {
                                eof = true;
                                break;
                            }
                            Ok(k) => n += k,
                            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                            Err(e) => {
                                let _ = full_tx.send(Err(e));
                                return;
                            }
                        }
                    }
                    if full_tx.send(Ok((buf, n, eof))).is_err() || eof {
                        return;
                    }
                }
            })
            .map(|_| ());
        match started {
            Ok(()) => Prefetch { full: Some(full_rx), failed: None, empty: empty_tx, head },
            Err(e) => Prefetch {
                full: None,
                failed: Some(std::io::Error::new(e.kind(), format!("cannot start the read-ahead thread: {e}"))),
                empty: empty_tx,
                head,
            },
        }
    }
}

impl BlockSource for Prefetch {
    fn fill(&mut self, st: &mut Window, _want: usize) -> Result<(), Error> {
        if let Some(e) = self.failed.take() {
            return Err(Error::Io(e));
        }
        let Some(rx) = &self.full else {
            st.eof = true;
            return Ok(());
        };
        let msg = rx.recv().map_err(|_| Error::Io(std::io::Error::other("the read-ahead thread stopped")))?;
        let (mut next, n, eof) = msg.map_err(|e| {
            self.full = None;
            Error::Io(e)
        })?;
        // Carried bytes go just before the new block; the open chunk is shorter than MAX.
        assert!(st.filled <= self.head, "carried {} bytes, room for {}", st.filled, self.head);
        let at = self.head - st.filled;
        next[at..self.head].copy_from_slice(&st.buf[st.off..st.off + st.filled]);
        let old = std::mem::replace(&mut st.buf, next);
        let _ = self.empty.try_send(old);
        st.off = at;
        st.filled += n;
        if eof {
            st.eof = true;
            self.full = None;
        }
        Ok(())
    }
}

impl Drop for Chunker<'_> {
    fn drop(&mut self) {
        self.engine.recycle(&mut self.sc);
    }
}

/// Streaming chunker over a reader (see [`Engine::stream`]).
pub struct StreamChunker<'a, S: BlockSource> {
    engine: &'a Engine,
    src: S,
    win: Window,
    /// Positions before `q` have been through both stages.
    q: usize,
    failed: bool,
    sc: Scanner,
    cuts: Vec<usize>,
    last_cut: usize,
    batch: std::vec::IntoIter<Chunk>,
}

impl<S: BlockSource> StreamChunker<'_, S> {
    /// Total bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        (self.win.base + self.win.filled) as u64
    }

    fn next_batch(&mut self) -> Result<(), Error> {
        let want = self.engine.block_size() + self.engine.profile.window;
        // New bytes needed beyond those held so that a block of positions is buffered.
        let held_new = (self.win.base + self.win.filled).saturating_sub(self.q.max(self.win.base));
        self.src.fill(&mut self.win, want.saturating_sub(held_new))?;
        let end = self.win.base + self.win.filled;
        let w = self.engine.profile.window;
        self.cuts.clear();
        if self.q < w {
            self.q = w.min(end);
        }
        if self.q < end {
            // Positions [q, end): a cut at `end` ends a chunk whose bytes are all here.
            self.engine.scan(&mut self.sc, self.win.bytes(), self.win.base, self.q, end, &mut self.cuts);
            self.q = end;
        }
        if self.win.eof {
            self.sc.sel.finish(end, &mut self.cuts);
        }
        let mut chunks = to_chunks(&self.cuts, &mut self.last_cut);
        self.engine.fingerprint(self.win.bytes(), self.win.base, &mut chunks);
        // Keep the current chunk's bytes and the window before the next position.
        let keep_from = self.sc.sel.start().min(self.q.saturating_sub(w)).max(self.win.base);
        self.win.drop_before(keep_from);
        self.batch = chunks.into_iter();
        Ok(())
    }
}

impl<S: BlockSource> Iterator for StreamChunker<'_, S> {
    type Item = Result<Chunk, Error>;
    fn next(&mut self) -> Option<Result<Chunk, Error>> {
        loop {
            if let Some(c) = self.batch.next() {
                return Some(Ok(c));
            }
            if self.failed || (self.win.eof && self.sc.sel.start() >= self.win.base + self.win.filled) {
                return None;
            }
            match self.next_batch() {
                Ok(()) => {}
                Err(e) => {
                    self.failed = true;
                    return Some(Err(e));
                }
            }
        }
    }
}

impl<S: BlockSource> Drop for StreamChunker<'_, S> {
    fn drop(&mut self) {
        self.engine.recycle(&mut self.sc);
    }
}
