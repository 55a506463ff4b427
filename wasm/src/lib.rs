//! WebAssembly bindings over `cutpoint-core`: no chunking logic of its own.
//!
//! The boundary is narrow, so that a call costs no more than a copy and no object per chunk
//! crosses it: each object owns one preallocated input buffer in
//! wasm memory; JavaScript copies (or reads a file straight) into the view at `inputPtr()` and
//! calls a method with lengths; results come back as typed arrays (`Uint32Array` candidate
//! offsets, `Float64Array` cut offsets, a `Uint8Array` of concatenated digests).
//!
//! * [`Stage1`] — stage 1 of the core (the chosen kernel) over one slice of a file: the bytes
//!   `[a - W, b)` give the candidates of the positions `[a, b)`, independently of every other
//!   slice. Workers run this.
//! * [`Stage2`] — the core's stage-2 `Selector`, fed the slices' candidates in file order. The
//!   coordinator runs this.
//! * [`Hasher`] — BLAKE3 / SHA-256 of consecutive chunks, from the core's fingerprint code.
//! * [`RapidTable`] / [`RapidRun`] — the core's RapidCDC: hint table (recipes and hint-cache
//!   bytes in the native formats) and a run over one input pushed in pieces.

use cutpoint_core::rolling::Tables;
use cutpoint_core::backend::{self, Backend};
use cutpoint_core::profile::Family;
use cutpoint_core::stage1::Stage1Fn;
use cutpoint_core::stage2::{bits_from_offsets, Bits, Selector};
use cutpoint_core::{HashAlg, Profile};
use std::fmt::Display;
use wasm_bindgen::prelude::*;

const SIMD: bool = cfg!(target_feature = "simd128");

fn err(e: impl Display) -> JsError {
    JsError::new(&e.to_string())
}

/// `cutpoint-wasm/VERSION/simd128` or `.../plain`: saved state carries it.
#[wasm_bindgen(js_name = buildId)]
pub fn build_id() -> String {
    format!("cutpoint-wasm/{}/{}", env!("CARGO_PKG_VERSION"), if SIMD { "simd128" } else { "plain" })
}

/// Stage-1 backends of this build, lowest tier first: the core's registry
/// (`cutpoint_core::backend`), filtered to what this module can run.
#[wasm_bindgen]
pub fn backends() -> Vec<String> {
    backend::available().iter().map(|b| b.name().to_string()).collect()
}

/// The backend used when none is asked for, for `profile`'s family (default: the default
/// profile's, gear): the core's choice (`backend::fastest`), which on wasm, where nothing can
/// be timed, is the first of the core's preference order that this build has.
#[wasm_bindgen(js_name = defaultBackend)]
pub fn default_backend(profile: Option<String>) -> Result<String, JsError> {
    let family = match profile {
        Some(p) if !p.trim().is_empty() => parse(&p)?.family,
        _ => Family::Gear,
    };
    Ok(backend::fastest(family).name().to_string())
}

fn kernel(name: &str, family: Family) -> Result<(Stage1Fn, &'static str), JsError> {
    let name = name.trim().to_ascii_lowercase();
    if name.is_empty() || name == "auto" {
        let b = backend::fastest(family);
        return Ok((b.stage1_kernel().ok_or_else(|| err(format!("backend '{b}' cannot run here")))?, b.name()));
    }
    match backend::ALL.iter().copied().find(|b| b.name() == name) {
        Some(b) => match b.stage1_kernel() {
            Some(k) => Ok((k, b.name())),
            None if b == Backend::Simd128 => {
                Err(err("backend 'simd128' is not in this build (plain wasm); load the simd128 build"))
            }
            None => Err(err(format!("backend '{name}' is native only (this build has: {})", backends().join(", ")))),
        },
        None => Err(err(format!("unknown backend '{name}' (known: {})", backends().join(", ")))),
    }
}

fn parse(profile: &str) -> Result<Profile, JsError> {
    profile.parse::<Profile>().map_err(err)
}

/// A parsed, validated profile.
#[wasm_bindgen]
pub struct ProfileInfo {
    p: Profile,
}

#[wasm_bindgen]
impl ProfileInfo {
    #[wasm_bindgen(getter)]
    pub fn canonical(&self) -> String {
        self.p.to_string()
    }
    #[wasm_bindgen(getter)]
    pub fn family(&self) -> String {
        self.p.family.name().to_string()
    }
    #[wasm_bindgen(getter)]
    pub fn window(&self) -> usize {
        self.p.window
    }
    #[wasm_bindgen(getter)]
    pub fn min(&self) -> usize {
        self.p.min
    }
    #[wasm_bindgen(getter)]
    pub fn avg(&self) -> usize {
        self.p.avg
    }
    #[wasm_bindgen(getter)]
    pub fn max(&self) -> usize {
        self.p.max
    }
    #[wasm_bindgen(getter, js_name = twoClasses)]
    pub fn two_classes(&self) -> bool {
        self.p.two_classes()
    }
}

/// Parses a profile string (`gear:2k:8k:64k`, ...); the error says what is wrong.
#[wasm_bindgen(js_name = parseProfile)]
pub fn parse_profile(profile: &str) -> Result<ProfileInfo, JsError> {
    Ok(ProfileInfo { p: parse(profile)? })
}

/// Stage 1 over one slice of a file.
#[wasm_bindgen]
pub struct Stage1 {
    tables: Box<Tables>,
    kernel: Stage1Fn,
    backend: &'static str,
    two: bool,
    input: Vec<u8>,
    strict: Vec<u64>,
    loose: Vec<u64>,
    positions: usize,
}

#[wasm_bindgen]
impl Stage1 {
    /// `backend`: "" for the build's default; `capacity`: the largest slice in bytes.
    #[wasm_bindgen(constructor)]
    pub fn new(profile: &str, backend: &str, capacity: usize) -> Result<Stage1, JsError> {
        let p = parse(profile)?;
        let (kernel, backend) = kernel(backend, p.family)?;
        Ok(Stage1 {
            tables: Tables::new(&p),
            kernel,
            backend,
            two: p.two_classes(),
            input: vec![0; capacity],
            strict: Vec::new(),
            loose: Vec::new(),
            positions: 0,
        })
    }

    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        self.backend.to_string()
    }

    /// Address of the input buffer in wasm memory (re-read it after any call: memory may grow).
    #[wasm_bindgen(js_name = inputPtr)]
    pub fn input_ptr(&mut self) -> *mut u8 {
        self.input.as_mut_ptr()
    }

    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> usize {
        self.input.len()
    }

    /// `input[..len]` holds the file bytes `[s, s + len)`. Finds the candidates of the positions
    /// `[s + p, s + q)` (`q <= len`), cutting them into lane segments of `lane_segment`
    /// bytes for the kernel's lanes (0: let the kernel split). `p` must be at least the window unless `s` is
    /// the start of the file (positions before the window are never candidates).
    pub fn scan(&mut self, len: usize, p: usize, q: usize, lane_segment: usize) -> Result<(), JsError> {
        let w = self.tables.window;
        if len > self.input.len() || p > q || q > len {
            return Err(err(format!("stage 1: bad slice (len {len}, positions {p}..{q}, capacity {})", self.input.len())));
        }
        let n = q - p;
        let words = n.div_ceil(64);
        self.strict.clear();
        self.strict.resize(words, 0);
        self.loose.clear();
        if self.two {
            self.loose.resize(words, 0);
        }
        self.positions = n;
        let lo = p.max(w);
        if lo < q {
            let mut segs = Vec::new();
            let seg = if lane_segment == 0 { q - lo } else { lane_segment };
            let mut a = lo;
            while a < q {
                let b = (a + seg).min(q);
                segs.push(a..b);
                a = b;
            }
            // SAFETY: the kernel comes from `kernel()`, which only names kernels compiled into
            // this build (simd128 only when the module was built with +simd128, and a module
            // with simd128 instructions only validates on engines that have them); every
            // segment lies in [W, len] and the bitmaps cover [p, q). The kernel re-checks.
            unsafe { (self.kernel)(&self.tables, &self.input[..len], &segs, p, &mut self.strict, &mut self.loose) };
        }
        Ok(())
    }

    /// Candidates of the last scan (the strict class, or the only class), as offsets from `p`.
    #[wasm_bindgen(js_name = strictOffsets)]
    pub fn strict_offsets(&self) -> Vec<u32> {
        offsets(&self.strict)
    }

    /// Loose-class candidates of the last scan (empty for one-class profiles).
    #[wasm_bindgen(js_name = looseOffsets)]
    pub fn loose_offsets(&self) -> Vec<u32> {
        offsets(&self.loose)
    }
}

