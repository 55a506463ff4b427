//! Test harness shared by the integration tests: the backend list (with a note of what was
//! skipped), engine construction, readers that return pieces of given sizes or fail, and the
//! checks every engine must pass against the reference.
#![allow(dead_code)]

pub mod fuzz_case;
pub mod vectors;

use cutpoint_core::backend::{self, Backend};
use cutpoint_core::{Engine, HashAlg, Options, Profile};
use std::io::{self, Read, Write};
use std::sync::Once;

/// Every backend this CPU supports. The first call in a test binary writes (to stderr, not
/// captured by the test harness) which backends run and which are skipped, and why.
pub fn backends() -> Vec<Backend> {
    static NOTE: Once = Once::new();
    let avail = backend::available();
    NOTE.call_once(|| {
        let skipped: Vec<String> = backend::ALL
            .iter()
            .filter(|b| !avail.contains(b))
            .map(|b| {
                let why = if *b == Backend::Simd128 { "wasm32+simd128 only" } else { "CPU lacks it or kernel not built" };
                format!("{} ({why})", b.name())
            })
            .collect();
        let _ = writeln!(
            io::stderr(),
            "\n[cutpoint tests] backends tested: {}; skipped: {}",
            avail.iter().map(|b| b.name()).collect::<Vec<_>>().join(", "),
            if skipped.is_empty() { "none".to_string() } else { skipped.join(", ") }
        );
    });
    assert!(avail.contains(&Backend::Scalar) && avail.contains(&Backend::Interleaved), "portable backends missing");
    avail
}

/// One engine configuration.
#[derive(Clone, Debug)]
pub struct Config {
    pub backend: Backend,
    pub threads: usize,
    pub lane_segment: Option<usize>,
    pub span: usize,
}

impl Config {
    pub fn engine(&self, p: &Profile, hash: HashAlg) -> Engine {
        Engine::new(
            p.clone(),
            Options { backend: Some(self.backend), threads: self.threads, lane_segment: self.lane_segment, span: self.span, hash },
        )
        .unwrap_or_else(|e| panic!("{self:?}: Engine::new failed: {e}"))
    }
}

/// A reader over `data` whose successive `read` calls return at most `sizes[0]`, `sizes[1]`, ...
/// bytes (cycling). A size of 0 returns `ErrorKind::Interrupted` once (the stream must retry).
pub struct Pieces<'a> {
    data: std::borrow::Cow<'a, [u8]>,
    pos: usize,
    sizes: Vec<usize>,
    i: usize,
    pub calls: usize,
}

impl<'a> Pieces<'a> {
    pub fn new(data: &'a [u8], sizes: &[usize]) -> Self {
        let sizes = if sizes.iter().all(|&s| s == 0) { vec![1] } else { sizes.to_vec() };
        Pieces { data: data.into(), pos: 0, sizes, i: 0, calls: 0 }
    }

    /// The same over a copy of `data` (for readers that must be `'static`).
    pub fn owned(data: &[u8], sizes: &[usize]) -> Pieces<'static> {
        let p = Pieces::new(&[], sizes);
        Pieces { data: data.to_vec().into(), ..p }
    }
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.calls += 1;
        let want = self.sizes[self.i % self.sizes.len()];
        self.i += 1;
        if want == 0 {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "test: interrupted"));
        }
        let k = want.min(buf.len()).min(self.data.len() - self.pos);
        buf[..k].copy_from_slice(&self.data[self.pos..self.pos + k]);
        self.pos += k;
        Ok(k)
    }
}

/// A reader that yields `ok_bytes` bytes of `data` (in pieces of `piece`) and then fails.
pub struct FailAfter<'a> {
    pub inner: Pieces<'a>,
    pub ok_bytes: usize,
    pub given: usize,
}

impl Read for FailAfter<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.given >= self.ok_bytes {
            return Err(io::Error::new(io::ErrorKind::BrokenPipe, "test: the disk caught fire"));
        }
        let lim = (self.ok_bytes - self.given).min(buf.len());
        let k = self.inner.read(&mut buf[..lim])?;
        self.given += k;
        Ok(k)
    }
}

