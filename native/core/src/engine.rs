//! The SS-CDC engine: blocks of input flow through stage 1 (parallel over threads and
//! segments, SIMD within a thread) and stage 2 (sequential selection), then fingerprints are
//! computed in parallel and emitted in input order.
//!
//! Memory is bounded: a block of positions at a time (`threads × span` bytes, 1 MiB spans by
//! default), its bitmaps (1/8 of that), and for streams the bytes of the current chunk (at most
//! MAX) carried over to the next block.

use crate::backend::{self, Backend};
use crate::error::Error;
use crate::fingerprint::{Digest, HashAlg};
use crate::hash::Tables;
use crate::profile::Profile;
use crate::stage1::Stage1Fn;
use crate::stage2::{Bits, Selector};
use std::io::Read;
use std::ops::Range;
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
    /// Segment size in bytes for stage 1; `None` = each thread's span split into as many
    /// segments as the backend has lanes.
    pub segment_size: Option<usize>,
    /// Bytes of positions each thread takes per block; 0 = 1 MiB.
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
    segment_size: Option<usize>,
    span: usize,
    hash: HashAlg,
    #[cfg(feature = "parallel")]
    pool: Option<Arc<rayon::ThreadPool>>,
}

const DEFAULT_SPAN: usize = 1 << 20;

