//! The in-memory map of one namespace's chunk ids to their index row, in front of the SQLite
//! index: existence queries (`Index::missing`, `Index::contains`) and a commit's length checks
//! (`Index::lengths`) are answered here and in the rows file, never by a B-tree walk, and a
//! restore's location (`Index::lookup`) is one read of the row by its number.
//!
//! Memory is what decides the layout (issue #32: the store's memory stays bounded while a file of
//! millions of chunks is committed). The map holds, per chunk, only a **key** (the id's first 8
//! bytes) and the **row number** (u32): 12 bytes. The full 32-byte id and the raw length of each
//! row are in the [`RowFile`], a file beside the index (36 bytes a row at offset row × 36), read
//! with positioned reads. **Full ids decide presence**: every key that matches is confirmed by
//! reading its row's full id (a key never stands for an id; ids ground to share 8 bytes are
//! several rows under one key, each confirmed: a lookup costs the rows under its key, never a
//! scan). The layout:
//!
//! * `base`: a sorted vector of (key, row), 12 bytes a chunk, with a directory of the first
//!   `bits` bits of a key → where its run starts (~16 entries a run);
//! * `added` / `more` / `removed`: the changes since the last compaction: rows added (a hash map
//!   keyed by key, and a side table of further rows under a key that `added` already has) and
//!   rows of `base` that are gone (a hash set of row numbers), with the standard library's random
//!   hash keys;
//! * when the changes pass 1/32 of `base` (and at least [`MIN_CHANGES`]) they are merged into
//!   `base` in place (amortised O(1) moves a change).
//!
//! Memory: 12 bytes per chunk in `base`, ≤ 4 bytes per 16 of directory (at most 4 MiB), and the
//! changes (≤ 1/32 of `base`, ~20 bytes each in a hash map): 12–13 bytes per chunk, ~12.5 MiB per
//! 10⁶ chunks. The rows file is on disk (36 bytes a row); its pages are the kernel's page cache.
//! Existence queries read it through a read-only mapping ([`IdSet::query_each`]: no system call
//! per present id), whose touched pages count in the process's RSS (file pages, reclaimable;
//! at most the file: 36 bytes a chunk); every other reader (a commit's length checks, restores'
//! locations, a writer's checks) uses positioned reads, so a big file's commit, which reads all
//! of its rows, leaves none of them mapped.

use cutpoint_core::Digest;
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock, RwLockReadGuard};

/// Changes kept before a compaction, at least (small sets are merged less often).
pub const MIN_CHANGES: usize = 4096;

/// Lookups whose memory reads [`IdSet::get_each`] overlaps.
const GROUP: usize = 16;

/// Bytes of a row's record in the [`RowFile`]: the full id, then the raw length (u32, LE).
pub const RECORD: u64 = 36;

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

/// What the map answers for an id: its row in the index's chunks table and its raw length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct Val {
    pub row: u64,
    pub len: u32,
}

/// The map's key of an id: its first 8 bytes.
pub fn key(id: &Digest) -> u64 {
    u64::from_be_bytes([id[0], id[1], id[2], id[3], id[4], id[5], id[6], id[7]])
}

/// The error of a row number the map cannot hold (above u32::MAX): never wrapped.
pub fn row_too_large(row: u64) -> io::Error {
    io::Error::other(format!(
        "chunk row number {row} is above {}: the index has numbered more rows than its in-memory map holds; reindex the store (`cutpoint serve --reindex`) to number its rows from 1 again",
        u32::MAX
    ))
}

/// A row number as the map holds it.
pub fn row32(row: u64) -> io::Result<u32> {
    u32::try_from(row).map_err(|_| row_too_large(row))
}

/// One entry of `base`, packed: an id's key and its row (12 bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, packed(4))]
pub struct Entry {
    key: u64,
    row: u32,
}

impl Entry {
    pub fn new(id: &Digest, row: u32) -> Entry {
        Entry { key: key(id), row }
    }

    pub fn row(&self) -> u64 {
        self.row as u64
    }

    fn kr(&self) -> (u64, u32) {
        (self.key, self.row)
    }
}

/// Each row's full id and raw length, at offset row × [`RECORD`] of a file: process state on
/// disk, written at open from the chunks table (truncated first: it never outlives the process
/// that wrote it, so a crash cannot leave it stale) and as rows are added. Read two ways:
/// positioned reads (length checks, restores' locations, a writer's own checks: their pages are
/// the kernel's cache, not this process's memory), and, for existence queries only
/// ([`IdSet::query_each`]), through a read-only shared mapping ([`RowFile::mapped`]): no system
/// call per present id. The mapping's touched pages count in the process's RSS (as file pages,
/// which the kernel may reclaim), at most the file's size: 36 bytes a chunk.
pub struct RowFile {
    file: File,
    /// The file's length as this process wrote it: a record past it is never read through the
    /// mapping (a mapped page past the end of the file would be a SIGBUS).
    written: AtomicU64,
    /// The mapping, made at the first query and made again larger when the file outgrows it.
    map: RwLock<Option<Mapping>>,
}

