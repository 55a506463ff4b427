//! The in-memory map of one namespace's chunk ids to their index row and raw length, in front
//! of the SQLite index: existence queries (`Index::missing`, `Index::contains`) and a commit's
//! length checks (`Index::lengths`) are answered here, never by a B-tree walk, and a restore's
//! location (`Index::lookup`) is one read of the row by its number.
//!
//! Full 32-byte ids decide presence (no prefix stands for an id). Layout, chosen for memory:
//!
//! * `base`: a sorted vector of entries (id, row, length: 44 bytes a chunk), with a directory of the first
//!   `bits` bits of an id → where its run starts, so a lookup is a binary search within a run
//!   of ~16 ids (a run made long on purpose, by ids ground to share a prefix, costs a binary
//!   search of it: log time);
//! * `added` / `removed`: the changes since the last compaction (entries not in `base`, and ids of
//!   `base` that are gone), in a hash map and a hash set keyed by the standard library's random keys;
//! * when the changes pass an eighth of `base` (and at least [`MIN_CHANGES`]), they are merged
//!   into `base` in place (no second copy of it: amortised O(log n) a change).
//!
//! Memory: 44 bytes per id in `base`, at most 4 bytes per 16 ids of directory, and the changes
//! (≤ 1/8 of `base`, ~50–100 bytes each in a hash map): 44–57 bytes per chunk, ~42–54 MiB per
//! 10⁶ chunks.

use cutpoint_core::Digest;
use std::collections::{HashMap, HashSet};

/// Changes kept before a compaction, at least (small sets are merged less often).
pub const MIN_CHANGES: usize = 4096;

/// Lookups whose memory reads [`IdSet::contains_each`] overlaps.
const GROUP: usize = 16;

/// Asks the CPU to start loading `x`'s cache line (a hint: no effect on what is computed).
#[inline(always)]
fn prefetch<T>(x: &T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch of a valid reference's address; it reads nothing the program sees.
    unsafe {
        std::arch::x86_64::_mm_prefetch(x as *const T as *const i8, std::arch::x86_64::_MM_HINT_T0)
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = x;
}

/// What the map holds for an id: its row in the index's chunks table and its raw length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Val {
    pub row: u64,
    pub len: u32,
}

/// One id of `base` and its value, packed (44 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct Entry {
    pub id: Digest,
    row: u64,
    len: u32,
}

impl Entry {
    pub fn new(id: Digest, v: Val) -> Entry {
        Entry { id, row: v.row, len: v.len }
    }

    pub fn val(&self) -> Val {
        Val { row: self.row, len: self.len }
    }
}

/// An empty vector for `n` entries. A large one is marked for transparent huge pages
/// (`MADV_HUGEPAGE`, where the kernel leaves that to the program): a lookup reads two random
/// places of a map of 10⁷ ids (440 MiB), and with 4 KiB pages each read also missed the TLB.
pub fn huge_vec<T>(n: usize) -> Vec<T> {
    let v: Vec<T> = Vec::with_capacity(n);
    let bytes = v.capacity() * std::mem::size_of::<T>();
    if bytes >= 4 << 20 {
        const HUGE: usize = 2 << 20;
        let start = (v.as_ptr() as usize).next_multiple_of(HUGE);
        let end = (v.as_ptr() as usize + bytes) / HUGE * HUGE;
        if end > start {
            // SAFETY: advice on pages inside this vector's own allocation; failure is harmless.
            unsafe { libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE) };
        }
    }
    v
}

/// An empty vector for `n` ids ([`huge_vec`]).
pub fn id_vec(n: usize) -> Vec<Digest> {
    huge_vec(n)
}

pub struct IdSet {
    base: Vec<Entry>,
    /// `dir[p]..dir[p + 1]`: where the ids of `base` whose first `bits` bits are `p` lie.
    dir: Vec<u32>,
    bits: u32,
    added: HashMap<Digest, Val>,
    removed: HashSet<Digest>,
}

impl Default for IdSet {
    fn default() -> IdSet {
        IdSet::from_ids(Vec::new())
    }
}

fn prefix(id: &Digest, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (u32::from_be_bytes([id[0], id[1], id[2], id[3]]) >> (32 - bits)) as usize
    }
}

