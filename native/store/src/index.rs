//! The index: chunk id → (pack, offset, length), the packs, and the committed versions, per
//! namespace, in an embedded SQLite database (`rusqlite`, bundled: nothing to install). In a
//! local store the versions whose recipe is a recipe row (`recipe_rows`: a batch commit's) are
//! not copied here: the version methods read them from the rows, so each file's name is
//! stored once.
//!
//! The index is a cache of what the objects say: every row can be rebuilt from the packs and
//! recipes (`Store::reconcile`, at every start), so a lost or stale index loses nothing. That is
//! why it runs with `synchronous = NORMAL` (WAL: a power cut may lose the last transactions,
//! never corrupt the database; the start-up reconcile puts them back from the objects). Every statement binds
//! the namespace's number: no query can cross one.
//!
//! Existence queries ([`Index::missing`], [`Index::contains`]) and a commit's length checks
//! ([`Index::lengths`]) do not touch SQLite: each namespace's chunk ids are also held in memory
//! as an 8-byte key and a row number ([`IdSet`], ~12.5 bytes a chunk), each key's rows confirmed
//! by their full id and raw length in the rows file beside the database ([`RowFile`],
//! `index.rows`, 36 bytes a row, rewritten at open and unlinked at once: never in the store at rest); loaded at open and changed by every method
//! that adds or drops chunk rows, under the same lock. The map is what
//! keeps an id once per namespace; the chunks table is written in pack order (appends: a pack's
//! rows dirty a few pages, where rows keyed by random ids dirtied about a page each), and a
//! restore reads a chunk's row by its number ([`Index::lookup`]).

use crate::error::{Result, StoreError};
use cutpoint_core::protocol::pack::Frame;
use cutpoint_core::{Digest, HashAlg};
use crate::idset::{row32, Entry, IdSet, RowFile, Val};
use crate::recipe_rows::RecipeRows;
use rusqlite::{params, Connection, OptionalExtension};
use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Chunk rows inserted per transaction ([`Index::add_pack`]).
pub const INDEX_BATCH: usize = 4096;

pub struct Index {
    conn: Mutex<Connection>,
    /// Each namespace's chunk ids → row, in memory ([`IdSet`]: keys and rows, each key's rows
    /// confirmed in `rows`): existence queries and length checks are answered here.
    /// Built at open from the chunks table and changed with it, under the connection's lock
    /// (taken first), so a writer leaves the table and the set in step before the next one.
    ids: RwLock<HashMap<String, IdSet>>,
    /// Every row's full id and raw length (all namespaces: row numbers are the table's).
    rows: Arc<RowFile>,
    /// Ids whose length was looked up ([`Index::lengths`]): a count for tests and stats.
    length_reads: AtomicU64,
    /// A local store's recipe rows ([`Index::set_recipe_rows`]): the versions they hold are
    /// answered from them, not copied into the versions table.
    recipes: Option<Arc<RecipeRows>>,
}

/// Where a chunk rests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub pack: String,
    pub offset: u64,
    /// The stored length (the bytes at `offset`).
    pub len: u32,
    /// The chunk's raw length where it rests zstd-compressed; `None` for a raw frame.
    pub compressed: Option<u32>,
    /// Its offset in its compressed frame's raw bytes: 0 but for a group's member (codec 2).
    pub raw_off: u32,
}

/// A committed version of a file.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Version {
    pub name: String,
    pub version: u64,
    pub bytes: u64,
    pub chunks: u64,
    /// Whole-file fingerprint, hex.
    pub digest: String,
    /// Unix seconds.
    pub created: i64,
}

/// One process owns its index (`locking_mode = EXCLUSIVE`: no file lock taken and released per
/// statement, and a second server on the same directory is refused at start); the page cache
/// holds ~8 MiB of it (rows are appended in pack order, and existence queries and length checks
/// do not read SQLite: a larger cache only grew the server's memory, see docs/scale.md). The WAL is checkpointed every 16,384 pages (64 MiB) rather than
/// SQLite's 1,000: an upload's random-keyed rows dirty about a page each, so with the default
/// nearly every pack's transaction was followed by a checkpoint writing those pages again;
/// a longer WAL lets the checkpoint write a page once for many packs.
const PRAGMAS: &str = "
PRAGMA locking_mode = EXCLUSIVE;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA cache_size = -8192;
PRAGMA wal_autocheckpoint = 16384;
";

/// The schema's version (`PRAGMA user_version`). An index of another version is dropped and
/// rebuilt from the objects (it is a cache): version 3 added the raw length of compressed chunks;
/// version 4 keys the chunks table by row number (pack order) instead of (namespace, id);
/// version 5 keeps a version's digest as 32 bytes (was 64 hex characters) and finds a pack's
/// rows by the range of row numbers its `packs` row holds (was an index on the chunks' pack);
/// version 6 no longer copies a version whose recipe is a recipe row into `versions` (the rows
/// answer it: [`Index::set_recipe_rows`]), so a version 5 index, which holds those, is rebuilt;
/// version 7 adds a chunk's raw offset in its group (`roff`, pack codec 2).
const SCHEMA_VERSION: i64 = 7;

/// Namespaces and packs are small integers in the big table, so that a chunk row is ~55 bytes
/// (row number, id, pack number, offset, stored length, raw length where compressed, raw offset
/// in a group: a member's; 0 otherwise). Rows are
/// appended in pack order; an id is in a namespace's rows once (the in-memory map decides, see
/// the module's text). A pack's `lo`..`hi` is the range of row numbers that holds every row
/// placed in it (other packs' rows may be in between: concurrent packs append batch by batch);
/// each statement that places a row in a pack widens it ([`Index::widen`]), in the same
/// transaction.
const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS namespaces(nsid INTEGER PRIMARY KEY, ns TEXT NOT NULL UNIQUE, hash TEXT);
CREATE TABLE IF NOT EXISTS packs(pid INTEGER PRIMARY KEY, nsid INTEGER NOT NULL, pack TEXT NOT NULL,
  bytes INTEGER NOT NULL, created INTEGER NOT NULL, lo INTEGER, hi INTEGER, UNIQUE(nsid, pack));