/// A read-only shared mapping of a file's first `len` bytes (more than the file may hold: only
/// bytes below [`RowFile::written`] are read).
struct Mapping {
    ptr: *mut libc::c_void,
    len: usize,
}

// SAFETY: the mapping is read-only memory owned by this value; reads go through raw pointers.
unsafe impl Send for Mapping {}
// SAFETY: as above; shared reads of read-only memory.
unsafe impl Sync for Mapping {}

impl Mapping {
    fn new(file: &File, len: usize) -> Option<Mapping> {
        use std::os::fd::AsRawFd;
        // SAFETY: a new read-only shared mapping of our own open file; the kernel picks where.
        let ptr = unsafe { libc::mmap(std::ptr::null_mut(), len, libc::PROT_READ, libc::MAP_SHARED, file.as_raw_fd(), 0) };
        (ptr != libc::MAP_FAILED).then_some(Mapping { ptr, len })
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: unmaps the mapping this value made; no reference into it outlives it (readers
        // hold the lock that owns it).
        unsafe { libc::munmap(self.ptr, self.len) };
    }
}

/// The rows file's mapping, held for a query ([`RowFile::mapped`]): records up to the file's
/// written length.
pub struct Mapped<'a> {
    map: RwLockReadGuard<'a, Option<Mapping>>,
    end: u64,
}

impl Mapped<'_> {
    fn at(&self, row: u32) -> Option<*const u8> {
        let off = row as u64 * RECORD;
        let m = self.map.as_ref()?;
        (off + RECORD <= self.end && off + RECORD <= m.len as u64).then(|| {
            // SAFETY: inside the mapping (checked just above).
            unsafe { (m.ptr as *const u8).add(off as usize) }
        })
    }

    /// Asks the CPU to start loading `row`'s record (no effect on what is computed).
    fn prefetch(&self, row: u32) {
        if let Some(p) = self.at(row) {
            // SAFETY: a valid address of the mapping (a hint only: prefetch reads nothing).
            prefetch(unsafe { &*p });
        }
    }

    /// `row`'s full id and raw length; an error where the file has no record for it.
    fn record(&self, row: u32) -> io::Result<(Digest, u32)> {
        let p = self.at(row).ok_or_else(|| io::Error::other(format!("the index's rows file has no record for row {row}")))?;
        let mut rec = [0u8; RECORD as usize];
        // SAFETY: `at` checked that the record lies inside the mapping and below the file's
        // written length; the bytes are copied out, no reference into the mapping is kept.
        unsafe { std::ptr::copy_nonoverlapping(p, rec.as_mut_ptr(), rec.len()) };
        let id: Digest = rec[..32].try_into().expect("32 bytes");
        Ok((id, u32::from_le_bytes(rec[32..].try_into().expect("4 bytes"))))
    }
}

impl RowFile {
    /// A rows file for this process, made at `path` and unlinked at once (the caller holds the
    /// index's exclusive lock, so no other process uses the name): it lives while the file is
    /// open, is gone after a stop or a crash, and is never part of the store at rest.
    pub fn create(path: &Path) -> io::Result<RowFile> {
        let file = std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(true).open(path)?;
        std::fs::remove_file(path)?;
        Ok(RowFile::of(file))
    }

