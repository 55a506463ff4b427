//! The store's logic, one function per protocol step, synchronous (the routes call them on
//! blocking threads). Durability order, written down and tested (`tests/crash.rs` in the CLI):
//!
//! 1. **upload**: the pack is written to a spool file while every frame is parsed and every
//!    fingerprint recomputed; the spool is fsync'd; it is put into the object store (durable
//!    when the put returns); only then are its chunks indexed. A crash before the put leaves a
//!    spool file (removed at start); between the put and the index, an unindexed pack, which
//!    [`Store::reconcile`] indexes at the next start.
//! 2. **commit**: under the GC lock (shared), every chunk the recipe names must be indexed with
//!    the recipe's length; the recipe is put with create-only semantics under the next version
//!    number — that put is the commit point — and then indexed. A crash after the put: the
//!    version is committed and reconcile indexes it.
//! 3. **gc**: under the GC lock (exclusive), so no commit is between its check and its put.

use crate::backend::{config_key, pack_key, part_key, part_prefix, recipe_key, recipe_prefix, tombstone_key, Objects};
use crate::error::{Result, StoreError};
use crate::index::{now, Index, Loc, Version};
use crate::upload_spool::{BufPool, Spool};
use bytes::Bytes;
use cutpoint_core::protocol::delta;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::protocol::name::{name_from_key, name_key, validate_name, validate_namespace};
use cutpoint_core::protocol::codec::{Codec, Decompressor};
use cutpoint_core::protocol::pack::{
    encode_frame_head, encode_pack_header, Buffered, Frame, FrameHead, Layout, PackReader, PackWriter, FRAME_HEAD_LEN, HEADER_LEN, MAX_CHUNK, MAX_GROUP_CHUNKS, MAX_GROUP_RAW,
};
use cutpoint_core::protocol::part::{has_part_lines, Line, Part, PartRecipe};
use cutpoint_core::protocol::part_delta::{expand_part_delta_lines, is_part_delta, part_delta_head};
use cutpoint_core::protocol::WireError;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::{hex, Digest, HashAlg};
use serde::Serialize;
use std::collections::{HashMap, HashSet};
use std::io::{self, BufWriter, Read, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

/// Body limits.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Largest pack upload (bytes).
    pub max_pack: u64,
    /// Largest recipe (commit body), and largest recipe a delta commit may expand to.
    pub max_recipe: u64,
    /// Most chunks in one pack upload, in either layout (each costs an index row: a pack of
    /// millions of tiny chunks would hold the index for minutes).
    pub max_pack_chunks: u64,
    /// Most entries a commit may expand to (its part lines' COUNTs and its chunk lines): a
    /// commit body within `max_recipe` naming a big part many times would otherwise make the
    /// store read that part once per line.
    pub max_commit_entries: u64,
}

/// The default of [`Limits::max_commit_entries`]: 2^25 entries, 256 GiB at the default
/// profile's 8 KiB average chunk.
pub const DEFAULT_MAX_COMMIT_ENTRIES: u64 = 1 << 25;

/// The default of [`Limits::max_pack_chunks`]: as many as a heads-first upload may list. A pack
/// of the default profile's 8 KiB average chunks holds ~32,768 at 256 MiB; the clients cut their
/// packs at this count too (`cutpoint_core::protocol::pack::MAX_HEADS_FIRST`).
pub const DEFAULT_MAX_PACK_CHUNKS: u64 = cutpoint_core::protocol::pack::MAX_HEADS_FIRST as u64;

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_pack: 256 << 20,
            max_recipe: 128 << 20,
            max_pack_chunks: DEFAULT_MAX_PACK_CHUNKS,
            max_commit_entries: DEFAULT_MAX_COMMIT_ENTRIES,
        }
    }
}

pub struct Store {
    pub objects: Objects,
    pub index: Index,
    tmp: PathBuf,
    pub limits: Limits,
    gc_lock: RwLock<()>,
    /// Objects in a bucket that other nodes may share: the index is a cache, refreshed from
    /// the bucket's listing where an answer depends on what other nodes wrote.
    shared: bool,
    /// When each namespace's last refresh started (refreshes of one namespace coalesce).
    refreshed: Mutex<HashMap<String, Instant>>,
    /// How long a gc in a shared bucket waits, holding its lock object, before it reads the
    /// recipes (commits that passed their lock check before it finish their put meanwhile).
    pub gc_settle: Duration,
    /// In a shared bucket: a gc lock object not rewritten for this long is a dead node's and
    /// is ignored by commits and taken over by the next gc; a running gc rewrites its lock
    /// every third of this.
    pub gc_lease: Duration,
    /// Whether uploads may be packs of codec 2 (groups; `GET /v1` lists `zstd-group`). On for a
    /// directory, off by default for a bucket: the edge store, which may share it, refuses groups
    /// this revision (`cutpoint serve --groups`).
    pub groups: bool,
    /// The uploads' spool buffers, lent again from one upload to the next (`upload_spool`).
    pub spool_bufs: Arc<BufPool>,
    /// Parts parsed when they were put, for the commit that names them next ([`PartCache`]).
    parts_put: Mutex<PartCache>,
    /// Stored parts read and parsed ([`Store::load_part`]): a count for tests and stats.
    part_loads: std::sync::atomic::AtomicU64,
}

/// Bytes the parts a [`PartCache`] holds may cost at most ([`PartCache::cost`]): 5 MiB, the parts
/// of a file of about 1 GiB at the default profile. Kept small for issue #32's bound on the
/// server's memory (≤ 128 MiB during a 32 GiB push and commit): at 2^19 entries (~20 MiB) with
/// the heap's 64 MiB trim threshold the server's peak was 122.7 MiB (92.6 without either).
const PART_CACHE_BYTES: usize = 5 << 20;

/// What a cached part costs beyond its entries: its key twice (the map's and the queue's), their
/// slots, the `Arc`. Charged so that many tiny parts (one entry each) hold no more than the bound.
const PART_CACHE_OVERHEAD: usize = 256;

/// The parts put last (parsed, by namespace and id), the oldest dropped first beyond
/// [`PART_CACHE_BYTES`]: a push puts a file's parts and then commits the recipe naming them, and
/// that commit takes them from here rather than reading each part's object and parsing its text
/// again (issue #28). A part's id is the hash of its text, so what is here is what is stored under
/// that id; whether it is still stored is asked of the objects ([`Store::query_parts`]) before any
/// is used. Used only in a directory store (in a shared bucket every part is read).
#[derive(Default)]
struct PartCache {
    parts: HashMap<(String, Digest), Arc<Part>>,
    order: std::collections::VecDeque<(String, Digest)>,
    bytes: usize,
}

impl PartCache {
    fn cost(ns: &str, part: &Part) -> usize {
        fn held<T>(v: &Vec<T>) -> usize {
            v.capacity() * std::mem::size_of::<T>()
        }
        held(&part.entries) + 2 * ns.len() + PART_CACHE_OVERHEAD
    }

    fn get(&self, ns: &str, id: &Digest) -> Option<Arc<Part>> {
        self.parts.get(&(ns.to_string(), *id)).cloned()
    }

    fn put(&mut self, ns: &str, id: Digest, mut part: Part) {
        part.entries.shrink_to_fit();
        let n = Self::cost(ns, &part);
        if n > PART_CACHE_BYTES {
            return;
        }
        let key = (ns.to_string(), id);
        if let Some(old) = self.parts.insert(key.clone(), Arc::new(part)) {
            self.bytes -= Self::cost(ns, &old);
        } else {
            self.order.push_back(key);
        }
        self.bytes += n;
        while self.bytes > PART_CACHE_BYTES {
            let Some(k) = self.order.pop_front() else { break };
            if let Some(p) = self.parts.remove(&k) {
                self.bytes -= Self::cost(&k.0, &p);
            }
        }
    }
}

/// Spool buffers (1 MiB each) kept idle between uploads.
const SPOOL_BUFS_IDLE: usize = 4;

#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PackReport {
    /// The stored pack's id (none when every chunk was already there).
    pub pack: Option<String>,
    /// Chunks in the upload.
    pub chunks: u64,
    /// Chunks newly stored.
    pub stored: u64,
    /// Chunks the namespace already had (or that appeared twice in the upload).
    pub duplicates: u64,
    /// Bytes of chunk data newly stored.
    pub stored_bytes: u64,
}

#[derive(Debug, Default, Serialize)]
pub struct ReconcileReport {
    pub packs_indexed: u64,
    pub packs_dropped: u64,
    pub bad_packs: Vec<String>,
    /// Recipe objects that do not parse (left in place, not indexed; `check` reports them).
    pub bad_recipes: Vec<String>,
    pub versions_indexed: u64,
    pub versions_dropped: u64,
}

#[derive(Debug, Default, Serialize, serde::Deserialize)]
pub struct GcReport {
    pub referenced_chunks: u64,
    pub packs_deleted: u64,
    pub packs_rewritten: u64,
    pub chunks_removed: u64,
    pub bytes_freed: u64,
    /// Packs younger than the grace period, left alone.
    pub packs_in_grace: u64,
    /// Recipe parts no recipe names, older than the grace period, deleted.
    #[serde(default)]
    pub parts_deleted: u64,
    /// Recipe parts no recipe names, younger than the grace period, kept (for now).
    #[serde(default)]
    pub parts_in_grace: u64,
    /// Damaged recipes: the chunk ids still readable in them were kept, the rest of the sweep
    /// went on.
    #[serde(default)]
    pub warnings: Vec<String>,
}

#[derive(Debug, Default, Serialize, serde::Deserialize)]
pub struct CheckReport {
    pub packs: u64,
    pub chunks: u64,
    pub versions: u64,
    #[serde(default)]
    pub parts: u64,
    pub problems: Vec<String>,
}

struct Limited<R> {
    r: R,
    left: u64,
    over: bool,
}

impl<R: Read> Read for Limited<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.r.read(buf)?;
        if n as u64 > self.left {
            self.over = true;
            return Err(io::Error::other("body over its limit"));
        }
        self.left -= n as u64;
        Ok(n)
    }
}

/// Counts what it writes.
struct CountingWriter<W> {
    w: W,
    n: u64,
}

impl<W: Write> Write for CountingWriter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.w.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.w.flush()
    }
}

/// A pack's name (moved to the core, where the edge store's wasm uses it too).
pub use cutpoint_core::protocol::pack::pack_id;