fn offsets(words: &[u64]) -> Vec<u32> {
    let mut v = Vec::new();
    for (i, &w) in words.iter().enumerate() {
        let mut w = w;
        while w != 0 {
            v.push((i * 64) as u32 + w.trailing_zeros());
            w &= w - 1;
        }
    }
    v
}

/// Stage 2, fed slices in file order.
#[wasm_bindgen]
pub struct Stage2 {
    p: Profile,
    sel: Selector,
    /// Absolute offset of the selector's position 0 (wasm32 `usize` is 32 bits, files are not).
    base: u64,
    next: u64,
    strict: Vec<u64>,
    loose: Vec<u64>,
    out: Vec<usize>,
}

const REBASE: usize = 1 << 30;

#[wasm_bindgen]
impl Stage2 {
    #[wasm_bindgen(constructor)]
    pub fn new(profile: &str) -> Result<Stage2, JsError> {
        let p = parse(profile)?;
        let sel = Selector::new(p.min, p.avg, p.max, p.two_classes());
        Ok(Stage2 { p, sel, base: 0, next: 0, strict: Vec::new(), loose: Vec::new(), out: Vec::new() })
    }

    /// The candidates of the positions `[p, q)` (offsets from `p`, as [`Stage1`] returns them);
    /// `p` is where the previous call ended (0 first). Returns the cuts they decide.
    pub fn feed(&mut self, p: f64, q: f64, strict: &[u32], loose: &[u32]) -> Result<Vec<f64>, JsError> {
        let (p, q) = (p as u64, q as u64);
        if p != self.next || q < p || q - p > (1 << 31) {
            return Err(err(format!("stage 2: slices out of order (expected {}, got {p}..{q})", self.next)));
        }
        if self.sel.start() >= REBASE {
            // The selector keeps only the current chunk's start: a fresh one at 0 is the same
            // state, shifted.
            self.base += self.sel.start() as u64;
            self.sel = Selector::new(self.p.min, self.p.avg, self.p.max, self.p.two_classes());
        }
        let n = (q - p) as usize;
        let outside = |o: usize| err(format!("stage 2: candidate offset {o} outside a slice of {n}"));
        bits_from_offsets(&mut self.strict, n, strict).map_err(outside)?;
        bits_from_offsets(&mut self.loose, n, loose).map_err(outside)?;
        let rp = (p - self.base) as usize;
        let rq = (q - self.base) as usize;
        self.out.clear();
        self.sel.select(Bits { words: &self.strict, origin: rp }, Bits { words: &self.loose, origin: rp }, rp, rq, &mut self.out);
        self.next = q;
        Ok(self.out.iter().map(|&c| (c as u64 + self.base) as f64).collect())
    }

    /// End of input at `n`: the last cut, if any.
    pub fn finish(&mut self, n: f64) -> Result<Vec<f64>, JsError> {
        let n = n as u64;
        if n != self.next {
            return Err(err(format!("stage 2: finished at {n} but fed up to {}", self.next)));
        }
        self.out.clear();
        self.sel.finish((n - self.base) as usize, &mut self.out);
        Ok(self.out.iter().map(|&c| (c as u64 + self.base) as f64).collect())
    }

    /// Start of the chunk not yet cut (absolute).
    #[wasm_bindgen(getter)]
    pub fn start(&self) -> f64 {
        (self.sel.start() as u64 + self.base) as f64
    }
}

fn alg(name: &str) -> Result<HashAlg, JsError> {
    HashAlg::parse(name).map_err(err)
}

/// Fingerprints of consecutive chunks.
#[wasm_bindgen]
pub struct Hasher {
    alg: HashAlg,
    input: Vec<u8>,
}

#[wasm_bindgen]
impl Hasher {
    #[wasm_bindgen(constructor)]
    pub fn new(alg_name: &str, capacity: usize) -> Result<Hasher, JsError> {
        let a = alg(alg_name)?;
        if a == HashAlg::None {
            return Err(err("hash 'none' has no digests"));
        }
        Ok(Hasher { alg: a, input: vec![0; capacity] })
    }
    #[wasm_bindgen(js_name = inputPtr)]
    pub fn input_ptr(&mut self) -> *mut u8 {
        self.input.as_mut_ptr()
    }
    #[wasm_bindgen(getter)]
    pub fn capacity(&self) -> usize {
        self.input.len()
    }
    /// Grows the buffer to at least `capacity` bytes (never shrinks).
    pub fn reserve(&mut self, capacity: usize) {
        if capacity > self.input.len() {
            self.input.resize(capacity, 0);
        }
    }
    /// `input` holds consecutive chunks of these lengths; returns their digests, 32 bytes each.
    pub fn digests(&mut self, lengths: &[u32]) -> Result<Vec<u8>, JsError> {
        let total: usize = lengths.iter().map(|&l| l as usize).sum();
        if total > self.input.len() {
            return Err(err(format!("hash: {total} bytes of chunks exceed the buffer ({})", self.input.len())));
        }
        let mut out = Vec::with_capacity(lengths.len() * 32);
        let mut a = 0;
        for &l in lengths {
            let b = a + l as usize;
            out.extend_from_slice(&self.alg.digest(&self.input[a..b]).expect("not none"));
            a = b;
        }
        Ok(out)
    }
}

/// One digest of `bytes` (copies them in; for small inputs and benchmarks).
#[wasm_bindgen]
pub fn digest(alg_name: &str, bytes: &[u8]) -> Result<Vec<u8>, JsError> {
    alg(alg_name)?.digest(bytes).map(|d| d.to_vec()).ok_or_else(|| err("hash 'none' has no digests"))
}

/// Cut offsets of `bytes` by the core's sequential reference chunker (tests only).
#[wasm_bindgen(js_name = referenceCuts)]
pub fn reference_cuts(profile: &str, bytes: &[u8]) -> Result<Vec<f64>, JsError> {
    Ok(cutpoint_core::reference_cuts(&parse(profile)?, bytes).into_iter().map(|c| c as f64).collect())
}

// ---- RapidCDC -------------------------------------------------------------------------------
//
// The core's RapidCDC (`cutpoint_core::rapid`) as is: the hint table with its recipe and cache
// formats (the bytes the native CLI reads and writes), and a run over one input pushed in
// pieces (`Rapid::feed`). Hint tests, the SS-CDC fallback (stage 1 + stage 2 of the core's
// engine, one thread, this build's kernel) and fingerprints all run in this wasm instance.

use cutpoint_core::rapid::{Criterion, FeedSource, HintTable, Rapid, RapidChunker, RapidOptions, RapidStats, Recipe, RecipeEntry};
use cutpoint_core::{Engine, Options};

fn rapid_alg(name: &str) -> Result<HashAlg, JsError> {
    let a = alg(name)?;
    if a == HashAlg::None {
        return Err(err("RapidCDC needs chunk fingerprints: use blake3 or sha256, not 'none'"));
    }
    Ok(a)
}

/// A hint table (fingerprint → LRU list of next-chunk size + marker byte) for one profile and
/// fingerprint algorithm. A [`RapidRun`] borrows it for the length of one input.
#[wasm_bindgen]
pub struct RapidTable {
    t: Option<HintTable>,
    profile: String,
    hash: &'static str,
    list_len: usize,
}

