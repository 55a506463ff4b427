//! The in-memory set of one namespace's chunk ids, in front of the SQLite index: existence
//! queries (`Index::missing`, `Index::contains`) are answered here, never by a B-tree walk.
//!
//! Full 32-byte ids decide presence (no prefix stands for an id). Layout, chosen for memory:
//!
//! * `base`: a sorted vector of ids (32 bytes a chunk), with a directory of the first
//!   `bits` bits of an id → where its run starts, so a lookup is a binary search within a run
//!   of ~16 ids (a run made long on purpose, by ids ground to share a prefix, costs a binary
//!   search of it: log time);
//! * `added` / `removed`: the changes since the last compaction (ids not in `base`, and ids of
//!   `base` that are gone), in hash sets keyed by the standard library's random keys;
//! * when the changes pass an eighth of `base` (and at least [`MIN_CHANGES`]), they are merged
//!   into `base` in place (no second copy of it: amortised O(log n) a change).
//!
//! Memory: 32 bytes per id in `base`, at most 4 bytes per 16 ids of directory, and the changes
//! (≤ 1/8 of `base`, ~37–74 bytes each in a hash set): 32–42 bytes per chunk, ~31–40 MiB per
//! 10⁶ chunks.

use cutpoint_core::Digest;
use std::collections::HashSet;

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

