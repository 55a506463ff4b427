//! FBC: TTTD coarse chunks, frequency estimation of fixed-size sub-chunks (pass 1), and
//! frequency-based re-chunking (pass 2), each with an optional multi-threaded second stage.
//! See the module documentation of [`crate::mtfbc`] for the algorithm and the choices made.

use std::collections::HashMap;

use super::bloom::BloomFilters;
use super::key::Key;
use super::tttd::{rolling_tables, Divisor, Tttd, TttdParams};
use crate::error::Error;
use crate::rolling::Tables;
use crate::profile::Family;

/// FBC parameters. [`FbcParams::paper`] gives the MT-FBC report's values (section 6.A).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FbcParams {
    /// The coarse chunker.
    pub tttd: TttdParams,
    /// Frequent chunk size: the fixed size of the sub-chunk candidates (report: 512 B, 1/16 of
    /// TTTD's average chunk size).
    pub sub_size: usize,
    /// Prefiltering sample density: a candidate is examined when the rolling hash of its bytes
    /// satisfies `h mod r == r - 1`, about one in `r` (report: 32).
    pub sample_rate: u64,
    /// Number of Bloom filters (report: 3).
    pub filters: usize,
    /// Size of each Bloom filter in bytes (report: 800 KB).
    pub filter_bytes: usize,
    /// Frequency threshold: a candidate whose estimated frequency reaches it is frequent and
    /// becomes a chunk of its own (report: 5).
    pub threshold: u32,
    /// How an examined candidate is named in the filters and the table.
    pub key: CandidateKey,
}

/// How an examined sub-chunk candidate is named.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum CandidateKey {
    /// BLAKE3 of the candidate's bytes: 128 bits name it, 128 bits give the Bloom probes. The
    /// closest to the report (a 20-byte cryptographic key); costs a hash of `sub_size` bytes
    /// per examined candidate.
    #[default]
    Blake3,
    /// Two rolling hashes of the candidate's bytes, rolled along with the sampling hash: the
    /// sampling family's (53-bit Rabin or 32-bit CRC) and the other one, 85 bits together, so
    /// no extra pass over the bytes. A collision only mislabels a candidate's frequency (a
    /// chunking choice); chunk identity is still the store's cryptographic fingerprint.
    Rolling,
}

impl CandidateKey {
    pub fn name(self) -> &'static str {
        match self {
            CandidateKey::Blake3 => "blake3",
            CandidateKey::Rolling => "rolling",
        }
    }
}

impl FbcParams {
    pub fn paper() -> FbcParams {
        FbcParams {
            tttd: TttdParams::paper(),
            sub_size: 512,
            sample_rate: 32,
            filters: 3,
            filter_bytes: 800 * 1024,
            threshold: 5,
            key: CandidateKey::Blake3,
        }
    }

    pub fn validate(&self) -> Result<(), Error> {
        self.tttd.validate()?;
        let e = |m: String| Err(Error::config(format!("fbc: {m}")));
        if self.sub_size == 0 {
            return e("frequent chunk size must be at least 1 byte".into());
        }
        if self.sub_size > 1 << 20 {
            return e(format!("frequent chunk size {} is too large (at most 1m)", self.sub_size));
        }
        if self.sub_size > self.tttd.max {
            return e(format!(
                "frequent chunk size ({}) is larger than TTTD's Tmax ({}): no coarse chunk could hold a candidate",
                self.sub_size, self.tttd.max
            ));
        }
        if self.sample_rate == 0 {
            return e("sample rate must be at least 1 (1 = every candidate)".into());
        }
        if self.filters == 0 || self.filters > 16 {
            return e(format!("number of Bloom filters must be 1..=16 (got {})", self.filters));
        }
        if self.filter_bytes < 8 || self.filter_bytes > 512 << 20 {
            return e(format!("Bloom filter size must be 8 bytes..512m (got {})", self.filter_bytes));
        }
        if self.threshold < 2 {
            return e(format!("frequency threshold must be at least 2 (got {})", self.threshold));
        }
        Ok(())
    }
}

impl Default for FbcParams {
    fn default() -> Self {
        FbcParams::paper()
    }
}

/// How the second stage runs: the report's master thread (TTTD, plus, here, the ordered commit)
/// and a pool of `workers` FBC threads with `buffers` coarse chunks in flight.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Workers {
    /// FBC worker threads; 0 = single stream (everything on the calling thread). Without the
    /// `parallel` feature any value runs single stream (the results are the same).
    pub workers: usize,
    /// Coarse chunks in flight at once; 0 = the report's default, `max(2 * workers, 6)`.
    pub buffers: usize,
}