fn random_hex() -> String {
    let mut b = [0u8; 12];
    let _ = getrandom::fill(&mut b);
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Parses `ns/<ns>/...` keys.
enum Key {
    Config(String),
    Pack(String, String),
    /// A recipe part (`backend::part_key`).
    Part(String),
    Recipe(String, String, u64),
    /// A deleted version's tombstone (`backend::tombstone_key`).
    Deleted(String, String, u64),
    Other,
}

fn parse_key(k: &str) -> Key {
    let p: Vec<&str> = k.split('/').collect();
    match p.as_slice() {
        ["ns", ns, "config"] => Key::Config(ns.to_string()),
        ["ns", ns, "packs", _, id] => Key::Pack(ns.to_string(), id.to_string()),
        ["ns", _, "parts", _, id] => Key::Part(id.to_string()),
        ["ns", ns, "recipes", nk @ .., last] if !nk.is_empty() => {
            let Some(n) = name_from_key(&nk.join("/")) else { return Key::Other };
            match last.strip_suffix(".deleted") {
                Some(v) => v.parse().map_or(Key::Other, |v| Key::Deleted(ns.to_string(), n, v)),
                None => last.parse().map_or(Key::Other, |v| Key::Recipe(ns.to_string(), n, v)),
            }
        }
        _ => Key::Other,
    }
}

/// Crash tests: with `CUTPOINT_FAILPOINT=<name>` in its environment, the server aborts (as a
/// SIGKILL would stop it: no cleanup, no flush) when it reaches that point of the durability
/// order: `before-pack-put` (the spooled pack is fsync'd, not yet stored), `after-pack-put`
/// (stored, not yet indexed), `after-recipe-put` (the commit point passed, not yet indexed),
/// `mid-batch-rows` (half a batch group's recipe rows written, the transaction open),
/// `after-batch-link` (the group's rows committed, not yet indexed),
/// `gc-locked` (a gc in a shared bucket took its lock object).
pub(crate) fn failpoint(name: &str) {
    static AT: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    if AT.get_or_init(|| std::env::var("CUTPOINT_FAILPOINT").ok()).as_deref() == Some(name) {
        eprintln!("cutpoint serve: CUTPOINT_FAILPOINT={name}: aborting");
        std::process::abort();
    }
}

/// Tests of a stalled node: with `CUTPOINT_COMMIT_STALL_MS=<n>`, every commit sleeps that long
/// between its chunk check and its recipe put.
fn stall_point() {
    static MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *MS.get_or_init(|| std::env::var("CUTPOINT_COMMIT_STALL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0));
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Tests of a gc racing a part delta: with `CUTPOINT_PART_DELTA_STALL_MS=<n>`, every part delta
/// sleeps that long between reading its base part and checking its chunks.
fn part_delta_stall_point() {
    static MS: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    let ms = *MS.get_or_init(|| std::env::var("CUTPOINT_PART_DELTA_STALL_MS").ok().and_then(|v| v.parse().ok()).unwrap_or(0));
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

pub fn check_ns(ns: &str) -> Result<()> {
    validate_namespace(ns).map_err(StoreError::bad)
}

impl Store {
    /// A store over `objects` with its index at `index_path` and spool files in `tmp`
    /// (emptied: what is there is left from a crash). Reconciles the index with the objects.
    pub fn open(objects: Objects, index_path: &Path, tmp: &Path, limits: Limits, reindex: bool) -> Result<(Store, ReconcileReport)> {
        if let Some(d) = index_path.parent() {
            std::fs::create_dir_all(d)?;
        }
        let mut index = Index::open(index_path, reindex)?;
        if let Some(rows) = objects.recipe_rows() {
            index.set_recipe_rows(rows);
        }
        let _ = std::fs::remove_dir_all(tmp);
        std::fs::create_dir_all(tmp)?;
        let shared = !objects.is_local();
        let store = Store {
            objects,
            index,
            tmp: tmp.to_path_buf(),
            limits,
            gc_lock: RwLock::new(()),
            shared,
            refreshed: Mutex::new(HashMap::new()),
            gc_settle: Duration::from_secs(5),
            gc_lease: Duration::from_secs(120),
            groups: true,
            spool_bufs: BufPool::new(SPOOL_BUFS_IDLE),
            parts_put: Mutex::new(PartCache::default()),
            part_loads: Default::default(),
        };
        let rep = store.reconcile()?;
        Ok((store, rep))
    }

    /// The embedded default: objects in `DIR/objects`, the index in `DIR/index.sqlite`.
    pub fn open_dir(dir: &Path, rt: tokio::runtime::Handle, limits: Limits, reindex: bool) -> Result<(Store, ReconcileReport)> {
        let objects = Objects::local(&dir.join("objects"), rt)?;
        Store::open(objects, &dir.join("index.sqlite"), &dir.join("tmp"), limits, reindex)
    }

    /// A clean stop (no request in flight): the index's log folded in and both databases
    /// compacted where small ([`Index::compact`], `Objects::compact`).
    pub fn close(&self) -> Result<()> {
        self.index.compact()?;
        self.objects.compact()
    }

    /// Brings the index in line with the objects: packs and versions that are in the objects
    /// but not indexed (a crash between a put and its indexing) are indexed; rows whose object
    /// is gone are dropped.
    pub fn reconcile(&self) -> Result<ReconcileReport> {
        self.reconcile_prefix("ns", None)
    }

    /// In a shared bucket: brings namespace `ns`'s index in line with the bucket's listing
    /// (packs and versions other nodes stored are indexed, rows of objects another node's gc
    /// deleted are dropped), unless a refresh of `ns` that started after `since` has already
    /// done so. A no-op over a local directory (one server owns it).
    pub fn refresh(&self, ns: &str, since: Instant) -> Result<()> {
        if !self.shared {
            return Ok(());
        }
        let mut at = self.refreshed.lock().unwrap_or_else(|p| p.into_inner());
        if at.get(ns).is_some_and(|t| *t > since) {
            return Ok(());
        }
        at.insert(ns.to_string(), Instant::now());
        self.reconcile_prefix(&format!("ns/{ns}"), Some(ns))?;
        Ok(())
    }

    /// In a shared bucket: indexes the versions of `name` other nodes committed (and drops
    /// those deleted), from one listing of the name's recipe prefix.
    fn refresh_name(&self, ns: &str, name: &str) -> Result<()> {
        if !self.shared {
            return Ok(());
        }
        let (stored, deleted) = self.name_objects(ns, name)?;
        if let Some(d) = deleted.last() {
            self.index.add_deleted(ns, name, *d)?;
        }
        let have: HashSet<u64> = stored.into_iter().collect();
        for v in self.index.versions(ns, Some(name))? {
            if !have.contains(&v.version) {
                self.index.delete_version(ns, name, v.version)?;
            }
        }
        for v in have {
            if self.index.version(ns, name, Some(v))?.is_none() {
                if let Some(b) = self.objects.get(&recipe_key(ns, &name_key(name), v))? {
                    if let Ok(r) = Stored::read(&b[..]) {
                        self.index.add_version(ns, &version_row(name, v, &r))?;
                    }
                }
            }
        }
        Ok(())
    }

    fn reconcile_prefix(&self, prefix: &str, only: Option<&str>) -> Result<ReconcileReport> {
        let mut rep = ReconcileReport::default();
        let objs = self.objects.list(prefix)?;
        let mut packs: HashMap<String, HashSet<String>> = HashMap::new();
        let mut recipes: HashMap<String, HashSet<(String, u64)>> = HashMap::new();
        for (k, _, _) in &objs {
            match parse_key(k) {
                Key::Config(ns) => {
                    if let Some(b) = self.objects.get(k)? {
                        let text = String::from_utf8_lossy(&b);
                        if let Some(alg) = text.trim().strip_prefix("hash ").and_then(|a| HashAlg::parse(a).ok()) {
                            self.index.set_ns_alg(&ns, alg)?;
                        }
                    }
                }
                Key::Pack(ns, id) => {
                    packs.entry(ns).or_default().insert(id);
                }
                Key::Recipe(ns, name, v) => {
                    recipes.entry(ns).or_default().insert((name, v));
                }
                Key::Deleted(ns, name, v) => self.index.add_deleted(&ns, &name, v)?,
                Key::Part(..) | Key::Other => {}
            }
        }
        let mut namespaces: HashSet<String> = match only {
            Some(ns) => [ns.to_string()].into(),
            None => self.index.namespaces()?.into_iter().collect(),
        };
        namespaces.extend(packs.keys().cloned());
        namespaces.extend(recipes.keys().cloned());
        for ns in &namespaces {
            let have = packs.get(ns).cloned().unwrap_or_default();
            let mut lost_rows = 0;
            for (p, _, _) in self.index.packs(ns)? {
                if !have.contains(&p) {
                    lost_rows += self.index.pack_chunks(ns, &p)?.len();
                    self.index.remove_pack(ns, &p)?;
                    rep.packs_dropped += 1;
                }
            }
            if lost_rows > 0 && self.shared {
                // The dropped rows' chunks may sit in other packs too (a pack another node's
                // gc rewrote, or a duplicate pack from a race): the index keeps one location per
                // chunk, so re-read the namespace's packs to find them again.
                for (p, _, _) in self.index.packs(ns)? {
                    self.index.remove_pack(ns, &p)?;
                }
            }
            for p in &have {
                if !self.index.has_pack(ns, p)? {
                    match self.read_pack_frames(ns, p) {
                        Ok((frames, bytes)) => {
                            self.index.add_pack(ns, p, bytes, now(), &frames)?;
                            rep.packs_indexed += 1;
                        }
                        Err(e) => rep.bad_packs.push(format!("{ns}/{p}: {e}")),
                    }
                }
            }
            let have = recipes.get(ns).cloned().unwrap_or_default();
            for v in self.index.versions(ns, None)? {
                if !have.contains(&(v.name.clone(), v.version)) {
                    self.index.delete_version(ns, &v.name, v.version)?;
                    rep.versions_dropped += 1;
                }
            }
            for (name, v) in &have {
                if self.index.version(ns, name, Some(*v))?.is_none() {
                    if let Some(b) = self.objects.get(&recipe_key(ns, &name_key(name), *v))? {
                        match Stored::read(&b[..]) {
                            Ok(r) => {
                                self.index.add_version(ns, &version_row(name, *v, &r))?;
                                rep.versions_indexed += 1;
                            }
                            Err(e) => rep.bad_recipes.push(format!("{ns}: '{name}' v{v}: {e}")),
                        }
                    }
                }
            }
        }
        Ok(rep)
    }

    /// Reads a stored pack and checks it: its id is its content's BLAKE3 and every frame
    /// verifies. Streamed in ranged reads of [`PACK_READ_PIECE`] bytes (one chunk's data at a
    /// time is held, never the pack). Returns the frames and the pack's size.
    fn read_pack_frames(&self, ns: &str, pack: &str) -> Result<(Vec<Frame>, u64)> {
        let key = pack_key(ns, pack);
        let size = self
            .objects
            .size(&key)?
            .ok_or_else(|| StoreError::NotFound(format!("pack {pack} is gone")))?;
        let rd = self.objects.reader(&key, size, PACK_READ_PIECE);
        let mut r = PackReader::new(rd, MAX_CHUNK, true).map_err(|e| StoreError::Internal(e.to_string()))?;
        let mut frames = Vec::new();
        let mut buf = Vec::new();
        while let Some(f) = r.next_into(&mut buf).map_err(|e| StoreError::Internal(e.to_string()))? {
            frames.push(f);
        }
        if pack_id(r.alg(), &frames) != pack {
            return Err(StoreError::Internal(format!("pack {pack}: its frames do not hash to its name")));
        }
        Ok((frames, size))
    }

    /// The namespace's fingerprint algorithm, fixed by its first write to `alg`.
    fn ensure_ns(&self, ns: &str, alg: HashAlg) -> Result<()> {
        let check = |have: HashAlg| {
            if have == alg {
                Ok(())
            } else {
                Err(StoreError::BadRequest(format!(
                    "namespace '{ns}' uses {} fingerprints; this body uses {}",
                    have.name(),
                    alg.name()
                )))
            }
        };
        if let Some(have) = self.index.ns_alg(ns)? {
            return check(have);
        }
        if !self.objects.put_new(&config_key(ns), format!("hash {}\n", alg.name()).into_bytes())? {
            let b = self.objects.get(&config_key(ns))?.unwrap_or_default();
            let text = String::from_utf8_lossy(&b);
            let have = text
                .trim()
                .strip_prefix("hash ")
                .and_then(|a| HashAlg::parse(a).ok())
                .ok_or_else(|| StoreError::Internal(format!("namespace '{ns}': unreadable config object")))?;
            self.index.set_ns_alg(ns, have)?;
            return check(have);
        }
        self.index.set_ns_alg(ns, alg)
    }

    /// Step 1: which of `ids` the namespace lacks.
    pub fn query(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Digest>> {
        check_ns(ns)?;
        let t = Instant::now();
        let miss = self.index.missing(ns, ids)?;
        if miss.is_empty() || !self.shared {
            return Ok(miss);
        }
        // Another node may have stored them: look at the bucket before saying "missing".
        self.refresh(ns, t)?;
        self.index.missing(ns, &miss)
    }

    /// Step 2: a pack upload, read from `body` (at most `limits.max_pack` bytes).
    pub fn ingest(&self, ns: &str, body: impl Read) -> Result<PackReport> {
        check_ns(ns)?;
        let spool = self.tmp.join(format!("{}.spool", random_hex()));
        let r = self.ingest_spooled(ns, body, &spool);
        let _ = std::fs::remove_file(&spool);
        r
    }

    fn ingest_spooled(&self, ns: &str, body: impl Read, spool: &Path) -> Result<PackReport> {
        let max = self.limits.max_pack;
        let mut lim = Limited {
            r: body,
            left: max,
            over: false,
        };
        let too_large = || StoreError::TooLarge(format!("the pack is larger than this store's limit of {max} bytes"));
        let wire = |e: WireError, over: bool| if over { too_large() } else { StoreError::from(e) };
        let mut rd = match PackReader::upload(&mut lim, MAX_CHUNK, true) {
            Ok(r) => r,
            Err(e) => return Err(wire(e, lim.over)),
        };
        let alg = rd.alg();
        if rd.codec() == Codec::Group && !self.groups {
            return Err(StoreError::BadRequest(
                "this store does not take packs of codec 2 (groups): it does not list zstd-group (cutpoint serve --groups on)".into(),
            ));
        }
        if let Some(have) = self.index.ns_alg(ns)? {
            if have != alg {
                return Err(StoreError::BadRequest(format!(
                    "namespace '{ns}' uses {} fingerprints; this pack uses {}",
                    have.name(),
                    alg.name()
                )));
            }
        }
        // O_DIRECT where the file system takes it: no copy of the pack into the page cache.
        let mut hw = Spool::create_in(spool, self.spool_bufs.clone())?;
        // Frames are kept as they arrived: a compressed frame stays compressed at rest. Each is
        // read (and checked) straight into the spool's buffer, its head put before it if kept.
        hw.write_all(&encode_pack_header(alg, Layout::Framed, rd.codec()).map_err(StoreError::internal)?)?;
        let mut pos = HEADER_LEN as u64;
        let mut rep = PackReport {
            pack: None,
            chunks: 0,
            stored: 0,
            duplicates: 0,
            stored_bytes: 0,
        };
        let mut kept = Vec::new();
        let mut seen = HashSet::new();
        // Chunks kept although repeated: a group's chunks are kept with their group.
        let mut kept_twice = 0;
        loop {
            let f = match rd.next_in(&mut hw) {
                Ok(Some(f)) => f,
                Ok(None) => break,
                Err(e) => {
                    drop(rd);
                    return Err(wire(e, lim.over));
                }
            };
            rep.chunks += 1;
            if rep.chunks > self.limits.max_pack_chunks {
                drop(rd);
                return Err(StoreError::TooLarge(format!(
                    "the pack holds more than this store's limit of {} chunks",
                    self.limits.max_pack_chunks
                )));
            }
            // A chunk twice in one pack is written once (but for a group's chunks, kept with
            // their group, indexed once). Whether the namespace already has it is decided when
            // the pack is indexed (one probe per chunk, not two); a chunk it had is left
            // unindexed in the new pack, which gc rewrites.
            let in_group = f.member || rd.buffered() == Buffered::Member;
            if !seen.insert(f.id) {
                rep.duplicates += 1;
                if !in_group {
                    continue;
                }
                kept_twice += 1;
            }
            if f.member {
                // No data: its group's frame was kept just before.
                let group = kept.last().map_or(0, |g: &Frame| g.offset);
                hw.write_all(&encode_frame_head(FrameHead::Member { raw: f.raw, id: f.id }))?;
                pos += FRAME_HEAD_LEN as u64;
                kept.push(Frame { offset: group, ..f });
                continue;
            }
            let head = FrameHead::Chunk {
                len: f.len,
                id: f.id,
                compressed: f.compressed,
            };
            hw.keep_frame(&encode_frame_head(head), f.len as usize)?;
            let off = pos + FRAME_HEAD_LEN as u64;
            pos = off + f.len as u64;
            kept.push(Frame { offset: off, ..f });
        }
        drop(rd);
        if lim.over {
            return Err(too_large());
        }
        rep.stored = kept.len() as u64 - kept_twice;
        rep.stored_bytes = 0;
        if kept.is_empty() {
            return Ok(rep);
        }
        hw.write_all(&encode_frame_head(FrameHead::End { count: kept.len() as u64 }))?;
        let id = pack_id(alg, &kept);
        let size = hw.len();
        let file = hw.finish()?;
        file.sync_all()?;
        drop(file);
        self.ensure_ns(ns, alg)?;
        let existed = self.index.has_pack(ns, &id)?;
        failpoint("before-pack-put");
        self.objects.put_spooled(&pack_key(ns, &id), spool)?;
        failpoint("after-pack-put");
        let (added, added_bytes) = self.index.add_pack(ns, &id, size, now(), &kept)?;
        rep.duplicates += rep.stored - added;
        rep.stored = added;
        rep.stored_bytes = added_bytes;
        if added == 0 && !existed && !self.shared {
            // Every chunk was there already: the new pack holds nothing the index names. (In a
            // shared bucket another node may be indexing it right now: gc removes it later.)
            self.index.remove_pack(ns, &id)?;
            self.objects.delete(&pack_key(ns, &id))?;
            return Ok(rep);
        }
        rep.pack = Some(id);
        Ok(rep)
    }

    /// Step 3: commits `body` as the next version of `name`: a recipe with a digest, or a
    /// delta against an earlier version of the same name (`cutpoint_core::protocol::delta`),
    /// which is expanded against the stored base and then committed as the full recipe.
    pub fn commit(&self, ns: &str, name: &str, body: &[u8]) -> Result<Version> {
        self.commit_within(ns, name, body, &mut self.limits.max_commit_entries.clone())
    }

    /// [`Store::commit`], a recipe naming parts taking its expanded entries from `budget` (what
    /// the request may still expand: a batch shares one `max_commit_entries`).
    fn commit_within(&self, ns: &str, name: &str, body: &[u8], budget: &mut u64) -> Result<Version> {
        check_ns(ns)?;
        validate_name(name).map_err(StoreError::bad)?;
        if body.starts_with(b"cutpoint-delta ") {
            let d = delta::parse(body).map_err(|e| StoreError::BadRequest(format!("delta: {e}")))?;
            // The base is read under the GC lock, held until the commit's put: no gc runs
            // between, and a gc keeps every chunk a stored recipe names, so the entries the runs
            // copy from the base (checked when the base was committed) are still stored. Only
            // the delta's own chunk lines are checked (in a shared bucket, where another node's
            // gc does not take this lock, every entry is).
            let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
            let (_, base) = self.recipe(ns, name, Some(d.base))?;
            // Bounded before it is built: the expanded recipe's text within --max-recipe.
            let recipe = d.expand(&base, self.limits.max_recipe).map_err(|e| match e {
                delta::ExpandError::TooLarge(m) => StoreError::TooLarge(format!("delta: {m}")),
                delta::ExpandError::Malformed(e) => StoreError::BadRequest(format!("delta: {e}")),
            })?;
            drop(base);
            let lines: Vec<RecipeEntry> = d
                .ops
                .into_iter()
                .filter_map(|op| match op {
                    delta::Op::Entry(e) => Some(e),
                    delta::Op::Copy { .. } => None,
                })
                .collect();
            return self.commit_locked(ns, name, recipe, Some(&lines));
        }
        if has_part_lines(body) {
            let r = PartRecipe::parse(body).map_err(|e| StoreError::BadRequest(format!("recipe: {e}")))?;
            return self.commit_parts(ns, name, r, budget);
        }
        let recipe = Recipe::read(body).map_err(|e| StoreError::BadRequest(format!("recipe: {e}")))?;
        self.commit_recipe(ns, name, recipe)
    }

    /// 400 unless the namespace (if it has an algorithm yet) uses `alg`.
    fn check_alg(&self, ns: &str, alg: HashAlg, what: &str) -> Result<()> {
        if let Some(have) = self.index.ns_alg(ns)? {
            if have != alg {
                return Err(StoreError::BadRequest(format!(
                    "namespace '{ns}' uses {} fingerprints; this {what} uses {}",
                    have.name(),
                    alg.name()
                )));
            }
        }
        Ok(())
    }

    /// Before a commit's (or a part's) check, under the gc lock the caller holds: in a shared
    /// bucket, the gc epoch this check belongs to (see `confirm_commit`), refused while another
    /// node's gc holds the namespace, and the index refreshed from the bucket's listing.
    fn commit_prelude(&self, ns: &str) -> Result<Option<Option<Bytes>>> {
        if !self.shared {
            return Ok(None);
        }
        let epoch = self.gc_epoch(ns)?;
        // A gc on another node holds the namespace: refuse rather than race its sweep (a
        // lock past its lease is a dead node's and is ignored).
        if self.gc_lock_held(ns)? {
            return Err(StoreError::Busy(format!(
                "a gc of namespace '{ns}' is running on a node of this bucket; try again shortly"
            )));
        }
        // Every chunk is checked against the bucket's listing, not only this node's cache:
        // packs another node's gc deleted are dropped, packs other nodes stored are indexed.
        self.refresh(ns, Instant::now())?;
        Ok(Some(epoch))
    }

    /// Every entry's chunk is indexed with the entry's length: 409 with the missing ids, 400 on
    /// a length that differs, `what` naming the body.
    fn check_chunks(&self, ns: &str, entries: &[RecipeEntry], what: &str) -> Result<()> {
        if let Some(e) = entries.iter().find(|e| e.size as usize > MAX_CHUNK) {
            return Err(StoreError::BadRequest(format!(
                "{what}: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}",
                e.size
            )));
        }
        let ids: Vec<Digest> = entries.iter().map(|e| e.fp).collect();
        let lens = self.index.lengths(ns, &ids)?;
        Self::check_present(ns, entries, what, |i, _| lens[i])
    }

    /// `POST parts`: stores a recipe part (PROTOCOL.md 3.7) once its chunks are all present
    /// with the part's lengths; create-only (a part already there: nothing written).
    /// A part delta (PROTOCOL.md 3.8, feature `part-delta`) is expanded against its base part
    /// first ([`Store::expand_part_delta`]) and the result stored as if it had been uploaded.
    pub fn put_part(&self, ns: &str, body: &[u8]) -> Result<PartStored> {
        check_ns(ns)?;
        if is_part_delta(body) {
            return self.put_part_delta(ns, body);
        }
        let part = Part::parse(body).map_err(|e| StoreError::BadRequest(format!("part: {e}")))?;
        self.check_alg(ns, part.hash, "part")?;
        let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
        self.commit_prelude(ns)?;
        self.store_part_locked(ns, part, Some(body), None)
    }

    /// A part delta: its base part read and the delta expanded under the GC lock, held until
    /// the part is put. Only the entries the delta writes out are checked here (in a directory
    /// store): those its runs copy from the base part were checked when the base part was
    /// stored, and no gc can have removed their chunks since, nor can while the lock is held —
    /// a gc keeps every chunk of every part it keeps, deletes a part before sweeping its
    /// chunks, and takes this lock exclusively (PROTOCOL.md 3.8). In a shared bucket, where
    /// another node's gc does not take this lock, every entry is checked.
    fn put_part_delta(&self, ns: &str, body: &[u8]) -> Result<PartStored> {
        let head = part_delta_head(body).map_err(|e| StoreError::BadRequest(format!("part delta: {e}")))?;
        self.check_alg(ns, head.hash, "part delta")?;
        let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
        self.commit_prelude(ns)?;
        let (part, written) = self.expand_part_delta(ns, body, head.base)?;
        part_delta_stall_point();
        let check = if self.shared { None } else { Some(&written[..]) };
        self.store_part_locked(ns, part, None, check)
    }

    /// A part delta's expansion and the entries it writes out: its base part read from the
    /// namespace (409 `missing_parts` naming it where the namespace lacks it), every bound
    /// checked before the part is built (400; 413 where the expanded text would pass
    /// `max_recipe_bytes`, the largest part body).
    fn expand_part_delta(&self, ns: &str, body: &[u8], base: Digest) -> Result<(Part, Vec<RecipeEntry>)> {
        let Some(base) = self.load_part(ns, &base)? else {
            return Err(StoreError::MissingParts {
                message: format!("the part delta's base part is not in namespace '{ns}'; nothing was stored"),
                missing: vec![base],
            });
        };
        expand_part_delta_lines(body, &base, self.limits.max_recipe).map_err(|e| match e {
            delta::ExpandError::TooLarge(m) => StoreError::TooLarge(format!("part delta: {m}")),
            delta::ExpandError::Malformed(e) => StoreError::BadRequest(format!("part delta: {e}")),
        })
    }

    /// Stores a parsed part (`text`: its canonical text where the caller has it) once the
    /// chunks of `check` (those a delta wrote out; `None`: its entries) are all present with
    /// their lengths; create-only. The caller holds the GC lock and has run `commit_prelude`.
    /// The part is kept parsed for the commit that names it ([`PartCache`]).
    fn store_part_locked(&self, ns: &str, part: Part, text: Option<&[u8]>, check: Option<&[RecipeEntry]>) -> Result<PartStored> {
        let check = check.unwrap_or(&part.entries);
        let owned;
        let body = match text {
            Some(t) => t,
            None => {
                owned = part.text().into_bytes();
                &owned
            }
        };
        let pid = cutpoint_core::protocol::part::part_id(part.hash, body);
        let id = pid.unwrap_or_default();
        let rep = PartStored {
            part: hex(&id),
            chunks: part.entries.len() as u64,
            bytes: part.bytes(),
        };
        // Checked in pieces, so that the lookups stay as small as a commit's.
        for piece in check.chunks(16384) {
            self.check_chunks(ns, piece, "part")?;
        }
        self.ensure_ns(ns, part.hash)?;
        self.objects.put_new(&part_key(ns, &rep.part), body.to_vec())?;
        if let (Some(id), false) = (pid, self.shared) {
            self.parts_put.lock().unwrap_or_else(|p| p.into_inner()).put(ns, id, part);
        }
        Ok(rep)
    }

    /// Stored parts read and parsed so far (a commit naming parts just put reads none).
    pub fn part_loads(&self) -> u64 {
        self.part_loads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// A part a commit names, whose presence the commit has just checked (`query_parts`): as it
    /// was parsed when put, where [`PartCache`] still holds it, else read and parsed.
    fn part_for_commit(&self, ns: &str, id: &Digest) -> Result<Option<Arc<Part>>> {
        if !self.shared {
            if let Some(p) = self.parts_put.lock().unwrap_or_else(|p| p.into_inner()).get(ns, id) {
                return Ok(Some(p));
            }
        }
        Ok(self.load_part(ns, id)?.map(Arc::new))
    }

    /// `POST parts/query`: which of `ids` the namespace has no part of.
    pub fn query_parts(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Digest>> {
        check_ns(ns)?;
        let mut miss = Vec::new();
        for id in ids {
            if !self.objects.exists(&part_key(ns, &hex(id)))? {
                miss.push(*id);
            }
        }
        Ok(miss)
    }

    /// `GET parts/{id}`: a part's text.
    pub fn part_text(&self, ns: &str, id: &Digest) -> Result<Bytes> {
        check_ns(ns)?;
        self.objects
            .get(&part_key(ns, &hex(id)))?
            .ok_or_else(|| StoreError::NotFound(format!("no part {} in namespace '{ns}'", hex(id))))
    }

    /// A stored part, parsed (`None`: not there). A part that does not parse is damaged.
    fn load_part(&self, ns: &str, id: &Digest) -> Result<Option<Part>> {
        self.part_loads.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let Some(b) = self.objects.get(&part_key(ns, &hex(id)))? else { return Ok(None) };
        Part::parse(&b)
            .map(Some)
            .map_err(|e| StoreError::Damaged(format!("the stored part {} in namespace '{ns}' is damaged: {e}", hex(id))))
    }

    /// Commits a recipe that names parts: each part must be stored, with the COUNT and BYTES
    /// the line says; the digest is computed by streaming the parts (one in memory at a time);
    /// the plain chunk lines are checked as a plain recipe's are. The expanded entry count is
    /// taken from `budget` (at most `max_commit_entries` a request) before any part is read, so
    /// a short body naming a big part many times costs the store no more than the limit; each
    /// distinct part is checked for existence once.
    fn commit_parts(&self, ns: &str, name: &str, r: PartRecipe, budget: &mut u64) -> Result<Version> {
        self.check_alg(ns, r.hash, "recipe")?;
        let digest = r
            .digest
            .ok_or_else(|| StoreError::BadRequest("recipe: a commit needs the file's 'digest' line".into()))?;
        Self::take_entries(budget, r.count, self.limits.max_commit_entries)?;
        let chunks: Vec<RecipeEntry> = r
            .lines
            .iter()
            .filter_map(|l| match l {
                Line::Chunk(e) => Some(e.clone()),
                Line::Part { .. } => None,
            })
            .collect();
        let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
        let epoch = self.commit_prelude(ns)?;
        self.check_chunks(ns, &chunks, "recipe")?;
        let parts = Self::distinct_parts(&r.lines);
        let missing = self.query_parts(ns, &parts)?;
        if !missing.is_empty() {
            return Err(StoreError::MissingParts {
                message: format!(
                    "{} of the recipe's parts are not in namespace '{ns}'; nothing was committed",
                    missing.len()
                ),
                missing,
            });
        }
        if self.expanded_digest(ns, &r)? != Some(digest) {
            return Err(StoreError::BadRequest(
                "recipe: its 'digest' line is not the digest of its chunk list (see PROTOCOL.md, 'File digest')".into(),
            ));
        }
        self.ensure_ns(ns, r.hash)?;
        let stored = Stored::Parts(r);
        let ids: Vec<Digest> = chunks.iter().map(|e| e.fp).collect();
        self.put_version(ns, name, stored, &ids, &parts, epoch)
    }

    /// Takes a commit's `count` expanded entries from what its request may still expand:
    /// 413 `too_many_entries` (nothing read yet) when they are more.
    fn take_entries(budget: &mut u64, count: u64, limit: u64) -> Result<()> {
        if count > *budget {
            return Err(StoreError::TooManyEntries(format!(
                "recipe: it expands to {count} entries, over the store's max_commit_entries of {limit} \
                 (in this request); nothing was committed"
            )));
        }
        *budget -= count;
        Ok(())
    }

    /// The distinct parts a recipe names, in order of first mention.
    fn distinct_parts(lines: &[Line]) -> Vec<Digest> {
        let mut seen = HashSet::new();
        lines
            .iter()
            .filter_map(|l| match l {
                Line::Part { id, .. } if seen.insert(*id) => Some(*id),
                _ => None,
            })
            .collect()
    }

    /// The file digest of a recipe's expanded chunk list, its parts taken one at a time (as
    /// parsed when put, where the [`PartCache`] holds them; else read: a part named on
    /// consecutive lines is read once); 400 where a part's COUNT, BYTES or algorithm differ from
    /// its line's. The caller has checked that every part is stored.
    fn expanded_digest(&self, ns: &str, r: &PartRecipe) -> Result<Option<Digest>> {
        let mut d = FileDigest::new(r.hash);
        let mut last: Option<(Digest, Arc<Part>)> = None;
        for l in &r.lines {
            let (id, count, bytes) = match l {
                Line::Chunk(e) => {
                    d.add(&e.fp, e.size);
                    continue;
                }
                Line::Part { id, count, bytes } => (id, *count, *bytes),
            };
            if last.as_ref().map(|(l, _)| l) != Some(id) {
                let p = self.part_for_commit(ns, id)?.ok_or_else(|| StoreError::MissingParts {
                    message: format!("a part of the recipe is no longer in namespace '{ns}'; nothing was committed"),
                    missing: vec![*id],
                })?;
                last = Some((*id, p));
            }
            let p = &last.as_ref().expect("loaded above").1;
            if p.hash != r.hash || p.entries.len() as u64 != count || p.bytes() != bytes {
                return Err(StoreError::BadRequest(format!(
                    "recipe: part {} holds {} chunks of {} bytes, the recipe says {count} chunks of {bytes} bytes",
                    hex(id),
                    p.entries.len(),
                    p.bytes()
                )));
            }
            for e in &p.entries {
                d.add(&e.fp, e.size);
            }
        }
        Ok(d.finish())
    }

    /// The commit point: the recipe's text put create-only under the name's next version, then
    /// (in a shared bucket) confirmed against a gc that may have run meanwhile, then indexed.
    fn put_version(&self, ns: &str, name: &str, recipe: Stored, ids: &[Digest], parts: &[Digest], epoch: Option<Option<Bytes>>) -> Result<Version> {
        let text = recipe.text();
        let nk = name_key(name);
        stall_point();
        // The next number the name never had: above its versions and its deleted ones (whose
        // tombstones another node may have written since this node's index last looked).
        let mut version = self.index.max_version(ns, name)? + 1;
        loop {
            if self.shared && self.objects.exists(&tombstone_key(ns, &nk, version))? {
                version += 1;
                continue;
            }
            if self.objects.put_new(&recipe_key(ns, &nk, version), text.clone())? {
                break;
            }
            version += 1;
        }
        failpoint("after-recipe-put");
        if let Some(e) = epoch {
            self.confirm_commit(ns, name, version, ids, parts, e)?;
        }
        let row = version_row(name, version, &recipe);
        self.index.add_version(ns, &row)?;
        Ok(row)
    }

    /// Commits a parsed recipe (see [`Store::commit`]).
    pub fn commit_recipe(&self, ns: &str, name: &str, recipe: Recipe) -> Result<Version> {
        let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
        self.commit_locked(ns, name, recipe, None)
    }

    /// [`Store::commit_recipe`], the GC lock held (shared) by the caller. `only`: the entries
    /// to check against the index (a delta's chunk lines; `None`: every entry).
    fn commit_locked(&self, ns: &str, name: &str, recipe: Recipe, only: Option<&[RecipeEntry]>) -> Result<Version> {
        self.check_alg(ns, recipe.hash, "recipe")?;
        let digest = recipe
            .digest
            .ok_or_else(|| StoreError::BadRequest("recipe: a commit needs the file's 'digest' line".into()))?;
        if FileDigest::of(&recipe) != Some(digest) {
            return Err(StoreError::BadRequest(
                "recipe: its 'digest' line is not the digest of its chunk list (see PROTOCOL.md, 'File digest')".into(),
            ));
        }
        let epoch = self.commit_prelude(ns)?;
        let check = match only {
            Some(lines) if !self.shared => lines,
            _ => &recipe.entries[..],
        };
        self.check_chunks(ns, check, "recipe").map_err(|e| match e {
            StoreError::Missing { missing, .. } => StoreError::Missing {
                message: format!(
                    "{} of the recipe's chunks are not in namespace '{ns}'; nothing was committed",
                    missing.len()
                ),
                missing,
            },
            e => e,
        })?;
        self.ensure_ns(ns, recipe.hash)?;
        let ids: Vec<Digest> = recipe.entries.iter().map(|e| e.fp).collect();
        let row = self.put_version(ns, name, Stored::Plain(recipe), &ids, &[], epoch)?;
        debug_assert_eq!(row.digest, hex(&digest));
        Ok(row)
    }

    /// A batch entry's body as the recipe it commits: a recipe, or a delta expanded against its
    /// base (404 when the base version is not there). (Every entry of the expansion is then
    /// checked with the group's one lookup.)
    fn parse_commit(&self, ns: &str, name: &str, body: &[u8]) -> Result<Recipe> {
        validate_name(name).map_err(StoreError::bad)?;
        if body.starts_with(b"cutpoint-delta ") {
            let d = delta::parse(body).map_err(|e| StoreError::BadRequest(format!("delta: {e}")))?;
            let (_, base) = self.recipe(ns, name, Some(d.base))?;
            // Bounded before it is built: the expanded recipe's text within --max-recipe.
            d.expand(&base, self.limits.max_recipe).map_err(|e| match e {
                delta::ExpandError::TooLarge(m) => StoreError::TooLarge(format!("delta: {m}")),
                delta::ExpandError::Malformed(e) => StoreError::BadRequest(format!("delta: {e}")),
            })
        } else {
            Recipe::read(body).map_err(|e| StoreError::BadRequest(format!("recipe: {e}")))
        }
    }

    /// What a batch entry's commit checks before the GC lock: the namespace's fingerprint, the
    /// digest line, the chunk sizes.
    fn check_recipe(&self, ns: &str, recipe: &Recipe) -> Result<Digest> {
        self.check_alg(ns, recipe.hash, "recipe")?;
        let digest = recipe
            .digest
            .ok_or_else(|| StoreError::BadRequest("recipe: a commit needs the file's 'digest' line".into()))?;
        if FileDigest::of(recipe) != Some(digest) {
            return Err(StoreError::BadRequest(
                "recipe: its 'digest' line is not the digest of its chunk list (see PROTOCOL.md, 'File digest')".into(),
            ));
        }
        if let Some(e) = recipe.entries.iter().find(|e| e.size as usize > MAX_CHUNK) {
            return Err(StoreError::BadRequest(format!(
                "recipe: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}",
                e.size
            )));
        }
        Ok(digest)
    }

    /// Under the GC lock: every chunk the recipe names indexed with the recipe's length
    /// (`length_of`: the index's answer for an id). 409 with the missing ids, 400 on a length.
    fn check_present(ns: &str, entries: &[RecipeEntry], what: &str, length_of: impl Fn(usize, &Digest) -> Option<u32>) -> Result<()> {
        let mut missing = Vec::new();
        let mut seen = HashSet::new();
        for (i, e) in entries.iter().enumerate() {
            match length_of(i, &e.fp) {
                None => {
                    if seen.insert(e.fp) {
                        missing.push(e.fp)
                    }
                }
                Some(l) if l != e.size => {
                    return Err(StoreError::BadRequest(format!(
                        "{what}: chunk {} is {} bytes in the store, the {what} says {}",
                        hex(&e.fp),
                        l,
                        e.size
                    )))
                }
                Some(_) => {}
            }
        }
        if !missing.is_empty() {
            let done = if what == "recipe" { "committed" } else { "stored" };
            return Err(StoreError::Missing {
                message: format!("{} of the {what}'s chunks are not in namespace '{ns}'; nothing was {done}", missing.len()),
                missing,
            });
        }
        Ok(())
    }

    /// A batch commit (`POST /v1/ns/{ns}/commits`): each file committed as its own
    /// [`Store::commit`] would be, in order, each atomic on its own; one result per file. In a
    /// local directory the batch goes in groups of distinct names (a name met again starts the
    /// next group, so that its delta may name the version just made): the group's chunk
    /// lookups are one index query, its recipes are put as recipe rows (`recipe_rows`) under
    /// their next version numbers in one synchronous transaction (the group commits whole or
    /// not at all) and indexed in one more; every `Ok` is durable when this returns. In a bucket each
    /// file is committed on its own (a put is durable when acknowledged).
    /// `Err` only when the store itself failed (nothing after the failing group committed).
    pub fn commit_batch(&self, ns: &str, files: &[(String, Range<usize>)], body: &[u8]) -> Result<Vec<Result<Version>>> {
        check_ns(ns)?;
        // One request, one max_commit_entries: the batch's recipes in parts share it.
        let mut budget = self.limits.max_commit_entries;
        if self.shared {
            return Ok(files.iter().map(|(n, r)| self.commit_within(ns, n, &body[r.clone()], &mut budget)).collect());
        }
        let mut out = Vec::with_capacity(files.len());
        let mut i = 0;
        while i < files.len() {
            // A recipe naming parts, or a delta, is committed on its own: its parts are read one
            // at a time, and a delta is expanded (up to --max-recipe) only when its turn comes,
            // so a batch of short deltas never holds several expanded recipes at once.
            if Self::alone_in_batch(&body[files[i].1.clone()]) {
                out.push(self.commit_within(ns, &files[i].0, &body[files[i].1.clone()], &mut budget));
                i += 1;
                continue;
            }
            let mut names = HashSet::new();
            let mut j = i;
            while j < files.len() && names.insert(files[j].0.as_str()) && !Self::alone_in_batch(&body[files[j].1.clone()]) {
                j += 1;
            }
            out.extend(self.commit_group(ns, &files[i..j], body)?);
            i = j;
        }
        Ok(out)
    }

    /// A batch entry committed on its own, not in a group: a recipe naming parts, or a delta.
    fn alone_in_batch(body: &[u8]) -> bool {
        body.starts_with(b"cutpoint-delta ") || has_part_lines(body)
    }

    /// One group of a batch commit (distinct names), in a local directory.
    fn commit_group(&self, ns: &str, files: &[(String, Range<usize>)], body: &[u8]) -> Result<Vec<Result<Version>>> {
        let mut res: Vec<Result<Recipe>> = files
            .iter()
            .map(|(name, r)| {
                let recipe = self.parse_commit(ns, name, &body[r.clone()])?;
                self.check_recipe(ns, &recipe)?;
                Ok(recipe)
            })
            .collect();
        let _shared = self.gc_lock.read().unwrap_or_else(|p| p.into_inner());
        // One lookup of every distinct id the group's recipes name.
        let mut ids: Vec<Digest> = res.iter().flatten().flat_map(|r| r.entries.iter().map(|e| e.fp)).collect();
        ids.sort_unstable();
        ids.dedup();
        let lens: HashMap<Digest, Option<u32>> = ids.iter().copied().zip(self.index.lengths(ns, &ids)?).collect();
        for r in res.iter_mut() {
            if let Ok(recipe) = r {
                let checked = Self::check_present(ns, &recipe.entries, "recipe", |_, id| lens.get(id).copied().flatten()).and_then(|_| self.ensure_ns(ns, recipe.hash));
                if let Err(e) = checked {
                    *r = Err(e);
                }
            }
        }
        // Published in one transaction of recipe rows, which the index reads its versions from.
        let versions = self.publish_group(ns, files, &res)?;
        Ok(res
            .into_iter()
            .zip(versions)
            .map(|(r, v)| r.map(|_| v.expect("a version for every recipe that passed")))
            .collect())
    }

    /// Puts the passing recipes of a group as recipe rows (`recipe_rows`), each under its name's
    /// next version number, in one transaction: the rows to index (`None` for a file that
    /// failed its checks). The names' highest numbers are read in one pass over the index.
    fn publish_group(&self, ns: &str, files: &[(String, Range<usize>)], res: &[Result<Recipe>]) -> Result<Vec<Option<Version>>> {
        let passing: Vec<(&str, &Recipe)> = files.iter().zip(res).filter_map(|((n, _), r)| r.as_ref().ok().map(|r| (n.as_str(), r))).collect();
        let names: Vec<&str> = passing.iter().map(|(n, _)| *n).collect();
        let highest = self.index.max_versions(ns, &names)?;
        let mut items = Vec::with_capacity(passing.len());
        for ((name, recipe), top) in passing.iter().zip(highest) {
            let mut text = Vec::new();
            recipe.write(&mut text).map_err(StoreError::internal)?;
            items.push((ns, *name, top + 1, text));
        }
        stall_point();
        let mut versions = self.objects.put_recipe_rows(&items)?.into_iter();
        failpoint("after-batch-link");
        Ok(files
            .iter()
            .zip(res)
            .map(|((name, _), r)| {
                let recipe = r.as_ref().ok()?;
                let v = versions.next()?;
                Some(version_row(name, v, &Stored::Plain(recipe.clone())))
            })
            .collect())
    }

    /// In a shared bucket, after a commit's put: if a gc started since the commit checked the
    /// lock (the lock is held, or the gc epoch changed), that gc may have listed the recipes
    /// before this put (a node stalled longer than `--gc-settle`) and swept chunks this recipe
    /// names. Then the commit waits for that gc to end and looks at the bucket again: if every
    /// chunk is still there the version stands; if not, the version is withdrawn (tombstoned,
    /// so its number is not given again, and deleted) and the commit fails with 409 and the
    /// missing ids, as if they had been missing at its check. A committed version that answers
    /// 201 names only chunks that are present.
    fn confirm_commit(&self, ns: &str, name: &str, version: u64, ids: &[Digest], parts: &[Digest], epoch: Option<Bytes>) -> Result<()> {
        if !self.gc_lock_held(ns)? && self.gc_epoch(ns)? == epoch {
            return Ok(());
        }
        let t = Instant::now();
        while self.gc_lock_held(ns)? && t.elapsed() < self.gc_lease {
            std::thread::sleep(Duration::from_millis(200));
        }
        let nk = name_key(name);
        let withdraw = || -> Result<()> {
            self.objects.put_new(&tombstone_key(ns, &nk, version), format!("withdrawn at {} (Unix seconds)\n", now()).into_bytes())?;
            self.index.add_deleted(ns, name, version)?;
            self.objects.delete(&recipe_key(ns, &nk, version))
        };
        if self.gc_lock_held(ns)? {
            withdraw()?;
            return Err(StoreError::Busy(format!(
                "a gc of namespace '{ns}' ran while this commit was stalled and is still running; nothing was committed"
            )));
        }
        self.refresh(ns, Instant::now())?;
        let missing = self.index.missing(ns, ids)?;
        let missing_parts = self.query_parts(ns, parts)?;
        if missing.is_empty() && missing_parts.is_empty() {
            return Ok(());
        }
        if missing.is_empty() {
            withdraw()?;
            return Err(StoreError::MissingParts {
                message: format!(
                    "a gc that ran while this commit was stalled removed {} of its parts from namespace '{ns}'; nothing was committed",
                    missing_parts.len()
                ),
                missing: missing_parts,
            });
        }
        withdraw()?;
        Err(StoreError::Missing {
            message: format!(
                "a gc that ran while this commit was stalled removed {} of its chunks from namespace '{ns}'; nothing was committed",
                missing.len()
            ),
            missing,
        })
    }

    /// The gc epoch of a namespace in a shared bucket: the content of its `gc-epoch` object,
    /// which every gc rewrites when it takes the lock.
    fn gc_epoch(&self, ns: &str) -> Result<Option<Bytes>> {
        self.objects.get(&format!("ns/{ns}/gc-epoch"))
    }

    /// A version's row and plain recipe (`version None`: the latest). A version committed in
    /// parts is 404 here (a delta cannot name it as its base): [`Store::stored`] reads it.
    pub fn recipe(&self, ns: &str, name: &str, version: Option<u64>) -> Result<(Version, Recipe)> {
        match self.stored(ns, name, version)? {
            (row, Stored::Plain(r)) => Ok((row, r)),
            (row, Stored::Parts(_)) => Err(StoreError::NotFound(format!(
                "version {} of '{name}' in namespace '{ns}' is committed in parts (it cannot be a delta's base)",
                row.version
            ))),
        }
    }

    /// A version's row and its stored recipe, plain or with part lines.
    pub fn stored(&self, ns: &str, name: &str, version: Option<u64>) -> Result<(Version, Stored)> {
        check_ns(ns)?;
        validate_name(name).map_err(StoreError::bad)?;
        let not_found = || match version {
            Some(v) => StoreError::NotFound(format!("no version {v} of '{name}' in namespace '{ns}'")),
            None => StoreError::NotFound(format!("no file '{name}' in namespace '{ns}'")),
        };
        self.refresh_name(ns, name)?;
        let row = self.index.version(ns, name, version)?.ok_or_else(not_found)?;
        let b = self
            .objects
            .get(&recipe_key(ns, &name_key(name), row.version))?
            .ok_or_else(not_found)?;
        let r = Stored::read(&b[..]).map_err(|e| damaged(ns, name, row.version, e))?;
        Ok((row, r))
    }

    pub fn list(&self, ns: &str) -> Result<Vec<Version>> {
        check_ns(ns)?;
        self.refresh(ns, Instant::now())?;
        self.index.versions(ns, None)
    }

    /// Deletes one version, or every version of `name`. Returns how many.
    pub fn delete(&self, ns: &str, name: &str, version: Option<u64>) -> Result<u64> {
        check_ns(ns)?;
        validate_name(name).map_err(StoreError::bad)?;
        self.refresh_name(ns, name)?;
        let vs: Vec<u64> = match version {
            Some(v) => self.index.version(ns, name, Some(v))?.map(|r| r.version).into_iter().collect(),
            None => self.index.versions(ns, Some(name))?.into_iter().map(|r| r.version).collect(),
        };
        if vs.is_empty() {
            return Err(StoreError::NotFound(format!("nothing to delete: '{name}' in namespace '{ns}'")));
        }
        self.tombstone(ns, name, &vs)?;
        for v in &vs {
            self.objects.delete(&recipe_key(ns, &name_key(name), *v))?;
            self.index.delete_version(ns, name, *v)?;
        }
        Ok(vs.len() as u64)
    }

    /// Before versions `vs` of `name` are deleted: if the highest of them is the name's latest
    /// version, its tombstone object is written (and indexed), so that the name's next commit
    /// gets a number above it, after a restart or a rebuilt index too; older tombstones of the
    /// name are removed (one is enough).
    fn tombstone(&self, ns: &str, name: &str, vs: &[u64]) -> Result<()> {
        let Some(&top) = vs.iter().max() else { return Ok(()) };
        let latest = self.index.version(ns, name, None)?.map_or(0, |r| r.version);
        if top < latest || top <= self.index.max_deleted(ns, name)? {
            return Ok(());
        }
        let nk = name_key(name);
        let (_, old) = self.name_objects(ns, name)?;
        self.objects.put_new(&tombstone_key(ns, &nk, top), format!("deleted at {} (Unix seconds)\n", now()).into_bytes())?;
        self.index.add_deleted(ns, name, top)?;
        for d in old.into_iter().filter(|d| *d < top) {
            self.objects.delete(&tombstone_key(ns, &nk, d))?;
        }
        Ok(())
    }

    /// Step 4: a restore of the bytes `range` of a recipe's file, read piece by piece with
    /// [`Store::restore_next`] (the server takes one piece at a time, when the client has
    /// read the last: nothing is read ahead of a client that does not read).
    pub fn restore_cursor(&self, ns: &str, recipe: Recipe, range: Range<u64>) -> RestoreCursor {
        self.restore_stored(ns, Stored::Plain(recipe), range)
    }

    /// [`Store::restore_cursor`] of a stored recipe, plain or in parts. A recipe in parts is
    /// streamed: whole parts before the range are skipped by their BYTES, and one part at a
    /// time is read and held (bounded by `--max-recipe`).
    pub fn restore_stored(&self, ns: &str, recipe: Stored, range: Range<u64>) -> RestoreCursor {
        // The first entry (plain) or line (parts) overlapping the range, and its file offset.
        let (mut at, mut pos) = (0, 0u64);
        let alg = match &recipe {
            Stored::Plain(r) => r.hash,
            Stored::Parts(r) => r.hash,
        };
        let src = match recipe {
            Stored::Plain(r) => {
                while at < r.entries.len() && pos + r.entries[at].size as u64 <= range.start {
                    pos += r.entries[at].size as u64;
                    at += 1;
                }
                Source::Plain { entries: r.entries, next: at }
            }
            Stored::Parts(r) => {
                let len = |l: &Line| match l {
                    Line::Chunk(e) => e.size as u64,
                    Line::Part { bytes, .. } => *bytes,
                };
                while at < r.lines.len() && pos + len(&r.lines[at]) <= range.start {
                    pos += len(&r.lines[at]);
                    at += 1;
                }
                Source::Parts {
                    lines: r.lines,
                    next: at,
                    part: Vec::new().into_iter(),
                }
            }
        };
        let max_read = if self.objects.is_local() { RESTORE_PIECE_LOCAL } else { RESTORE_PIECE_BUCKET };
        RestoreCursor {
            ns: ns.to_string(),
            alg,
            src,
            range,
            batch: Vec::new(),
            at: 0,
            pos,
            locs: Vec::new(),
            moved: 0,
            max_read,
            dec: None,
            group: None,
        }
    }

    /// Up to `max` next entries of a restore's source into `out`.
    fn next_entries(&self, ns: &str, src: &mut Source, max: usize, out: &mut Vec<RecipeEntry>) -> Result<()> {
        match src {
            Source::Plain { entries, next } => {
                let end = (*next + max).min(entries.len());
                out.extend_from_slice(&entries[*next..end]);
                *next = end;
            }
            Source::Parts { lines, next, part } => {
                while out.len() < max {
                    if let Some(e) = part.next() {
                        out.push(e);
                        continue;
                    }
                    let Some(l) = lines.get(*next) else { break };
                    *next += 1;
                    match l {
                        Line::Chunk(e) => out.push(e.clone()),
                        Line::Part { id, count, bytes } => {
                            let p = self
                                .load_part(ns, id)?
                                .ok_or_else(|| StoreError::Internal(format!("part {} of a committed recipe is not stored", hex(id))))?;
                            if p.entries.len() as u64 != *count || p.bytes() != *bytes {
                                return Err(StoreError::Internal(format!("part {} does not match its recipe line", hex(id))));
                            }
                            *part = p.entries.into_iter();
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// The restore's next piece of bytes (`None`: the range is done): a run of chunks that lie
    /// back to back in one pack, read at once (at most the cursor's piece size, or one chunk),
    /// each chunk verified against its fingerprint (the recipe's digest was checked against its
    /// chunk list when it was committed, so verified chunks in recipe order are the file).
    pub fn restore_next(&self, c: &mut RestoreCursor) -> Result<Option<Bytes>> {
        const BATCH: usize = 512;
        loop {
            if c.pos >= c.range.end {
                return Ok(None);
            }
            if c.at >= c.batch.len() {
                c.batch.clear();
                c.at = 0;
                c.moved = 0;
                // Entries before the range (inside the first part) are dropped unlooked-up.
                while c.batch.is_empty() {
                    self.next_entries(&c.ns, &mut c.src, BATCH, &mut c.batch)?;
                    if c.batch.is_empty() {
                        return Ok(None);
                    }
                    let skip = c
                        .batch
                        .iter()
                        .scan(c.pos, |p, e| {
                            *p += e.size as u64;
                            Some(*p)
                        })
                        .take_while(|end| *end <= c.range.start)
                        .count();
                    c.pos += c.batch[..skip].iter().map(|e| e.size as u64).sum::<u64>();
                    c.batch.drain(..skip);
                }
                let ids: Vec<Digest> = c.batch.iter().map(|e| e.fp).collect();
                c.locs = self.index.lookup(&c.ns, &ids)?;
                if self.shared && c.locs.iter().any(|l| l.is_none()) {
                    self.refresh(&c.ns, Instant::now())?;
                    c.locs = self.index.lookup(&c.ns, &ids)?;
                }
            }
            let i = c.at;
            let entries = &c.batch;
            let l0: &Loc = c.locs[i]
                .as_ref()
                .ok_or_else(|| StoreError::Internal(format!("chunk {} of a committed recipe is not indexed", hex(&entries[i].fp))))?;
            // Coalesce the chunks that lie back to back in one pack (a group's chunks in its one
            // frame; the next frame after a group's member heads), up to the piece size and the
            // range's end.
            let mut j = i + 1;
            let mut end = l0.offset + l0.len as u64;
            let mut last = l0.offset;
            let mut fend = c.pos + entries[i].size as u64;
            while j < entries.len() && fend < c.range.end {
                match &c.locs[j] {
                    Some(l)
                        if l.pack == l0.pack
                            && (l.offset == last
                                || (l.offset >= end + FRAME_HEAD_LEN as u64 && l.offset <= end + (MAX_GROUP_CHUNKS * FRAME_HEAD_LEN) as u64))
                            && l.offset + l.len as u64 - l0.offset <= c.max_read =>
                    {
                        end = end.max(l.offset + l.len as u64);
                        last = l.offset;
                        fend += entries[j].size as u64;
                        j += 1;
                    }
                    _ => break,
                }
            }
            let bytes = match self.objects.get_range(&pack_key(&c.ns, &l0.pack), l0.offset..end) {
                Ok(b) => b,
                // A gc rewrote the pack since this batch was looked up (its chunks moved to a
                // new pack, the old one deleted; in a shared bucket, maybe another node's gc):
                // refresh from the bucket where shared, look the batch up again and go on from
                // the same chunk. A few times at most per batch.
                Err(StoreError::NotFound(_)) if c.moved < 3 => {
                    c.moved += 1;
                    if self.shared {
                        self.refresh(&c.ns, Instant::now())?;
                    }
                    let ids: Vec<Digest> = entries.iter().map(|e| e.fp).collect();
                    c.locs = self.index.lookup(&c.ns, &ids)?;
                    continue;
                }
                Err(e) => return Err(e),
            };
            // The run's pieces are verified one by one, then sent as few buffers as possible
            // (the pack's frame heads lie between them).
            let mut pieces: Vec<Bytes> = Vec::new();
            let mut fpos = c.pos;
            for k in i..j {
                let l = c.locs[k].as_ref().ok_or_else(|| StoreError::internal("a location vanished"))?;
                let (fp, size) = (entries[k].fp, entries[k].size);
                let rel = (l.offset - l0.offset) as usize;
                let data = if l.compressed.is_some() {
                    let stored = &bytes[rel..rel + l.len as usize];
                    let corrupt = |e: String| StoreError::Internal(format!("stored chunk {}: {e} (storage corruption)", hex(&fp)));
                    let declared = Decompressor::raw_len(stored, MAX_CHUNK).map_err(corrupt)?;
                    if l.raw_off == 0 && declared == size {
                        // Decompressed on the way, bounded to the recipe's (checked) raw length.
                        let mut raw = Vec::new();
                        c.dec.get_or_insert_with(Decompressor::new).decompress(stored, size as usize, &mut raw).map_err(corrupt)?;
                        Bytes::from(raw)
                    } else {
                        // A group's chunk: the group decompressed once (at most MAX_GROUP_RAW).
                        let hit = matches!(&c.group, Some((p, o, _)) if *p == l.pack && *o == l.offset);
                        if !hit {
                            let mut raw = Vec::new();
                            c.dec.get_or_insert_with(Decompressor::new).decompress(stored, MAX_GROUP_RAW, &mut raw).map_err(corrupt)?;
                            c.group = Some((l.pack.clone(), l.offset, Bytes::from(raw)));
                        }
                        let g = &c.group.as_ref().expect("just set").2;
                        let (a, b) = (l.raw_off as usize, l.raw_off as usize + size as usize);
                        if b > g.len() {
                            return Err(corrupt(format!("bytes {a}..{b} of a group of {} raw bytes", g.len())));
                        }
                        g.slice(a..b)
                    }
                } else {
                    bytes.slice(rel..rel + size as usize)
                };
                if c.alg.digest(&data) != Some(fp) {
                    return Err(StoreError::Internal(format!(
                        "stored chunk {} does not match its fingerprint (storage corruption)",
                        hex(&fp)
                    )));
                }
                let a = c.range.start.saturating_sub(fpos).min(size as u64) as usize;
                let b = (c.range.end.saturating_sub(fpos)).min(size as u64) as usize;
                if a < b {
                    pieces.push(data.slice(a..b));
                }
                fpos += size as u64;
            }
            c.at = j;
            c.pos = fpos;
            if !pieces.is_empty() {
                return Ok(Some(join(pieces)));
            }
        }
    }

    /// Several [`Store::restore_next`] runs, joined, up to `at_most` bytes (more only by one
    /// chunk larger than what is left) or the range's end (`None`: nothing was left). One step
    /// of the server's restore stream: fewer hand-offs between the async runtime and the
    /// blocking pool than one step per run of chunks (a file restored from many packs has
    /// runs of a few chunks), and no more held per restore than one piece.
    pub fn restore_step(&self, c: &mut RestoreCursor, at_most: u64) -> Result<Option<Bytes>> {
        let piece = c.max_read;
        let mut pieces = Vec::new();
        let mut n = 0u64;
        let r = loop {
            if n >= at_most {
                break Ok(());
            }
            // The run is coalesced within what is left of the step.
            c.max_read = piece.min(at_most - n);
            match self.restore_next(c) {
                Ok(Some(b)) => {
                    n += b.len() as u64;
                    pieces.push(b);
                }
                Ok(None) => break Ok(()),
                Err(e) => break Err(e),
            }
        };
        c.max_read = piece;
        r?;
        Ok((!pieces.is_empty()).then(|| join(pieces)))
    }

    /// The bytes one read of a restore takes at most ([`RESTORE_PIECE_LOCAL`] or
    /// [`RESTORE_PIECE_BUCKET`]), and so one step of its stream.
    pub fn restore_piece(c: &RestoreCursor) -> u64 {
        c.max_read
    }

    /// Step 5: removes chunks that no recipe of the namespace references, from packs older
    /// than `grace_secs` (younger packs may hold the chunks of a commit in flight). A pack with
    /// no referenced chunk is deleted; one with less than half its bytes referenced is
    /// rewritten with only those.
    pub fn gc(&self, ns: &str, grace_secs: u64) -> Result<GcReport> {
        check_ns(ns)?;
        let _excl = self.gc_lock.write().unwrap_or_else(|p| p.into_inner());
        if !self.shared {
            return self.gc_locked(ns, grace_secs);
        }
        // A shared bucket: one gc at a time per namespace, by a create-only lock object that
        // every node's commit checks; then a settle period for commits already past that check.
        let lock = gc_lock_key(ns);
        if !self.take_gc_lock(&lock)? {
            return Err(StoreError::Busy(format!(
                "another gc of namespace '{ns}' holds {lock} (a lock not renewed for {} s is taken over)",
                self.gc_lease.as_secs()
            )));
        }
        self.objects.put(&format!("ns/{ns}/gc-epoch"), format!("{}\n", random_hex()).into_bytes())?;
        failpoint("gc-locked");
        // The lock is a lease: rewritten every third of it while this gc runs.
        let stop = std::sync::atomic::AtomicBool::new(false);
        let r = std::thread::scope(|s| {
            s.spawn(|| {
                let mut last = Instant::now();
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(100));
                    if last.elapsed() >= self.gc_lease / 3 {
                        let _ = self.objects.put(&lock, gc_lock_body());
                        last = Instant::now();
                    }
                }
            });
            std::thread::sleep(self.gc_settle);
            let r = self.refresh(ns, Instant::now()).and_then(|_| self.gc_locked(ns, grace_secs));
            stop.store(true, std::sync::atomic::Ordering::Relaxed);
            r
        });
        let d = self.objects.delete(&lock);
        let rep = r?;
        d?;
        Ok(rep)
    }

    /// Whether a live gc holds namespace `ns` (its lock object younger than the lease).
    fn gc_lock_held(&self, ns: &str) -> Result<bool> {
        Ok(self.objects.age(&gc_lock_key(ns))?.is_some_and(|age| age <= self.gc_lease.as_secs() as i64))
    }

    /// Takes the gc lock `lock`: creates it, or takes over one past its lease (a node that died
    /// during a gc). `false` if a live gc holds it.
    fn take_gc_lock(&self, lock: &str) -> Result<bool> {
        if self.objects.put_new(lock, gc_lock_body())? {
            return Ok(true);
        }
        match self.objects.age(lock)? {
            Some(age) if age <= self.gc_lease.as_secs() as i64 => Ok(false),
            Some(age) => {
                eprintln!("cutpoint serve: taking over {lock}, not renewed for {age} s (a node died during a gc)");
                self.objects.delete(lock)?;
                self.objects.put_new(lock, gc_lock_body())
            }
            None => self.objects.put_new(lock, gc_lock_body()),
        }
    }

    fn gc_locked(&self, ns: &str, grace_secs: u64) -> Result<GcReport> {
        let mut rep = GcReport::default();
        // A grace past i64 (u64::MAX would wrap to -1, i.e. no grace) is clamped: spare every pack.
        let cutoff = now().saturating_sub(i64::try_from(grace_secs).unwrap_or(i64::MAX));
        let live = self.live_chunks(ns, cutoff, &mut rep)?;
        rep.referenced_chunks = live.len() as u64;
        let alg = self.index.ns_alg(ns)?.unwrap_or_default();
        for (pack, bytes, created) in self.index.packs(ns)? {
            if created > cutoff {
                rep.packs_in_grace += 1;
                continue;
            }
            let frames = self.index.pack_chunks(ns, &pack)?;
            let keep: Vec<&Frame> = frames.iter().filter(|f| live.contains(&f.id)).collect();
            // A group's frame once, however many of its chunks are live (rows are in pack order).
            let live_bytes: u64 = keep.iter().enumerate().filter(|(i, f)| *i == 0 || keep[i - 1].offset != f.offset).map(|(_, f)| f.len as u64).sum();
            if keep.is_empty() {
                self.index.remove_pack(ns, &pack)?;
                self.objects.delete(&pack_key(ns, &pack))?;
                rep.packs_deleted += 1;
                rep.chunks_removed += frames.len() as u64;
                rep.bytes_freed += bytes;
            } else if live_bytes * 2 < bytes {
                let spool = self.tmp.join(format!("{}.spool", random_hex()));
                let res = self.rewrite_pack(ns, &pack, alg, &keep, &spool);
                let _ = std::fs::remove_file(&spool);
                let new_size = res?;
                rep.packs_rewritten += 1;
                rep.chunks_removed += (frames.len() - keep.len()) as u64;
                rep.bytes_freed += bytes.saturating_sub(new_size);
            }
        }
        Ok(rep)
    }

    /// The chunks the namespace's recipe objects reference (every stored recipe, indexed or
    /// not) and those of its parts: every part is a root, except that a part no recipe names
    /// and last written before `cutoff` is deleted first. A damaged recipe does not stop the
    /// sweep: the chunk ids still readable in it are kept and a warning says so.
    fn live_chunks(&self, ns: &str, cutoff: i64, rep: &mut GcReport) -> Result<HashSet<Digest>> {
        let warnings = &mut rep.warnings;
        let mut live = HashSet::new();
        let mut named = HashSet::new();
        for (k, _, _) in self.objects.list(&format!("ns/{ns}/recipes"))? {
            let Key::Recipe(_, name, v) = parse_key(&k) else { continue };
            let Some(b) = self.objects.get(&k)? else { continue };
            match Stored::read(&b[..]) {
                Ok(Stored::Plain(r)) => live.extend(r.entries.iter().map(|e| e.fp)),
                Ok(Stored::Parts(r)) => {
                    for l in &r.lines {
                        match l {
                            Line::Chunk(e) => {
                                live.insert(e.fp);
                            }
                            Line::Part { id, .. } => {
                                named.insert(*id);
                            }
                        }
                    }
                }
                Err(e) => {
                    let ids = readable_ids(&b);
                    // A damaged recipe's part lines still name their parts.
                    named.extend(readable_part_ids(&b));
                    warnings.push(format!(
                        "{}; its {} readable chunk ids were kept",
                        damaged(ns, &name, v, e),
                        ids.len()
                    ));
                    live.extend(ids);
                }
            }
        }
        for (k, _, modified) in self.objects.list(&part_prefix(ns))? {
            let Key::Part(id) = parse_key(&k) else { continue };
            let named = cutpoint_core::rapid::recipe::parse_hex(&id).is_some_and(|d| named.contains(&d));
            // Not younger than the grace period, as a pack's rule has it (`created > cutoff`
            // spares a pack): with `grace=0`, a part written in this very second goes too.
            if !named && modified <= cutoff {
                self.objects.delete(&k)?;
                rep.parts_deleted += 1;
                continue;
            }
            if !named {
                rep.parts_in_grace += 1;
            }
            let Some(b) = self.objects.get(&k)? else { continue };
            match Part::parse(&b) {
                Ok(p) => live.extend(p.entries.iter().map(|e| e.fp)),
                Err(e) => {
                    let ids = readable_ids(&b);
                    rep.warnings.push(format!(
                        "the stored part {id} in namespace '{ns}' is damaged: {e}; its {} readable chunk ids were kept",
                        ids.len()
                    ));
                    live.extend(ids);
                }
            }
        }
        Ok(live)
    }

    /// Copies the frames of `pack` that hold a chunk of `keep` (its live, indexed chunks) into a
    /// new pack, as they are stored: a group whole (its frame and every member head) where any
    /// of its chunks is live, only the live ones indexed; a wholly dead group is dropped. The
    /// old pack is read once, every frame checked on its raw bytes.
    fn rewrite_pack(&self, ns: &str, pack: &str, alg: HashAlg, keep: &[&Frame], spool: &Path) -> Result<u64> {
        let file = std::fs::File::create(spool)?;
        let hw = CountingWriter {
            w: BufWriter::new(file),
            n: 0,
        };
        let key = pack_key(ns, pack);
        let size = self.objects.size(&key)?.ok_or_else(|| StoreError::NotFound(format!("pack {pack} is gone")))?;
        let mut r = PackReader::new(self.objects.reader(&key, size, PACK_READ_PIECE), MAX_CHUNK, true)
            .map_err(|e| StoreError::Internal(format!("gc: pack {pack}: {e}")))?;
        let codec = if keep.iter().any(|f| f.compressed) { r.codec() } else { Codec::None };
        let live: HashSet<(Digest, u64, u32)> = keep.iter().map(|f| (f.id, f.offset, f.raw_off)).collect();
        let mut pw = PackWriter::with_codec(hw, alg, codec).map_err(StoreError::internal)?;
        let (mut moved, mut written) = (Vec::new(), Vec::new());
        let mut found: HashSet<(Digest, u64, u32)> = HashSet::new();
        let mut data = Vec::new();
        let bad = |e: cutpoint_core::protocol::WireError| StoreError::Internal(format!("gc: pack {pack}: {e}"));
        while let Some(f) = r.next_into(&mut data).map_err(bad)? {
            // A frame with the member heads after it (read with it: no data of their own).
            let mut group = vec![f];
            while r.buffered() == Buffered::Member {
                group.push(r.next_into(&mut data).map_err(bad)?.ok_or_else(|| StoreError::internal("a group ended early"))?);
            }
            if !group.iter().any(|g| live.contains(&(g.id, g.offset, g.raw_off))) {
                continue;
            }
            let off = pw.add_frame(&f.id, &data, f.compressed).map_err(StoreError::internal)?;
            for g in &group[1..] {
                pw.add_member(&g.id, g.raw).map_err(StoreError::internal)?;
            }
            for g in group {
                let at = Frame { offset: off, ..g };
                if live.contains(&(g.id, g.offset, g.raw_off)) {
                    found.insert((g.id, g.offset, g.raw_off));
                    moved.push(at);
                }
                written.push(at);
            }
        }
        // Every live row must have found its frame: a row naming a frame the pack lacks would
        // otherwise leave the index without a word (`replace_pack` drops the old rows).
        if found.len() != live.len() {
            return Err(StoreError::Internal(format!(
                "gc: pack {pack}: {} indexed chunks name frames the pack does not hold (run check)",
                live.len() - found.len()
            )));
        }
        let hw = pw.finish().map_err(StoreError::internal)?;
        // Named over every head it stores (a kept group's dead members too).
        let id = pack_id(alg, &written);
        let size = hw.n;
        let file = hw.w.into_inner().map_err(|e| StoreError::internal(e.error()))?;
        file.sync_all()?;
        drop(file);
        self.objects.put_spooled(&pack_key(ns, &id), spool)?;
        self.index.replace_pack(ns, pack, &id, size, &moved)?;
        if id != pack {
            self.objects.delete(&pack_key(ns, pack))?;
        }
        Ok(size)
    }

    /// Checks a namespace: every pack verifies, the index agrees with the packs (each row names
    /// a frame with that id, offset and length; every pack is indexed), and every committed
    /// version's chunks are indexed.
    pub fn check(&self, ns: &str) -> Result<CheckReport> {
        check_ns(ns)?;
        self.refresh(ns, Instant::now())?;
        let mut rep = CheckReport::default();
        let objs = self.objects.list(&format!("ns/{ns}/packs"))?;
        let stored: HashSet<String> = objs
            .iter()
            .filter_map(|(k, _, _)| match parse_key(k) {
                Key::Pack(_, id) => Some(id),
                _ => None,
            })
            .collect();
        let indexed = self.index.packs(ns)?;
        let indexed_set: HashSet<String> = indexed.iter().map(|p| p.0.clone()).collect();
        for p in stored.difference(&indexed_set) {
            rep.problems.push(format!("pack {p} is stored but not indexed"));
        }
        for (p, _, _) in &indexed {
            rep.packs += 1;
            let rows = self.index.pack_chunks(ns, p)?;
            rep.chunks += rows.len() as u64;
            match self.read_pack_frames(ns, p) {
                Err(e) => rep.problems.push(format!("pack {p}: {e}")),
                Ok((frames, _)) => {
                    let set: HashSet<(Digest, u64, u32, u32, u32)> =
                        frames.iter().map(|f| (f.id, f.offset, f.head_len(), f.raw, f.raw_off)).collect();
                    for r in rows {
                        if !set.contains(&(r.id, r.offset, r.head_len(), r.raw, r.raw_off)) {
                            rep.problems.push(format!("index row {} → {p}@{} is not a frame of that pack", hex(&r.id), r.offset));
                        }
                    }
                }
            }
        }
        let indexed: HashSet<(String, u64)> = self.index.versions(ns, None)?.into_iter().map(|v| (v.name, v.version)).collect();
        for (k, _, _) in self.objects.list(&format!("ns/{ns}/recipes"))? {
            let Key::Recipe(_, name, v) = parse_key(&k) else { continue };
            if indexed.contains(&(name.clone(), v)) {
                continue;
            }
            match self.objects.get(&k)?.map(|b| Stored::read(&b[..])) {
                Some(Err(e)) => rep.problems.push(damaged(ns, &name, v, e).to_string()),
                Some(Ok(_)) => rep.problems.push(format!("'{name}' v{v}: stored but not indexed")),
                None => {}
            }
        }
        for v in self.index.versions(ns, None)? {
            rep.versions += 1;
            match self.stored(ns, &v.name, Some(v.version)) {
                Err(e) => rep.problems.push(format!("{} v{}: {e}", v.name, v.version)),
                Ok((_, r)) => {
                    let (ids, parts): (Vec<Digest>, Vec<Digest>) = match &r {
                        Stored::Plain(r) => (r.entries.iter().map(|e| e.fp).collect(), Vec::new()),
                        Stored::Parts(r) => {
                            let mut ids = Vec::new();
                            let mut parts = Vec::new();
                            for l in &r.lines {
                                match l {
                                    Line::Chunk(e) => ids.push(e.fp),
                                    Line::Part { id, .. } => parts.push(*id),
                                }
                            }
                            (ids, parts)
                        }
                    };
                    let miss = self.index.missing(ns, &ids)?;
                    if !miss.is_empty() {
                        rep.problems.push(format!("{} v{}: {} chunks not indexed", v.name, v.version, miss.len()));
                    }
                    let miss = self.query_parts(ns, &parts)?;
                    if !miss.is_empty() {
                        rep.problems.push(format!("{} v{}: {} parts not stored", v.name, v.version, miss.len()));
                    }
                }
            }
        }
        // Every part parses and its chunks are indexed with its lengths.
        for (k, _, _) in self.objects.list(&part_prefix(ns))? {
            let Key::Part(id) = parse_key(&k) else { continue };
            let Some(b) = self.objects.get(&k)? else { continue };
            rep.parts += 1;
            let p = match Part::parse(&b) {
                Ok(p) => p,
                Err(e) => {
                    rep.problems.push(format!("part {id}: does not parse: {e}"));
                    continue;
                }
            };
            if cutpoint_core::protocol::part::part_id(p.hash, &b).map(|d| hex(&d)) != Some(id.clone()) {
                rep.problems.push(format!("part {id}: its text does not hash to its name"));
            }
            for piece in p.entries.chunks(16384) {
                match self.check_chunks(ns, piece, "part") {
                    Ok(()) => {}
                    Err(StoreError::Missing { missing, .. }) => {
                        rep.problems.push(format!("part {id}: {} chunks not indexed", missing.len()))
                    }
                    Err(StoreError::BadRequest(m)) => rep.problems.push(format!("part {id}: {m}")),
                    Err(e) => return Err(e),
                }
            }
        }
        for p in rep.problems.iter_mut() {
            *p = self.objects.scrub(p);
        }
        Ok(rep)
    }

    /// The recipe versions stored for a name and its tombstones' versions (objects, not the
    /// index), each sorted.
    pub fn name_objects(&self, ns: &str, name: &str) -> Result<(Vec<u64>, Vec<u64>)> {
        let objs = self.objects.list(&recipe_prefix(ns, &name_key(name)))?;
        let (mut vs, mut del) = (Vec::new(), Vec::new());
        for (k, _, _) in &objs {
            match parse_key(k) {
                Key::Recipe(_, n, v) if n == name => vs.push(v),
                Key::Deleted(_, n, v) if n == name => del.push(v),
                _ => {}
            }
        }
        vs.sort();
        del.sort();
        Ok((vs, del))
    }
}

/// The error of a stored recipe that does not parse (no server path in it).
fn damaged(ns: &str, name: &str, v: u64, e: impl std::fmt::Display) -> StoreError {
    StoreError::Damaged(format!("the stored recipe of '{name}' v{v} in namespace '{ns}' is damaged: {e}"))
}

/// The chunk ids of a damaged recipe's lines that still read as `<64 hex> ...`.
fn readable_ids(text: &[u8]) -> Vec<Digest> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.split_whitespace().next().and_then(cutpoint_core::rapid::recipe::parse_hex))
        .collect()
}

/// The part ids of a damaged recipe's lines that still read as `part <64 hex> ...`.
fn readable_part_ids(text: &[u8]) -> Vec<Digest> {
    String::from_utf8_lossy(text)
        .lines()
        .filter_map(|l| l.strip_prefix("part ")?.split_whitespace().next().and_then(cutpoint_core::rapid::recipe::parse_hex))
        .collect()
}

fn gc_lock_body() -> Vec<u8> {
    format!("gc running, renewed at {} (Unix seconds)\n", now()).into_bytes()
}

/// The most bytes one restore piece reads at once from a local directory, and from a bucket
/// (where each read is a request). A client that stops reading holds at most one piece (or one
/// chunk, if larger) and the HTTP layer's buffer: 500 unread downloads hold ~128 MiB of them locally.
pub const RESTORE_PIECE_LOCAL: u64 = 128 << 10;
pub const RESTORE_PIECE_BUCKET: u64 = 2 << 20;

/// The ranged reads in which reconcile and check read a stored pack.
pub const PACK_READ_PIECE: u64 = 4 << 20;

/// A restore in progress ([`Store::restore_cursor`]).
pub struct RestoreCursor {
    ns: String,
    alg: HashAlg,
    src: Source,
    range: Range<u64>,
    /// The entries looked up, the next one to send (`at`), and its file offset.
    batch: Vec<RecipeEntry>,
    at: usize,
    pos: u64,
    /// The locations of `batch`.
    locs: Vec<Option<Loc>>,
    /// How often this batch was looked up again after a pack went missing (a gc rewrote it).
    moved: u8,
    max_read: u64,
    /// The decoder of compressed chunks (made at the first one).
    dec: Option<Decompressor>,
    /// The last group decompressed (pack codec 2): its pack, frame offset and raw bytes, kept
    /// for its next chunks (a group's chunks are consecutive in the file that stored them).
    group: Option<(String, u64, Bytes)>,
}

/// Where a restore's entries come from: a plain recipe's list, or a recipe's lines with one
/// part's entries at a time.
enum Source {
    Plain { entries: Vec<RecipeEntry>, next: usize },
    Parts {
        lines: Vec<Line>,
        next: usize,
        part: std::vec::IntoIter<RecipeEntry>,
    },
}

/// The gc lock object of a namespace in a shared bucket.
pub fn gc_lock_key(ns: &str) -> String {
    format!("ns/{ns}/gc-lock")
}

/// One buffer of several (a copy, unless there is only one).
fn join(mut pieces: Vec<Bytes>) -> Bytes {
    if pieces.len() == 1 {
        return pieces.pop().unwrap_or_default();
    }
    let mut v = Vec::with_capacity(pieces.iter().map(|p| p.len()).sum());
    for p in &pieces {
        v.extend_from_slice(p);
    }
    Bytes::from(v)
}

pub(crate) fn version_row(name: &str, version: u64, r: &Stored) -> Version {
    let (bytes, chunks, digest) = match r {
        Stored::Plain(r) => (r.total_bytes(), r.entries.len() as u64, r.digest),
        Stored::Parts(r) => (r.bytes, r.count, r.digest),
    };
    Version {
        name: name.to_string(),
        version,
        bytes,
        chunks,
        digest: digest.map(|d| hex(&d)).unwrap_or_default(),
        created: now(),
    }
}

/// A stored recipe: plain (chunk lines only), or with part lines (PROTOCOL.md 3.3, 3.7).
#[derive(Clone, Debug)]
pub enum Stored {
    Plain(Recipe),
    Parts(PartRecipe),
}

impl Stored {
    /// Parses a stored recipe object.
    pub fn read(b: &[u8]) -> std::result::Result<Stored, String> {
        if has_part_lines(b) {
            PartRecipe::parse(b).map(Stored::Parts).map_err(|e| e.to_string())
        } else {
            Recipe::read(b).map(Stored::Plain).map_err(|e| e.to_string())
        }
    }

    /// The stored text (with its part lines).
    pub fn text(&self) -> Vec<u8> {
        match self {
            Stored::Plain(r) => {
                let mut t = Vec::new();
                let _ = r.write(&mut t);
                t
            }
            Stored::Parts(r) => r.text().into_bytes(),
        }
    }

    /// The file's length.
    pub fn total_bytes(&self) -> u64 {
        match self {
            Stored::Plain(r) => r.total_bytes(),
            Stored::Parts(r) => r.bytes,
        }
    }
}

/// The answer to `POST parts`.
#[derive(Debug, Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct PartStored {
    pub part: String,
    pub chunks: u64,
    pub bytes: u64,
}

#[cfg(test)]
mod part_cache_tests {
    use super::*;

    fn part(i: u32, n: usize) -> Part {
        let entry = |j: usize| {
            let mut fp = [0u8; 32];
            fp[..4].copy_from_slice(&i.to_le_bytes());
            fp[4..12].copy_from_slice(&(j as u64).to_le_bytes());
            RecipeEntry { fp, size: 8192, last: None, regular: true }
        };
        Part { hash: HashAlg::default(), entries: (0..n).map(entry).collect() }
    }

    fn id(i: u32) -> Digest {
        let mut d = [0xffu8; 32];
        d[..4].copy_from_slice(&i.to_le_bytes());
        d
    }

    /// A writer putting many one-entry parts (the cheapest to send) holds no more than the bound:
    /// each part is charged its overhead, not only its entries.
    #[test]
    fn many_tiny_parts_hold_no_more_than_the_bound() {
        let mut c = PartCache::default();
        let n = 100_000u32;
        for i in 0..n {
            c.put("t", id(i), part(i, 1));
        }
        assert!(c.bytes <= PART_CACHE_BYTES, "{} bytes", c.bytes);
        assert!(c.parts.len() <= PART_CACHE_BYTES / PART_CACHE_OVERHEAD, "{} parts", c.parts.len());
        assert_eq!(c.parts.len(), c.order.len());
        assert!(c.get("t", &id(n - 1)).is_some(), "the newest part is kept");
        assert!(c.get("t", &id(0)).is_none(), "the oldest went first");
    }

    /// A part of a usual size is kept for its namespace only; one past the bound is not kept.
    #[test]
    fn parts_are_kept_by_namespace_and_within_the_bound() {
        let mut c = PartCache::default();
        c.put("a", id(1), part(1, 4600));
        assert_eq!(c.get("a", &id(1)).map(|p| p.entries.len()), Some(4600));
        assert!(c.get("b", &id(1)).is_none());
        c.put("a", id(2), part(2, PART_CACHE_BYTES / 32));
        assert!(c.get("a", &id(2)).is_none());
        assert!(c.bytes <= PART_CACHE_BYTES);
        // The same id put again is charged once.
        let before = c.bytes;
        c.put("a", id(1), part(1, 4600));
        assert_eq!(c.bytes, before);
    }
}