#[wasm_bindgen]
impl RapidTable {
    /// `max_entries`: bound on fingerprints kept (least recently used evicted); 0 = none.
    #[wasm_bindgen(constructor)]
    pub fn new(profile: &str, hash: &str, list_len: usize, max_entries: usize) -> Result<RapidTable, JsError> {
        let p = parse(profile)?;
        let a = rapid_alg(hash)?;
        let mut t = HintTable::new(&p, a, list_len).map_err(err)?;
        t.set_max_entries(max_entries);
        Ok(RapidTable { t: Some(t), profile: p.to_string(), hash: a.name(), list_len })
    }

    fn table(&mut self) -> Result<&mut HintTable, JsError> {
        self.t.as_mut().ok_or_else(|| err("the hint table is in use by a running chunker"))
    }

    #[wasm_bindgen(getter)]
    pub fn profile(&self) -> String {
        self.profile.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn hash(&self) -> String {
        self.hash.to_string()
    }
    #[wasm_bindgen(getter, js_name = listLen)]
    pub fn list_len(&self) -> usize {
        self.list_len
    }
    /// Fingerprints in the table.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> Result<usize, JsError> {
        self.t.as_ref().map(|t| t.len()).ok_or_else(|| err("the hint table is in use by a running chunker"))
    }

    /// Adds a base file's recipe (the text `cutpoint stats --rapid ... --save-recipe` writes).
    /// A recipe for another profile or fingerprint is rejected and nothing is used. Returns its
    /// chunk count.
    #[wasm_bindgen(js_name = addRecipe)]
    pub fn add_recipe(&mut self, bytes: &[u8]) -> Result<usize, JsError> {
        // Bytes in memory: a malformed recipe is "recipe line N: ...", not a "read error".
        let r = Recipe::read(bytes).map_err(|e| match e {
            cutpoint_core::Error::Io(e) => err(e),
            other => err(other),
        })?;
        self.table()?.add_recipe(&r).map_err(err)?;
        Ok(r.entries.len())
    }

    /// Merges a hint cache (the bytes `cutpoint ... --hints FILE` writes). One made for another
    /// profile, fingerprint or format version, or damaged, is rejected and nothing is used.
    /// Returns the number of fingerprints read.
    #[wasm_bindgen(js_name = loadCache)]
    pub fn load_cache(&mut self, bytes: &[u8]) -> Result<usize, JsError> {
        self.table()?.read_cache(bytes).map_err(err)
    }

    /// The table as hint cache bytes, at most `max_bytes` (0 = no bound; the most recently used
    /// fingerprints are kept).
    #[wasm_bindgen(js_name = exportCache)]
    pub fn export_cache(&mut self, max_bytes: f64) -> Result<Vec<u8>, JsError> {
        let bound = (max_bytes > 0.0).then_some(max_bytes as u64);
        let mut out = Vec::new();
        self.table()?.write_cache(&mut out, bound).map_err(err)?;
        Ok(out)
    }
}

/// Hint cache format version this build reads and writes.
#[wasm_bindgen(js_name = hintCacheVersion)]
pub fn hint_cache_version() -> u32 {
    cutpoint_core::rapid::table::CACHE_VERSION
}

/// RapidCDC over one input pushed in pieces. JavaScript pushes bytes, then calls [`RapidRun::run`]
/// until it returns 0 (the run needs more bytes, or is done); chunks come back as typed arrays.
#[wasm_bindgen]
pub struct RapidRun {
    // Self-referential: `chunker` borrows `*rapid`, which borrows `*engine`. Both are boxed
    // (stable addresses), never touched directly while the chunker lives, and freed after it in
    // `release()` / `Drop`.
    chunker: Option<RapidChunker<'static, 'static, FeedSource>>,
    rapid: *mut Rapid<'static>,
    engine: *mut Engine,
    criterion: Criterion,
    /// Offsets are `usize` in the core (32 bits here): the input, plus what the chunker looks
    /// ahead (MAX and one block), must stay below 4 GiB.
    limit: f64,
    done: bool,
    recipe: Option<Vec<cutpoint_core::rapid::RapidChunk>>,
    offsets: Vec<f64>,
    lengths: Vec<u32>,
    digests: Vec<u8>,
    found: Vec<u8>,
}


#[wasm_bindgen]
impl RapidRun {
    /// Takes `table` for the run (give it back with [`RapidRun::finish`]); the core refuses a
    /// table of another profile or fingerprint than `profile` / `hash`. `criterion`: ff,
    /// ff+mt, ff+rwt, ff+rwt+fpt. `block`: the largest fallback block in positions — the native
    /// engine's block size (`cutpoint_core::Engine::block_size`: 1 MiB spans, 4 per thread, at
    /// most 16, at least one per thread); the same value gives the native CLI's boundaries.
    /// `backend`: "" for this build's fastest. `recipe`: keep this input's recipe.
    #[wasm_bindgen(constructor)]
    pub fn new(table: &mut RapidTable, profile: &str, hash: &str, criterion: &str, block: usize, backend: &str, recipe: bool) -> Result<RapidRun, JsError> {
        let criterion = Criterion::parse(criterion).map_err(err)?;
        let profile = parse(profile)?;
        let hash = rapid_alg(hash)?;
        let t = table.table()?;
        // Checked here too (as `Rapid::new` does) so that a refused table stays usable.
        if t.profile() != &profile {
            return Err(err(format!("the hint table is for profile {}, this run uses {profile}", t.profile())));
        }
        if t.hash_alg() != hash {
            return Err(err(format!("the hint table holds {} fingerprints, this run uses {}", t.hash_alg().name(), hash.name())));
        }
        let backend = match backend.trim() {
            "" | "auto" => None,
            b => Some(Backend::parse(b).map_err(err)?),
        };
        let limit = u32::MAX as f64 - (profile.max as f64 + block.max(1 << 16) as f64 + 2.0);
        let engine = Engine::new(profile, Options { backend, threads: 1, lane_segment: None, span: 0, hash }).map_err(err)?;
        let t = table.t.take().expect("checked above");
        let engine = Box::into_raw(Box::new(engine));
        // SAFETY: `engine` stays allocated until after `rapid` and the chunker are dropped.
        let e: &'static Engine = unsafe { &*engine };
        let opts = RapidOptions { max_block: block.max(64), ..RapidOptions::new(criterion) };
        let rapid = match Rapid::new(e, t, opts) {
            Ok(r) => Box::into_raw(Box::new(r)),
            Err(er) => {
                // SAFETY: nothing borrows the engine any more.
                drop(unsafe { Box::from_raw(engine) });
                return Err(err(er));
            }
        };
        // SAFETY: `rapid` stays allocated, and is not accessed except through the chunker,
        // until the chunker is dropped.
        let chunker = unsafe { &mut *rapid }.feed();
        Ok(RapidRun {
            chunker: Some(chunker),
            rapid,
            engine,
            criterion,
            limit,
            done: false,
            recipe: recipe.then(Vec::new),
            offsets: Vec::new(),
            lengths: Vec::new(),
            digests: Vec::new(),
            found: Vec::new(),
        })
    }

    fn chunker(&mut self) -> Result<&mut RapidChunker<'static, 'static, FeedSource>, JsError> {
        self.chunker.as_mut().ok_or_else(|| err("the RapidCDC run is finished"))
    }

    #[wasm_bindgen(getter)]
    pub fn criterion(&self) -> String {
        self.criterion.name().to_string()
    }

    /// The engine's stage-1 backend.
    #[wasm_bindgen(getter)]
    pub fn backend(&self) -> String {
        // SAFETY: the engine lives as long as `self` (freed only in `Drop`).
        unsafe { &*self.engine }.backend().name().to_string()
    }