impl Workers {
    pub fn single() -> Workers {
        Workers { workers: 0, buffers: 0 }
    }
    pub fn threads(workers: usize) -> Workers {
        Workers { workers, buffers: 0 }
    }
    /// The buffers a parallel run uses: `buffers`, or the default `max(2 * workers, 6)`.
    pub fn buffers_or_default(self) -> usize {
        if self.buffers == 0 {
            (2 * self.workers).max(6)
        } else {
            self.buffers
        }
    }
}

/// What a run did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RunStats {
    /// Bytes processed.
    pub bytes: u64,
    /// TTTD coarse chunks.
    pub coarse_chunks: u64,
    /// Candidates that passed prefiltering (sampled).
    pub sampled: u64,
    /// Pass 1: sampled candidates absorbed by the Bloom filters (first sightings).
    pub filtered: u64,
    /// Pass 1: sampled candidates counted in the table.
    pub counted: u64,
    /// Pass 2: frequent sub-chunks cut out.
    pub frequent_cut: u64,
    /// Worker threads actually used (0 = single stream).
    pub workers: usize,
    /// Buffers (coarse chunks in flight) used.
    pub buffers: usize,
    /// Times the master found no free buffer and waited for a worker (the report's wait count
    /// on queue 1).
    pub master_waits: u64,
}

/// One FBC chunk.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FbcChunk {
    pub offset: u64,
    pub length: usize,
    /// Whether this chunk is a frequent sub-chunk cut out by pass 2 (its length is then
    /// `sub_size`).
    pub frequent: bool,
}

/// A sampled candidate: its end offset in the input and its key.
#[derive(Clone, Copy, Debug)]
struct Sample {
    end: usize,
    key: Key,
}

/// The shared frequency state: the Bloom filters and the counting table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FrequencyState {
    filters: BloomFilters,
    /// Candidate id → sightings after the first (the first is absorbed by the filters).
    table: HashMap<u128, u32>,
}

impl FrequencyState {
    /// Entries in the counting table.
    pub fn table_len(&self) -> usize {
        self.table.len()
    }
    /// Entries whose estimated frequency reaches `threshold`.
    pub fn frequent_len(&self, threshold: u32) -> usize {
        self.table.values().filter(|&&c| c.saturating_add(1) >= threshold).count()
    }
    /// Fraction of Bloom filter bits set.
    pub fn filter_fill(&self) -> f64 {
        self.filters.ones() as f64 / self.filters.total_bits() as f64
    }
    fn estimate_key(&self, k: &Key) -> u32 {
        match self.table.get(&k.id) {
            Some(&c) => c.saturating_add(1),
            None => 0,
        }
    }
    fn commit(&mut self, samples: &[Sample], st: &mut RunStats) {
        for s in samples {
            if self.filters.contains(&s.key) {
                let c = self.table.entry(s.key.id).or_insert(0);
                *c = c.saturating_add(1);
                st.counted += 1;
            } else {
                self.filters.insert(&s.key);
                st.filtered += 1;
            }
        }
    }
}

/// The immutable part of FBC: the coarse chunker and the candidate scanner.
struct Scanner {
    tttd: Tttd,
    /// Sampling hash over `sub_size` bytes (TTTD's family).
    sub: Box<Tables>,
    /// The second rolling hash for [`CandidateKey::Rolling`] (the other family).
    other: Option<Box<Tables>>,
    sub_size: usize,
    sample: Divisor,
}

impl Scanner {
    /// The key of one candidate's bytes (`sub_size` of them).
    fn key_of(&self, bytes: &[u8]) -> Key {
        match &self.other {
            Some(o) => Key::rolling(self.sub.hash_window(bytes), o.hash_window(bytes)),
            None => Key::blake3(bytes),
        }
    }

    /// The sampled candidates (windows of `sub_size` bytes lying wholly inside the coarse chunk
    /// `data[base..base + chunk.len()]`), in order of their end offsets.
    fn sample(&self, chunk: &[u8], base: usize, out: &mut Vec<Sample>) {
        let w = self.sub_size;
        if chunk.len() < w {
            return;
        }
        let t = &*self.sub;
        let mut h = t.hash_window(&chunk[..w]);
        let mut e = w;
        match &self.other {
            None => loop {
                if self.sample.hit(h) {
                    out.push(Sample { end: base + e, key: Key::blake3(&chunk[e - w..e]) });
                }
                if e == chunk.len() {
                    break;
                }
                h = t.roll(h, chunk[e - w], chunk[e]);
                e += 1;
            },
            Some(o) => {
                let mut g = o.hash_window(&chunk[..w]);
                loop {
                    if self.sample.hit(h) {
                        out.push(Sample { end: base + e, key: Key::rolling(h, g) });
                    }
                    if e == chunk.len() {
                        break;
                    }
                    h = t.roll(h, chunk[e - w], chunk[e]);
                    g = o.roll(g, chunk[e - w], chunk[e]);
                    e += 1;
                }
            }
        }
    }
}

