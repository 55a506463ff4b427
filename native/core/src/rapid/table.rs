//! The hint table: fingerprint → short LRU list of (next-chunk size, marker byte), plus whether
//! the fingerprint names a chunk the boundary rule itself produced ("regular"); and its
//! persisted form, the hint cache file.

use crate::error::Error;
use crate::fingerprint::{Digest, HashAlg};
use crate::profile::Profile;
use std::collections::{HashMap, HashSet};
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
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.0[..8]);
        state.write_u64(u64::from_le_bytes(b));
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

/// A set of fingerprints with the cheap hasher (for dedup accounting).
pub(crate) type DigestSet = HashSet<Key, KeyBuild>;

#[derive(Clone, Copy, Debug)]
struct Entry {
    /// First of `list_len` slots in the size / marker arenas.
    slot: u32,
    len: u8,
    regular: bool,
    /// Last use (learn, link, hit); the oldest entries are evicted first.
    stamp: u64,
}

/// Bit 31 of a stored size: the marker is unknown. Sizes are at most 2^30
/// ([`crate::profile::MAX_CHUNK_LIMIT`]).
const NO_MARKER: u32 = 1 << 31;

/// The entry of `fp`, created (with a fresh slot of `list_len` hints) if missing; one lookup.
fn entry_in<'m>(
    map: &'m mut HashMap<Key, Entry, KeyBuild>,
    sizes: &mut Vec<u32>,
    markers: &mut Vec<u8>,
    free: &mut Vec<u32>,
    list_len: usize,
    stamp: u64,
    fp: &Digest,
) -> &'m mut Entry {
    let e = map.entry(Key(*fp)).or_insert_with(|| {
        let slot = free.pop().unwrap_or_else(|| {
            let s = sizes.len() as u32;
            sizes.resize(sizes.len() + list_len, 0);
            markers.resize(markers.len() + list_len, 0);
            s
        });
        Entry {
            slot,
            len: 0,
            regular: false,
            stamp,
        }
    });
    e.stamp = stamp;
    e
}

/// The hint table of one profile and fingerprint algorithm.
///
/// Per fingerprint it keeps at most `list_len` hints, most recently hit or added first, stored
/// in flat arenas (a `u32` size and a `u8` marker per hint), and a flag saying the fingerprint
/// names a *regular* chunk: one the boundary rule produced from its own start, so that no
/// position inside it qualifies as a cut (see the module docs of [`crate::rapid`]).
pub struct HintTable {
    profile: Profile,
    hash: HashAlg,
    list_len: usize,
    map: HashMap<Key, Entry, KeyBuild>,
    sizes: Vec<u32>,
    markers: Vec<u8>,
    free: Vec<u32>,
    clock: u64,
    max_entries: usize,
}