CREATE TABLE IF NOT EXISTS chunks(rid INTEGER PRIMARY KEY, nsid INTEGER NOT NULL, id BLOB NOT NULL, pid INTEGER NOT NULL,
  off INTEGER NOT NULL, len INTEGER NOT NULL, raw INTEGER NOT NULL DEFAULT 0, roff INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS versions(nsid INTEGER NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
  bytes INTEGER NOT NULL, chunks INTEGER NOT NULL, digest BLOB NOT NULL, created INTEGER NOT NULL,
  PRIMARY KEY(nsid, name, version)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS deleted(nsid INTEGER NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
  PRIMARY KEY(nsid, name)) WITHOUT ROWID;
";

/// The chunk rows of pack `?1`: its range of row numbers, then its number.
const IN_PACK: &str =
    "rid BETWEEN (SELECT lo FROM packs WHERE pid = ?1) AND (SELECT hi FROM packs WHERE pid = ?1) AND pid = ?1";

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// A version's digest as the index keeps it: 32 bytes where it is 64 lowercase hex characters
/// (read back as that text), else the text itself.
fn digest_value(hex: &str) -> rusqlite::types::Value {
    match cutpoint_core::rapid::recipe::parse_hex(hex) {
        Some(d) if hex.bytes().all(|c| !c.is_ascii_uppercase()) => rusqlite::types::Value::Blob(d.to_vec()),
        _ => rusqlite::types::Value::Text(hex.to_string()),
    }
}

/// The largest database [`Index::compact`] and `RecipeRows::compact` rewrite at a clean stop
/// (`VACUUM` reads and writes it once: well under a second at this size).
pub const COMPACT_MAX: i64 = 32 << 20;

/// `VACUUM` for a database of at most [`COMPACT_MAX`] bytes; `wal`: the log is checkpointed and
/// truncated before and after.
pub(crate) fn compact_db(c: &Connection, wal: bool) -> Result<()> {
    if wal {
        c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
    }
    let bytes: i64 = c.query_row("SELECT page_count * page_size FROM pragma_page_count(), pragma_page_size()", [], |r| r.get(0))?;
    if bytes <= COMPACT_MAX {
        c.execute_batch("VACUUM")?;
        if wal {
            c.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))?;
        }
    }
    Ok(())
}

fn busy(path: &Path, e: impl std::fmt::Display) -> StoreError {
    StoreError::BadRequest(format!(
        "{}: the index is in use by another process (is another `cutpoint serve` running on this directory?): {e}",
        path.display()
    ))
}