/// Frequency-based chunking over TTTD coarse chunks.
///
/// Pass 1 ([`Fbc::observe`]) feeds data — one or many files, in order — into the frequency
/// state; pass 2 ([`Fbc::chunk`]) cuts data using that state. Both take a [`Workers`] setting;
/// results do not depend on it. Each call chunks its slice from the start (TTTD begins afresh),
/// so call them once per file, as the report feeds one tarball after another.
pub struct Fbc {
    params: FbcParams,
    scan: Scanner,
    state: FrequencyState,
}

impl Fbc {
    pub fn new(params: FbcParams) -> Result<Fbc, Error> {
        params.validate()?;
        let tttd = Tttd::new(params.tttd.clone())?;
        let sub = rolling_tables(params.tttd.family, params.sub_size)?;
        let other = match params.key {
            CandidateKey::Blake3 => None,
            CandidateKey::Rolling => {
                let f = if params.tttd.family == Family::Rabin { Family::Crc32 } else { Family::Rabin };
                Some(rolling_tables(f, params.sub_size)?)
            }
        };
        let scan = Scanner { tttd, sub, other, sub_size: params.sub_size, sample: Divisor::new(params.sample_rate) };
        let state = FrequencyState { filters: BloomFilters::new(params.filters, params.filter_bytes), table: HashMap::new() };
        Ok(Fbc { params, scan, state })
    }

    pub fn params(&self) -> &FbcParams {
        &self.params
    }

    pub fn tttd(&self) -> &Tttd {
        &self.scan.tttd
    }

    pub fn state(&self) -> &FrequencyState {
        &self.state
    }

    /// Estimated frequency of the candidate made of `bytes` (`sub_size` of them; 0 when never
    /// counted, or when `bytes` has another length).
    pub fn estimate(&self, bytes: &[u8]) -> u32 {
        if bytes.len() != self.params.sub_size {
            return 0;
        }
        self.state.estimate_key(&self.scan.key_of(bytes))
    }

    /// Clears the frequency state.
    pub fn reset(&mut self) {
        self.state.filters = BloomFilters::new(self.params.filters, self.params.filter_bytes);
        self.state.table.clear();
    }

    /// Pass 1: TTTD coarse chunks on this thread; sampling and fingerprinting of candidates on
    /// the workers; Bloom filter and counting table updates in stream order on this thread.
    pub fn observe(&mut self, data: &[u8], workers: Workers) -> Result<RunStats, Error> {
        let scan = &self.scan;
        let state = &mut self.state;
        let mut st = RunStats::default();
        let job = |s: usize, e: usize| {
            let mut v = Vec::new();
            scan.sample(&data[s..e], s, &mut v);
            v
        };
        let mut sink = |v: Vec<Sample>, st: &mut RunStats| {
            st.sampled += v.len() as u64;
            state.commit(&v, st);
        };
        pipeline(&scan.tttd, data, workers, &job, &mut sink, &mut st)?;
        Ok(st)
    }

    /// Pass 2: the chunks of `data`. Each coarse chunk is scanned for sampled candidates that
    /// are frequent; from left to right, each frequent candidate that does not overlap the one
    /// chosen before it becomes a chunk, and the bytes between them become chunks.
    pub fn chunk(&self, data: &[u8], workers: Workers) -> Result<(Vec<FbcChunk>, RunStats), Error> {
        let scan = &self.scan;
        let state = &self.state;
        let threshold = self.params.threshold;
        let w = self.params.sub_size;
        let job = |s: usize, e: usize| {
            let mut samples = Vec::new();
            scan.sample(&data[s..e], s, &mut samples);
            let mut out = Vec::new();
            let mut last = s;
            for c in &samples {
                let start = c.end - w;
                if start < last || state.estimate_key(&c.key) < threshold {
                    continue;
                }
                if start > last {
                    out.push(FbcChunk { offset: last as u64, length: start - last, frequent: false });
                }
                out.push(FbcChunk { offset: start as u64, length: w, frequent: true });
                last = c.end;
            }
            if e > last {
                out.push(FbcChunk { offset: last as u64, length: e - last, frequent: false });
            }
            (samples.len() as u64, out)
        };
        let mut chunks = Vec::new();
        let mut sink = |(n, v): (u64, Vec<FbcChunk>), st: &mut RunStats| {
            st.sampled += n;
            st.frequent_cut += v.iter().filter(|c| c.frequent).count() as u64;
            chunks.extend_from_slice(&v);
        };
        let mut st = RunStats::default();
        pipeline(&scan.tttd, data, workers, &job, &mut sink, &mut st)?;
        Ok((chunks, st))
    }