/// Checks the chunking invariants of `cuts` for an input of `n` bytes: strictly increasing
/// (so chunks are non-empty and contiguous), last = n (every byte covered), each chunk at most
/// MAX and at least MIN except the last.
pub fn check_invariants(p: &Profile, n: usize, cuts: &[usize]) -> Result<(), String> {
    if n == 0 {
        return if cuts.is_empty() { Ok(()) } else { Err(format!("empty input gave cuts {cuts:?}")) };
    }
    if cuts.last() != Some(&n) {
        return Err(format!("last cut {:?} != input length {n}", cuts.last()));
    }
    let mut s = 0;
    for (i, &e) in cuts.iter().enumerate() {
        if e <= s {
            return Err(format!("chunk {i}: cut {e} not after {s} (empty or backwards)"));
        }
        let len = e - s;
        if len > p.max {
            return Err(format!("chunk {i} [{s},{e}) is {len} > MAX {}", p.max));
        }
        if len < p.min && i + 1 != cuts.len() {
            return Err(format!("chunk {i} [{s},{e}) is {len} < MIN {} and not the last", p.min));
        }
        s = e;
    }
    Ok(())
}

/// Chunks a stream read in pieces of `sizes`; checks offsets are contiguous; returns the cuts.
pub fn stream_cuts(e: &Engine, data: &[u8], sizes: &[usize]) -> Result<Vec<usize>, String> {
    checked_stream_cuts(e, data, e.stream(Pieces::new(data, sizes)))
}

/// The same through [`Engine::stream_prefetch`] (reading on a thread of its own).
pub fn prefetch_cuts(e: &Engine, data: &[u8], sizes: &[usize]) -> Result<Vec<usize>, String> {
    checked_stream_cuts(e, data, e.stream_prefetch(Pieces::owned(data, sizes)))
}

fn checked_stream_cuts(
    e: &Engine,
    data: &[u8],
    chunks: impl Iterator<Item = Result<cutpoint_core::Chunk, cutpoint_core::Error>>,
) -> Result<Vec<usize>, String> {
    let mut cuts = Vec::new();
    let mut at = 0u64;
    for c in chunks {
        let c = c.map_err(|err| format!("stream error: {err}"))?;
        if c.offset != at {
            return Err(format!("stream chunk at {} but previous ended at {at}", c.offset));
        }
        check_hash(e.hash_alg(), data, c.offset as usize, c.length, c.hash)?;
        at += c.length as u64;
        cuts.push(at as usize);
    }
    Ok(cuts)
}

/// Chunks a slice through the `chunks()` iterator; checks contiguity and fingerprints.
pub fn iter_cuts(e: &Engine, data: &[u8]) -> Result<Vec<usize>, String> {
    let mut cuts = Vec::new();
    let mut at = 0u64;
    for c in e.chunks(data) {
        if c.offset != at {
            return Err(format!("chunks(): chunk at {} but previous ended at {at}", c.offset));
        }
        check_hash(e.hash_alg(), data, c.offset as usize, c.length, c.hash)?;
        at += c.length as u64;
        cuts.push(at as usize);
    }
    Ok(cuts)
}

fn check_hash(alg: HashAlg, data: &[u8], off: usize, len: usize, got: Option<[u8; 32]>) -> Result<(), String> {
    let want = alg.digest(&data[off..off + len]);
    if got != want {
        return Err(format!("fingerprint of chunk at {off} (+{len}) wrong: {got:?} != {want:?} ({})", alg.name()));
    }
    Ok(())
}

/// Runs `cuts()`, `chunks()` and `stream()` (pieces of `sizes`) of one engine and compares each
/// with `want`. The error names the first differing cut.
pub fn check_engine(e: &Engine, data: &[u8], want: &[usize], sizes: &[usize]) -> Result<(), String> {
    let cmp = |what: &str, got: Vec<usize>| -> Result<(), String> {
        if got == want {
            return Ok(());
        }
        let i = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(got.len().min(want.len()));
        Err(format!(
            "{what}: {} cuts vs reference {}; first difference at index {i}: got {:?}, want {:?}",
            got.len(),
            want.len(),
            got.get(i),
            want.get(i)
        ))
    };
    cmp("cuts()", e.cuts(data))?;
    cmp("chunks()", iter_cuts(e, data)?)?;
    cmp(&format!("stream(read sizes {sizes:?})"), stream_cuts(e, data, sizes)?)?;
    cmp(&format!("stream_prefetch(read sizes {sizes:?})"), prefetch_cuts(e, data, sizes)?)?;
    Ok(())
}