    /// Appends the next bytes of the input.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), JsError> {
        let limit = self.limit;
        let c = self.chunker()?;
        if c.source_mut().pushed() as f64 + bytes.len() as f64 > limit {
            return Err(err(format!(
                "RapidCDC in WebAssembly handles inputs up to {} bytes (32-bit offsets); chunk larger inputs without `rapid`",
                limit
            )));
        }
        c.source_mut().push(bytes).map_err(err)
    }

    /// The input has ended.
    pub fn end(&mut self) -> Result<(), JsError> {
        self.chunker()?.source_mut().end();
        Ok(())
    }

    /// Input offset up to which bytes must have been pushed before `run` can decide more
    /// (0 while decided chunks are waiting, or stage-1 candidates are awaited).
    #[wasm_bindgen(getter)]
    pub fn demand(&self) -> f64 {
        match &self.chunker {
            Some(c) if c.pending() == 0 && c.stage1_needed().is_none() => c.demand() as f64,
            _ => 0.0,
        }
    }

    /// Fingerprints in the table now.
    #[wasm_bindgen(getter, js_name = tableSize)]
    pub fn table_size(&self) -> usize {
        self.chunker.as_ref().map_or(0, |c| c.rapid().table().len())
    }

    /// Whether every chunk of the input has been returned.
    #[wasm_bindgen(getter)]
    pub fn done(&self) -> bool {
        self.done
    }

    /// From now on, fallback blocks of at least `min_positions` positions (0: none, the
    /// default) get their stage 1 from the caller: `run` then stops before such a block,
    /// [`RapidRun::needed`] names its positions, and [`RapidRun::supply_candidates`] takes
    /// their candidates (computed by workers' [`Stage1`] over [`RapidRun::bytes`]). The chunks
    /// and statistics are the same.
    #[wasm_bindgen(js_name = externalStage1)]
    pub fn external_stage1(&mut self, min_positions: usize) -> Result<(), JsError> {
        self.chunker()?.set_external_stage1(min_positions);
        Ok(())
    }

    /// The positions `[a, q)` of the fallback block whose stage-1 candidates are awaited (`a`:
    /// the first not yet supplied), or an empty array when none are.
    pub fn needed(&self) -> Vec<f64> {
        match self.chunker.as_ref().and_then(|c| c.stage1_needed()) {
            Some((a, q)) => vec![a as f64, q as f64],
            None => Vec::new(),
        }
    }

    /// A copy of the input bytes `[a, b)`, which the run must still hold (it holds
    /// `[a - W, q)` of the awaited block).
    pub fn bytes(&self, a: f64, b: f64) -> Result<Vec<u8>, JsError> {
        let c = self.chunker.as_ref().ok_or_else(|| err("the RapidCDC run is finished"))?;
        c.input(a as usize, b as usize)
            .map(|s| s.to_vec())
            .ok_or_else(|| err(format!("the RapidCDC run does not hold the bytes [{a}, {b})")))
    }

    /// Address in wasm memory of the input bytes `[a, b)` the run holds (as [`RapidRun::bytes`],
    /// without a copy): valid until the next call into the run; read it before.
    #[wasm_bindgen(js_name = bytesPtr)]
    pub fn bytes_ptr(&self, a: f64, b: f64) -> Result<*const u8, JsError> {
        let c = self.chunker.as_ref().ok_or_else(|| err("the RapidCDC run is finished"))?;
        c.input(a as usize, b as usize)
            .map(|s| s.as_ptr())
            .ok_or_else(|| err(format!("the RapidCDC run does not hold the bytes [{a}, {b})")))
    }

    /// The stage-1 candidates of positions `[a, b)` of the awaited block (offsets from `a`, as
    /// [`Stage1::strict_offsets`] / [`Stage1::loose_offsets`] give them for the bytes
    /// `[a - W, b)`), in order; after the block's last piece, `run` returns its chunks.
    #[wasm_bindgen(js_name = supplyCandidates)]
    pub fn supply_candidates(&mut self, a: f64, b: f64, strict: &[u32], loose: &[u32]) -> Result<(), JsError> {
        self.chunker()?.supply_stage1(a as usize, b as usize, strict, loose).map_err(err)
    }

    /// Stage 1 of the positions `[a, b)` of the awaited block in this instance, in place of
    /// [`RapidRun::supply_candidates`] (the coordinator's share of a block; same chunks).
    #[wasm_bindgen(js_name = scanStage1)]
    pub fn scan_stage1(&mut self, a: f64, b: f64) -> Result<(), JsError> {
        self.chunker()?.scan_stage1(a as usize, b as usize).map_err(err)
    }

    /// Decides up to `max` chunks with the bytes pushed so far; returns how many (then read
    /// `offsets`, `lengths`, `digests`, `found`). 0: more bytes are needed, stage-1 candidates
    /// are awaited ([`RapidRun::needed`]), or the input is done.
    pub fn run(&mut self, max: usize) -> Result<usize, JsError> {
        self.offsets.clear();
        self.lengths.clear();
        self.digests.clear();
        self.found.clear();
        let Some(c) = self.chunker.as_mut() else { return Ok(0) };
        while self.offsets.len() < max && !self.done && c.ready() {
            match c.next() {
                Some(Ok(ch)) => {
                    self.offsets.push(ch.offset as f64);
                    self.lengths.push(ch.length as u32);
                    self.digests.extend_from_slice(&ch.hash);
                    self.found.push(match ch.found {
                        cutpoint_core::rapid::Found::Rule => 255,
                        cutpoint_core::rapid::Found::Hint(k) => k,
                    });
                    if let Some(r) = self.recipe.as_mut() {
                        r.push(ch);
                    }
                }
                Some(Err(e)) => return Err(err(e)),
                None if c.stage1_needed().is_some() => break,
                None => self.done = true,
            }
        }
        Ok(self.offsets.len())
    }

    /// Chunk offsets of the last `run`.
    pub fn offsets(&self) -> Vec<f64> {
        self.offsets.clone()
    }
    /// Chunk lengths of the last `run`.
    pub fn lengths(&self) -> Vec<u32> {
        self.lengths.clone()
    }
    /// Digests of the last `run`, 32 bytes each.
    pub fn digests(&self) -> Vec<u8> {
        self.digests.clone()
    }
    /// How each chunk of the last `run` was found: its hint's list position, or 255 by the rule.
    pub fn found(&self) -> Vec<u8> {
        self.found.clone()
    }

    /// Statistics so far: `[bytes, chunks, hintedChunks, rolledPositions, windowTests,
    /// windowBytes, fptWasted, fptWastedBytes, fallbacks, fallbackBlocks, n, hits[0..n],
    /// misses[0..n]]`.
    pub fn stats(&self) -> Result<Vec<f64>, JsError> {
        let st: &RapidStats = match &self.chunker {
            Some(c) => c.rapid().stats(),
            None => return Err(err("the RapidCDC run is finished")),
        };
        let mut v = vec![
            st.bytes as f64,
            st.chunks as f64,
            st.hinted_chunks as f64,
            st.scanned_positions as f64,
            st.window_tests as f64,
            st.window_bytes as f64,
            st.fpt_wasted as f64,
            st.fpt_wasted_bytes as f64,
            st.fallbacks as f64,
            st.blocks as f64,
            st.hits.len() as f64,
        ];
        v.extend(st.hits.iter().map(|&h| h as f64));
        v.extend(st.misses.iter().map(|&m| m as f64));
        Ok(v)
    }

    /// The recipe of the input (the text `--base` reads), when asked for at construction and
    /// after the input is done.
    pub fn recipe(&self) -> Result<Vec<u8>, JsError> {
        let r = self.recipe.as_ref().ok_or_else(|| err("no recipe was asked for"))?;
        if !self.done {
            return Err(err("the recipe is complete only when the input is done"));
        }
        // SAFETY: the engine lives as long as `self`.
        let e = unsafe { &*self.engine };
        let mut out = Vec::new();
        Recipe::from_chunks(e.profile(), e.hash_alg(), r).write(&mut out).map_err(err)?;
        Ok(out)
    }

    /// Ends the run and gives the table (with what it learned) back to `table`.
    pub fn finish(&mut self, table: &mut RapidTable) -> Result<(), JsError> {
        if table.t.is_some() {
            return Err(err("that hint table is not the one this run took"));
        }
        let t = self.release().ok_or_else(|| err("the RapidCDC run is finished"))?;
        table.t = Some(t);
        Ok(())
    }

    /// Drops the chunker and the session; returns the table.
    fn release(&mut self) -> Option<HintTable> {
        let c = self.chunker.take()?;
        drop(c);
        // SAFETY: the chunker, the only borrower of `*rapid`, is gone; `rapid` came from
        // `Box::into_raw` and is freed once (set to null).
        let r = unsafe { Box::from_raw(self.rapid) };
        self.rapid = std::ptr::null_mut();
        Some(r.into_table())
    }
}