    /// Both passes over one input: observe, then chunk.
    pub fn observe_and_chunk(&mut self, data: &[u8], workers: Workers) -> Result<Vec<FbcChunk>, Error> {
        self.observe(data, workers)?;
        Ok(self.chunk(data, workers)?.0)
    }
}

/// Runs `job` on every TTTD coarse chunk `[s, e)` of `data` and hands the results to `sink` in
/// stream order. Single stream: one after the other on this thread. With workers: this thread
/// runs TTTD and the sink, a rayon pool of `workers` threads runs the jobs, at most `buffers`
/// coarse chunks are in flight (dispatched, not yet sunk).
fn pipeline<T: Send>(
    tttd: &Tttd,
    data: &[u8],
    workers: Workers,
    job: &(dyn Fn(usize, usize) -> T + Sync),
    sink: &mut dyn FnMut(T, &mut RunStats),
    st: &mut RunStats,
) -> Result<(), Error> {
    st.bytes = data.len() as u64;
    #[cfg(feature = "parallel")]
    if workers.workers > 0 {
        return pipeline_parallel(tttd, data, workers, job, sink, st);
    }
    let _ = workers;
    let mut s = 0;
    for e in tttd.iter(data) {
        st.coarse_chunks += 1;
        let r = job(s, e);
        sink(r, st);
        s = e;
    }
    Ok(())
}

#[cfg(feature = "parallel")]
fn pipeline_parallel<T: Send>(
    tttd: &Tttd,
    data: &[u8],
    workers: Workers,
    job: &(dyn Fn(usize, usize) -> T + Sync),
    sink: &mut dyn FnMut(T, &mut RunStats),
    st: &mut RunStats,
) -> Result<(), Error> {
    use std::collections::BTreeMap;
    use std::panic::{catch_unwind, AssertUnwindSafe};
    use std::sync::mpsc;

    let buffers = workers.buffers_or_default();
    st.workers = workers.workers;
    st.buffers = buffers;
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(workers.workers)
        .thread_name(|i| format!("cutpoint-fbc-{i}"))
        .build()
        .map_err(|e| Error::config(format!("fbc: cannot start {} worker threads: {e}", workers.workers)))?;
    // A job sends (sequence number, result); None if it panicked (a bug, reported as an error
    // rather than a hang).
    let (tx, rx) = mpsc::channel::<(u64, Option<T>)>();
    let mut q = Reorder { ahead: BTreeMap::new(), next: 0, broken: false };
    pool.in_place_scope_fifo(|scope| {
        let mut dispatched = 0u64;
        let mut s = 0;
        for e in tttd.iter(data) {
            st.coarse_chunks += 1;
            // Reclaim the buffers that are done, then wait while none is free.
            while let Ok(m) = rx.try_recv() {
                q.accept(m, sink, st);
            }
            while !q.broken && dispatched - q.next >= buffers as u64 {
                st.master_waits += 1;
                match rx.recv() {
                    Ok(m) => q.accept(m, sink, st),
                    Err(_) => q.broken = true,
                }
            }
            if q.broken {
                break;
            }
            let tx = tx.clone();
            let seq = dispatched;
            let (s0, e0) = (s, e);
            scope.spawn_fifo(move |_| {
                let r = catch_unwind(AssertUnwindSafe(|| job(s0, e0))).ok();
                let _ = tx.send((seq, r));
            });
            dispatched += 1;
            s = e;
        }
        while !q.broken && q.next < dispatched {
            match rx.recv() {
                Ok(m) => q.accept(m, sink, st),
                Err(_) => q.broken = true,
            }
        }
    });
    if q.broken {
        return Err(Error::config("fbc: a worker thread failed".to_string()));
    }
    Ok(())
}

/// Puts results back in stream order before they reach the sink.
#[cfg(feature = "parallel")]
struct Reorder<T> {
    ahead: std::collections::BTreeMap<u64, T>,
    /// Sequence number of the next result the sink takes.
    next: u64,
    broken: bool,
}

#[cfg(feature = "parallel")]
impl<T> Reorder<T> {
    fn accept(&mut self, (seq, r): (u64, Option<T>), sink: &mut dyn FnMut(T, &mut RunStats), st: &mut RunStats) {
        let Some(r) = r else {
            self.broken = true;
            return;
        };
        if self.broken {
            return;
        }
        self.ahead.insert(seq, r);
        while let Some(r) = self.ahead.remove(&self.next) {
            sink(r, st);
            self.next += 1;
        }
    }
}