    /// A rows file with no name (a temporary file, removed when closed): tests and examples.
    pub fn temp() -> io::Result<RowFile> {
        let dir = std::env::temp_dir();
        for n in 0..100u32 {
            let path = dir.join(format!("cutpoint-rows-{}-{}-{n}", std::process::id(), std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())));
            match std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&path) {
                Ok(file) => {
                    let _ = std::fs::remove_file(&path);
                    return Ok(RowFile::of(file));
                }
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(e) => return Err(e),
            }
        }
        Err(io::Error::other("no temporary rows file could be made"))
    }

    fn of(file: File) -> RowFile {
        RowFile { file, written: AtomicU64::new(0), map: RwLock::new(None) }
    }

    /// Writes `buf` at `off` and moves the written length past it.
    fn write_at(&self, buf: &[u8], off: u64) -> io::Result<()> {
        self.file.write_all_at(buf, off)?;
        self.written.fetch_max(off + buf.len() as u64, Ordering::Release);
        Ok(())
    }

    /// The file mapped for reading, up to its written length: mapped at the first call, and
    /// again (twice the size, at least 64 MiB) when the file has outgrown the mapping. `None`
    /// where the system refuses the mapping (the caller reads records instead).
    pub fn mapped(&self) -> Option<Mapped<'_>> {
        let end = self.written.load(Ordering::Acquire);
        let covers = |m: &Option<Mapping>| m.as_ref().is_some_and(|m| m.len as u64 >= end);
        if !covers(&self.map.read().unwrap_or_else(|p| p.into_inner())) {
            let mut m = self.map.write().unwrap_or_else(|p| p.into_inner());
            if !covers(&m) {
                // The old mapping goes first (no reader holds it: this is the write lock).
                *m = None;
                *m = Mapping::new(&self.file, usize::try_from(end).ok()?.next_power_of_two().max(64 << 20));
            }
        }
        let map = self.map.read().unwrap_or_else(|p| p.into_inner());
        covers(&map).then_some(Mapped { map, end })
    }

    /// Writes the records of `recs` (row, id, raw length): rows that follow one another go in
    /// one write.
    pub fn write(&self, recs: &[(u64, Digest, u32)]) -> io::Result<()> {
        let mut buf: Vec<u8> = Vec::with_capacity(recs.len().min(1 << 14) * RECORD as usize);
        let mut start = 0u64;
        for (row, id, len) in recs {
            let next = start + (buf.len() as u64 / RECORD);
            if !buf.is_empty() && (*row != next || buf.len() >= 1 << 20) {
                self.write_at(&buf, start * RECORD)?;
                buf.clear();
            }
            row32(*row)?;
            if buf.is_empty() {
                start = *row;
            }
            buf.extend_from_slice(id);
            buf.extend_from_slice(&len.to_le_bytes());
        }
        if !buf.is_empty() {
            self.write_at(&buf, start * RECORD)?;
        }
        Ok(())
    }

    /// The (id, raw length) of each of `rows` (sorted ascending, each with its caller's tag),
    /// passed to `each`: rows near one another are read together (one read for a run).
    fn read_sorted(&self, rows: &[(u32, u32)], mut each: impl FnMut(u32, u32, &Digest, u32)) -> io::Result<()> {
        /// Rows apart that are still read in one go, and the most one read spans.
        const GAP: u32 = 28;
        const SPAN: u32 = 1820;
        let mut buf = Vec::new();
        let mut i = 0;
        while i < rows.len() {
            let first = rows[i].0;
            let mut j = i + 1;
            while j < rows.len() && rows[j].0 - rows[j - 1].0 <= GAP && rows[j].0 - first < SPAN {
                j += 1;
            }
            let last = rows[j - 1].0;
            buf.resize(((last - first + 1) as u64 * RECORD) as usize, 0);
            self.file.read_exact_at(&mut buf, first as u64 * RECORD).map_err(|e| {
                io::Error::new(e.kind(), format!("the index's rows file has no record for rows {first}..={last}: {e}"))
            })?;
            for &(row, tag) in &rows[i..j] {
                let at = ((row - first) as u64 * RECORD) as usize;
                let id: &Digest = buf[at..at + 32].try_into().expect("32 bytes");
                let len = u32::from_le_bytes(buf[at + 32..at + 36].try_into().expect("4 bytes"));
                each(row, tag, id, len);
            }
            i = j;
        }
        Ok(())
    }

    /// The id and raw length of `row`.
    pub fn read(&self, row: u64) -> io::Result<(Digest, u32)> {
        let mut out = ([0; 32], 0);
        self.read_sorted(&[(row32(row)?, 0)], |_, _, id, len| out = (*id, len))?;
        Ok(out)
    }
}

/// Gives the allocator's free pages back to the system. A growing array below glibc's mmap
/// threshold (which rises to 32 MiB) is reallocated by copying, and the old copy's pages, free
/// but touched, stayed in the server's RSS as the map grew (a few MiB per 10⁵ chunks); called
/// after a merge that moved a large array (a few hundred times in a push of millions of chunks).
fn release_free_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: glibc's malloc_trim only returns free memory; it touches no live allocation.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// An empty vector for `n` entries. A large one is marked for transparent huge pages
/// (`MADV_HUGEPAGE`, where the kernel leaves that to the program): a lookup reads two random
/// places of a large map, and with 4 KiB pages each read also missed the TLB.
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
    rows: Arc<RowFile>,
    base: Vec<Entry>,
    /// `dir[p]..dir[p + 1]`: where the entries of `base` whose key's first `bits` bits are `p` lie.
    dir: Vec<u32>,
    bits: u32,
    /// Rows added since the last compaction: the first under each key.
    added: HashMap<u64, u32>,
    /// Further rows added under a key that `added` holds (ids ground to share 8 bytes).
    more: HashMap<u64, Vec<u32>>,
    /// How many rows `more` holds.
    n_more: usize,
    /// Rows of `base` that are gone.
    removed: HashSet<u32>,
}

fn prefix(key: u64, bits: u32) -> usize {
    if bits == 0 {
        0
    } else {
        (key >> (64 - bits)) as usize
    }
}

impl IdSet {
    /// An empty map whose rows' ids are in `rows`.
    pub fn new(rows: Arc<RowFile>) -> IdSet {
        IdSet::build(rows, Vec::new()).expect("an empty map reads nothing").0
    }

    /// A map of `entries`, whose rows' records `rows` holds (sorted here). Of an id in several
    /// rows, the lowest row stays; the others' rows are returned.
    pub fn build(rows: Arc<RowFile>, mut entries: Vec<Entry>) -> io::Result<(IdSet, Vec<u64>)> {
        if !entries.is_sorted_by(|a, b| a.kr() < b.kr()) {
            entries.sort_unstable_by_key(Entry::kr);
        }
        let dropped = Self::same_ids(&rows, &entries)?;
        if !dropped.is_empty() {
            let gone: HashSet<u32> = dropped.iter().copied().collect();
            entries.retain(|e| !gone.contains(&{ e.row }));
        }
        entries.shrink_to_fit();
        let mut s = IdSet {
            rows,
            base: entries,
            dir: Vec::new(),
            bits: 0,
            added: HashMap::new(),
            more: HashMap::new(),
            n_more: 0,
            removed: HashSet::new(),
        };
        s.build_dir();
        Ok((s, dropped.into_iter().map(u64::from).collect()))
    }

