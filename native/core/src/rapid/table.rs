//! The hint table: fingerprint → short LRU list of (next-chunk size, marker byte), plus whether
//! the fingerprint names a chunk the boundary rule itself produced ("regular"); and its
//! persisted form, the hint cache file.

use crate::error::Error;
use crate::fingerprint::{Digest, HashAlg};
use crate::profile::Profile;
use hashbrown::hash_table::{Entry, HashTable};
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// One hint: the size of the chunk that followed a fingerprint, and that chunk's last byte
/// (`None` when the source, e.g. a recipe without markers, did not record it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Hint {
    pub size: u32,
    pub marker: Option<u8>,
}

/// Digests are uniformly random: their first eight bytes are a good hash already.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) struct Key(pub(crate) Digest);

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u64(key_hash(&self.0));
    }
}

#[derive(Default)]
pub(crate) struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ b as u64;
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = v;
    }
}

pub(crate) type KeyBuild = BuildHasherDefault<KeyHasher>;

/// The table's hash of a fingerprint: its first eight bytes.
fn key_hash(fp: &Digest) -> u64 {
    let mut b = [0u8; 8];
    b.copy_from_slice(&fp[..8]);
    u64::from_le_bytes(b)
}

/// A set of fingerprints with the cheap hasher (for dedup accounting).
pub(crate) type DigestSet = HashSet<Key, KeyBuild>;

/// Bit 31 of a stored size: the marker is unknown. Sizes are at most 2^30
/// ([`crate::profile::MAX_CHUNK_LIMIT`]).
const NO_MARKER: u32 = 1 << 31;

/// An entry's place in the table's arena, as [`HintTable::learn_slot`] returns it: lets the
/// chunker reach the entry of the chunk it just produced without another hash lookup. Valid
/// until the next eviction (the table's epoch changes then); [`HintTable::check`] tells.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slot {
    idx: u32,
    epoch: u32,
}

impl Slot {
    /// The entry index (stable while the entry is in the table).
    pub(crate) fn idx(self) -> u32 {
        self.idx
    }
}

/// The hint table of one profile and fingerprint algorithm.
///
/// Per fingerprint it keeps at most `list_len` hints, most recently hit or added first, and a
/// flag saying the fingerprint names a *regular* chunk: one the boundary rule produced from its
/// own start, so that no position inside it qualifies as a cut (see the module docs of
/// [`crate::rapid`]).
///
/// Layout: the map takes a fingerprint to an entry index; entry `i` is `1 + list_len` words of
/// one arena, so that an entry is one or two cache lines, and `digests[i]` is its fingerprint.
/// Word 0: the last use (learn, link; the oldest entries are evicted first) in bits 16.., the
/// hint count in bits 8..16, whether the entry is in use in bit 1, the regular flag in bit 0.
/// Hint words: the size (bit 31: no marker) in bits 0..32, the marker in bits 32..40, and in
/// bits 40..64 one more than the entry index of the chunk that followed last time (0: unknown).
///
/// A chunk costs at most one hash lookup: the chunker keeps the [`Slot`] of the last chunk for
/// its hints and its link, and when a hint is taken, the entry that followed last time is the
/// likely one for the new chunk: it is prefetched while the chunk is fingerprinted and checked
/// against the fingerprint ([`HintTable::predicted`]), which saves the lookup, a cache miss or
/// two in a table that the hashed input keeps pushing out of the caches.
pub struct HintTable {
    profile: Profile,
    hash: HashAlg,
    list_len: usize,
    /// Entry indices by fingerprint (the fingerprints live in `digests`): 4-byte buckets keep
    /// the index small enough for the caches of a table of a few hundred thousand entries.
    map: HashTable<u32>,
    arena: Vec<u64>,
    digests: Vec<Digest>,
    free: Vec<u32>,
    clock: u64,
    max_entries: usize,
    /// Changes whenever entries are evicted (indices may then be reused).
    epoch: u32,
}

/// Longest size list accepted.
pub const MAX_LIST_LEN: usize = 64;

const REGULAR: u64 = 1;
const LIVE: u64 = 2;
/// Successor indices that fit a hint word (bits 40..64, stored plus one).
const MAX_NEXT: u32 = (1 << 24) - 2;

fn meta_len(m: u64) -> usize {
    ((m >> 8) & 0xff) as usize
}

fn meta_stamp(m: u64) -> u64 {
    m >> 16
}