impl Drop for RapidRun {
    fn drop(&mut self) {
        let _ = self.release();
        if !self.engine.is_null() {
            // SAFETY: nothing borrows the engine any more (chunker and session are gone).
            drop(unsafe { Box::from_raw(self.engine) });
            self.engine = std::ptr::null_mut();
        }
    }
}

// ---- the store's wire format (protocol v1) --------------------------------------------------
//
// The encoders and parsers of `cutpoint_core::protocol` (pack framing, query bodies, names,
// the file digest, delta commits) and `cutpoint_core::rapid::recipe` (recipes), for the
// TypeScript client (`web/src/client/`), which only does the networking. No format is written
// a second time in TypeScript.

use cutpoint_core::protocol::codec::{Codec, Compressor, Sampler, AUTO_LEVEL, COMPRESSED, COMPRESS_GROUP, MAX_LEVEL, SAMPLE};
use cutpoint_core::protocol::pack::{encode_frame_head, encode_pack_header, FrameHead, Layout, MAX_CHUNK, MAX_HEADS_FIRST};
use cutpoint_core::protocol::{delta, name as wire_name, query as wire_query, FileDigest};

fn digest32(id: &[u8]) -> Result<cutpoint_core::Digest, JsError> {
    id.try_into().map_err(|_| err(format!("a chunk id is 32 bytes (got {})", id.len())))
}

/// The 16-byte header of a pack of `hash` chunks; with `heads_first`, of an upload whose heads
/// (and end frame) all come before the data; with `zstd`, of a pack whose frames may be
/// compressed (codec 1, PROTOCOL.md 3.1).
#[wasm_bindgen(js_name = packHeader)]
pub fn pack_header(hash: &str, heads_first: Option<bool>, zstd: Option<bool>) -> Result<Vec<u8>, JsError> {
    let layout = if heads_first == Some(true) { Layout::HeadsFirst } else { Layout::Framed };
    let codec = if zstd == Some(true) { Codec::Zstd } else { Codec::None };
    Ok(encode_pack_header(alg(hash)?, layout, codec).map_err(err)?.to_vec())
}