/// Longest size list accepted.
pub const MAX_LIST_LEN: usize = 64;

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
            map: HashMap::default(),
            sizes: Vec::new(),
            markers: Vec::new(),
            free: Vec::new(),
            clock: 0,
            max_entries: 0,
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
        self.map.contains_key(&Key(*fp))
    }

    /// Whether `fp` names a chunk the boundary rule produced (see [`HintTable`]).
    pub fn is_regular(&self, fp: &Digest) -> bool {
        self.map.get(&Key(*fp)).is_some_and(|e| e.regular)
    }

    /// Whether `fp` has at least one hint.
    pub fn has_hints(&self, fp: &Digest) -> bool {
        self.map.get(&Key(*fp)).is_some_and(|e| e.len > 0)
    }

    /// The hints of `fp`, most recent first, into `out` (cleared first).
    pub fn hints_into(&self, fp: &Digest, out: &mut Vec<Hint>) {
        out.clear();
        if let Some(e) = self.map.get(&Key(*fp)) {
            let a = e.slot as usize;
            for i in a..a + e.len as usize {
                out.push(decode(self.sizes[i], self.markers[i]));
            }
        }
    }

    /// The hints of `fp`, most recent first.
    pub fn hints(&self, fp: &Digest) -> Vec<Hint> {
        let mut v = Vec::new();
        self.hints_into(fp, &mut v);
        v
    }

    fn entry(&mut self, fp: &Digest) -> &mut Entry {
        self.clock += 1;
        entry_in(
            &mut self.map,
            &mut self.sizes,
            &mut self.markers,
            &mut self.free,
            self.list_len,
            self.clock,
            fp,
        )
    }

    /// Records `fp` as known; `regular` marks it as produced by the boundary rule (a flag is
    /// never cleared: the same bytes always have the same interior).
    pub fn learn(&mut self, fp: &Digest, regular: bool) {
        let e = self.entry(fp);
        e.regular |= regular;
        self.evict_if_needed();
    }

    /// Records that a chunk described by `next` followed a chunk with fingerprint `prev`: the
    /// hint moves to (or enters at) the front of `prev`'s list (LRU, section 3.3 of the paper);
    /// a hint with the same size is replaced, and the last one drops out when the list is full.
    pub fn link(&mut self, prev: &Digest, next: Hint) {
        let list_len = self.list_len;
        self.clock += 1;
        let e = entry_in(
            &mut self.map,
            &mut self.sizes,
            &mut self.markers,
            &mut self.free,
            list_len,
            self.clock,
            prev,
        );
        let a = e.slot as usize;
        let n = e.len as usize;
        let (sizes, markers) = (&mut self.sizes, &mut self.markers);
        let end = match (a..a + n).find(|&i| sizes[i] & !NO_MARKER == next.size) {
            Some(i) => i,
            None if n < list_len => {
                e.len += 1;
                a + n
            }
            None => a + n - 1,
        };
        // Shift [a, end) one to the right and put the hint at a.
        sizes.copy_within(a..end, a + 1);
        markers.copy_within(a..end, a + 1);
        let (s, m) = encode(next);
        sizes[a] = s;
        markers[a] = m;
        self.evict_if_needed();
    }

    fn evict_if_needed(&mut self) {
        if self.max_entries == 0 || self.map.len() <= self.max_entries {
            return;
        }
        // Evict down to 7/8 of the bound at once, so eviction is amortised O(1) per insert.
        let keep = self.max_entries - self.max_entries / 8;
        let remove = self.map.len() - keep;
        let mut stamps: Vec<u64> = self.map.values().map(|e| e.stamp).collect();
        let (_, &mut cutoff, _) = stamps.select_nth_unstable(remove - 1);
        let free = &mut self.free;
        self.map.retain(|_, e| {
            if e.stamp <= cutoff {
                free.push(e.slot);
                false
            } else {
                true
            }
        });
    }

    /// Entries from least to most recently used.
    fn entries_by_age(&self) -> Vec<(&Digest, &Entry)> {
        let mut v: Vec<(&Digest, &Entry)> = self.map.iter().map(|(k, e)| (&k.0, e)).collect();
        v.sort_unstable_by_key(|(_, e)| e.stamp);
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

    /// Bytes one entry takes in a hint cache file.
    fn cache_entry_bytes(&self, e: &Entry) -> u64 {
        32 + 2 + 5 * e.len as u64
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
        let header = 16 + 4 + 2 + profile.len() as u64 + 2 + self.hash.name().len() as u64 + 4 + 8;
        let trailer = 32u64;
        let all = self.entries_by_age();
        // Most recent first until the budget is spent.
        let mut budget = max_bytes.map(|m| m.saturating_sub(header + trailer));
        let mut first = all.len();
        for (i, (_, e)) in all.iter().enumerate().rev() {
            let b = self.cache_entry_bytes(e);
            if let Some(left) = budget.as_mut() {
                if b > *left {
                    break;
                }
                *left -= b;
            }
            first = i;
        }
        if let Some(m) = max_bytes {
            if header + trailer > m {
                return Err(Error::config(format!(
                    "hint cache bound {m} bytes is below its header size"
                )));
            }
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
        for (fp, e) in kept {
            rec.clear();
            rec.extend_from_slice(&fp[..]);
            rec.push(e.regular as u8);
            rec.push(e.len);
            let a = e.slot as usize;
            for i in a..a + e.len as usize {
                rec.extend_from_slice(&self.sizes[i].to_le_bytes());
                rec.push(self.markers[i]);
            }
            w.put(&rec)?;
        }
        let sum = *w.hasher.finalize().as_bytes();
        w.inner.write_all(&sum)?;
        w.inner.flush()?;
        Ok(kept.len())
    }

    /// Writes the hint cache to `path` atomically (a temporary file, then a rename).
    pub fn save_cache_file(&self, path: &Path, max_bytes: Option<u64>) -> Result<usize, Error> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = std::path::PathBuf::from(tmp);
        let n = {
            let f = std::fs::File::create(&tmp)?;
            let n = self.write_cache(&f, max_bytes)?;
            f.sync_all()?;
            n
        };
        std::fs::rename(&tmp, path)?;
        Ok(n)
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