fn hint_word(h: Hint, next: Option<u32>) -> u64 {
    let (s, m) = encode(h);
    let n = next.filter(|&i| i <= MAX_NEXT).map_or(0, |i| i as u64 + 1);
    s as u64 | (m as u64) << 32 | n << 40
}

fn word_next(w: u64) -> Option<u32> {
    match w >> 40 {
        0 => None,
        n => Some(n as u32 - 1),
    }
}

/// A hint and the entry index of the chunk that followed last time, if known.
#[derive(Clone, Copy, Debug)]
pub(crate) struct NextHint {
    pub hint: Hint,
    pub next: Option<u32>,
}

fn word_hint(w: u64) -> Hint {
    decode(w as u32, (w >> 32) as u8)
}

impl HintTable {
    /// An empty table. `list_len` is the size-list length (the paper's default is 2).
    pub fn new(profile: &Profile, hash: HashAlg, list_len: usize) -> Result<HintTable, Error> {
        profile.validate()?;
        if hash == HashAlg::None {
            return Err(Error::config(
                "a hint table needs chunk fingerprints (blake3 or sha256), not 'none'",
            ));
        }
        if list_len == 0 || list_len > MAX_LIST_LEN {
            return Err(Error::config(format!(
                "hint list length must be 1..={MAX_LIST_LEN}, got {list_len}"
            )));
        }
        Ok(HintTable {
            profile: profile.clone(),
            hash,
            list_len,
            map: HashTable::new(),
            arena: Vec::new(),
            digests: Vec::new(),
            free: Vec::new(),
            clock: 0,
            max_entries: 0,
            epoch: 0,
        })
    }

    /// Bounds the table to `n` fingerprints (0 = unbounded); the least recently used are
    /// evicted first.
    pub fn set_max_entries(&mut self, n: usize) {
        self.max_entries = n;
        self.evict_if_needed();
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }
    pub fn hash_alg(&self) -> HashAlg {
        self.hash
    }
    pub fn list_len(&self) -> usize {
        self.list_len
    }
    /// Number of fingerprints.
    pub fn len(&self) -> usize {
        self.map.len()
    }
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    pub fn is_known(&self, fp: &Digest) -> bool {
        self.find(fp).is_some()
    }

    fn base(&self, idx: u32) -> usize {
        idx as usize * (1 + self.list_len)
    }

    fn slot_of(&self, idx: u32) -> Slot {
        Slot { idx, epoch: self.epoch }
    }

    /// The slot of `fp`, if it is in the table (no use is recorded).
    pub(crate) fn find(&self, fp: &Digest) -> Option<Slot> {
        let d = &self.digests;
        self.map.find(key_hash(fp), |&i| d[i as usize] == *fp).map(|&i| self.slot_of(i))
    }

    /// Whether `s` still names the entry it was taken from (no eviction since).
    pub(crate) fn check(&self, s: Slot) -> bool {
        s.epoch == self.epoch
    }

    /// Whether the entry at `s` names a regular chunk.
    pub(crate) fn slot_regular(&self, s: Slot) -> bool {
        debug_assert!(self.check(s));
        self.arena[self.base(s.idx)] & REGULAR != 0
    }

    /// Whether the entry at `s` has at least one hint.
    pub(crate) fn slot_has_hints(&self, s: Slot) -> bool {
        debug_assert!(self.check(s));
        meta_len(self.arena[self.base(s.idx)]) > 0
    }

    /// The hints of the entry at `s`, most recent first, into `out` (cleared first).
    pub(crate) fn slot_hints_into(&self, s: Slot, out: &mut Vec<Hint>) {
        debug_assert!(self.check(s));
        out.clear();
        let b = self.base(s.idx);
        let n = meta_len(self.arena[b]);
        out.extend(self.arena[b + 1..b + 1 + n].iter().map(|&w| word_hint(w)));
    }

    /// The hints of the entry at `s` with the entries that followed, most recent first, into
    /// `out` (cleared first).
    pub(crate) fn slot_next_hints_into(&self, s: Slot, out: &mut Vec<NextHint>) {
        debug_assert!(self.check(s));
        out.clear();
        let b = self.base(s.idx);
        let n = meta_len(self.arena[b]);
        out.extend(self.arena[b + 1..b + 1 + n].iter().map(|&w| NextHint {
            hint: word_hint(w),
            next: word_next(w),
        }));
    }