impl Index {
    /// Opens (or makes) the index; `reset` empties it first, under its lock (`--reindex`: the
    /// reconcile at start then rebuilds it from the objects). A server already running on it
    /// keeps it, and this one is refused.
    pub fn open(path: &Path, reset: bool) -> Result<Index> {
        let conn = Connection::open(path)?;
        conn.execute_batch(PRAGMAS).map_err(|e| busy(path, e))?;
        // The exclusive lock is taken by the first read: take it now, so that a second server
        // fails here and not at its first request.
        let v: i64 = conn.query_row("PRAGMA user_version", [], |r| r.get(0)).map_err(|e| busy(path, e))?;
        if v != SCHEMA_VERSION || reset {
            conn.execute_batch(
                "DROP INDEX IF EXISTS chunks_by_pack; DROP TABLE IF EXISTS chunks; DROP TABLE IF EXISTS packs; DROP TABLE IF EXISTS versions; DROP TABLE IF EXISTS deleted; DROP TABLE IF EXISTS namespaces;",
            )?;
        }
        conn.execute_batch(SCHEMA)?;
        // Packs a crash left half indexed (see `add_pack`): dropped, the reconcile indexes them again.
        {
            let half: Vec<i64> = conn
                .prepare("SELECT pid FROM packs WHERE bytes < 0")?
                .query_map([], |r| r.get(0))?
                .collect::<rusqlite::Result<_>>()?;
            for pid in half {
                Self::delete_pack_rows(&conn, pid)?;
            }
            conn.execute_batch("DELETE FROM packs WHERE bytes < 0;")?;
        }
        conn.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))?;
        // After the exclusive lock: a second server on this directory never gets here.
        let rows = Arc::new(RowFile::create(&Self::rows_path(path))?);
        let ids = Self::load_ids(&conn, &rows)?;
        Ok(Index {
            conn: Mutex::new(conn),
            ids: RwLock::new(ids),
            rows,
            length_reads: AtomicU64::new(0),
            recipes: None,
        })
    }

    /// A local store's recipe rows (batch commits' recipes, objects in `recipes.sqlite`): from
    /// now on [`Index::version`], [`Index::versions`] and [`Index::max_version`] answer the
    /// versions they hold from them, besides the versions table, which then holds only the
    /// versions whose recipe is a file. Each file's name is stored once: issue #33's store size.
    pub fn set_recipe_rows(&mut self, rows: Arc<RecipeRows>) {
        self.recipes = Some(rows);
    }

    /// At a clean stop: the write-ahead log folded into the database and emptied, and a
    /// database of at most [`COMPACT_MAX`] bytes rewritten without free pages or half-full
    /// ones (`VACUUM`, which in WAL mode goes through the log: folded in again after).
    pub fn compact(&self) -> Result<()> {
        let c = self.c();
        compact_db(&c, true)
    }

    /// The rows file of the index at `path`: `index.rows` beside `index.sqlite`.
    pub fn rows_path(path: &Path) -> std::path::PathBuf {
        path.with_extension("rows")
    }

    /// Every namespace's map, from the chunks table (read in row order; each row's id and raw
    /// length written to `rows` as it is read, the map sorted here). A row whose id the
    /// namespace has in an earlier row (which no writer leaves) is deleted. A row number the
    /// map cannot hold (above u32::MAX) is an error that says to reindex.
    fn load_ids(c: &Connection, rows: &Arc<RowFile>) -> Result<HashMap<String, IdSet>> {
        let mut names: HashMap<i64, (String, Vec<Entry>)> = HashMap::new();
        {
            let mut s = c.prepare("SELECT n.nsid, n.ns, COUNT(c.id) FROM namespaces n LEFT JOIN chunks c ON c.nsid = n.nsid GROUP BY n.nsid")?;
            let rows = s.query_map([], |r| Ok((r.get::<_, i64>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?)))?;
            for row in rows {
                let (nsid, ns, n) = row?;
                names.insert(nsid, (ns, crate::idset::huge_vec(n.max(0) as usize)));
            }
        }
        {
            const WRITE: usize = 16_384;
            let mut recs: Vec<(u64, Digest, u32)> = Vec::with_capacity(WRITE);
            let mut s = c.prepare("SELECT rid, nsid, id, CASE WHEN raw > 0 THEN raw ELSE len END FROM chunks ORDER BY rid")?;
            let mut q = s.query([])?;
            while let Some(r) = q.next()? {
                let nsid: i64 = r.get(1)?;
                let id = r.get_ref(2)?.as_blob().map_err(rusqlite::Error::from)?;
                let id: Digest = id
                    .try_into()
                    .map_err(|_| StoreError::Internal(format!("the index holds a chunk id of {} bytes", id.len())))?;
                let row = r.get::<_, i64>(0)? as u64;
                if let Some((_, v)) = names.get_mut(&nsid) {
                    v.push(Entry::new(&id, row32(row)?));
                    recs.push((row, id, r.get::<_, i64>(3)? as u32));
                    if recs.len() == WRITE {
                        rows.write(&recs)?;
                        recs.clear();
                    }
                }
            }
            rows.write(&recs)?;
        }
        let mut out = HashMap::new();
        let mut del = c.prepare("DELETE FROM chunks WHERE rid = ?1")?;
        for (ns, v) in names.into_values() {
            let (set, dropped) = IdSet::build(rows.clone(), v)?;
            for row in dropped {
                del.execute([row as i64])?;
            }
            out.insert(ns, set);
        }
        Ok(out)
    }

    fn ids_mut(&self) -> std::sync::RwLockWriteGuard<'_, HashMap<String, IdSet>> {
        self.ids.write().unwrap_or_else(|p| p.into_inner())
    }

    fn ids(&self) -> std::sync::RwLockReadGuard<'_, HashMap<String, IdSet>> {
        self.ids.read().unwrap_or_else(|p| p.into_inner())
    }

    /// How many ids' stored lengths were read from SQLite since the index was opened.
    pub fn length_reads(&self) -> u64 {
        self.length_reads.load(Ordering::Relaxed)
    }

    /// Bytes the in-memory id sets hold (all namespaces).
    pub fn id_set_bytes(&self) -> usize {
        self.ids().values().map(IdSet::heap_bytes).sum()
    }

    /// The (row, chunk id) of pack `pid`'s rows (within the caller's transaction, before they go).
    fn pack_rows(c: &Connection, pid: i64) -> Result<Vec<(u64, Digest)>> {
        let mut s = c.prepare_cached(&format!("SELECT rid, id FROM chunks WHERE {IN_PACK}"))?;
        let v = s
            .query_map([pid], |r| Ok((r.get::<_, i64>(0)? as u64, r.get::<_, Vec<u8>>(1)?)))?
            .filter_map(|r| r.map(|(row, v)| v.try_into().ok().map(|id| (row, id))).transpose())
            .collect::<rusqlite::Result<Vec<(u64, Digest)>>>()?;
        Ok(v)
    }

    /// Widens pack `pid`'s range of row numbers to hold `lo..=hi` (rows just placed in it,
    /// within the caller's transaction).
    fn widen(c: &Connection, pid: i64, lo: u64, hi: u64) -> Result<()> {
        c.prepare_cached("UPDATE packs SET lo = MIN(COALESCE(lo, ?2), ?2), hi = MAX(COALESCE(hi, ?3), ?3) WHERE pid = ?1")?
            .execute(params![pid, lo as i64, hi as i64])?;
        Ok(())
    }

    /// Deletes pack `pid`'s chunk rows (within the caller's transaction).
    fn delete_pack_rows(c: &Connection, pid: i64) -> Result<()> {
        c.prepare_cached(&format!("DELETE FROM chunks WHERE {IN_PACK}"))?.execute([pid])?;
        Ok(())
    }

    /// Drops the ids of `gone`'s rows from namespace `ns`'s map, each where the map places it in
    /// that row (the caller holds the connection's lock and has committed the rows' removal).
    fn forget(&self, ns: &str, gone: &[(u64, Digest)]) {
        if gone.is_empty() {
            return;
        }
        let mut sets = self.ids_mut();
        if let Some(s) = sets.get_mut(ns) {
            for (row, id) in gone {
                s.remove_at(id, *row);
            }
        }
    }

    fn c(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The namespace's number, if it has one.
    fn nsid(c: &Connection, ns: &str) -> Result<Option<i64>> {
        let mut s = c.prepare_cached("SELECT nsid FROM namespaces WHERE ns = ?1")?;
        Ok(s.query_row([ns], |r| r.get(0)).optional()?)
    }

    /// The namespace's number, made if it has none.
    fn nsid_mut(c: &Connection, ns: &str) -> Result<i64> {
        if let Some(id) = Self::nsid(c, ns)? {
            return Ok(id);
        }
        c.execute("INSERT INTO namespaces(ns) VALUES (?1)", [ns])?;
        Ok(c.last_insert_rowid())
    }

    fn pid(c: &Connection, nsid: i64, pack: &str) -> Result<Option<i64>> {
        let mut s = c.prepare_cached("SELECT pid FROM packs WHERE nsid = ?1 AND pack = ?2")?;
        Ok(s.query_row(params![nsid, pack], |r| r.get(0)).optional()?)
    }

    pub fn ns_alg(&self, ns: &str) -> Result<Option<HashAlg>> {
        let h: Option<Option<String>> = self
            .c()
            .query_row("SELECT hash FROM namespaces WHERE ns = ?1", [ns], |r| r.get(0))
            .optional()?;
        Ok(h.flatten().and_then(|h| HashAlg::parse(&h).ok()))
    }

    pub fn set_ns_alg(&self, ns: &str, alg: HashAlg) -> Result<()> {
        let c = self.c();
        let id = Self::nsid_mut(&c, ns)?;
        c.execute("UPDATE namespaces SET hash = ?2 WHERE nsid = ?1", params![id, alg.name()])?;
        Ok(())
    }

    pub fn namespaces(&self) -> Result<Vec<String>> {
        let c = self.c();
        let mut s = c.prepare("SELECT ns FROM namespaces ORDER BY ns")?;
        let v = s.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
        Ok(v)
    }

    /// The ids among `ids` that the namespace lacks, in order (each once).
    /// Answered by the namespace's in-memory id set, each key's rows confirmed through the rows
    /// file's mapping ([`IdSet::query_each`]; no SQLite, no lock a writer holds long).
    pub fn missing(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Digest>> {
        let sets = self.ids();
        let present = match sets.get(ns) {
            Some(set) => set.query_each(ids)?,
            None => vec![false; ids.len()],
        };
        drop(sets);
        let mut out = Vec::new();
        // Only the missing ids are remembered (most of a re-push's ids are present).
        let mut seen = std::collections::HashSet::new();
        for (id, here) in ids.iter().zip(present) {
            if !here && seen.insert(*id) {
                out.push(*id);
            }
        }
        Ok(out)
    }

    pub fn contains(&self, ns: &str, id: &Digest) -> Result<bool> {
        match self.ids().get(ns) {
            Some(s) => Ok(s.contains(id)?),
            None => Ok(false),
        }
    }

    /// Where each of `ids` rests: its row from the namespace's map, then that row by number.
    pub fn lookup(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Option<Loc>>> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(vec![None; ids.len()]) };
        let rows = match self.ids().get(ns) {
            Some(set) => set.get_each(ids)?,
            None => vec![None; ids.len()],
        };
        let mut s = c.prepare_cached(
            "SELECT p.pack, c.off, c.len, c.raw, c.roff FROM chunks c JOIN packs p ON p.pid = c.pid WHERE c.rid = ?1 AND c.nsid = ?2",
        )?;
        let mut out = Vec::with_capacity(ids.len());
        for v in rows {
            let Some(v) = v else {
                out.push(None);
                continue;
            };
            out.push(
                s.query_row(params![v.row as i64, nsid], |r| {
                    Ok(Loc {
                        pack: r.get(0)?,
                        offset: r.get::<_, i64>(1)? as u64,
                        len: r.get::<_, i64>(2)? as u32,
                        compressed: Some(r.get::<_, i64>(3)? as u32).filter(|&n| n > 0),
                        raw_off: r.get::<_, i64>(4)? as u32,
                    })
                })
                .optional()?,
            );
        }
        Ok(out)
    }

    /// The raw length of each of `ids` (`None`: not in the namespace): a compressed chunk's
    /// decompressed length. Answered by the namespace's map.
    pub fn lengths(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Option<u32>>> {
        self.length_reads.fetch_add(ids.len() as u64, Ordering::Relaxed);
        Ok(match self.ids().get(ns) {
            Some(set) => set.get_each(ids)?.into_iter().map(|v| v.map(|v| v.len)).collect(),
            None => vec![None; ids.len()],
        })
    }

    /// Indexes a durable pack's chunks, [`INDEX_BATCH`] rows per transaction: between two
    /// batches other requests use the index (a pack of 65,536 chunks does not hold it for its
    /// whole insert). Until the last batch the pack's row says `bytes = -1` ("being indexed"):
    /// [`Index::packs`] leaves it out (gc and check do not see a half-indexed pack), and an index
    /// opened after a crash drops such a pack's rows, so that the start-up reconcile indexes it
    /// again from the object. A chunk already indexed keeps its place. Returns how many rows
    /// were added, and their bytes.
    pub fn add_pack(&self, ns: &str, pack: &str, bytes: u64, created: i64, frames: &[Frame]) -> Result<(u64, u64)> {
        let (nsid, pid, fresh) = {
            let c = self.c();
            let nsid = Self::nsid_mut(&c, ns)?;
            let fresh = c.execute(
                "INSERT OR IGNORE INTO packs(nsid, pack, bytes, created) VALUES (?1, ?2, -1, ?3)",
                params![nsid, pack, created],
            )? == 1;
            let pid = Self::pid(&c, nsid, pack)?.ok_or_else(|| StoreError::Internal(format!("pack {pack} vanished")))?;
            (nsid, pid, fresh)
        };
        let r = self.add_rows(ns, nsid, pid, frames);
        if fresh {
            match &r {
                Ok(_) => {
                    self.c().execute("UPDATE packs SET bytes = ?2 WHERE pid = ?1", params![pid, bytes as i64])?;
                }
                // The rows added so far go with the pack's row (the pack is indexed again later).
                Err(_) => {
                    let _ = self.remove_pack(ns, pack);
                }
            }
        }
        r
    }

    /// Inserts the rows batch by batch, in pack order, of the ids the namespace does not
    /// have (nor an earlier frame of this pack); each batch's new ids join the namespace's map
    /// once its transaction has committed (the connection's lock still held, so no other
    /// writer decides on the same ids in between).
    fn add_rows(&self, ns: &str, nsid: i64, pid: i64, frames: &[Frame]) -> Result<(u64, u64)> {
        let (mut added, mut added_bytes) = (0, 0);
        let mut new: Vec<(Digest, Val)> = Vec::with_capacity(INDEX_BATCH.min(frames.len()));
        let mut batch_ids = std::collections::HashSet::with_capacity(INDEX_BATCH.min(frames.len()));
        for batch in frames.chunks(INDEX_BATCH) {
            let mut c = self.c();
            let ids: Vec<Digest> = batch.iter().map(|f| f.id).collect();
            let have = match self.ids().get(ns) {
                Some(set) => set.contains_each(&ids)?,
                None => vec![false; ids.len()],
            };
            let tx = c.transaction()?;
            new.clear();
            batch_ids.clear();
            {
                let mut s = tx.prepare_cached("INSERT INTO chunks(nsid, id, pid, off, len, raw, roff) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)")?;
                for (f, here) in batch.iter().zip(have) {
                    if here || !batch_ids.insert(f.id) {
                        continue;
                    }
                    let raw = if f.compressed { f.raw as i64 } else { 0 };
                    s.execute(params![nsid, &f.id[..], pid, f.offset as i64, f.len as i64, raw, f.raw_off as i64])?;
                    added += 1;
                    // A group's frame is counted once, with its first chunk.
                    added_bytes += if f.member { 0 } else { f.len as u64 };
                    let len = if f.compressed { f.raw } else { f.len };
                    let row = tx.last_insert_rowid() as u64;
                    // Refused before the commit (the batch is rolled back), never wrapped.
                    row32(row)?;
                    new.push((f.id, Val { row, len }));
                }
            }
            if let (Some(a), Some(b)) = (new.first(), new.last()) {
                Self::widen(&tx, pid, a.1.row, b.1.row)?;
            }
            tx.commit()?;
            let mut sets = self.ids_mut();
            let set = sets.entry(ns.to_string()).or_insert_with(|| IdSet::new(self.rows.clone()));
            set.insert_each(&new)?;
        }
        Ok((added, added_bytes))
    }

    pub fn has_pack(&self, ns: &str, pack: &str) -> Result<bool> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(false) };
        Ok(Self::pid(&c, nsid, pack)?.is_some())
    }

    /// (pack, bytes, created) of every pack of a namespace (not those being indexed).
    pub fn packs(&self, ns: &str) -> Result<Vec<(String, u64, i64)>> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(Vec::new()) };
        let mut s = c.prepare("SELECT pack, bytes, created FROM packs WHERE nsid = ?1 AND bytes >= 0 ORDER BY pack")?;
        let v = s
            .query_map([nsid], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v)
    }

    /// The chunks the index places in `pack`.
    pub fn pack_chunks(&self, ns: &str, pack: &str) -> Result<Vec<Frame>> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(Vec::new()) };
        let Some(pid) = Self::pid(&c, nsid, pack)? else { return Ok(Vec::new()) };
        let mut s = c.prepare_cached(&format!("SELECT id, off, len, raw, roff FROM chunks WHERE {IN_PACK} ORDER BY off, roff"))?;
        let v = s
            .query_map(params![pid], |r| {
                let id: Vec<u8> = r.get(0)?;
                let len = r.get::<_, i64>(2)? as u32;
                let raw = r.get::<_, i64>(3)? as u32;
                let raw_off = r.get::<_, i64>(4)? as u32;
                Ok(Frame {
                    id: id.try_into().unwrap_or([0; 32]),
                    offset: r.get::<_, i64>(1)? as u64,
                    len,
                    raw: if raw > 0 { raw } else { len },
                    compressed: raw > 0,
                    raw_off,
                    // A group's first chunk is at raw offset 0, each member after at least one byte.
                    member: raw_off > 0,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v)
    }

    /// Number of chunk rows of a namespace.
    pub fn chunk_count(&self, ns: &str) -> Result<u64> {
        Ok(self.ids().get(ns).map_or(0, |s| s.len() as u64))
    }

    /// Drops a pack and the chunks the index places in it.
    pub fn remove_pack(&self, ns: &str, pack: &str) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        let mut gone = Vec::new();
        if let Some(nsid) = Self::nsid(&tx, ns)? {
            if let Some(pid) = Self::pid(&tx, nsid, pack)? {
                gone = Self::pack_rows(&tx, pid)?;
                Self::delete_pack_rows(&tx, pid)?;
                tx.execute("DELETE FROM packs WHERE pid = ?1", [pid])?;
            }
        }
        tx.commit()?;
        self.forget(ns, &gone);
        Ok(())
    }

    /// Repacking: `new_pack` (durable) takes over `frames` from `old_pack`; the old pack's
    /// remaining rows and the old pack go.
    pub fn replace_pack(&self, ns: &str, old_pack: &str, new_pack: &str, bytes: u64, frames: &[Frame]) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        let nsid = Self::nsid_mut(&tx, ns)?;
        tx.execute(
            "INSERT OR IGNORE INTO packs(nsid, pack, bytes, created) VALUES (?1, ?2, ?3, ?4)",
            params![nsid, new_pack, bytes as i64, now()],
        )?;
        let new_pid = Self::pid(&tx, nsid, new_pack)?.ok_or_else(|| StoreError::Internal(format!("pack {new_pack} vanished")))?;
        {
            let rows = match self.ids().get(ns) {
                Some(set) => set.get_each(&frames.iter().map(|f| f.id).collect::<Vec<_>>())?,
                None => vec![None; frames.len()],
            };
            let mut s = tx.prepare_cached("UPDATE chunks SET pid = ?3, off = ?4 WHERE nsid = ?1 AND rid = ?2")?;
            let (mut lo, mut hi) = (u64::MAX, 0);
            for (f, v) in frames.iter().zip(rows) {
                if let Some(v) = v {
                    if s.execute(params![nsid, v.row as i64, new_pid, f.offset as i64])? == 1 {
                        (lo, hi) = (lo.min(v.row), hi.max(v.row));
                    }
                }
            }
            if lo <= hi {
                Self::widen(&tx, new_pid, lo, hi)?;
            }
        }
        let mut gone = Vec::new();
        if old_pack != new_pack {
            if let Some(old) = Self::pid(&tx, nsid, old_pack)? {
                gone = Self::pack_rows(&tx, old)?;
                Self::delete_pack_rows(&tx, old)?;
                tx.execute("DELETE FROM packs WHERE pid = ?1", [old])?;
            }
        }
        tx.commit()?;
        self.forget(ns, &gone);
        Ok(())
    }

    /// The highest version number `name` ever had: its latest version, or a deleted one above
    /// it (a version number is never given twice).
    pub fn max_version(&self, ns: &str, name: &str) -> Result<u64> {
        Ok(self.max_versions(ns, &[name])?[0])
    }

    /// [`Index::max_version`] of each of `names`, in one pass (a batch commit's names).
    pub fn max_versions(&self, ns: &str, names: &[&str]) -> Result<Vec<u64>> {
        let mut out = {
            let c = self.c();
            match Self::nsid(&c, ns)? {
                None => vec![0; names.len()],
                Some(nsid) => {
                    let mut s = c.prepare_cached(
                        "SELECT MAX(v) FROM (SELECT MAX(version) AS v FROM versions WHERE nsid = ?1 AND name = ?2
                         UNION ALL SELECT version FROM deleted WHERE nsid = ?1 AND name = ?2)",
                    )?;
                    names
                        .iter()
                        .map(|n| Ok(s.query_row(params![nsid, n], |r| r.get::<_, Option<i64>>(0))?.unwrap_or(0) as u64))
                        .collect::<Result<Vec<u64>>>()?
                }
            }
        };
        if let Some(rows) = &self.recipes {
            for (o, n) in out.iter_mut().zip(names) {
                *o = (*o).max(rows.max_version(ns, n)?);
            }
        }
        Ok(out)
    }

    /// Records that version `version` of `name` was deleted (its tombstone object exists): the
    /// name's next version is above it.
    pub fn add_deleted(&self, ns: &str, name: &str, version: u64) -> Result<()> {
        let c = self.c();
        let nsid = Self::nsid_mut(&c, ns)?;
        c.execute(
            "INSERT INTO deleted(nsid, name, version) VALUES (?1, ?2, ?3)
             ON CONFLICT(nsid, name) DO UPDATE SET version = MAX(version, excluded.version)",
            params![nsid, name, version as i64],
        )?;
        Ok(())
    }

    /// The highest deleted version of `name` recorded (0: none).
    pub fn max_deleted(&self, ns: &str, name: &str) -> Result<u64> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(0) };
        let v: Option<i64> = c
            .query_row("SELECT version FROM deleted WHERE nsid = ?1 AND name = ?2", params![nsid, name], |r| r.get(0))
            .optional()?;
        Ok(v.unwrap_or(0) as u64)
    }

    /// A version whose recipe is a file (or any version, in a bucket). A version whose recipe
    /// is a recipe row is not added: the rows answer it (see [`Index::set_recipe_rows`]).
    pub fn add_version(&self, ns: &str, v: &Version) -> Result<()> {
        let c = self.c();
        let nsid = Self::nsid_mut(&c, ns)?;
        c.execute(
            "INSERT OR REPLACE INTO versions(nsid, name, version, bytes, chunks, digest, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![nsid, v.name, v.version as i64, v.bytes as i64, v.chunks as i64, digest_value(&v.digest), v.created],
        )?;
        Ok(())
    }

    fn row(r: &rusqlite::Row) -> rusqlite::Result<Version> {
        Ok(Version {
            name: r.get(0)?,
            version: r.get::<_, i64>(1)? as u64,
            bytes: r.get::<_, i64>(2)? as u64,
            chunks: r.get::<_, i64>(3)? as u64,
            digest: match r.get_ref(4)? {
                rusqlite::types::ValueRef::Blob(b) => b.iter().map(|x| format!("{x:02x}")).collect(),
                v => v.as_str().map_err(rusqlite::Error::from)?.to_string(),
            },
            created: r.get(5)?,
        })
    }

    /// A version (`None`: the latest), from the versions table or the recipe rows.
    pub fn version(&self, ns: &str, name: &str, version: Option<u64>) -> Result<Option<Version>> {
        let table = {
            let c = self.c();
            match Self::nsid(&c, ns)? {
                None => None,
                Some(nsid) => {
                    let q = "SELECT name, version, bytes, chunks, digest, created FROM versions WHERE nsid = ?1 AND name = ?2";
                    match version {
                        Some(v) => c
                            .query_row(&format!("{q} AND version = ?3"), params![nsid, name, v as i64], Self::row)
                            .optional()?,
                        None => c
                            .query_row(&format!("{q} ORDER BY version DESC LIMIT 1"), params![nsid, name], Self::row)
                            .optional()?,
                    }
                }
            }
        };
        let row = match &self.recipes {
            Some(rows) => rows.version(ns, name, version)?,
            None => None,
        };
        // A version number is a file's or a row's, never both; the latest is the higher.
        Ok(match (table, row) {
            (Some(t), Some(r)) => Some(if r.version > t.version { r } else { t }),
            (t, r) => t.or(r),
        })
    }

    /// Every version of a namespace (of one name, with `name`), by name then version: the
    /// versions table's and the recipe rows'.
    pub fn versions(&self, ns: &str, name: Option<&str>) -> Result<Vec<Version>> {
        let mut v = {
            let c = self.c();
            match Self::nsid(&c, ns)? {
                None => Vec::new(),
                Some(nsid) => {
                    let q = "SELECT name, version, bytes, chunks, digest, created FROM versions WHERE nsid = ?1";
                    match name {
                        Some(n) => {
                            let mut s = c.prepare(&format!("{q} AND name = ?2 ORDER BY version"))?;
                            let r = s.query_map(params![nsid, n], Self::row)?.collect::<rusqlite::Result<Vec<_>>>()?;
                            r
                        }
                        None => {
                            let mut s = c.prepare(&format!("{q} ORDER BY name, version"))?;
                            let r = s.query_map(params![nsid], Self::row)?.collect::<rusqlite::Result<Vec<_>>>()?;
                            r
                        }
                    }
                }
            }
        };
        if let Some(rows) = &self.recipes {
            let more = rows.versions(ns, name)?;
            if !more.is_empty() {
                v.extend(more);
                // Both are in (name, version) order, names compared as bytes (SQLite's BINARY).
                v.sort_by(|a, b| (a.name.as_bytes(), a.version).cmp(&(b.name.as_bytes(), b.version)));
            }
        }
        Ok(v)
    }

    pub fn delete_version(&self, ns: &str, name: &str, version: u64) -> Result<()> {
        let c = self.c();
        let Some(nsid) = Self::nsid(&c, ns)? else { return Ok(()) };
        c.execute(
            "DELETE FROM versions WHERE nsid = ?1 AND name = ?2 AND version = ?3",
            params![nsid, name, version as i64],
        )?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    /// Ids of which one in three shares its first 8 bytes (the map's key) with 9 others.
    fn id(x: u64) -> Digest {
        let mut d = *blake3::hash(&x.to_le_bytes()).as_bytes();
        if x % 3 == 0 {
            d[..8].copy_from_slice(&blake3::hash(&(x / 30).to_be_bytes()).as_bytes()[..8]);
        }
        d
    }

    fn frames(xs: &[u64]) -> Vec<Frame> {
        xs.iter()
            .enumerate()
            .map(|(i, &x)| Frame::plain(id(x), 12 + i as u64 * 100, 60))
            .collect()
    }

    /// The chunk ids the table holds for `ns`, read from SQLite, with their pack, offset and
    /// length; an id in two rows of a namespace fails the test.
    fn table(ix: &Index, ns: &str) -> HashMap<Digest, (String, u64, u32)> {
        let c = ix.c();
        let Some(nsid) = Index::nsid(&c, ns).unwrap() else { return HashMap::new() };
        let mut s = c
            .prepare("SELECT c.id, p.pack, c.off, c.len FROM chunks c JOIN packs p ON p.pid = c.pid WHERE c.nsid = ?1")
            .unwrap();
        let mut out = HashMap::new();
        for r in s
            .query_map([nsid], |r| Ok((r.get::<_, Vec<u8>>(0)?, r.get::<_, String>(1)?, r.get::<_, i64>(2)?, r.get::<_, i64>(3)?)))
            .unwrap()
        {
            let (id, pack, off, len) = r.unwrap();
            let id: Digest = id.try_into().unwrap();
            assert!(out.insert(id, (pack, off as u64, len as u32)).is_none(), "ns {ns}: an id in two rows");
        }
        out
    }

    /// The set and the table agree on every id of `universe`, through both ways of asking.
    fn agree(ix: &Index, ns: &str, universe: u64, what: &str) {
        let t = table(ix, ns);
        let all: Vec<Digest> = (0..universe).map(id).collect();
        let miss: HashSet<Digest> = ix.missing(ns, &all).unwrap().into_iter().collect();
        let locs = ix.lookup(ns, &all).unwrap();
        let lens = ix.lengths(ns, &all).unwrap();
        for (k, d) in all.iter().enumerate() {
            let row = t.get(d);
            assert_eq!(!miss.contains(d), row.is_some(), "{what}: ns {ns}: missing() and the table differ");
            assert_eq!(ix.contains(ns, d).unwrap(), row.is_some(), "{what}: ns {ns}: contains() and the table differ");
            let loc = locs[k].as_ref().map(|l| (l.pack.clone(), l.offset, l.len));
            assert_eq!(loc.as_ref(), row, "{what}: ns {ns}: lookup() and the table differ");
            assert_eq!(lens[k], row.map(|r| r.2), "{what}: ns {ns}: lengths() and the table differ");
        }
        assert_eq!(ix.ids().get(ns).map_or(0, |s| s.len()), t.len(), "{what}: ns {ns}: sizes differ");
    }

    /// Property: through random adds (overlapping packs, chunks already indexed), removes,
    /// replaces (a gc rewrite keeping some rows) and restarts (the set rebuilt from the
    /// table), the in-memory set and the chunks table hold the same ids, namespace by
    /// namespace; a chunk of one namespace never answers present in another.
    #[test]
    fn the_id_set_and_the_table_agree() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let mut ix = Index::open(&path, false).unwrap();
        let mut x = 0x9E37_79B9_7F4A_7C15u64;
        let mut rnd = move |n: u64| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x % n.max(1)
        };
        const UNIVERSE: u64 = 30_000;
        let nss = ["a", "b", "c"];
        let mut packs: Vec<(String, String)> = Vec::new();
        for step in 0..400 {
            let ns = nss[rnd(3) as usize];
            match rnd(10) {
                0..=4 => {
                    // A pack of up to 9,000 chunks (more than one INDEX_BATCH), overlapping others.
                    let start = rnd(UNIVERSE);
                    let n = 1 + rnd(9000);
                    let xs: Vec<u64> = (start..start + n).map(|k| k % UNIVERSE).collect();
                    let name = format!("p{step}");
                    ix.add_pack(ns, &name, 1000, now(), &frames(&xs)).unwrap();
                    packs.push((ns.to_string(), name));
                }
                5 | 6 if !packs.is_empty() => {
                    let (ns2, p) = packs.swap_remove(rnd(packs.len() as u64) as usize);
                    ix.remove_pack(&ns2, &p).unwrap();
                }
                7 if !packs.is_empty() => {
                    // A rewrite: some of the old pack's rows move to a new pack, the rest go.
                    let i = rnd(packs.len() as u64) as usize;
                    let (ns2, old) = packs[i].clone();
                    let rows = ix.pack_chunks(&ns2, &old).unwrap();
                    let keep: Vec<Frame> = rows.into_iter().filter(|_| rnd(2) == 0).collect();
                    let new = format!("r{step}");
                    ix.replace_pack(&ns2, &old, &new, 500, &keep).unwrap();
                    packs[i] = (ns2, new);
                }
                8 => {
                    // A restart; the rows file left by the last process is damaged on the way
                    // (it is rewritten at open, never trusted).
                    drop(ix);
                    std::fs::write(Index::rows_path(&path), vec![0xA5u8; 36 * 1000]).unwrap();
                    ix = Index::open(&path, false).unwrap();
                }
                _ => {}
            }
            if step % 25 == 0 {
                for ns in nss {
                    agree(&ix, ns, UNIVERSE, &format!("step {step}"));
                }
            }
        }
        for ns in nss {
            agree(&ix, ns, UNIVERSE, "end");
        }
        drop(ix);
        let ix = Index::open(&path, false).unwrap();
        for ns in nss {
            agree(&ix, ns, UNIVERSE, "after a restart");
        }
        // --reindex empties the table and the set alike.
        drop(ix);
        let ix = Index::open(&path, true).unwrap();
        for ns in nss {
            assert!(ix.ids().get(ns).is_none_or(|s| s.is_empty()));
            agree(&ix, ns, UNIVERSE, "after a reset");
        }
    }

    /// A row number above u32::MAX (which the map cannot hold) is refused with an error that
    /// says to reindex, never wrapped: a pack that would get one is not indexed (nothing half
    /// stored), and an index that holds one does not open.
    #[test]
    fn a_row_over_u32_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("index.sqlite");
        let ix = Index::open(&path, false).unwrap();
        ix.add_pack("a", "p", 100, now(), &frames(&[1, 2])).unwrap();
        ix.c()
            .execute("INSERT INTO chunks(rid, nsid, id, pid, off, len, raw) SELECT 4294967295, nsid, zeroblob(32), pid, 0, 1, 0 FROM chunks LIMIT 1", [])
            .unwrap();
        let e = ix.add_pack("a", "q", 100, now(), &frames(&[3, 4])).unwrap_err();
        assert!(e.to_string().contains("reindex"), "{e}");
        assert!(!ix.has_pack("a", "q").unwrap());
        assert_eq!(ix.missing("a", &[id(1), id(2), id(3), id(4)]).unwrap(), vec![id(3), id(4)]);
        assert_eq!(ix.c().query_row("SELECT COUNT(*) FROM chunks", [], |r| r.get::<_, i64>(0)).unwrap(), 3);
        drop(ix);
        let ix = Index::open(&path, false).unwrap();
        assert_eq!(ix.missing("a", &[id(1), id(2), id(3)]).unwrap(), vec![id(3)]);
        ix.c()
            .execute("INSERT INTO chunks(rid, nsid, id, pid, off, len, raw) SELECT 4294967296, nsid, zeroblob(32), pid, 0, 1, 0 FROM chunks LIMIT 1", [])
            .unwrap();
        drop(ix);
        let e = Index::open(&path, false).err().expect("an index with a row over u32::MAX opened");
        assert!(e.to_string().contains("reindex"), "{e}");
        // --reindex numbers rows from 1 again.
        let ix = Index::open(&path, true).unwrap();
        ix.add_pack("a", "p", 100, now(), &frames(&[1, 2])).unwrap();
        assert!(ix.contains("a", &id(2)).unwrap());
    }

    #[test]
    fn tenants_apart() {
        let dir = tempfile::tempdir().unwrap();
        let ix = Index::open(&dir.path().join("i.sqlite"), false).unwrap();
        ix.add_pack("a", "p", 100, now(), &frames(&[1, 2, 3])).unwrap();
        ix.add_pack("b", "p", 100, now(), &frames(&[3, 4])).unwrap();
        let q: Vec<Digest> = (1..=5).map(id).collect();
        assert_eq!(ix.missing("a", &q).unwrap(), vec![id(4), id(5)]);
        assert_eq!(ix.missing("b", &q).unwrap(), vec![id(1), id(2), id(5)]);
        assert_eq!(ix.missing("nobody", &q).unwrap(), q);
        assert!(ix.contains("b", &id(4)).unwrap() && !ix.contains("a", &id(4)).unwrap());
        ix.remove_pack("b", "p").unwrap();
        assert!(!ix.contains("b", &id(3)).unwrap() && ix.contains("a", &id(3)).unwrap(), "b's removal left a's chunk");
        // Repeated ids are answered once.
        assert_eq!(ix.missing("a", &[id(9), id(9), id(1)]).unwrap(), vec![id(9)]);
    }
}