thread_local! {
    static COMPRESSORS: std::cell::RefCell<Vec<(i32, Compressor)>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// A compressed frame's data for the chunk `data` at zstd `level` (its raw length, then one
/// zstd frame: `cutpoint_core::protocol::codec::Compressor`), or `undefined` where that does
/// not save at least 1/16 of the chunk (it then travels raw). The frame's head is
/// `packFrameHead(result.length, id, true)`.
#[wasm_bindgen(js_name = compressChunk)]
pub fn compress_chunk(data: &[u8], level: i32) -> Option<Vec<u8>> {
    with_compressor(level, |cx| {
        let mut out = Vec::new();
        cx.compress(data, &mut out).then_some(out)
    })
}

/// `f` with this thread's compressor at `level` (made once, its context kept).
fn with_compressor<T>(level: i32, f: impl FnOnce(&mut Compressor) -> T) -> T {
    COMPRESSORS.with(|c| {
        let mut list = c.borrow_mut();
        let i = match list.iter().position(|(l, _)| *l == level) {
            Some(i) => i,
            None => {
                list.push((level, Compressor::new(level)));
                list.len() - 1
            }
        };
        f(&mut list[i].1)
    })
}

/// The zstd level of a `compression` setting ('auto', 'max'; `undefined` for 'off'), as the
/// native client's `--compression`.
#[wasm_bindgen(js_name = compressionLevel)]
pub fn compression_level(mode: &str) -> Result<Option<i32>, JsError> {
    match mode {
        "off" => Ok(None),
        "auto" => Ok(Some(AUTO_LEVEL)),
        "max" => Ok(Some(MAX_LEVEL)),
        _ => Err(err(format!("compression must be 'auto', 'off' or 'max' (got '{mode}')"))),
    }
}

/// `[group, sample]`: the chunks compressed together and the sample tried after a group where
/// none compressed (`cutpoint_core::protocol::codec`).
#[wasm_bindgen(js_name = compressGroupSizes)]
pub fn compress_group_sizes() -> Vec<u32> {
    vec![COMPRESS_GROUP as u32, SAMPLE as u32]
}

/// The clients' rule over the groups of one input (`cutpoint_core::protocol::codec::Sampler`):
/// after a group where no chunk compressed, the next one tries a sample first.
#[wasm_bindgen(js_name = CompressSampler)]
#[derive(Default)]
pub struct CompressSampler(Sampler);

#[wasm_bindgen(js_class = CompressSampler)]
impl CompressSampler {
    #[wasm_bindgen(constructor)]
    pub fn new() -> CompressSampler {
        CompressSampler::default()
    }
    /// How many of a group's `n` chunks are tried first.
    pub fn first(&self, n: usize) -> usize {
        self.0.first(n)
    }
    /// Whether the rest of the group is tried, given whether any of its first chunks compressed.
    #[wasm_bindgen(js_name = tryRest)]
    pub fn try_rest(&self, any_first: bool) -> bool {
        self.0.try_rest(any_first)
    }
    /// Records a group's outcome: whether any of its chunks compressed.
    pub fn record(&mut self, any: bool) {
        self.0.record(any)
    }
}

/// Compresses consecutive chunks (`data`, the chunks one after another, of these `lengths`) at
/// zstd `level`, each kept compressed only where that saves at least 1/16 of it (the rule of
/// `compressChunk`). Returns one u32 LE per chunk, its frame's stored length with bit 31 set
/// where it is compressed (else its raw length: it travels raw), then the compressed frames'
/// data one after another (raw chunks are not copied back). What the library's workers run.
#[wasm_bindgen(js_name = compressGroup)]
pub fn compress_group(data: &[u8], lengths: &[u32], level: i32) -> Result<Vec<u8>, JsError> {
    let total: u64 = lengths.iter().map(|&l| l as u64).sum();
    if total != data.len() as u64 {
        return Err(err(format!("compressGroup: {} bytes for chunks of {total}", data.len())));
    }
    let mut out = vec![0u8; 4 * lengths.len()];
    with_compressor(level, |cx| {
        let mut z = Vec::new();
        let mut at = 0usize;
        for (k, &len) in lengths.iter().enumerate() {
            let raw = &data[at..at + len as usize];
            at += len as usize;
            let head = if cx.compress(raw, &mut z) {
                out.extend_from_slice(&z);
                z.len() as u32 | COMPRESSED
            } else {
                len
            };
            out[4 * k..4 * k + 4].copy_from_slice(&head.to_le_bytes());
        }
    });
    Ok(out)
}

/// The pack size to aim at within a store's limit (`cutpoint_core::protocol::pack::fit_pack_target`).
#[wasm_bindgen(js_name = fitPackTarget)]
pub fn fit_pack_target(want: f64, max_chunk: f64, max_pack: f64) -> Result<f64, JsError> {
    // Sizes from JavaScript numbers: non-finite or negative as 0, the rest clamped to u32.
    let n = |x: f64| if x.is_finite() && x >= 0.0 { x.min(u32::MAX as f64) as u64 } else { 0 };
    cutpoint_core::protocol::pack::fit_pack_target(n(want) as usize, n(max_chunk) as usize, n(max_pack)).map(|t| t as f64).map_err(err)
}

/// The most chunks to put in one pack, for a store whose `limits.max_pack_chunks` is
/// `store_max` (`undefined`: a store that does not say) (`cutpoint_core::protocol::pack::fit_pack_chunks`).
#[wasm_bindgen(js_name = fitPackChunks)]
pub fn fit_pack_chunks(store_max: Option<f64>) -> f64 {
    let m = store_max.filter(|x| x.is_finite() && *x >= 0.0).map(|x| x.min(u64::MAX as f64) as u64);
    cutpoint_core::protocol::pack::fit_pack_chunks(m) as f64
}

/// The most chunks a heads-first upload may list.
#[wasm_bindgen(js_name = packMaxHeadsFirst)]
pub fn pack_max_heads_first() -> usize {
    MAX_HEADS_FIRST
}

/// The 36-byte frame head of one chunk (`len` bytes of data follow it; with `compressed`, the
/// stored length of a frame from `compressChunk`, bit 31 set).
#[wasm_bindgen(js_name = packFrameHead)]
pub fn pack_frame_head(len: u32, id: &[u8], compressed: Option<bool>) -> Result<Vec<u8>, JsError> {
    if len == 0 || len as usize > MAX_CHUNK + 3 || (compressed != Some(true) && len as usize > MAX_CHUNK) {
        return Err(err(format!("a chunk of {len} bytes cannot be packed (1..={MAX_CHUNK})")));
    }
    let compressed = compressed == Some(true);
    Ok(encode_frame_head(FrameHead::Chunk { len, id: digest32(id)?, compressed }).to_vec())
}

/// The 36-byte end frame of a pack of `count` chunks.
#[wasm_bindgen(js_name = packEnd)]
pub fn pack_end(count: f64) -> Vec<u8> {
    encode_frame_head(FrameHead::End { count: count as u64 }).to_vec()
}

/// Bytes of a pack of chunks of these lengths (header, frames, end frame).
#[wasm_bindgen(js_name = packedLen)]
pub fn packed_len(lengths: &[u32]) -> f64 {
    cutpoint_core::protocol::pack::packed_len(lengths.iter().map(|&l| l as usize)) as f64
}

/// The most ids one existence query may carry.
#[wasm_bindgen(js_name = maxQueryIds)]
pub fn max_query_ids() -> usize {
    wire_query::MAX_QUERY_IDS
}

/// A query body from ids back to back (checked: a multiple of 32 bytes, at most the limit).
#[wasm_bindgen(js_name = queryEncode)]
pub fn query_encode(ids: &[u8]) -> Result<Vec<u8>, JsError> {
    let ids = wire_query::decode_ids(ids, wire_query::MAX_QUERY_IDS).map_err(err)?;
    Ok(wire_query::encode_ids(ids.iter()))
}

/// Checks a query's answer (the ids the namespace lacks) against the `asked` count; returns it.
#[wasm_bindgen(js_name = queryDecode)]
pub fn query_decode(body: &[u8], asked: usize) -> Result<Vec<u8>, JsError> {
    let ids = wire_query::decode_ids(body, asked).map_err(err)?;
    Ok(wire_query::encode_ids(ids.iter()))
}

/// Checks a namespace name (throws with the reason).
#[wasm_bindgen(js_name = validateNamespace)]
pub fn validate_namespace(ns: &str) -> Result<(), JsError> {
    wire_name::validate_namespace(ns).map_err(err)
}

/// Checks a file name (throws with the reason).
#[wasm_bindgen(js_name = validateName)]
pub fn validate_name(name: &str) -> Result<(), JsError> {
    wire_name::validate_name(name).map_err(err)
}

/// A name as one percent-encoded URL path segment.
#[wasm_bindgen(js_name = encodeSegment)]
pub fn encode_segment(s: &str) -> String {
    wire_name::encode_segment(s)
}

/// A file recipe (`cutpoint_core::rapid::Recipe`): built chunk by chunk while pushing, or
/// parsed from the store (a base for hints, known chunks and deltas; a pull's chunk list).
#[wasm_bindgen]
pub struct StoreRecipe {
    r: Recipe,
}

#[wasm_bindgen]
impl StoreRecipe {
    /// An empty recipe for `profile` and `hash`.
    #[wasm_bindgen(constructor)]
    pub fn new(profile: &str, hash: &str) -> Result<StoreRecipe, JsError> {
        let p = parse(profile)?;
        let a = rapid_alg(hash)?;
        Ok(StoreRecipe { r: Recipe::new(&p, a) })
    }

    /// Parses recipe text (the store's, or `--save-recipe`'s).
    pub fn parse(bytes: &[u8]) -> Result<StoreRecipe, JsError> {
        Ok(StoreRecipe { r: Recipe::read(bytes).map_err(err)? })
    }

    /// Appends regular chunks without a recorded last byte (SS-CDC): `ids` back to back.
    pub fn add(&mut self, ids: &[u8], sizes: &[u32]) -> Result<(), JsError> {
        if ids.len() != sizes.len() * 32 {
            return Err(err(format!("{} ids bytes for {} chunks", ids.len(), sizes.len())));
        }
        for (id, &size) in ids.chunks_exact(32).zip(sizes) {
            self.r.entries.push(RecipeEntry { fp: digest32(id)?, size, last: None, regular: true });
        }
        self.r.digest = None;
        Ok(())
    }

    #[wasm_bindgen(getter)]
    pub fn profile(&self) -> String {
        self.r.profile.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn hash(&self) -> String {
        self.r.hash.name().to_string()
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> usize {
        self.r.entries.len()
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.r.total_bytes() as f64
    }

    /// Chunk ids `[from, to)` back to back.
    pub fn ids(&self, from: usize, to: usize) -> Vec<u8> {
        let to = to.min(self.r.entries.len());
        let mut out = Vec::with_capacity(to.saturating_sub(from) * 32);
        for e in self.r.entries.get(from..to).unwrap_or(&[]) {
            out.extend_from_slice(&e.fp);
        }
        out
    }

    /// Chunk sizes `[from, to)`.
    pub fn sizes(&self, from: usize, to: usize) -> Vec<u32> {
        let to = to.min(self.r.entries.len());
        self.r.entries.get(from..to).unwrap_or(&[]).iter().map(|e| e.size).collect()
    }

    /// The recorded digest (hex), or "" when the recipe has none.
    #[wasm_bindgen(getter, js_name = digestHex)]
    pub fn digest_hex(&self) -> String {
        self.r.digest.map(|d| cutpoint_core::hex(&d)).unwrap_or_default()
    }

    /// Whether the recorded digest is the file digest of the chunk list (a store's recipe
    /// must carry one; chunks that verify, in this order, are then the file).
    #[wasm_bindgen(js_name = digestMatches)]
    pub fn digest_matches(&self) -> bool {
        self.r.digest.is_some() && FileDigest::of(&self.r) == self.r.digest
    }

    /// Computes and records the file digest (`FileDigest`); returns it in hex.
    #[wasm_bindgen(js_name = seal)]
    pub fn seal(&mut self) -> Result<String, JsError> {
        let d = FileDigest::of(&self.r).ok_or_else(|| err("a recipe needs fingerprints"))?;
        self.r.digest = Some(d);
        Ok(cutpoint_core::hex(&d))
    }

    /// The recipe text (a full commit body).
    pub fn text(&self) -> Result<Vec<u8>, JsError> {
        let mut out = Vec::new();
        self.r.write(&mut out).map_err(err)?;
        Ok(out)
    }

    /// A delta commit body against `base`, stored as version `base_version` (needs `seal`).
    pub fn delta(&self, base: &StoreRecipe, base_version: f64) -> Result<Vec<u8>, JsError> {
        delta::encode(&self.r, &base.r, base_version as u64).map_err(err)
    }
}

// ---- recipe parts and batch commits (PROTOCOL.md 3.7, 4.11-4.14) ----------------------------
//
// The core's `PartCutter`, `PartRecipe` and `BatchWriter` for the library's pushes: the
// threshold, the part boundaries, the part and recipe texts, the part ids and the batch body are
// the core's, as natively (native/store/src/client.rs `RecipeSink`, `commit_batches`).

use cutpoint_core::protocol::batch::BatchWriter;
use cutpoint_core::protocol::part::{self as wire_part, Line as PartLine, Part, PartCutter, PartRecipe};
use cutpoint_core::protocol::part_delta::{base_lines, PartWindow, PART_WINDOW_BYTES};
use std::collections::VecDeque;

/// A file's recipe entries as they are chunked, cut into parts (`PartCutter`) as they go, with
/// the count, the bytes and the file digest kept on the way. Until the recipe passes the parts
/// threshold (`needs_parts`) the client keeps the whole recipe too (a `StoreRecipe`) and
/// `inParts` is false; after, each closed part waits here until `takePart` hands it out (the
/// client uploads it and drops it), and only its id, count and bytes are kept for the commit.
#[wasm_bindgen]
pub struct PartSink {
    profile: String,
    alg: HashAlg,
    max_recipe: u64,
    parts_ok: bool,
    count: u64,
    bytes: u64,
    text_len: u64,
    digest: Option<FileDigest>,
    sealed: Option<cutpoint_core::Digest>,
    cutter: PartCutter,
    /// Closed parts, each with its part delta where it was closed with a base window.
    closed: VecDeque<(Part, Option<Vec<u8>>)>,
    in_parts: bool,
    refs: Vec<(cutpoint_core::Digest, u64, u64)>,
}

/// A closed part's delta against the base window, where it has one.
fn part_delta(alg: HashAlg, p: &Part, base: Option<&PartWindow>) -> Option<Vec<u8>> {
    let w = base?;
    let text = p.text();
    w.delta_for(p, &wire_part::part_id(alg, text.as_bytes())?, text.len() as u64)
}

/// One part, as `PartSink::takePart` hands it out: its canonical text, id (hex), entries, bytes.
#[wasm_bindgen]
pub struct PartOut {
    text: Vec<u8>,
    id: String,
    count: u64,
    bytes: u64,
    delta: Option<Vec<u8>>,
}

#[wasm_bindgen]
impl PartOut {
    #[wasm_bindgen(getter)]
    pub fn text(&self) -> Vec<u8> {
        self.text.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.id.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> f64 {
        self.count as f64
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.bytes as f64
    }
    /// Its part delta against a base part (PROTOCOL.md 3.8), where it was closed (`addWith`,
    /// `sealWith`) with a window holding one it is shorter against; else `undefined` (send `text`).
    #[wasm_bindgen(getter)]
    pub fn delta(&self) -> Option<Vec<u8>> {
        self.delta.clone()
    }
}

#[wasm_bindgen]
impl PartSink {
    /// For a store whose `max_recipe_bytes` is `max_recipe` (`undefined`: none said); without
    /// `parts_ok` (the store does not list "parts") it never goes to parts.
    #[wasm_bindgen(constructor)]
    pub fn new(profile: &str, hash: &str, max_recipe: Option<f64>, parts_ok: bool) -> Result<PartSink, JsError> {
        let p = parse(profile)?;
        let a = rapid_alg(hash)?;
        let max_recipe = max_recipe.filter(|x| x.is_finite() && *x >= 0.0).map(|x| x as u64).unwrap_or(u64::MAX);
        Ok(PartSink {
            profile: p.to_string(),
            alg: a,
            max_recipe,
            parts_ok,
            count: 0,
            bytes: 0,
            text_len: 0,
            digest: Some(FileDigest::new(a)),
            sealed: None,
            cutter: PartCutter::new(a, max_recipe),
            closed: VecDeque::new(),
            in_parts: false,
            refs: Vec::new(),
        })
    }

    /// Appends regular chunks (SS-CDC, no recorded last byte): `ids` back to back. Returns
    /// whether the recipe is (now) committed in parts.
    pub fn add(&mut self, ids: &[u8], sizes: &[u32]) -> Result<bool, JsError> {
        self.add_to(ids, sizes, None)
    }

    /// As `add`; each part these chunks close gets its part delta against the base part in
    /// `base` (the push's window on its base version's parts, advanced over these chunks first)
    /// holding most of its entries, where that is shorter (`PartWindow::delta_for`, checked by
    /// expanding it): made when the part closes, as natively, while its base is in the window.
    #[wasm_bindgen(js_name = addWith)]
    pub fn add_with(&mut self, ids: &[u8], sizes: &[u32], base: &BaseParts) -> Result<bool, JsError> {
        self.add_to(ids, sizes, Some(&base.w))
    }

    fn add_to(&mut self, ids: &[u8], sizes: &[u32], base: Option<&PartWindow>) -> Result<bool, JsError> {
        if ids.len() != sizes.len() * 32 {
            return Err(err(format!("{} ids bytes for {} chunks", ids.len(), sizes.len())));
        }
        if self.sealed.is_some() {
            return Err(err("the recipe is sealed"));
        }
        let digest = self.digest.as_mut().ok_or_else(|| err("the recipe is sealed"))?;
        for (id, &size) in ids.chunks_exact(32).zip(sizes) {
            let e = RecipeEntry { fp: digest32(id)?, size, last: None, regular: true };
            self.count += 1;
            self.bytes += size as u64;
            digest.add(&e.fp, size);
            if !self.in_parts {
                self.text_len += e.line_len();
            }
            if self.parts_ok {
                if let Some(p) = self.cutter.push(e) {
                    let d = part_delta(self.alg, &p, base);
                    self.closed.push_back((p, d));
                }
                // The header and end lines are under 300 bytes (as natively).
                if !self.in_parts && wire_part::needs_parts(self.count, self.text_len + 300, self.max_recipe) {
                    self.in_parts = true;
                }
            }
        }
        Ok(self.in_parts)
    }

    /// Whether the recipe goes to the store in parts.
    #[wasm_bindgen(getter, js_name = inParts)]
    pub fn in_parts(&self) -> bool {
        self.in_parts
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> f64 {
        self.count as f64
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.bytes as f64
    }
    /// Closed parts waiting for `takePart` (0 while the recipe is not in parts).
    #[wasm_bindgen(getter)]
    pub fn ready(&self) -> usize {
        if self.in_parts {
            self.closed.len()
        } else {
            0
        }
    }
    /// Entries of the recipe in parts handed out or waiting (the rest are in the open part).
    #[wasm_bindgen(getter, js_name = closedEntries)]
    pub fn closed_entries(&self) -> f64 {
        (self.count - self.cutter.pending() as u64) as f64
    }

    /// The oldest closed part (recorded for the commit's part lines), or `undefined`.
    #[wasm_bindgen(js_name = takePart)]
    pub fn take_part(&mut self) -> Option<PartOut> {
        if !self.in_parts {
            return None;
        }
        let (p, delta) = self.closed.pop_front()?;
        let text = p.text().into_bytes();
        let id = wire_part::part_id(self.alg, &text).unwrap_or_default();
        let (count, bytes) = (p.entries.len() as u64, p.bytes());
        self.refs.push((id, count, bytes));
        Some(PartOut {
            text,
            id: cutpoint_core::hex(&id),
            count,
            bytes,
            delta,
        })
    }

    /// The file offset where the open part starts (the entries before it are in closed parts).
    #[wasm_bindgen(getter, js_name = partStart)]
    pub fn part_start(&self) -> f64 {
        (self.bytes - self.cutter.pending_bytes()) as f64
    }

    /// Ends the recipe: its file digest (hex). A recipe in parts has its last, open part closed
    /// (then `takePart` it).
    pub fn seal(&mut self) -> Result<String, JsError> {
        self.seal_to(None)
    }

    /// As `seal`; the last part gets its part delta against `base` (as `addWith`).
    #[wasm_bindgen(js_name = sealWith)]
    pub fn seal_with(&mut self, base: &BaseParts) -> Result<String, JsError> {
        self.seal_to(Some(&base.w))
    }

    fn seal_to(&mut self, base: Option<&PartWindow>) -> Result<String, JsError> {
        let d = self.digest.take().ok_or_else(|| err("the recipe is sealed"))?.finish().ok_or_else(|| err("a recipe needs fingerprints"))?;
        self.sealed = Some(d);
        if self.in_parts {
            if let Some(p) = self.cutter.finish() {
                let d = part_delta(self.alg, &p, base);
                self.closed.push_back((p, d));
            }
        }
        Ok(cutpoint_core::hex(&d))
    }

    /// The commit body of a recipe in parts: one part line per part handed out (after `seal`
    /// and once every part is taken).
    #[wasm_bindgen(js_name = recipeText)]
    pub fn recipe_text(&self) -> Result<Vec<u8>, JsError> {
        if !self.in_parts || self.sealed.is_none() || !self.closed.is_empty() {
            return Err(err("the recipe in parts is not sealed, or parts are still to be taken"));
        }
        let r = PartRecipe {
            profile: self.profile.clone(),
            hash: self.alg,
            digest: self.sealed,
            lines: self.refs.iter().map(|&(id, count, bytes)| PartLine::Part { id, count, bytes }).collect(),
            count: self.count,
            bytes: self.bytes,
        };
        Ok(r.text().into_bytes())
    }

    /// Parts handed out so far.
    #[wasm_bindgen(getter)]
    pub fn parts(&self) -> usize {
        self.refs.len()
    }
}

/// A push's window on its base version's parts (PROTOCOL.md 5.1 step 5; the core's
/// `PartWindow`): the library reads the parts `advance` names (`GET parts/{id}`) and gives each
/// to `load`, which keeps it only if it hashes to its id; the ids of the parts kept are known
/// present (`known`) and `PartSink::addWith` writes part deltas against them.
#[wasm_bindgen]
pub struct BaseParts {
    w: PartWindow,
}

#[wasm_bindgen]
impl BaseParts {
    /// The window of a base version's stored text (`GET recipes/{name}?parts=1`), or
    /// `undefined` where it names no parts or has another profile or fingerprint than the
    /// push (`profile` canonical); `deltas`: the store lists `part-delta`.
    pub fn of(recipe: &[u8], profile: &str, hash: &str, deltas: bool) -> Result<Option<BaseParts>, JsError> {
        if !wire_part::has_part_lines(recipe) {
            return Ok(None);
        }
        let r = PartRecipe::parse(recipe).map_err(err)?;
        let alg = rapid_alg(hash)?;
        if !r.has_parts() || r.profile != profile || r.hash != alg {
            return Ok(None);
        }
        Ok(Some(BaseParts {
            w: PartWindow::new(alg, base_lines(&r.lines), deltas),
        }))
    }

    /// Bytes around the offset being chunked whose base parts are kept (before the open
    /// part's start and after the chunks being queried).
    #[wasm_bindgen(js_name = windowBytes)]
    pub fn window_bytes() -> f64 {
        PART_WINDOW_BYTES as f64
    }

    /// Drops the parts ending at or before `lo`; returns the line numbers of the parts to read
    /// now (starting before `hi`), in order: `load` or `skip` each, in this order.
    pub fn advance(&mut self, lo: f64, hi: f64) -> Vec<u32> {
        let n = |x: f64| if x.is_finite() && x > 0.0 { x as u64 } else { 0 };
        self.w.advance(n(lo), if hi.is_finite() { n(hi) } else { u64::MAX }).into_iter().map(|i| i as u32).collect()
    }

    /// Part line `i`'s id (hex).
    #[wasm_bindgen(js_name = lineId)]
    pub fn line_id(&self, i: u32) -> Result<String, JsError> {
        self.w.lines().get(i as usize).map(|l| cutpoint_core::hex(&l.id)).ok_or_else(|| err(format!("no base part line {i}")))
    }

    /// Line `i`'s part as the store sent it; throws (and keeps nothing) where it is not that part.
    pub fn load(&mut self, i: u32, text: &[u8]) -> Result<(), JsError> {
        self.w.load(i as usize, text).map_err(err)
    }

    /// A part that could not be read: its chunks are queried as usual.
    pub fn skip(&mut self) {
        self.w.skip()
    }

    /// One byte per id of `ids` (back to back): 1 where a loaded base part holds it.
    pub fn known(&self, ids: &[u8]) -> Result<Vec<u8>, JsError> {
        if ids.len() % 32 != 0 {
            return Err(err(format!("{} ids bytes is not a multiple of 32", ids.len())));
        }
        ids.chunks_exact(32).map(|id| Ok(self.w.contains(&digest32(id)?) as u8)).collect()
    }

    /// Ids held now.
    #[wasm_bindgen(getter)]
    pub fn size(&self) -> usize {
        self.w.len()
    }
    /// Bytes of base parts loaded so far.
    #[wasm_bindgen(getter, js_name = readBytes)]
    pub fn read_bytes(&self) -> f64 {
        self.w.read_bytes as f64
    }
    /// Parts that could not be read or did not match their id.
    #[wasm_bindgen(getter)]
    pub fn unreadable(&self) -> f64 {
        self.w.unreadable as f64
    }
}

/// The least `max_recipe_bytes` with which a store takes a part of one chunk (four times the
/// longest part of one entry): below it a push in parts is refused before a byte is sent.
#[wasm_bindgen(js_name = minPartText)]
pub fn min_part_text(hash: &str) -> Result<f64, JsError> {
    Ok(wire_part::min_part_text(rapid_alg(hash)?) as f64)
}

/// The shortest a whole recipe of a `len`-byte file can be at a profile's largest chunk
/// `max_chunk` (a store without parts refuses a longer one: checked before a byte is sent).
#[wasm_bindgen(js_name = recipeFloor)]
pub fn recipe_floor(len: f64, max_chunk: f64) -> f64 {
    let len = if len.is_finite() && len > 0.0 { len as u64 } else { 0 };
    let max = if max_chunk.is_finite() && max_chunk >= 1.0 { max_chunk as u64 } else { 1 };
    (len.div_ceil(max) * cutpoint_core::rapid::recipe::MIN_ENTRY_LINE) as f64
}

/// A batch commit body being built (`POST /v1/ns/{ns}/commits`, PROTOCOL.md 4.14).
#[wasm_bindgen]
pub struct StoreBatch {
    w: BatchWriter,
}

#[wasm_bindgen]
impl StoreBatch {
    #[wasm_bindgen(constructor)]
    pub fn new() -> StoreBatch {
        StoreBatch { w: BatchWriter::new() }
    }
    /// Adds one file's commit body (4.4).
    pub fn add(&mut self, name: &str, body: &[u8]) {
        self.w.add(name, body)
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> usize {
        self.w.count()
    }
    /// The finished body's length with one more file of `name` and `body_len` bytes.
    #[wasm_bindgen(js_name = lenWith)]
    pub fn len_with(&self, name: &str, body_len: usize) -> f64 {
        self.w.len_with(name, body_len) as f64
    }
    /// The body (the batch is empty again after).
    pub fn finish(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.w).finish()
    }
}

impl Default for StoreBatch {
    fn default() -> Self {
        Self::new()
    }
}

/// The most files one batch may carry (the core's; a store says its own in `limits.max_batch_files`).
#[wasm_bindgen(js_name = maxBatchFiles)]
pub fn max_batch_files() -> usize {
    cutpoint_core::protocol::batch::MAX_BATCH_FILES
}

/// Whether a recipe's text names parts (`part` lines, as `GET recipes/{name}?parts=1` returns a
/// version committed in parts): no delta base and no hints then.
#[wasm_bindgen(js_name = recipeHasParts)]
pub fn recipe_has_parts(body: &[u8]) -> bool {
    wire_part::has_part_lines(body)
}