    /// Starts loading the entry at index `idx` and its fingerprint into the cache (for
    /// [`HintTable::predicted`] after a fingerprint is computed).
    pub(crate) fn prefetch(&self, idx: u32) {
        let i = idx as usize;
        if i < self.digests.len() {
            prefetch(&self.digests[i]);
            prefetch(&self.arena[self.base(idx)]);
        }
    }

    /// The first (most recent) hint of entry `idx` with the entry that followed, if `idx` is
    /// an entry in use with hints. For prefetching only: `idx` may be stale (no epoch check).
    pub(crate) fn first_next_hint(&self, idx: u32) -> Option<NextHint> {
        let b = self.base(idx);
        let m = *self.arena.get(b)?;
        (m & LIVE != 0 && meta_len(m) > 0).then(|| {
            let w = self.arena[b + 1];
            NextHint {
                hint: word_hint(w),
                next: word_next(w),
            }
        })
    }

    /// The slot of entry `idx` if it is in use and its fingerprint is `fp` (then it is the
    /// entry [`HintTable::find`] gives, without the lookup).
    pub(crate) fn predicted(&self, idx: u32, fp: &Digest) -> Option<Slot> {
        let i = idx as usize;
        let r = (i < self.digests.len() && self.arena[self.base(idx)] & LIVE != 0 && self.digests[i] == *fp)
            .then(|| self.slot_of(idx));
        debug_assert!(r.is_none() || r == self.find(fp));
        r
    }

    /// Whether `fp` names a chunk the boundary rule produced (see [`HintTable`]).
    pub fn is_regular(&self, fp: &Digest) -> bool {
        self.find(fp).is_some_and(|s| self.slot_regular(s))
    }

    /// Whether `fp` has at least one hint.
    pub fn has_hints(&self, fp: &Digest) -> bool {
        self.find(fp).is_some_and(|s| self.slot_has_hints(s))
    }

    /// The hints of `fp`, most recent first, into `out` (cleared first).
    pub fn hints_into(&self, fp: &Digest, out: &mut Vec<Hint>) {
        match self.find(fp) {
            Some(s) => self.slot_hints_into(s, out),
            None => out.clear(),
        }
    }

    /// The hints of `fp`, most recent first.
    pub fn hints(&self, fp: &Digest) -> Vec<Hint> {
        let mut v = Vec::new();
        self.hints_into(fp, &mut v);
        v
    }

    /// Records a use of the entry at `s` (for eviction): stamps it with the next clock value.
    fn touch(&mut self, s: Slot) -> usize {
        self.clock += 1;
        let b = self.base(s.idx);
        self.arena[b] = (self.arena[b] & 0xffff) | self.clock << 16;
        b
    }

    /// The entry of `fp`, created empty if missing; one lookup. Not stamped, and evicts
    /// nothing: [`HintTable::learn_at`] does.
    pub(crate) fn entry(&mut self, fp: &Digest) -> Slot {
        let stride = 1 + self.list_len;
        let (arena, digests, free) = (&mut self.arena, &mut self.digests, &mut self.free);
        let d = &*digests;
        let idx = match self.map.entry(key_hash(fp), |&i| d[i as usize] == *fp, |&i| key_hash(&d[i as usize])) {
            Entry::Occupied(o) => *o.get(),
            Entry::Vacant(v) => {
                let i = match free.pop() {
                    Some(i) => {
                        arena[i as usize * stride] = LIVE;
                        digests[i as usize] = *fp;
                        i
                    }
                    None => {
                        let i = digests.len() as u32;
                        arena.resize(arena.len() + stride, 0);
                        arena[i as usize * stride] = LIVE;
                        digests.push(*fp);
                        i
                    }
                };
                v.insert(i);
                i
            }
        };
        self.slot_of(idx)
    }

    /// Records `fp` as known; `regular` marks it as produced by the boundary rule (a flag is
    /// never cleared: the same bytes always have the same interior).
    pub fn learn(&mut self, fp: &Digest, regular: bool) {
        self.learn_slot(fp, regular);
    }

    /// [`HintTable::learn`], returning the entry's slot (valid after the eviction this may
    /// cause: the entry just used is the newest, and indices do not move).
    pub(crate) fn learn_slot(&mut self, fp: &Digest, regular: bool) -> Slot {
        let s = self.entry(fp);
        self.learn_at(s, regular)
    }