/// An empty vector for `n` ids. A large one is marked for transparent huge pages
/// (`MADV_HUGEPAGE`, where the kernel leaves that to the program): a lookup reads two random
/// places of a set of 10⁷ ids (320 MiB), and with 4 KiB pages each read also missed the TLB.
pub fn id_vec(n: usize) -> Vec<Digest> {
    let v: Vec<Digest> = Vec::with_capacity(n);
    let bytes = v.capacity() * 32;
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

pub struct IdSet {
    base: Vec<Digest>,
    /// `dir[p]..dir[p + 1]`: where the ids of `base` whose first `bits` bits are `p` lie.
    dir: Vec<u32>,
    bits: u32,
    added: HashSet<Digest>,
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
    /// A set of `ids` (sorted here if they are not; duplicates dropped).
    pub fn from_ids(mut ids: Vec<Digest>) -> IdSet {
        if !ids.is_sorted() {
            ids.sort_unstable();
        }
        ids.dedup();
        ids.shrink_to_fit();
        let mut s = IdSet {
            base: ids,
            dir: Vec::new(),
            bits: 0,
            added: HashSet::new(),
            removed: HashSet::new(),
        };
        s.build_dir();
        s
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
    fn in_base(&self, id: &Digest) -> bool {
        let p = prefix(id, self.bits);
        self.in_run(id, self.dir[p] as usize, self.dir[p + 1] as usize)
    }

    /// Where in a run of `n` ids `id` would lie, guessed from the bits after the prefix.
    fn guess(&self, id: &Digest, n: usize) -> usize {
        let word = u64::from_be_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]]);
        let frac = (word << self.bits) >> 32;
        ((frac * n as u64) >> 32) as usize
    }

    /// Whether `id` is in `base[start..end]`, its run.
    fn in_run(&self, id: &Digest, start: usize, end: usize) -> bool {
        let run = &self.base[start..end];
        let n = run.len();
        if n == 0 {
            return false;
        }
        let guess = self.guess(id, n);
        let (lo, hi) = (guess.saturating_sub(4), (guess + 5).min(n));
        let part = if *id < run[lo] {
            &run[..lo]
        } else if *id > run[hi - 1] {
            &run[hi..]
        } else {
            &run[lo..hi]
        };
        part.binary_search(id).is_ok()
    }

    pub fn contains(&self, id: &Digest) -> bool {
        if !self.added.is_empty() && self.added.contains(id) {
            return true;
        }
        self.in_base(id) && (self.removed.is_empty() || !self.removed.contains(id))
    }

    /// [`IdSet::contains`] of each of `ids`, in order. Lookups go in groups of [`GROUP`]: the
    /// directory entries of a group are fetched ahead, then the ids of `base` each guess points
    /// at, then the ids are compared. A lookup's two cache misses (directory, then `base`) thus
    /// overlap with the group's others instead of following one another (at 10⁷ ids neither
    /// fits in any cache).
    pub fn contains_each(&self, ids: &[Digest]) -> Vec<bool> {
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
                let in_added = !self.added.is_empty() && self.added.contains(id);
                out.push(in_added || (self.in_run(id, runs[k].0, runs[k].1) && (self.removed.is_empty() || !self.removed.contains(id))));
            }
        }
        out
    }

    /// Adds `id`; `true` if it was not there.
    pub fn insert(&mut self, id: &Digest) -> bool {
        let new = if self.in_base(id) { self.removed.remove(id) } else { self.added.insert(*id) };
        self.maybe_compact();
        new
    }

    /// Removes `id`; `true` if it was there.
    pub fn remove(&mut self, id: &Digest) -> bool {
        let was = if self.added.remove(id) {
            true
        } else {
            self.in_base(id) && self.removed.insert(*id)
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
            self.base.retain(|id| {
                while k < gone.len() && gone[k] < *id {
                    k += 1;
                }
                !(k < gone.len() && gone[k] == *id)
            });
        }
        if !self.added.is_empty() {
            let mut add: Vec<Digest> = self.added.drain().collect();
            add.sort_unstable();
            let mut i = self.base.len();
            self.base.reserve_exact(add.len());
            self.base.resize(i + add.len(), [0; 32]);
            // Invariant: no added id is in `base`, so the merge needs no tie rule.
            let mut w = self.base.len();
            let mut j = add.len();
            while j > 0 {
                w -= 1;
                if i > 0 && self.base[i - 1] > add[j - 1] {
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
        for id in &self.base {
            self.dir[prefix(id, self.bits) + 1] += 1;
        }
        for p in 0..runs {
            self.dir[p + 1] += self.dir[p];
        }
        self.dir.shrink_to_fit();
    }

    /// Bytes the set holds on the heap (its capacity, roughly: a hash set's entry is counted
    /// at 33 bytes of its capacity).
    pub fn heap_bytes(&self) -> usize {
        self.base.capacity() * 32 + self.dir.capacity() * 4 + (self.added.capacity() + self.removed.capacity()) * 33
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(x: u64) -> Digest {
        *blake3::hash(&x.to_le_bytes()).as_bytes()
    }

    /// Against a `HashSet` model: random inserts and removes (some of present ids, some of
    /// absent), compactions forced at random; every id ever touched answers the same.
    #[test]
    fn the_set_answers_as_a_hash_set_would() {
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let mut rnd = move || {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x
        };
        for round in 0..6u64 {
            let start: Vec<Digest> = (0..(round * 3000)).map(|i| id(i % 5000)).collect();
            let mut model: HashSet<Digest> = start.iter().copied().collect();
            let mut s = IdSet::from_ids(start);
            assert_eq!(s.len(), model.len());
            let universe = 20_000 + round * 1000;
            for step in 0..60_000u64 {
                let d = id(rnd() % universe);
                if rnd() % 3 == 0 {
                    assert_eq!(s.remove(&d), model.remove(&d), "round {round} step {step}: remove");
                } else {
                    assert_eq!(s.insert(&d), model.insert(d), "round {round} step {step}: insert");
                }
                if rnd() % 20_000 == 0 {
                    s.compact();
                }
                if step % 5000 == 0 {
                    assert_eq!(s.len(), model.len());
                    for k in 0..universe {
                        assert_eq!(s.contains(&id(k)), model.contains(&id(k)), "round {round} step {step} id {k}");
                    }
                }
            }
            s.compact();
            assert!(s.base.is_sorted() && s.base.windows(2).all(|w| w[0] != w[1]));
            for k in 0..universe {
                assert_eq!(s.contains(&id(k)), model.contains(&id(k)));
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
            s.insert(&id(i * 2 + 1));
            s.remove(&id(i * 6));
        }
        assert_eq!(s.contains_each(&ask), one(&s));
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
