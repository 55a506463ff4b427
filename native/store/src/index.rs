//! The index: chunk id → (pack, offset, length), the packs, and the committed versions, per
//! namespace, in an embedded SQLite database (`rusqlite`, bundled: nothing to install).
//!
//! The index is a cache of what the objects say: every row can be rebuilt from the packs and
//! recipes (`Store::reconcile`, at every start), so a lost or stale index loses nothing. That is
//! why it runs with `synchronous = NORMAL` (WAL: a power cut may lose the last transactions,
//! never corrupt the database; the start-up reconcile puts them back from the objects). Every statement binds
//! the namespace: no query can cross one.

use crate::error::{Result, StoreError};
use cutpoint_core::protocol::pack::Frame;
use cutpoint_core::{Digest, HashAlg};
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

pub struct Index {
    conn: Mutex<Connection>,
}

/// Where a chunk rests.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Loc {
    pub pack: String,
    pub offset: u64,
    pub len: u32,
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
/// holds ~64 MiB of it.
const SCHEMA: &str = "
PRAGMA locking_mode = EXCLUSIVE;
PRAGMA journal_mode = WAL;
PRAGMA synchronous = NORMAL;
PRAGMA cache_size = -65536;
CREATE TABLE IF NOT EXISTS namespaces(ns TEXT PRIMARY KEY, hash TEXT NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packs(ns TEXT NOT NULL, pack TEXT NOT NULL, bytes INTEGER NOT NULL,
  created INTEGER NOT NULL, PRIMARY KEY(ns, pack)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS chunks(ns TEXT NOT NULL, id BLOB NOT NULL, pack TEXT NOT NULL,
  off INTEGER NOT NULL, len INTEGER NOT NULL, PRIMARY KEY(ns, id)) WITHOUT ROWID;
CREATE INDEX IF NOT EXISTS chunks_by_pack ON chunks(ns, pack);
CREATE TABLE IF NOT EXISTS versions(ns TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
  bytes INTEGER NOT NULL, chunks INTEGER NOT NULL, digest TEXT NOT NULL, created INTEGER NOT NULL,
  PRIMARY KEY(ns, name, version)) WITHOUT ROWID;
";

pub fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

impl Index {
    pub fn open(path: &Path) -> Result<Index> {
        let conn = Connection::open(path)?;
        conn.execute_batch(SCHEMA).map_err(|e| match e.sqlite_error_code() {
            Some(rusqlite::ErrorCode::DatabaseBusy) | Some(rusqlite::ErrorCode::DatabaseLocked) => StoreError::BadRequest(format!(
                "{}: the index is in use by another process (is another `cutpoint serve` running on this directory?)",
                path.display()
            )),
            _ => StoreError::from(e),
        })?;
        // The exclusive lock is taken by the first read; take it now, so that a second server
        // fails here and not at its first request.
        conn.query_row("SELECT COUNT(*) FROM namespaces", [], |_| Ok(())).map_err(|e| {
            StoreError::BadRequest(format!(
                "{}: the index is in use by another process (is another `cutpoint serve` running on this directory?): {e}",
                path.display()
            ))
        })?;
        Ok(Index { conn: Mutex::new(conn) })
    }

    fn c(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.conn.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn ns_alg(&self, ns: &str) -> Result<Option<HashAlg>> {
        let h: Option<String> = self
            .c()
            .query_row("SELECT hash FROM namespaces WHERE ns = ?1", [ns], |r| r.get(0))
            .optional()?;
        Ok(h.and_then(|h| HashAlg::parse(&h).ok()))
    }

    pub fn set_ns_alg(&self, ns: &str, alg: HashAlg) -> Result<()> {
        self.c().execute(
            "INSERT OR REPLACE INTO namespaces(ns, hash) VALUES (?1, ?2)",
            params![ns, alg.name()],
        )?;
        Ok(())
    }

    pub fn namespaces(&self) -> Result<Vec<String>> {
        let c = self.c();
        let mut s = c.prepare("SELECT ns FROM namespaces ORDER BY ns")?;
        let v = s.query_map([], |r| r.get(0))?.collect::<rusqlite::Result<Vec<String>>>()?;
        Ok(v)
    }

    /// The ids among `ids` that the namespace lacks, in order (each once).
    pub fn missing(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Digest>> {
        let c = self.c();
        let mut s = c.prepare_cached("SELECT 1 FROM chunks WHERE ns = ?1 AND id = ?2")?;
        let mut out = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for id in ids {
            if seen.insert(*id) && !s.exists(params![ns, &id[..]])? {
                out.push(*id);
            }
        }
        Ok(out)
    }

    pub fn contains(&self, ns: &str, id: &Digest) -> Result<bool> {
        let c = self.c();
        let mut s = c.prepare_cached("SELECT 1 FROM chunks WHERE ns = ?1 AND id = ?2")?;
        Ok(s.exists(params![ns, &id[..]])?)
    }

    pub fn lookup(&self, ns: &str, ids: &[Digest]) -> Result<Vec<Option<Loc>>> {
        let c = self.c();
        let mut s = c.prepare_cached("SELECT pack, off, len FROM chunks WHERE ns = ?1 AND id = ?2")?;
        let mut out = Vec::with_capacity(ids.len());
        for id in ids {
            out.push(
                s.query_row(params![ns, &id[..]], |r| {
                    Ok(Loc {
                        pack: r.get(0)?,
                        offset: r.get::<_, i64>(1)? as u64,
                        len: r.get::<_, i64>(2)? as u32,
                    })
                })
                .optional()?,
            );
        }
        Ok(out)
    }

    /// Indexes a durable pack's chunks (one transaction). A chunk already indexed keeps its
    /// place. Returns how many rows were added.
    pub fn add_pack(&self, ns: &str, pack: &str, bytes: u64, created: i64, frames: &[Frame]) -> Result<usize> {
        let mut c = self.c();
        let tx = c.transaction()?;
        tx.execute(
            "INSERT OR IGNORE INTO packs(ns, pack, bytes, created) VALUES (?1, ?2, ?3, ?4)",
            params![ns, pack, bytes as i64, created],
        )?;
        let mut added = 0;
        {
            let mut s = tx.prepare_cached("INSERT OR IGNORE INTO chunks(ns, id, pack, off, len) VALUES (?1, ?2, ?3, ?4, ?5)")?;
            for f in frames {
                added += s.execute(params![ns, &f.id[..], pack, f.offset as i64, f.len as i64])?;
            }
        }
        tx.commit()?;
        Ok(added)
    }

    pub fn has_pack(&self, ns: &str, pack: &str) -> Result<bool> {
        let c = self.c();
        let mut s = c.prepare_cached("SELECT 1 FROM packs WHERE ns = ?1 AND pack = ?2")?;
        Ok(s.exists(params![ns, pack])?)
    }

    /// (pack, bytes, created) of every pack of a namespace.
    pub fn packs(&self, ns: &str) -> Result<Vec<(String, u64, i64)>> {
        let c = self.c();
        let mut s = c.prepare("SELECT pack, bytes, created FROM packs WHERE ns = ?1 ORDER BY pack")?;
        let v = s
            .query_map([ns], |r| Ok((r.get(0)?, r.get::<_, i64>(1)? as u64, r.get(2)?)))?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v)
    }

    /// The chunks the index places in `pack`.
    pub fn pack_chunks(&self, ns: &str, pack: &str) -> Result<Vec<Frame>> {
        let c = self.c();
        let mut s = c.prepare_cached("SELECT id, off, len FROM chunks WHERE ns = ?1 AND pack = ?2 ORDER BY off")?;
        let v = s
            .query_map(params![ns, pack], |r| {
                let id: Vec<u8> = r.get(0)?;
                Ok(Frame {
                    id: id.try_into().unwrap_or([0; 32]),
                    offset: r.get::<_, i64>(1)? as u64,
                    len: r.get::<_, i64>(2)? as u32,
                })
            })?
            .collect::<rusqlite::Result<Vec<_>>>()?;
        Ok(v)
    }

    /// Number of chunk rows of a namespace.
    pub fn chunk_count(&self, ns: &str) -> Result<u64> {
        Ok(self
            .c()
            .query_row("SELECT COUNT(*) FROM chunks WHERE ns = ?1", [ns], |r| r.get::<_, i64>(0))? as u64)
    }

    /// Drops a pack and the chunks the index places in it.
    pub fn remove_pack(&self, ns: &str, pack: &str) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        tx.execute("DELETE FROM chunks WHERE ns = ?1 AND pack = ?2", params![ns, pack])?;
        tx.execute("DELETE FROM packs WHERE ns = ?1 AND pack = ?2", params![ns, pack])?;
        tx.commit()?;
        Ok(())
    }

    /// Repacking: `new_pack` (durable) takes over `frames` from `old_pack`; the old pack's
    /// remaining rows and the old pack go.
    pub fn replace_pack(&self, ns: &str, old_pack: &str, new_pack: &str, bytes: u64, frames: &[Frame]) -> Result<()> {
        let mut c = self.c();
        let tx = c.transaction()?;
        tx.execute(
            "INSERT OR IGNORE INTO packs(ns, pack, bytes, created) VALUES (?1, ?2, ?3, ?4)",
            params![ns, new_pack, bytes as i64, now()],
        )?;
        {
            let mut s = tx.prepare_cached("UPDATE chunks SET pack = ?3, off = ?4 WHERE ns = ?1 AND id = ?2")?;
            for f in frames {
                s.execute(params![ns, &f.id[..], new_pack, f.offset as i64])?;
            }
        }
        tx.execute("DELETE FROM chunks WHERE ns = ?1 AND pack = ?2", params![ns, old_pack])?;
        tx.execute("DELETE FROM packs WHERE ns = ?1 AND pack = ?2", params![ns, old_pack])?;
        tx.commit()?;
        Ok(())
    }

    pub fn max_version(&self, ns: &str, name: &str) -> Result<u64> {
        let v: Option<i64> = self.c().query_row(
            "SELECT MAX(version) FROM versions WHERE ns = ?1 AND name = ?2",
            params![ns, name],
            |r| r.get(0),
        )?;
        Ok(v.unwrap_or(0) as u64)
    }

    pub fn add_version(&self, ns: &str, v: &Version) -> Result<()> {
        self.c().execute(
            "INSERT OR REPLACE INTO versions(ns, name, version, bytes, chunks, digest, created) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![ns, v.name, v.version as i64, v.bytes as i64, v.chunks as i64, v.digest, v.created],
        )?;
        Ok(())
    }

    fn row(r: &rusqlite::Row) -> rusqlite::Result<Version> {
        Ok(Version {
            name: r.get(0)?,
            version: r.get::<_, i64>(1)? as u64,
            bytes: r.get::<_, i64>(2)? as u64,
            chunks: r.get::<_, i64>(3)? as u64,
            digest: r.get(4)?,
            created: r.get(5)?,
        })
    }

    /// A version (`None`: the latest).
    pub fn version(&self, ns: &str, name: &str, version: Option<u64>) -> Result<Option<Version>> {
        let c = self.c();
        let q = "SELECT name, version, bytes, chunks, digest, created FROM versions WHERE ns = ?1 AND name = ?2";
        Ok(match version {
            Some(v) => c
                .query_row(&format!("{q} AND version = ?3"), params![ns, name, v as i64], Self::row)
                .optional()?,
            None => c
                .query_row(&format!("{q} ORDER BY version DESC LIMIT 1"), params![ns, name], Self::row)
                .optional()?,
        })
    }

    /// Every version of a namespace (of one name, with `name`), by name then version.
    pub fn versions(&self, ns: &str, name: Option<&str>) -> Result<Vec<Version>> {
        let c = self.c();
        let q = "SELECT name, version, bytes, chunks, digest, created FROM versions WHERE ns = ?1";
        let v = match name {
            Some(n) => {
                let mut s = c.prepare(&format!("{q} AND name = ?2 ORDER BY version"))?;
                let r = s.query_map(params![ns, n], Self::row)?.collect::<rusqlite::Result<Vec<_>>>()?;
                r
            }
            None => {
                let mut s = c.prepare(&format!("{q} ORDER BY name, version"))?;
                let r = s.query_map(params![ns], Self::row)?.collect::<rusqlite::Result<Vec<_>>>()?;
                r
            }
        };
        Ok(v)
    }

    pub fn delete_version(&self, ns: &str, name: &str, version: u64) -> Result<()> {
        self.c().execute(
            "DELETE FROM versions WHERE ns = ?1 AND name = ?2 AND version = ?3",
            params![ns, name, version as i64],
        )?;
        Ok(())
    }
}