    /// [`HintTable::learn`] for the entry at `s` (from [`HintTable::find`]).
    pub(crate) fn learn_at(&mut self, s: Slot, regular: bool) -> Slot {
        debug_assert!(self.check(s));
        let b = self.touch(s);
        if regular {
            self.arena[b] |= REGULAR;
        }
        if self.evict_if_needed() {
            return self.slot_of(s.idx);
        }
        s
    }

    /// Records that a chunk described by `next` followed a chunk with fingerprint `prev`: the
    /// hint moves to (or enters at) the front of `prev`'s list (LRU, section 3.3 of the paper);
    /// a hint with the same size is replaced, and the last one drops out when the list is full.
    pub fn link(&mut self, prev: &Digest, next: Hint) {
        let s = self.entry(prev);
        self.link_at(s, next, None);
        self.evict_if_needed();
    }

    /// [`HintTable::link`] for the entry at `s` (creates no entry, so evicts nothing);
    /// `succ`: the entry index of the chunk described by `next`, if known.
    pub(crate) fn link_at(&mut self, s: Slot, next: Hint, succ: Option<u32>) {
        debug_assert!(self.check(s));
        let list_len = self.list_len;
        let b = self.touch(s);
        let n = meta_len(self.arena[b]);
        let a = b + 1;
        let list = &mut self.arena[a..a + list_len];
        let end = match list[..n].iter().position(|&w| (w as u32) & !NO_MARKER == next.size) {
            Some(i) => i,
            None if n < list_len => {
                self.arena[b] += 1 << 8;
                n
            }
            None => n - 1,
        };
        let list = &mut self.arena[a..a + list_len];
        // Shift [0, end) one to the right and put the hint at 0.
        list.copy_within(0..end, 1);
        list[0] = hint_word(next, succ);
    }

    /// Evicts the least recently used entries if the table is over its bound; returns whether
    /// it did (slots taken before are then stale, see [`HintTable::check`]).
    fn evict_if_needed(&mut self) -> bool {
        if self.max_entries == 0 || self.map.len() <= self.max_entries {
            return false;
        }
        // Evict down to 7/8 of the bound at once, so eviction is amortised O(1) per insert.
        let keep = self.max_entries - self.max_entries / 8;
        let remove = self.map.len() - keep;
        let stride = 1 + self.list_len;
        let arena = &self.arena;
        let mut stamps: Vec<u64> = self.map.iter().map(|&i| meta_stamp(arena[i as usize * stride])).collect();
        let (_, &mut cutoff, _) = stamps.select_nth_unstable(remove - 1);
        let free = &mut self.free;
        let first_free = free.len();
        self.map.retain(|&mut i| {
            if meta_stamp(arena[i as usize * stride]) <= cutoff {
                free.push(i);
                false
            } else {
                true
            }
        });
        for &i in &self.free[first_free..] {
            // No longer in use: a successor index kept in a hint no longer matches it.
            self.arena[i as usize * stride] = 0;
        }
        self.epoch = self.epoch.wrapping_add(1);
        true
    }

    /// Entries from least to most recently used.
    fn entries_by_age(&self) -> Vec<(&Digest, usize)> {
        let mut v: Vec<(&Digest, usize)> = self.map.iter().map(|&i| (&self.digests[i as usize], self.base(i))).collect();
        v.sort_unstable_by_key(|&(_, b)| meta_stamp(self.arena[b]));
        v
    }

    fn check_compatible(&self, what: &str, profile: &str, hash: &str) -> Result<(), Error> {
        let ours = self.profile.to_string();
        if profile != ours {
            return Err(Error::config(format!(
                "{what} was made with profile {profile}; this run uses {ours} — hints never cross profiles, so it is not used"
            )));
        }
        if hash != self.hash.name() {
            return Err(Error::config(format!(
                "{what} holds {hash} fingerprints; this run uses {} — it is not used",
                self.hash.name()
            )));
        }
        Ok(())
    }