impl Engine {
    pub fn new(profile: Profile, opts: Options) -> Result<Engine, Error> {
        profile.validate()?;
        let backend = match opts.backend {
            Some(b) if !b.is_supported() => {
                return Err(Error::config(format!("backend '{}' is not supported on this CPU", b.name())))
            }
            Some(b) => b,
            None => backend::detect_for(profile.family)?,
        };
        if opts.segment_size == Some(0) {
            return Err(Error::config("segment size must be at least 1 byte"));
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
            segment_size: opts.segment_size,
            span,
            hash: opts.hash,
            #[cfg(feature = "parallel")]
            pool,
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
    /// Bytes of positions per block.
    pub fn block_size(&self) -> usize {
        self.span * self.threads
    }

    /// Chunk end offsets of `data` (no fingerprints). Equal to
    /// [`crate::reference_cuts`] for every backend, thread count and segment size.
    pub fn cuts(&self, data: &[u8]) -> Vec<usize> {
        let mut sc = Scanner::new(&self.profile);
        let mut out = Vec::with_capacity(data.len() / self.profile.avg + 1);
        let mut p = self.profile.window.min(data.len());
        while p < data.len() {
            let q = (p + self.block_size()).min(data.len());
            self.scan(&mut sc, data, 0, p, q, &mut out);
            p = q;
        }
        sc.sel.finish(data.len(), &mut out);
        out
    }

    /// Chunks of `data` with fingerprints, lazily, block by block.
    pub fn chunks<'a>(&'a self, data: &'a [u8]) -> Chunker<'a> {
        Chunker {
            engine: self,
            data,
            sc: Scanner::new(&self.profile),
            p: self.profile.window.min(data.len()),
            last_cut: 0,
            cuts: Vec::new(),
            batch: Vec::new().into_iter(),
            done: false,
        }
    }

    /// Chunks of a reader, streaming with bounded memory. Any read sizes give the same chunks.
    pub fn stream<R: Read>(&self, reader: R) -> StreamChunker<'_, R> {
        StreamChunker {
            engine: self,
            reader,
            buf: Vec::new(),
            filled: 0,
            base: 0,
            q: 0,
            eof: false,
            failed: false,
            sc: Scanner::new(&self.profile),
            cuts: Vec::new(),
            last_cut: 0,
            batch: Vec::new().into_iter(),
        }
    }

    /// Stage 1 and stage 2 over positions `[p, q)` (absolute). `buf` holds the bytes
    /// `[base, base + buf.len())`, which include `[p - W, q - 1)`.
    fn scan(&self, sc: &mut Scanner, buf: &[u8], base: usize, p: usize, q: usize, out: &mut Vec<usize>) {
        let n = q - p;
        let words = n.div_ceil(64);
        // Resized without clearing: each thread zeroes its own words below, so zeroing the
        // bitmaps is parallel too (it was a serial cost per block).
        sc.strict.resize(words, 0);
        sc.strict.truncate(words);
        let two = self.profile.two_classes();
        if two {
            sc.loose.resize(words, 0);
            sc.loose.truncate(words);
        }
        // Thread spans are 64-aligned relative to p, so each owns whole bitmap words.
        let span = n.div_ceil(self.threads).div_ceil(64) * 64;
        let span = span.max(64);
        let rel_p = p - base;
        let lanes = self.backend.lanes();
        let seg_size = self.segment_size;
        let jobs: Vec<(Range<usize>, &mut [u64], &mut [u64])> = {
            let strict_parts = sc.strict.chunks_mut(span / 64);
            let mut loose_parts: Vec<&mut [u64]> = if two {
                sc.loose.chunks_mut(span / 64).collect()
            } else {
                Vec::new()
            };
            strict_parts
                .enumerate()
                .map(|(i, s)| {
                    let l: &mut [u64] = if two { std::mem::take(&mut loose_parts[i]) } else { &mut [] };
                    (i * span..((i + 1) * span).min(n), s, l)
                })
                .collect()
        };
        let run = |(r, s, l): (Range<usize>, &mut [u64], &mut [u64])| {
            s.fill(0);
            l.fill(0);
            let seg = seg_size.unwrap_or_else(|| r.len().div_ceil(lanes).max(1));
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
        self.run_jobs(jobs, run);
        let strict = Bits { words: &sc.strict, origin: p };
        let loose = Bits { words: &sc.loose, origin: p };
        sc.sel.select(strict, loose, p, q, out);
    }

    #[cfg(feature = "parallel")]
    fn run_jobs<T: Send, F: Fn(T) + Sync>(&self, jobs: Vec<T>, f: F) {
        match &self.pool {
            Some(pool) if jobs.len() > 1 => pool.scope(|s| {
                let f = &f;
                for j in jobs {
                    s.spawn(move |_| f(j));
                }
            }),
            _ => jobs.into_iter().for_each(f),
        }
    }
    #[cfg(not(feature = "parallel"))]
    fn run_jobs<T, F: Fn(T)>(&self, jobs: Vec<T>, f: F) {
        jobs.into_iter().for_each(f)
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

/// Streaming chunker over a reader (see [`Engine::stream`]).
pub struct StreamChunker<'a, R: Read> {
    engine: &'a Engine,
    reader: R,
    /// Bytes `[base, base + filled)` of the stream are in `buf[..filled]`.
    buf: Vec<u8>,
    filled: usize,
    base: usize,
    /// Positions before `q` have been through both stages.
    q: usize,
    eof: bool,
    failed: bool,
    sc: Scanner,
    cuts: Vec<usize>,
    last_cut: usize,
    batch: std::vec::IntoIter<Chunk>,
}

impl<R: Read> StreamChunker<'_, R> {
    /// Total bytes read so far.
    pub fn bytes_read(&self) -> u64 {
        (self.base + self.filled) as u64
    }

    /// Reads until a block of new positions is buffered or the input ends.
    fn fill(&mut self) -> Result<(), Error> {
        let want = self.engine.block_size() + self.engine.profile.window;
        let target = (self.q.max(self.base) - self.base) + want;
        if self.buf.len() < target {
            self.buf.resize(target, 0);
        }
        while !self.eof && self.filled < target {
            match self.reader.read(&mut self.buf[self.filled..target]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(())
    }

    fn next_batch(&mut self) -> Result<(), Error> {
        self.fill()?;
        let end = self.base + self.filled;
        let w = self.engine.profile.window;
        self.cuts.clear();
        if self.q < w {
            self.q = w.min(end);
        }
        if self.q < end {
            // Positions [q, end): a cut at `end` ends a chunk whose bytes are all here.
            self.engine.scan(&mut self.sc, &self.buf[..self.filled], self.base, self.q, end, &mut self.cuts);
            self.q = end;
        }
        if self.eof {
            self.sc.sel.finish(end, &mut self.cuts);
        }
        let mut chunks = to_chunks(&self.cuts, &mut self.last_cut);
        self.engine.fingerprint(&self.buf[..self.filled], self.base, &mut chunks);
        // Keep the current chunk's bytes and the window before the next position.
        let keep_from = self.sc.sel.start().min(self.q.saturating_sub(w)).max(self.base);
        let drop = keep_from - self.base;
        if drop > 0 {
            self.buf.copy_within(drop..self.filled, 0);
            self.filled -= drop;
            self.base = keep_from;
        }
        self.batch = chunks.into_iter();
        Ok(())
    }
}

impl<R: Read> Iterator for StreamChunker<'_, R> {
    type Item = Result<Chunk, Error>;
    fn next(&mut self) -> Option<Result<Chunk, Error>> {
        loop {
            if let Some(c) = self.batch.next() {
                return Some(Ok(c));
            }
            if self.failed || (self.eof && self.sc.sel.start() >= self.base + self.filled) {
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