impl IdSet {
    /// A set of `ids`, each with the value 0 (sorted here if they are not; duplicates dropped).
    pub fn from_ids(ids: Vec<Digest>) -> IdSet {
        let mut v = huge_vec(ids.len());
        v.extend(ids.into_iter().map(|id| Entry::new(id, Val::default())));
        IdSet::from_entries(v).0
    }

    /// A map of `entries` (sorted here by id if they are not). Of an id given twice the first
    /// (in the order given) stays; the others are returned.
    pub fn from_entries(mut entries: Vec<Entry>) -> (IdSet, Vec<Entry>) {
        if !entries.is_sorted_by(|a, b| a.id < b.id) {
            // Stable: of an id twice, the first given stays first.
            entries.sort_by(|a, b| a.id.cmp(&b.id));
        }
        let mut dropped = Vec::new();
        entries.dedup_by(|b, a| {
            let same = a.id == b.id;
            if same {
                dropped.push(*b);
            }
            same
        });
        entries.shrink_to_fit();
        let mut s = IdSet {
            base: entries,
            dir: Vec::new(),
            bits: 0,
            added: HashMap::new(),
            removed: HashSet::new(),
        };
        s.build_dir();
        (s, dropped)
    }

    /// How many ids the set holds.
    pub fn len(&self) -> usize {
        self.base.len() - self.removed.len() + self.added.len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A lookup in `base`: the directory gives the id's run; ids are uniform, so the next 32
    /// bits of the id say where in the run it would lie. The ids 4 either side of that guess
    /// are compared first (two reads near each other), then only the part that can hold the id
    /// is searched: ~2 cache misses a lookup, and a binary search of the run at worst.
    fn in_base(&self, id: &Digest) -> Option<usize> {
        let p = prefix(id, self.bits);
        self.in_run(id, self.dir[p] as usize, self.dir[p + 1] as usize)
    }

    /// Where in a run of `n` ids `id` would lie, guessed from the bits after the prefix.
    fn guess(&self, id: &Digest, n: usize) -> usize {
        let word = u64::from_be_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]]);
        let frac = (word << self.bits) >> 32;
        ((frac * n as u64) >> 32) as usize
    }

    /// Where `id` is in `base` (looked for in `base[start..end]`, its run).
    fn in_run(&self, id: &Digest, start: usize, end: usize) -> Option<usize> {
        let run = &self.base[start..end];
        let n = run.len();
        if n == 0 {
            return None;
        }
        let guess = self.guess(id, n);
        let (lo, hi) = (guess.saturating_sub(4), (guess + 5).min(n));
        let (from, to) = if *id < run[lo].id {
            (0, lo)
        } else if *id > run[hi - 1].id {
            (hi, n)
        } else {
            (lo, hi)
        };
        run[from..to].binary_search_by(|e| e.id.cmp(id)).ok().map(|k| start + from + k)
    }

    /// The value of `id` where `base` holds it and it was not removed since.
    fn base_val(&self, id: &Digest, at: Option<usize>) -> Option<Val> {
        let at = at?;
        if !self.removed.is_empty() && self.removed.contains(id) {
            return None;
        }
        Some(self.base[at].val())
    }

    pub fn contains(&self, id: &Digest) -> bool {
        self.get(id).is_some()
    }

    /// The value of `id`, if the map holds it.
    pub fn get(&self, id: &Digest) -> Option<Val> {
        if !self.added.is_empty() {
            if let Some(v) = self.added.get(id) {
                return Some(*v);
            }
        }
        self.base_val(id, self.in_base(id))
    }

    /// [`IdSet::contains`] of each of `ids`, in order. Lookups go in groups of [`GROUP`]: the
    /// directory entries of a group are fetched ahead, then the ids of `base` each guess points
    /// at, then the ids are compared. A lookup's two cache misses (directory, then `base`) thus
    /// overlap with the group's others instead of following one another (at 10⁷ ids neither
    /// fits in any cache).
    pub fn contains_each(&self, ids: &[Digest]) -> Vec<bool> {
        self.get_each(ids).into_iter().map(|v| v.is_some()).collect()
    }

    /// [`IdSet::get`] of each of `ids`, in order, grouped as [`IdSet::contains_each`] says.
    pub fn get_each(&self, ids: &[Digest]) -> Vec<Option<Val>> {
        let mut out = Vec::with_capacity(ids.len());
        let mut runs = [(0usize, 0usize); GROUP];
        for group in ids.chunks(GROUP) {
            for id in group {
                prefetch(&self.dir[prefix(id, self.bits)]);
            }
            for (k, id) in group.iter().enumerate() {
                let p = prefix(id, self.bits);
                let (start, end) = (self.dir[p] as usize, self.dir[p + 1] as usize);
                runs[k] = (start, end);
                if end > start {
                    prefetch(&self.base[start + self.guess(id, end - start)]);
                }
            }
            for (k, id) in group.iter().enumerate() {
                let added = if self.added.is_empty() { None } else { self.added.get(id).copied() };
                out.push(added.or_else(|| self.base_val(id, self.in_run(id, runs[k].0, runs[k].1))));
            }
        }
        out
    }

    /// Adds `id` with the value `v` where it is not there (one that is keeps its value);
    /// `true` if it was not there.
    pub fn insert(&mut self, id: &Digest, v: Val) -> bool {
        let new = match self.in_base(id) {
            Some(at) => {
                let back = self.removed.remove(id);
                if back {
                    // A removed id comes back with its new value (its old row is gone).
                    let e = &mut self.base[at];
                    e.row = v.row;
                    e.len = v.len;
                }
                back
            }
            None => match self.added.entry(*id) {
                std::collections::hash_map::Entry::Occupied(_) => false,
                std::collections::hash_map::Entry::Vacant(e) => {
                    e.insert(v);
                    true
                }
            },
        };
        self.maybe_compact();
        new
    }

    /// Removes `id`; `true` if it was there.
    pub fn remove(&mut self, id: &Digest) -> bool {
        let was = if self.added.remove(id).is_some() {
            true
        } else {
            self.in_base(id).is_some() && self.removed.insert(*id)
        };
        self.maybe_compact();
        was
    }

    fn maybe_compact(&mut self) {
        if self.added.len() + self.removed.len() > (self.base.len() / 8).max(MIN_CHANGES) {
            self.compact();
        }
    }

    /// Merges the changes into `base`, in place: the removed ids are dropped (a walk beside
    /// their sorted list), `base` grows by the added ones (a `realloc`, which moves a large
    /// allocation's pages rather than copying them) and the two sorted lists are merged from
    /// the back.
    pub fn compact(&mut self) {
        if !self.removed.is_empty() {
            let mut gone: Vec<Digest> = self.removed.drain().collect();
            gone.sort_unstable();
            let mut k = 0;
            self.base.retain(|e| {
                while k < gone.len() && gone[k] < e.id {
                    k += 1;
                }
                !(k < gone.len() && gone[k] == e.id)
            });
        }
        if !self.added.is_empty() {
            let mut add: Vec<Entry> = self.added.drain().map(|(id, v)| Entry::new(id, v)).collect();
            add.sort_unstable_by(|a, b| a.id.cmp(&b.id));
            let mut i = self.base.len();
            self.base.reserve_exact(add.len());
            self.base.resize(i + add.len(), Entry::new([0; 32], Val::default()));
            // Invariant: no added id is in `base`, so the merge needs no tie rule.
            let mut w = self.base.len();
            let mut j = add.len();
            while j > 0 {
                w -= 1;
                if i > 0 && self.base[i - 1].id > add[j - 1].id {
                    self.base[w] = self.base[i - 1];
                    i -= 1;
                } else {
                    self.base[w] = add[j - 1];
                    j -= 1;
                }
            }
        }
        self.added.shrink_to(0);
        self.removed.shrink_to(0);
        self.build_dir();
    }

    /// The directory: ~16 ids a run, at most 2^20 runs (4 MiB).
    fn build_dir(&mut self) {
        let n = self.base.len();
        self.bits = if n < 32 { 0 } else { (usize::BITS - 1 - (n / 16).leading_zeros()).min(20) };
        let runs = 1usize << self.bits;
        self.dir.clear();
        self.dir.resize(runs + 1, 0);
        for e in &self.base {
            self.dir[prefix(&e.id, self.bits) + 1] += 1;
        }
        for p in 0..runs {
            self.dir[p + 1] += self.dir[p];
        }
        self.dir.shrink_to_fit();
    }

    /// Bytes the map holds on the heap (its capacity, roughly: a hash map's entry is counted
    /// at 45 bytes of its capacity, a hash set's at 33).
    pub fn heap_bytes(&self) -> usize {
        self.base.capacity() * std::mem::size_of::<Entry>() + self.dir.capacity() * 4 + self.added.capacity() * 45 + self.removed.capacity() * 33
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(x: u64) -> Digest {
        *blake3::hash(&x.to_le_bytes()).as_bytes()
    }

    /// Against a `HashMap` model: random inserts and removes (some of present ids, some of
    /// absent), compactions forced at random; every id ever touched answers the same, with the
    /// same value (an id inserted again while present keeps its first value).
    #[test]
    fn the_map_answers_as_a_hash_map_would() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..6u64 {
            let start: Vec<Entry> = (0..(round * 3000)).map(|i| Entry::new(id(i % 5000), Val { row: i, len: i as u32 })).collect();
            let mut model: HashMap<Digest, Val> = HashMap::new();
            for e in &start {
                model.entry(e.id).or_insert(e.val());
            }
            let (mut s, dropped) = IdSet::from_entries(start);
            assert_eq!(dropped.len() as u64, round * 3000 - model.len() as u64);
            assert_eq!(s.len(), model.len());
            let universe = 20_000 + round * 1000;
            for step in 0..60_000u64 {
                let d = id(rnd() % universe);
                if rnd() % 3 == 0 {
                    assert_eq!(s.remove(&d), model.remove(&d).is_some(), "round {round} step {step}: remove");
                } else {
                    let v = Val { row: 1_000_000 + step, len: step as u32 };
                    let new = !model.contains_key(&d);
                    model.entry(d).or_insert(v);
                    assert_eq!(s.insert(&d, v), new, "round {round} step {step}: insert");
                }
                if rnd() % 20_000 == 0 {
                    s.compact();
                }
                if step % 5000 == 0 {
                    assert_eq!(s.len(), model.len());
                    for k in 0..universe {
                        assert_eq!(s.get(&id(k)), model.get(&id(k)).copied(), "round {round} step {step} id {k}");
                    }
                }
            }
            s.compact();
            assert!(s.base.is_sorted_by(|a, b| a.id < b.id));
            for k in 0..universe {
                assert_eq!(s.get(&id(k)), model.get(&id(k)).copied());
            }
        }
    }

    /// The grouped lookup answers as one lookup at a time does, with changes pending or not.
    #[test]
    fn contains_each_answers_as_contains() {
        let mut s = IdSet::from_ids((0..20_000).map(|i| id(i * 2)).collect());
        let ask: Vec<Digest> = (0..50_000).map(id).collect();
        let one = |s: &IdSet| ask.iter().map(|d| s.contains(d)).collect::<Vec<bool>>();
        assert_eq!(s.contains_each(&ask), one(&s));
        for i in 0..3000 {
            s.insert(&id(i * 2 + 1), Val { row: i, len: 1 });
            s.remove(&id(i * 6));
        }
        assert_eq!(s.contains_each(&ask), one(&s));
        assert_eq!(s.get_each(&ask), ask.iter().map(|d| s.get(d)).collect::<Vec<_>>());
        assert_eq!(s.contains_each(&ask[..7]), one(&s)[..7]);
        assert!(IdSet::default().contains_each(&ask).iter().all(|&x| !x));
        let mut v = id_vec(1 << 20);
        v.extend((0..1000).map(id));
        let big = IdSet::from_ids(v);
        assert_eq!(big.contains_each(&ask), ask.iter().map(|d| big.contains(d)).collect::<Vec<bool>>());
    }

    /// Ids ground to share their first bytes (one long run of the directory) and ids that
    /// differ only in their last byte: each decided by its full 32 bytes.
    #[test]
    fn full_ids_decide() {
        let mut ids = Vec::new();
        for i in 0..5000u32 {
            let mut d = [7u8; 32];
            d[28..].copy_from_slice(&i.to_be_bytes());
            ids.push(d);
        }
        ids.extend((0..5000).map(id));
        let s = IdSet::from_ids(ids.clone());
        for d in &ids {
            assert!(s.contains(d));
            let mut other = *d;
            other[31] ^= 0x80;
            other[0] ^= 0x01;
            assert!(!s.contains(&other));
        }
        let mut near = [7u8; 32];
        near[28..].copy_from_slice(&6000u32.to_be_bytes());
        assert!(!s.contains(&near));
        assert!(!IdSet::default().contains(&near));
    }
}