    /// Adds a base file's recipe: every fingerprint becomes known (regular if the recipe says
    /// so) and each chunk's size and marker become a hint of the chunk before it.
    pub fn add_recipe(&mut self, recipe: &super::recipe::Recipe) -> Result<(), Error> {
        self.check_compatible("the recipe", &recipe.profile, recipe.hash.name())?;
        let mut prev: Option<&Digest> = None;
        for r in &recipe.entries {
            if r.size == 0 || r.size as usize > self.profile.max {
                return Err(Error::config(format!(
                    "the recipe has a chunk of {} bytes, outside 1..=MAX",
                    r.size
                )));
            }
        }
        for r in &recipe.entries {
            if let Some(p) = prev {
                self.link(
                    p,
                    Hint {
                        size: r.size,
                        marker: r.last,
                    },
                );
            }
            self.learn(&r.fp, r.regular);
            prev = Some(&r.fp);
        }
        Ok(())
    }

    /// The smallest bound [`HintTable::write_cache`] accepts: a cache with no entries (its
    /// header, which holds the profile and fingerprint names, and its checksum). Callers check a
    /// user's bound against it before any work.
    pub fn cache_min_bytes(&self) -> u64 {
        let header = 16 + 4 + 2 + self.profile.to_string().len() as u64 + 2 + self.hash.name().len() as u64 + 4 + 8;
        header + 32
    }

    /// Bytes one entry takes in a hint cache file.
    fn cache_entry_bytes(&self, b: usize) -> u64 {
        32 + 2 + 5 * meta_len(self.arena[b]) as u64
    }

    /// Writes the table as a hint cache: at most `max_bytes` in all (`None` = no bound), keeping
    /// the most recently used fingerprints. Returns the number of fingerprints written.
    ///
    /// Format (all integers little-endian): the magic `cutpoint-hints\n\0`, `u32` format
    /// version ([`CACHE_VERSION`]), `u16` length + the profile's canonical string, `u16` length +
    /// the fingerprint algorithm's name, `u32` list length, `u64` entry count, then per entry
    /// from least to most recently used: 32-byte fingerprint, `u8` flags (bit 0: regular),
    /// `u8` hint count, and per hint (most recent first) `u32` size (bit 31: no marker) and `u8`
    /// marker; finally the BLAKE3 hash (32 bytes) of everything before it.
    pub fn write_cache<W: Write>(&self, w: W, max_bytes: Option<u64>) -> Result<usize, Error> {
        let profile = self.profile.to_string();
        let least = self.cache_min_bytes();
        if let Some(m) = max_bytes {
            if least > m {
                return Err(Error::config(format!(
                    "hint cache bound {m} bytes is below its header size ({least} bytes for this profile and fingerprint)"
                )));
            }
        }
        let all = self.entries_by_age();
        // Most recent first until the budget is spent.
        let mut budget = max_bytes.map(|m| m.saturating_sub(least));
        let mut first = all.len();
        for (i, &(_, e)) in all.iter().enumerate().rev() {
            let b = self.cache_entry_bytes(e);
            if let Some(left) = budget.as_mut() {
                if b > *left {
                    break;
                }
                *left -= b;
            }
            first = i;
        }
        let kept = &all[first..];
        let mut w = HashingWriter {
            inner: BufWriter::new(w),
            hasher: blake3::Hasher::new(),
        };
        w.put(CACHE_MAGIC)?;
        w.put(&CACHE_VERSION.to_le_bytes())?;
        w.put(&(profile.len() as u16).to_le_bytes())?;
        w.put(profile.as_bytes())?;
        w.put(&(self.hash.name().len() as u16).to_le_bytes())?;
        w.put(self.hash.name().as_bytes())?;
        w.put(&(self.list_len as u32).to_le_bytes())?;
        w.put(&(kept.len() as u64).to_le_bytes())?;
        let mut rec = Vec::with_capacity(34 + 5 * self.list_len);
        for &(fp, b) in kept {
            rec.clear();
            rec.extend_from_slice(&fp[..]);
            let m = self.arena[b];
            let n = meta_len(m);
            rec.push((m & REGULAR) as u8);
            rec.push(n as u8);
            for &h in &self.arena[b + 1..b + 1 + n] {
                rec.extend_from_slice(&(h as u32).to_le_bytes());
                rec.push((h >> 32) as u8);
            }
            w.put(&rec)?;
        }
        let sum = *w.hasher.finalize().as_bytes();
        w.inner.write_all(&sum)?;
        w.inner.flush()?;
        Ok(kept.len())
    }