    /// Rows of sorted `entries` whose full id an earlier row under the same key has (read from
    /// the rows file: only runs of a shared key are read).
    fn same_ids(rows: &RowFile, entries: &[Entry]) -> io::Result<Vec<u32>> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < entries.len() {
            let mut j = i + 1;
            while j < entries.len() && { entries[j].key } == { entries[i].key } {
                j += 1;
            }
            if j - i > 1 {
                let mut seen = HashSet::new();
                let run: Vec<(u32, u32)> = entries[i..j].iter().map(|e| (e.row, 0)).collect();
                rows.read_sorted(&run, |row, _, id, _| {
                    if !seen.insert(*id) {
                        out.push(row);
                    }
                })?;
            }
            i = j;
        }
        Ok(out)
    }

    /// A map of `vals` (each id with its row and raw length), its records written to `rows`
    /// first (tests and examples; an id given twice keeps its first row).
    pub fn from_vals(rows: Arc<RowFile>, vals: &[(Digest, Val)]) -> io::Result<IdSet> {
        let mut recs: Vec<(u64, Digest, u32)> = vals.iter().map(|(id, v)| (v.row, *id, v.len)).collect();
        recs.sort_unstable_by_key(|r| r.0);
        rows.write(&recs)?;
        let mut entries = huge_vec(vals.len());
        for (id, v) in vals {
            entries.push(Entry::new(id, row32(v.row)?));
        }
        Ok(IdSet::build(rows, entries)?.0)
    }

    /// How many ids the map holds.
    pub fn len(&self) -> usize {
        self.base.len() - self.removed.len() + self.added.len() + self.n_more
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Where in a run of `n` entries `key` would lie, guessed from the bits after the prefix
    /// (ids are uniform).
    fn guess(&self, key: u64, n: usize) -> usize {
        let frac = (key << self.bits) >> 32;
        ((frac * n as u64) >> 32) as usize
    }

    /// The entries of `base[start..end]` (a run) under `key`: the 8 entries around the guess are
    /// compared first (one or two cache lines), then only the part that can hold the key's
    /// first entry is searched; the entries under it follow one another.
    fn under_key(&self, key: u64, start: usize, end: usize) -> std::ops::Range<usize> {
        let run = &self.base[start..end];
        let n = run.len();
        if n == 0 {
            return start..start;
        }
        let guess = self.guess(key, n).min(n - 1);
        let (lo, hi) = (guess.saturating_sub(4), (guess + 5).min(n));
        let (from, to) = if key <= { run[lo].key } {
            (0, lo + 1)
        } else if key > { run[hi - 1].key } {
            (hi, n)
        } else {
            (lo, hi)
        };
        let first = from + run[from..to].partition_point(|e| { e.key } < key);
        let mut last = first;
        while last < n && { run[last].key } == key {
            last += 1;
        }
        start + first..start + last
    }

    /// The run of `base` where `key` would be.
    fn run_of(&self, key: u64) -> (usize, usize) {
        let p = prefix(key, self.bits);
        (self.dir[p] as usize, self.dir[p + 1] as usize)
    }

    /// The live rows under `key`, each passed to `each` (those of `base` that were not
    /// removed, then the added ones).
    fn rows_under(&self, key: u64, run: (usize, usize), mut each: impl FnMut(u32)) {
        for e in &self.base[self.under_key(key, run.0, run.1)] {
            let row = e.row;
            if self.removed.is_empty() || !self.removed.contains(&row) {
                each(row);
            }
        }
        if !self.added.is_empty() {
            if let Some(&row) = self.added.get(&key) {
                each(row);
                if let Some(more) = self.more.get(&key) {
                    more.iter().for_each(|&r| each(r));
                }
            }
        }
    }

    pub fn contains(&self, id: &Digest) -> io::Result<bool> {
        Ok(self.get(id)?.is_some())
    }

    /// The row and raw length of `id`, if the map holds it.
    pub fn get(&self, id: &Digest) -> io::Result<Option<Val>> {
        Ok(self.get_each(std::slice::from_ref(id))?[0])
    }

    /// [`IdSet::contains`] of each of `ids`, in order.
    pub fn contains_each(&self, ids: &[Digest]) -> io::Result<Vec<bool>> {
        Ok(self.get_each(ids)?.into_iter().map(|v| v.is_some()).collect())
    }

    /// [`IdSet::get`] of each of `ids`, in order. The keys are looked up group by group
    /// ([`IdSet::rows_under_each`]); then the rows found are confirmed against the rows file in
    /// row order (rows near one another read together: a re-push and a commit's length checks
    /// ask for ids in the order they were stored).
    pub fn get_each(&self, ids: &[Digest]) -> io::Result<Vec<Option<Val>>> {
        let mut out = vec![None; ids.len()];
        // (row, index in `ids`) of every row found under an asked id's key.
        let mut found: Vec<(u32, u32)> = Vec::new();
        self.rows_under_each(ids, &mut found, |_| Ok(()))?;
        if found.is_empty() {
            return Ok(out);
        }
        found.sort_unstable();
        self.rows.read_sorted(&found, |row, at, id, len| {
            if *id == ids[at as usize] {
                out[at as usize] = Some(Val { row: row as u64, len });
            }
        })?;
        Ok(out)
    }

    /// [`IdSet::contains_each`] for existence queries: each group's rows are confirmed through
    /// the rows file's mapping ([`RowFile::mapped`]: the group's records fetched ahead, no
    /// system call), where [`IdSet::get_each`] reads them (one `pread` per present id when the
    /// asked ids are spread over the index). Falls back to reads where the file cannot be mapped.
    /// Only queries take this path: a commit's length checks read the whole of a big file's
    /// rows, which through the mapping would stay in the process's RSS.
    pub fn query_each(&self, ids: &[Digest]) -> io::Result<Vec<bool>> {
        let Some(map) = self.rows.mapped() else { return self.contains_each(ids) };
        let mut out = vec![false; ids.len()];
        let mut found: Vec<(u32, u32)> = Vec::new();
        self.rows_under_each(ids, &mut found, |found| {
            for &(row, _) in found.iter() {
                map.prefetch(row);
            }
            for &(row, at) in found.iter() {
                if map.record(row)?.0 == ids[at as usize] {
                    out[at as usize] = true;
                }
            }
            found.clear();
            Ok(())
        })?;
        Ok(out)
    }

    /// Pushes (row, index in `ids`) of every live row under the key of each of `ids` onto
    /// `found`, [`GROUP`] ids at a time (the directory entries of a group fetched ahead, then
    /// the entries of `base` each guess points at: a lookup's cache misses overlap with the
    /// group's others), calling `group_done` after each group.
    fn rows_under_each(
        &self,
        ids: &[Digest],
        found: &mut Vec<(u32, u32)>,
        mut group_done: impl FnMut(&mut Vec<(u32, u32)>) -> io::Result<()>,
    ) -> io::Result<()> {
        let mut runs = [(0usize, 0usize); GROUP];
        for (g, group) in ids.chunks(GROUP).enumerate() {
            for id in group {
                prefetch(&self.dir[prefix(key(id), self.bits)]);
            }
            for (k, id) in group.iter().enumerate() {
                let key = key(id);
                runs[k] = self.run_of(key);
                let (start, end) = runs[k];
                if end > start {
                    prefetch(&self.base[start + self.guess(key, end - start).min(end - start - 1)]);
                }
            }
            for (k, id) in group.iter().enumerate() {
                let at = (g * GROUP + k) as u32;
                self.rows_under(key(id), runs[k], |row| found.push((row, at)));
            }
            group_done(found)?;
        }
        Ok(())
    }

    /// Adds `id` with the value `v` where it is not there (one that is keeps its value);
    /// `true` if it was not there.
    pub fn insert(&mut self, id: &Digest, v: Val) -> io::Result<bool> {
        Ok(self.insert_each(&[(*id, v)])? == 1)
    }

    /// [`IdSet::insert`] of each of `vals`, in order (an id given twice keeps its first value):
    /// the new rows' records are written to the rows file (rows that follow one another in one
    /// write), then the rows join the map. Returns how many were new.
    pub fn insert_each(&mut self, vals: &[(Digest, Val)]) -> io::Result<usize> {
        let ids: Vec<Digest> = vals.iter().map(|(id, _)| *id).collect();
        let here = self.get_each(&ids)?;
        let mut seen = HashSet::new();
        let mut new = Vec::new();
        for ((id, v), here) in vals.iter().zip(here) {
            if here.is_none() && seen.insert(*id) {
                row32(v.row)?;
                new.push((v.row, *id, v.len));
            }
        }
        self.rows.write(&new)?;
        for (row, id, _) in &new {
            self.add_row(key(id), *row as u32);
        }
        self.maybe_compact();
        Ok(new.len())
    }

    fn add_row(&mut self, key: u64, row: u32) {
        match self.added.entry(key) {
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(row);
            }
            std::collections::hash_map::Entry::Occupied(_) => {
                self.more.entry(key).or_default().push(row);
                self.n_more += 1;
            }
        }
    }

    /// Removes `id`'s row if the map places `id` in row `row` (read nothing: a row is one id's);
    /// `true` if it did.
    pub fn remove_at(&mut self, id: &Digest, row: u64) -> bool {
        let Ok(row) = u32::try_from(row) else { return false };
        let key = key(id);
        let was = if self.added.get(&key) == Some(&row) {
            match self.more.get_mut(&key) {
                Some(more) => {
                    let next = more.pop().expect("no empty side list is kept");
                    self.n_more -= 1;
                    if more.is_empty() {
                        self.more.remove(&key);
                    }
                    self.added.insert(key, next);
                }
                None => {
                    self.added.remove(&key);
                }
            }
            true
        } else if let Some(at) = self.more.get(&key).and_then(|m| m.iter().position(|&r| r == row)) {
            let more = self.more.get_mut(&key).expect("just found");
            more.swap_remove(at);
            self.n_more -= 1;
            if more.is_empty() {
                self.more.remove(&key);
            }
            true
        } else {
            let run = self.run_of(key);
            let r = self.under_key(key, run.0, run.1);
            self.base[r].iter().any(|e| { e.row } == row) && self.removed.insert(row)
        };
        self.maybe_compact();
        was
    }

    /// Removes `id`; `true` if it was there.
    pub fn remove(&mut self, id: &Digest) -> io::Result<bool> {
        Ok(match self.get(id)? {
            Some(v) => self.remove_at(id, v.row),
            None => false,
        })
    }

    fn maybe_compact(&mut self) {
        if self.added.len() + self.n_more + self.removed.len() > (self.base.len() / 32).max(MIN_CHANGES) {
            self.compact();
        }
    }

    /// Merges the changes into `base`, in place: the removed rows are dropped, `base` grows by
    /// the added ones (a `realloc`, which moves a large allocation's pages rather than copying
    /// them) and the two sorted lists are merged from the back.
    pub fn compact(&mut self) {
        if !self.removed.is_empty() {
            let gone = std::mem::take(&mut self.removed);
            self.base.retain(|e| !gone.contains(&{ e.row }));
        }
        let was = self.base.as_ptr();
        if !self.added.is_empty() {
            let mut add: Vec<Entry> = Vec::with_capacity(self.added.len() + self.n_more);
            add.extend(self.added.drain().map(|(key, row)| Entry { key, row }));
            add.extend(self.more.drain().flat_map(|(key, rows)| rows.into_iter().map(move |row| Entry { key, row })));
            self.n_more = 0;
            add.sort_unstable_by_key(Entry::kr);
            let mut i = self.base.len();
            self.base.reserve_exact(add.len());
            self.base.resize(i + add.len(), Entry { key: 0, row: 0 });
            // Rows are unique: the merge needs no tie rule.
            let mut w = self.base.len();
            let mut j = add.len();
            while j > 0 {
                w -= 1;
                if i > 0 && self.base[i - 1].kr() > add[j - 1].kr() {
                    self.base[w] = self.base[i - 1];
                    i -= 1;
                } else {
                    self.base[w] = add[j - 1];
                    j -= 1;
                }
            }
        }
        self.added.shrink_to(0);
        self.more.shrink_to(0);
        self.removed.shrink_to(0);
        self.build_dir();
        if self.base.as_ptr() != was && self.base.capacity() * std::mem::size_of::<Entry>() >= 1 << 20 {
            release_free_pages();
        }
    }

    /// The directory: ~16 entries a run, at most 2^20 runs (4 MiB).
    fn build_dir(&mut self) {
        let n = self.base.len();
        self.bits = if n < 32 { 0 } else { (usize::BITS - 1 - (n / 16).leading_zeros()).min(20) };
        let runs = 1usize << self.bits;
        self.dir.clear();
        self.dir.resize(runs + 1, 0);
        for e in &self.base {
            self.dir[prefix(e.key, self.bits) + 1] += 1;
        }
        for p in 0..runs {
            self.dir[p + 1] += self.dir[p];
        }
        self.dir.shrink_to_fit();
    }

    /// Bytes the map holds on the heap (its capacity, roughly: a hash map's entry is counted at
    /// 20 bytes of its capacity (16 and a control byte, at 7/8 load), a hash set's at 6).
    pub fn heap_bytes(&self) -> usize {
        self.base.capacity() * std::mem::size_of::<Entry>()
            + self.dir.capacity() * 4
            + self.added.capacity() * 20
            + self.more.capacity() * 40
            + self.n_more * 4
            + self.removed.capacity() * 6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows() -> Arc<RowFile> {
        Arc::new(RowFile::temp().unwrap())
    }

    /// Ids of which one in three shares its first 8 bytes with 9 others (ids ground to collide
    /// on the map's key: ids in these tests are arbitrary bytes).
    fn id(x: u64) -> Digest {
        let mut d = *blake3::hash(&x.to_le_bytes()).as_bytes();
        if x % 3 == 0 {
            d[..8].copy_from_slice(&blake3::hash(&(x / 30).to_be_bytes()).as_bytes()[..8]);
        }
        d
    }

    /// Against a `HashMap` model: random inserts and removes (some of present ids, some of
    /// absent, many sharing a key), rows of removed ids given again to other ids (SQLite reuses
    /// the highest row numbers), compactions forced at random; every id ever touched answers the
    /// same, with the same value (an id inserted again while present keeps its first value).
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
            let start: Vec<(Digest, Val)> = (0..(round * 3000)).map(|i| (id(i % 5000), Val { row: i, len: i as u32 })).collect();
            let mut model: HashMap<Digest, Val> = HashMap::new();
            for (d, v) in &start {
                model.entry(*d).or_insert(*v);
            }
            let mut s = IdSet::from_vals(rows(), &start).unwrap();
            assert_eq!(s.len(), model.len());
            let universe = 20_000 + round * 1000;
            for step in 0..60_000u64 {
                let d = id(rnd() % universe);
                match rnd() % 6 {
                    0 | 1 => assert_eq!(s.remove(&d).unwrap(), model.remove(&d).is_some(), "round {round} step {step}: remove"),
                    2 if model.contains_key(&d) => {
                        // The row of a removed id comes back under another id.
                        let old = model.remove(&d).unwrap();
                        assert!(!s.remove_at(&d, u32::MAX as u64 - 5), "a row the id is not in");
                        assert!(s.remove_at(&d, old.row), "round {round} step {step}: remove_at");
                        assert!(!s.remove_at(&d, old.row), "removed twice");
                        let d2 = id(rnd() % universe);
                        let v = Val { row: old.row, len: 7 };
                        let new = !model.contains_key(&d2);
                        if new {
                            model.insert(d2, v);
                            assert!(s.insert(&d2, v).unwrap(), "round {round} step {step}: a reused row");
                        }
                    }
                    _ => {
                        let v = Val { row: 1_000_000 + step, len: step as u32 };
                        let new = !model.contains_key(&d);
                        model.entry(d).or_insert(v);
                        assert_eq!(s.insert(&d, v).unwrap(), new, "round {round} step {step}: insert");
                    }
                }
                if rnd() % 20_000 == 0 {
                    s.compact();
                }
                if step % 5000 == 0 {
                    assert_eq!(s.len(), model.len());
                    for k in 0..universe {
                        assert_eq!(s.get(&id(k)).unwrap(), model.get(&id(k)).copied(), "round {round} step {step} id {k}");
                    }
                }
            }
            s.compact();
            assert!(s.base.is_sorted_by(|a, b| a.kr() < b.kr()));
            assert_eq!(s.len(), model.len());
            let all: Vec<Digest> = (0..universe).map(id).collect();
            let want: Vec<Option<Val>> = all.iter().map(|d| model.get(d).copied()).collect();
            assert_eq!(s.get_each(&all).unwrap(), want);
        }
    }

    /// The grouped lookup answers as one lookup at a time does, with changes pending or not.
    #[test]
    fn contains_each_answers_as_contains() {
        let vals: Vec<(Digest, Val)> = (0..20_000).map(|i| (id(i * 2), Val { row: i + 1, len: 1 })).collect();
        let mut s = IdSet::from_vals(rows(), &vals).unwrap();
        let ask: Vec<Digest> = (0..50_000).map(id).collect();
        let one = |s: &IdSet| ask.iter().map(|d| s.contains(d).unwrap()).collect::<Vec<bool>>();
        assert_eq!(s.contains_each(&ask).unwrap(), one(&s));
        for i in 0..3000 {
            s.insert(&id(i * 2 + 1), Val { row: 100_000 + i, len: 1 }).unwrap();
            s.remove(&id(i * 6)).unwrap();
        }
        assert_eq!(s.contains_each(&ask).unwrap(), one(&s));
        assert_eq!(s.get_each(&ask).unwrap(), ask.iter().map(|d| s.get(d).unwrap()).collect::<Vec<_>>());
        assert_eq!(s.contains_each(&ask[..7]).unwrap(), one(&s)[..7]);
        assert!(IdSet::new(rows()).contains_each(&ask).unwrap().iter().all(|&x| !x));
    }

    /// Queries through the rows file's mapping answer as reads do: ids sharing keys, pending
    /// adds and removals, the file grown past the first mapping (mapped again, larger).
    #[test]
    fn queries_through_the_mapping_answer_as_reads_do() {
        let vals: Vec<(Digest, Val)> = (0..30_000).map(|i| (id(i * 2), Val { row: i + 1, len: 1 })).collect();
        let mut s = IdSet::from_vals(rows(), &vals).unwrap();
        let ask: Vec<Digest> = (0..70_000).map(id).collect();
        let got = s.query_each(&ask).unwrap();
        assert_eq!(got, s.contains_each(&ask).unwrap());
        assert_eq!(got.iter().filter(|&&x| x).count(), 30_000);
        let first = s.rows.map.read().unwrap().as_ref().map(|m| m.len).expect("mapped");
        // Rows past the first mapping (64 MiB: 1.86 M rows): the mapping is made again.
        for i in 0..3000 {
            assert!(s.insert(&id(i * 2 + 1), Val { row: 3_000_000 + i, len: 1 }).unwrap());
            assert!(s.remove(&id(i * 6)).unwrap());
        }
        let got = s.query_each(&ask).unwrap();
        assert_eq!(got, s.contains_each(&ask).unwrap());
        assert_eq!(got.iter().filter(|&&x| x).count(), 30_000);
        assert!(got[1] && got[5999] && !got[6001] && !got[0] && !got[17_994] && got[17_996]);
        let again = s.rows.map.read().unwrap().as_ref().map(|m| m.len).expect("mapped");
        assert!(again > first && again as u64 >= 3_003_000 * RECORD, "{first} -> {again}");
        s.compact();
        assert_eq!(s.query_each(&ask).unwrap(), got);
    }

    /// A row whose record the file lacks (inside the mapping, past the file's end: a read there
    /// would be a SIGBUS) is an error of the query, not a crash and not an answer.
    #[test]
    fn a_query_never_reads_past_the_rows_file() {
        let r = rows();
        r.write(&[(1, id(1), 1)]).unwrap();
        let (s, _) = IdSet::build(r, vec![Entry::new(&id(1), 1), Entry::new(&id(2), 1_000_000)]).unwrap();
        assert_eq!(s.query_each(&[id(1), id(3)]).unwrap(), vec![true, false]);
        let e = s.query_each(&[id(2)]).unwrap_err();
        assert!(e.to_string().contains("no record for row 1000000"), "{e}");
        assert!(s.get(&id(2)).is_err());
    }

    /// Ids that share their first 8 bytes (one key, many rows: in `base` and pending) and ids
    /// that differ only in their last byte: each decided by its full 32 bytes, never by its key.
    #[test]
    fn full_ids_decide() {
        let ground = |i: u32| {
            let mut d = [7u8; 32];
            d[28..].copy_from_slice(&i.to_be_bytes());
            d
        };
        let mut vals: Vec<(Digest, Val)> = (0..5000u32).map(|i| (ground(i), Val { row: i as u64 + 1, len: i })).collect();
        vals.extend((0..5000u64).map(|i| (id(i), Val { row: 10_000 + i, len: 3 })));
        let mut s = IdSet::from_vals(rows(), &vals).unwrap();
        for i in 5000..5100u32 {
            assert!(s.insert(&ground(i), Val { row: 20_000 + i as u64, len: i }).unwrap());
        }
        assert!(!s.insert(&ground(5050), Val { row: 30_000, len: 0 }).unwrap(), "present under a shared key");
        for (d, v) in &vals {
            assert_eq!(s.get(d).unwrap(), Some(*v));
            let mut other = *d;
            other[20] ^= 0x80;
            assert!(!s.contains(&other).unwrap(), "an id that shares its key");
            other[0] ^= 0x01;
            assert!(!s.contains(&other).unwrap());
        }
        assert_eq!(s.get(&ground(5099)).unwrap(), Some(Val { row: 25_099, len: 5099 }));
        assert!(!s.contains(&ground(6000)).unwrap());
        assert!(!IdSet::new(rows()).contains(&ground(6000)).unwrap());
        // Removing under the shared key removes that row only.
        assert!(s.remove(&ground(17)).unwrap() && s.remove(&ground(5017)).unwrap());
        assert!(!s.contains(&ground(17)).unwrap() && !s.contains(&ground(5017)).unwrap());
        assert!(s.contains(&ground(18)).unwrap() && s.contains(&ground(5018)).unwrap());
        s.compact();
        assert_eq!(s.len(), 10_098);
        assert!(s.contains(&ground(5018)).unwrap() && !s.contains(&ground(5017)).unwrap());
    }

    /// At load, an id in two rows keeps its lowest row; the other is returned (to be deleted).
    #[test]
    fn an_id_in_two_rows_keeps_the_first() {
        let r = rows();
        let recs: Vec<(u64, Digest, u32)> = vec![(1, id(3), 10), (2, id(4), 20), (3, id(3), 30), (4, id(6), 40)];
        r.write(&recs).unwrap();
        let entries = recs.iter().rev().map(|(row, d, _)| Entry::new(d, *row as u32)).collect();
        let (s, dropped) = IdSet::build(r, entries).unwrap();
        assert_eq!(dropped, vec![3]);
        assert_eq!(s.len(), 3);
        assert_eq!(s.get(&id(3)).unwrap(), Some(Val { row: 1, len: 10 }));
    }

    /// A row number above u32::MAX is refused with a clear error, never wrapped.
    #[test]
    fn a_row_over_u32_is_refused() {
        let mut s = IdSet::new(rows());
        let e = s.insert(&id(1), Val { row: u32::MAX as u64 + 1, len: 1 }).unwrap_err();
        assert!(e.to_string().contains("reindex"), "{e}");
        assert!(s.is_empty() && !s.contains(&id(1)).unwrap());
        assert!(s.insert(&id(1), Val { row: u32::MAX as u64, len: 1 }).unwrap());
        assert_eq!(s.get(&id(1)).unwrap(), Some(Val { row: u32::MAX as u64, len: 1 }));
        assert!(IdSet::from_vals(rows(), &[(id(2), Val { row: 1 << 40, len: 1 })]).is_err());
    }

    /// 12 bytes a chunk in `base` (and the directory), whatever the changes were.
    #[test]
    fn twelve_bytes_a_chunk() {
        let vals: Vec<(Digest, Val)> = (0..200_000).map(|i| (id(i), Val { row: i + 1, len: 1 })).collect();
        let mut s = IdSet::from_vals(rows(), &vals[..100_000]).unwrap();
        assert_eq!(s.insert_each(&vals[100_000..]).unwrap(), 100_000);
        s.compact();
        let per = s.heap_bytes() as f64 / s.len() as f64;
        assert!(per < 13.0, "{per} bytes a chunk");
    }
}