    /// Writes the hint cache to `path` atomically (a temporary file, then a rename). On an
    /// error the temporary file is removed and `path` is left as it was.
    pub fn save_cache_file(&self, path: &Path, max_bytes: Option<u64>) -> Result<usize, Error> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let f = std::fs::File::create(&tmp)?;
        let r = self
            .write_cache(&f, max_bytes)
            .and_then(|n| f.sync_all().map(|_| n).map_err(Error::Io))
            .and_then(|n| std::fs::rename(&tmp, path).map(|_| n).map_err(Error::Io));
        if r.is_err() {
            drop(f);
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }

    /// Merges a hint cache into this table. The cache's profile and fingerprint algorithm must
    /// equal this table's, and its format version this build's: otherwise it is rejected with an
    /// error and nothing is used. A damaged file (bad magic, truncated, checksum mismatch) is an
    /// `InvalidData` I/O error, also with nothing used. Lists longer than this table's are cut.
    /// Returns the number of fingerprints read.
    pub fn read_cache<R: Read>(&mut self, r: R) -> Result<usize, Error> {
        let mut r = HashingReader {
            inner: BufReader::new(r),
            hasher: blake3::Hasher::new(),
        };
        let mut magic = [0u8; 16];
        r.take(&mut magic)?;
        if &magic != CACHE_MAGIC {
            return Err(invalid("not a cutpoint hint cache (bad magic)"));
        }
        let version = u32::from_le_bytes(r.array()?);
        if version != CACHE_VERSION {
            return Err(Error::config(format!(
                "hint cache format version {version}; this build reads version {CACHE_VERSION} — it is not used"
            )));
        }
        let profile = r.string()?;
        let hash = r.string()?;
        self.check_compatible("the hint cache", &profile, &hash)?;
        let _their_list_len = u32::from_le_bytes(r.array()?);
        let count = u64::from_le_bytes(r.array()?);
        // Parse everything and verify the checksum before touching the table.
        let mut parsed: Vec<(Digest, bool, Vec<Hint>)> = Vec::new();
        for _ in 0..count {
            let fp: Digest = r.array()?;
            let [flags, n]: [u8; 2] = r.array()?;
            if flags > 1 {
                return Err(invalid("hint cache entry has unknown flags"));
            }
            let mut hints = Vec::with_capacity(n as usize);
            for _ in 0..n {
                let raw = u32::from_le_bytes(r.array()?);
                let [m]: [u8; 1] = r.array()?;
                let h = decode(raw, m);
                if h.size == 0 || h.size as usize > self.profile.max {
                    return Err(invalid("hint cache holds a size outside 1..=MAX"));
                }
                hints.push(h);
            }
            parsed.push((fp, flags == 1, hints));
        }
        let want = *r.hasher.finalize().as_bytes();
        let mut got = [0u8; 32];
        r.inner
            .read_exact(&mut got)
            .map_err(|_| invalid("hint cache is truncated (no checksum)"))?;
        if got != want {
            return Err(invalid("hint cache checksum mismatch (damaged file)"));
        }
        let mut extra = [0u8; 1];
        if r.inner.read(&mut extra)? != 0 {
            return Err(invalid("hint cache has trailing bytes"));
        }
        let n = parsed.len();
        for (fp, regular, hints) in parsed {
            self.learn(&fp, regular);
            // Oldest first so that the list ends up in the cache's order.
            for h in hints.iter().take(self.list_len).rev() {
                self.link(&fp, *h);
            }
        }
        Ok(n)
    }

    /// Merges the hint cache at `path` (see [`HintTable::read_cache`]).
    pub fn load_cache_file(&mut self, path: &Path) -> Result<usize, Error> {
        let f = std::fs::File::open(path)?;
        self.read_cache(f).map_err(|e| match e {
            Error::Io(io) => Error::Io(io::Error::new(io.kind(), format!("{}: {io}", path.display()))),
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            other => other,
        })
    }
}

/// First bytes of a hint cache file.
pub const CACHE_MAGIC: &[u8; 16] = b"cutpoint-hints\n\0";
/// Hint cache format version this build writes and reads.
pub const CACHE_VERSION: u32 = 1;

fn encode(h: Hint) -> (u32, u8) {
    match h.marker {
        Some(m) => (h.size, m),
        None => (h.size | NO_MARKER, 0),
    }
}

fn decode(s: u32, m: u8) -> Hint {
    if s & NO_MARKER != 0 {
        Hint {
            size: s & !NO_MARKER,
            marker: None,
        }
    } else {
        Hint {
            size: s,
            marker: Some(m),
        }
    }
}

/// Asks for the cache line of `x` ahead of its use (nothing on other targets).
#[inline(always)]
pub(crate) fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch only hints the cache; it never faults and reads nothing.
    #[allow(unused_unsafe)]
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(x as *const T as *const i8)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

fn invalid(msg: &str) -> Error {
    Error::Io(io::Error::new(io::ErrorKind::InvalidData, msg.to_string()))
}

struct HashingWriter<W: Write> {
    inner: W,
    hasher: blake3::Hasher,
}

impl<W: Write> HashingWriter<W> {
    fn put(&mut self, b: &[u8]) -> Result<(), Error> {
        self.hasher.update(b);
        self.inner.write_all(b)?;
        Ok(())
    }
}

struct HashingReader<R: Read> {
    inner: R,
    hasher: blake3::Hasher,
}

impl<R: Read> HashingReader<R> {
    fn take(&mut self, b: &mut [u8]) -> Result<(), Error> {
        self.inner.read_exact(b).map_err(|e| {
            if e.kind() == io::ErrorKind::UnexpectedEof {
                invalid("hint cache is truncated")
            } else {
                Error::Io(e)
            }
        })?;
        self.hasher.update(b);
        Ok(())
    }
    fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut a = [0u8; N];
        self.take(&mut a)?;
        Ok(a)
    }
    fn string(&mut self) -> Result<String, Error> {
        let n = u16::from_le_bytes(self.array()?) as usize;
        let mut v = vec![0u8; n];
        self.take(&mut v)?;
        String::from_utf8(v).map_err(|_| invalid("hint cache header is not UTF-8"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(i: u32) -> Digest {
        *blake3::hash(&i.to_le_bytes()).as_bytes()
    }

    fn table(list_len: usize) -> HintTable {
        HintTable::new(&"gear:2k:8k:64k".parse().unwrap(), HashAlg::Blake3, list_len).unwrap()
    }

    fn sizes(t: &HintTable, f: &Digest) -> Vec<u32> {
        t.hints(f).iter().map(|h| h.size).collect()
    }

    #[test]
    fn lists_are_lru_and_bounded() {
        let mut t = table(2);
        let a = fp(1);
        t.learn(&a, true);
        t.link(
            &a,
            Hint {
                size: 5000,
                marker: Some(1),
            },
        );
        assert_eq!(sizes(&t, &a), [5000]);
        t.link(
            &a,
            Hint {
                size: 6000,
                marker: Some(2),
            },
        );
        assert_eq!(sizes(&t, &a), [6000, 5000]);
        // A hit on the second moves it to the front (paper, Figure 7).
        t.link(
            &a,
            Hint {
                size: 5000,
                marker: Some(1),
            },
        );
        assert_eq!(sizes(&t, &a), [5000, 6000]);
        // A new size pushes the least recently hit one out.
        t.link(
            &a,
            Hint {
                size: 7000,
                marker: None,
            },
        );
        assert_eq!(sizes(&t, &a), [7000, 5000]);
        assert_eq!(t.hints(&a)[0].marker, None);
        assert_eq!(t.hints(&a)[1].marker, Some(1));
        // A known size with a new marker keeps one slot.
        t.link(
            &a,
            Hint {
                size: 5000,
                marker: Some(9),
            },
        );
        assert_eq!(
            t.hints(&a),
            [
                Hint {
                    size: 5000,
                    marker: Some(9)
                },
                Hint {
                    size: 7000,
                    marker: None
                }
            ]
        );
        assert!(t.is_regular(&a));
        assert!(!t.is_known(&fp(2)));
    }

    #[test]
    fn regular_flag_is_never_cleared() {
        let mut t = table(2);
        t.learn(&fp(1), false);
        assert!(t.is_known(&fp(1)) && !t.is_regular(&fp(1)));
        t.learn(&fp(1), true);
        t.learn(&fp(1), false);
        assert!(t.is_regular(&fp(1)));
    }

    #[test]
    fn eviction_drops_least_recently_used() {
        let mut t = table(2);
        t.set_max_entries(80);
        for i in 0..100 {
            t.learn(&fp(i), true);
            t.link(
                &fp(i),
                Hint {
                    size: 3000 + i,
                    marker: Some(0),
                },
            );
            // Keep fingerprint 0 hot.
            t.learn(&fp(0), true);
        }
        assert!(t.len() <= 80 && t.len() >= 70, "{}", t.len());
        assert!(t.is_known(&fp(0)));
        assert!(t.is_known(&fp(99)));
        assert!(!t.is_known(&fp(1)));
        assert_eq!(sizes(&t, &fp(99)), [3099]);
    }

    #[test]
    fn cache_round_trip_and_bound() {
        let mut t = table(3);
        for i in 0..50u32 {
            t.learn(&fp(i), i % 2 == 0);
            t.link(
                &fp(i),
                Hint {
                    size: 2048 + i,
                    marker: Some(i as u8),
                },
            );
            t.link(
                &fp(i),
                Hint {
                    size: 4096 + i,
                    marker: None,
                },
            );
        }
        let mut buf = Vec::new();
        assert_eq!(t.write_cache(&mut buf, None).unwrap(), 50);
        let mut u = table(3);
        assert_eq!(u.read_cache(&buf[..]).unwrap(), 50);
        for i in 0..50u32 {
            assert_eq!(u.hints(&fp(i)), t.hints(&fp(i)), "{i}");
            assert_eq!(u.is_regular(&fp(i)), i % 2 == 0);
        }
        // Bounded: only the most recent entries fit.
        let mut small = Vec::new();
        let kept = t.write_cache(&mut small, Some(1000)).unwrap();
        assert!(
            small.len() <= 1000 && kept > 0 && kept < 50,
            "{} bytes, {kept} entries",
            small.len()
        );
        let mut v = table(1);
        v.read_cache(&small[..]).unwrap();
        assert!(v.is_known(&fp(49)) && !v.is_known(&fp(0)));
        assert_eq!(sizes(&v, &fp(49)), [4096 + 49]);
        // The smallest bound is the empty cache: it is exactly that long; one byte less is
        // refused (callers check a user's bound against cache_min_bytes() before any work).
        let least = t.cache_min_bytes();
        let mut empty = Vec::new();
        assert_eq!(t.write_cache(&mut empty, Some(least)).unwrap(), 0);
        assert_eq!(empty.len() as u64, least);
        let e = t.write_cache(&mut Vec::new(), Some(least - 1)).unwrap_err().to_string();
        assert!(e.contains("below its header size") && e.contains(&format!("({least} bytes")), "{e}");
        // A failed save leaves no temporary file behind (it did: `CACHE.tmp`).
        let dir = std::env::temp_dir().join(format!("cutpoint-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("cache");
        assert!(t.save_cache_file(&path, Some(least - 1)).is_err());
        assert!(!path.exists() && !dir.join("cache.tmp").exists());
        assert_eq!(t.save_cache_file(&path, None).unwrap(), 50);
        assert!(path.exists() && !dir.join("cache.tmp").exists());
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn cache_mismatches_and_damage_are_rejected() {
        let mut t = table(2);
        t.learn(&fp(1), true);
        t.link(
            &fp(1),
            Hint {
                size: 3000,
                marker: Some(7),
            },
        );
        let mut buf = Vec::new();
        t.write_cache(&mut buf, None).unwrap();

        let mut other = HintTable::new(&"gear:4k:8k:64k".parse().unwrap(), HashAlg::Blake3, 2).unwrap();
        let e = other.read_cache(&buf[..]).unwrap_err().to_string();
        assert!(
            e.contains("profile gear:2k:8k:64k") && e.contains("gear:4k:8k:64k"),
            "{e}"
        );
        assert!(other.is_empty());

        let mut sha = HintTable::new(&"gear:2k:8k:64k".parse().unwrap(), HashAlg::Sha256, 2).unwrap();
        assert!(sha.read_cache(&buf[..]).unwrap_err().to_string().contains("blake3"));

        let mut newer = buf.clone();
        newer[16] = 2;
        let e = table(2).read_cache(&newer[..]).unwrap_err().to_string();
        assert!(e.contains("version 2"), "{e}");

        for cut in [0, 10, 40, buf.len() - 1] {
            let mut u = table(2);
            assert!(matches!(u.read_cache(&buf[..cut]), Err(Error::Io(_))), "cut {cut}");
            assert!(u.is_empty());
        }
        let mut flipped = buf.clone();
        let k = buf.len() - 60; // inside the last entry's fingerprint
        flipped[k] ^= 1;
        let mut u = table(2);
        assert!(u.read_cache(&flipped[..]).unwrap_err().to_string().contains("checksum"));
        assert!(u.is_empty());
    }
}
