//! The recipes of a local store's batch commits, kept as rows of one SQLite database
//! (`<objects>/recipes.sqlite`) instead of one file (and one directory) per version: a batch's
//! recipes are written in one transaction (synchronous, so durable when it commits), each under
//! its name's next version number — all of the batch's group or none of it.
//!
//! These rows are objects, not index: they are read through [`crate::backend::Objects`] under
//! the same keys a recipe file has (`ns/<ns>/recipes/<name key>/<v:012>`), so restore, list,
//! delete, gc, check and the start-up reconcile find a recipe wherever it rests (a store's older
//! recipe files are still read; a single commit still writes its recipe as a file; `--reindex`
//! rebuilds the index from files and rows alike). A bucket has no rows: its key layout is the
//! one the edge shares.
//!
//! A plain recipe is stored compact ([`encode`]): its profile and algorithm once in a `heads`
//! table, its chunk ids as bytes, its digest left out when it is the digest of its chunk list
//! (recomputed on read); the text read back is byte for byte the text committed (checked when
//! it is encoded: anything else is stored as text). A single commit's recipe file in a local
//! store is written in the same compact form, its head inline ([`encode_file`]).

use crate::error::{Result, StoreError};
use crate::index::Version;
use crate::store::Stored;
use bytes::Bytes;
use cutpoint_core::protocol::name::{name_from_key, name_key};
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::HashAlg;
use rusqlite::{params, Connection, OptionalExtension};
use std::path::Path;
use std::sync::Mutex;

/// The first bytes of a compact body (a recipe's text never starts with a NUL byte).
const MAGIC: &[u8; 4] = b"\0cr1";
/// The first bytes of a compact recipe file (a single commit's, in a local store): its head
/// (algorithm and profile) inline, not in the `heads` table.
const MAGIC_FILE: &[u8; 4] = b"\0cf1";

const SCHEMA: &str = "
PRAGMA journal_mode = DELETE;
PRAGMA synchronous = EXTRA;
CREATE TABLE IF NOT EXISTS heads(id INTEGER PRIMARY KEY, text TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS recipes(ns TEXT NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
  deleted INTEGER NOT NULL, modified INTEGER NOT NULL, body BLOB NOT NULL,
  PRIMARY KEY(ns, name, version, deleted)) WITHOUT ROWID;
";

/// One row's key: `ns/<ns>/recipes/<name key>/<v:012>[.deleted]`.
#[derive(Clone, Debug, PartialEq, Eq)]
struct RowKey {
    ns: String,
    name: String,
    version: u64,
    deleted: bool,
}

impl RowKey {
    /// The row a key names (`None`: not a recipe or tombstone key, or not in its one spelling).
    fn parse(key: &str) -> Option<RowKey> {
        let rest = key.strip_prefix("ns/")?;
        let (ns, rest) = rest.split_once('/')?;
        let rest = rest.strip_prefix("recipes/")?;
        let (nk, last) = rest.rsplit_once('/')?;
        let name = name_from_key(nk)?;
        let (v, deleted) = match last.strip_suffix(".deleted") {
            Some(v) => (v, true),
            None => (last, false),
        };
        let version: u64 = v.parse().ok()?;
        let k = RowKey { ns: ns.to_string(), name, version, deleted };
        (k.key() == key).then_some(k)
    }

    fn key(&self) -> String {
        let k = crate::backend::recipe_key(&self.ns, &name_key(&self.name), self.version);
        if self.deleted {
            format!("{k}.deleted")
        } else {
            k
        }
    }
}

/// Whether `key` is one a row may hold (a recipe's or a tombstone's).
pub fn is_row_key(key: &str) -> bool {
    RowKey::parse(key).is_some()
}

/// The recipe rows of a local store.
pub struct RecipeRows {
    c: Mutex<Connection>,
}

impl RecipeRows {
    /// Opens (or makes) the database at `path`.
    pub fn open(path: &Path) -> Result<RecipeRows> {
        let c = Connection::open(path).map_err(|e| StoreError::Internal(format!("recipes.sqlite: {e}")))?;
        c.busy_timeout(std::time::Duration::from_secs(30)).map_err(|e| StoreError::Internal(e.to_string()))?;
        c.execute_batch(SCHEMA).map_err(|e| StoreError::Internal(format!("recipes.sqlite: {e}")))?;
        Ok(RecipeRows { c: Mutex::new(c) })
    }

    /// At a clean stop: a small database rewritten without free or half-full pages
    /// ([`crate::index::compact_db`]; `VACUUM` is one transaction: all or nothing).
    pub fn compact(&self) -> Result<()> {
        crate::index::compact_db(&self.c(), false).map_err(|e| StoreError::Internal(format!("recipes.sqlite: {e}")))
    }

    fn c(&self) -> std::sync::MutexGuard<'_, Connection> {
        self.c.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The text stored under `key`, if a row holds it.
    pub fn get(&self, key: &str) -> Result<Option<Bytes>> {
        let Some(k) = RowKey::parse(key) else { return Ok(None) };
        let c = self.c();
        let body: Option<Vec<u8>> = c
            .query_row(
                "SELECT body FROM recipes WHERE ns = ?1 AND name = ?2 AND version = ?3 AND deleted = ?4",
                params![k.ns, k.name, k.version as i64, k.deleted],
                |r| r.get(0),
            )
            .optional()
            .map_err(sql)?;
        match body {
            None => Ok(None),
            // A body that does not decode is answered as it is: it then reads as a damaged
            // recipe wherever it is read (check, gc, restore), as a damaged file would.
            Some(b) => Ok(Some(Bytes::from(decode(Some(&c), &b).unwrap_or(b)))),
        }
    }

    /// The stored size and the last write (Unix seconds) of the row under `key`.
    pub fn meta(&self, key: &str) -> Result<Option<(u64, i64)>> {
        let Some(k) = RowKey::parse(key) else { return Ok(None) };
        self.c()
            .query_row(
                "SELECT length(body), modified FROM recipes WHERE ns = ?1 AND name = ?2 AND version = ?3 AND deleted = ?4",
                params![k.ns, k.name, k.version as i64, k.deleted],
                |r| Ok((r.get::<_, i64>(0)? as u64, r.get(1)?)),
            )
            .optional()
            .map_err(sql)
    }

    /// The rows under `prefix` as `Objects::list` answers: `ns` (every row), `ns/<ns>`,
    /// `ns/<ns>/recipes` (a namespace's), `ns/<ns>/recipes/<name key>` (that name's).
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, u64, i64)>> {
        let p: Vec<&str> = prefix.trim_end_matches('/').split('/').collect();
        let (ns, name) = match p.as_slice() {
            ["ns"] => (None, None),
            ["ns", ns] | ["ns", ns, "recipes"] => (Some(*ns), None),
            ["ns", ns, "recipes", nk @ ..] => match name_from_key(&nk.join("/")) {
                Some(n) => (Some(*ns), Some(n)),
                None => return Ok(Vec::new()),
            },
            _ => return Ok(Vec::new()),
        };
        let c = self.c();
        let mut s = c
            .prepare_cached(
                "SELECT ns, name, version, deleted, length(body), modified FROM recipes
                 WHERE (?1 IS NULL OR ns = ?1) AND (?2 IS NULL OR name = ?2)",
            )
            .map_err(sql)?;
        let rows = s
            .query_map(params![ns, name], |r| {
                let k = RowKey { ns: r.get(0)?, name: r.get(1)?, version: r.get::<_, i64>(2)? as u64, deleted: r.get(3)? };
                Ok((k.key(), r.get::<_, i64>(4)? as u64, r.get(5)?))
            })
            .map_err(sql)?
            .collect::<rusqlite::Result<Vec<_>>>()
            .map_err(sql)?;
        Ok(rows)
    }

    /// Deletes the row under `key` (absent is fine).
    pub fn delete(&self, key: &str) -> Result<()> {
        let Some(k) = RowKey::parse(key) else { return Ok(()) };
        self.c()
            .execute(
                "DELETE FROM recipes WHERE ns = ?1 AND name = ?2 AND version = ?3 AND deleted = ?4",
                params![k.ns, k.name, k.version as i64, k.deleted],
            )
            .map_err(sql)?;
        Ok(())
    }

    /// Puts `text` under `key` only if no row is there and `taken(key)` is false; `false` if
    /// something was. Durable when this returns.
    pub fn put_new(&self, key: &str, text: &[u8], taken: impl Fn(&str) -> Result<bool>) -> Result<bool> {
        let k = RowKey::parse(key).ok_or_else(|| StoreError::Internal(format!("object key {key}: not a recipe key")))?;
        let mut c = self.c();
        let tx = c.transaction().map_err(sql)?;
        let done = Self::insert(&tx, &k, text, &taken)?;
        tx.commit().map_err(sql)?;
        Ok(done)
    }

    /// A batch's recipes in one transaction: `(ns, name, first version to try, text)` each,
    /// put under the first version from there that no row and no `taken` key holds. All or
    /// nothing; durable when this returns. Returns each one's version.
    pub fn put_next_versions(&self, items: &[(&str, &str, u64, Vec<u8>)], taken: impl Fn(&str) -> Result<bool>) -> Result<Vec<u64>> {
        let mut c = self.c();
        let tx = c.transaction().map_err(sql)?;
        let mut out = Vec::with_capacity(items.len());
        for (i, (ns, name, first, text)) in items.iter().enumerate() {
            if i == items.len() / 2 && i > 0 {
                crate::store::failpoint("mid-batch-rows");
            }
            let mut k = RowKey { ns: ns.to_string(), name: name.to_string(), version: (*first).max(1), deleted: false };
            while !Self::insert(&tx, &k, text, &taken)? {
                k.version += 1;
            }
            out.push(k.version);
        }
        tx.commit().map_err(sql)?;
        Ok(out)
    }

    /// The committed versions the rows hold in namespace `ns` (of one name, with `name`), by
    /// name then version, each read from its body ([`RecipeRows::row_version`]). Created: the
    /// row's write.
    pub fn versions(&self, ns: &str, name: Option<&str>) -> Result<Vec<Version>> {
        let c = self.c();
        let mut s = c
            .prepare_cached(
                "SELECT name, version, modified, body FROM recipes
                 WHERE ns = ?1 AND (?2 IS NULL OR name = ?2) AND deleted = 0 ORDER BY name, version",
            )
            .map_err(sql)?;
        let mut q = s.query(params![ns, name]).map_err(sql)?;
        let mut out = Vec::new();
        while let Some(r) = q.next().map_err(sql)? {
            out.push(Self::row_version(&c, r)?);
        }
        Ok(out)
    }

    /// Version `version` of `name` (`None`: its highest), if a row holds it.
    pub fn version(&self, ns: &str, name: &str, version: Option<u64>) -> Result<Option<Version>> {
        let c = self.c();
        let mut s = c
            .prepare_cached(
                "SELECT name, version, modified, body FROM recipes
                 WHERE ns = ?1 AND name = ?2 AND (?3 IS NULL OR version = ?3) AND deleted = 0 ORDER BY version DESC",
            )
            .map_err(sql)?;
        let mut q = s.query(params![ns, name, version.map(|v| v as i64)]).map_err(sql)?;
        match q.next().map_err(sql)? {
            Some(r) => Ok(Some(Self::row_version(&c, r)?)),
            None => Ok(None),
        }
    }

    /// The highest version number a row of `name` holds (0: none), whether it reads or not.
    pub fn max_version(&self, ns: &str, name: &str) -> Result<u64> {
        let v: Option<i64> = self
            .c()
            .prepare_cached("SELECT MAX(version) FROM recipes WHERE ns = ?1 AND name = ?2")
            .map_err(sql)?
            .query_row(params![ns, name], |r| r.get(0))
            .map_err(sql)?;
        Ok(v.unwrap_or(0) as u64)
    }

    /// A row (name, version, modified, body) as a version: its sizes and digest from its
    /// recipe, compact or text. A body that does not read as a recipe (damaged at rest) is
    /// still a version, with sizes 0 and no digest, as the index kept a version damaged after
    /// it was indexed: a restore of it answers `damaged`, `check` names it, it can be deleted.
    fn row_version(c: &Connection, r: &rusqlite::Row) -> Result<Version> {
        let name: String = r.get(0).map_err(sql)?;
        let version = r.get::<_, i64>(1).map_err(sql)? as u64;
        let created: i64 = r.get(2).map_err(sql)?;
        let stored = match r.get_ref(3).map_err(sql)? {
            rusqlite::types::ValueRef::Blob(b) | rusqlite::types::ValueRef::Text(b) => match decode_recipe(Some(c), b) {
                Ok(Some(recipe)) => Some(Stored::Plain(recipe)),
                Ok(None) => Stored::read(b).ok(),
                Err(_) => None,
            },
            _ => None,
        };
        Ok(match stored {
            Some(s) => Version { created, ..crate::store::version_row(&name, version, &s) },
            None => Version { name, version, bytes: 0, chunks: 0, digest: String::new(), created },
        })
    }

    fn insert(c: &Connection, k: &RowKey, text: &[u8], taken: &impl Fn(&str) -> Result<bool>) -> Result<bool> {
        if taken(&k.key())? {
            return Ok(false);
        }
        let body = encode(Some(c), text)?;
        let n = c
            .prepare_cached("INSERT OR IGNORE INTO recipes(ns, name, version, deleted, modified, body) VALUES (?1, ?2, ?3, ?4, ?5, ?6)")
            .map_err(sql)?
            .execute(params![k.ns, k.name, k.version as i64, k.deleted, crate::index::now(), body])
            .map_err(sql)?;
        Ok(n == 1)
    }
}

/// A local store's recipe file (a single commit's) for `text`: compact when `text` is a plain
/// recipe that reads back byte for byte from it (its head inline), else `text` itself.
pub fn encode_file(text: &[u8]) -> Vec<u8> {
    encode(None, text).unwrap_or_else(|_| text.to_vec())
}

/// The text of a local store's recipe file: a compact one decoded, any other (a text recipe, or
/// one that does not decode: then read as damaged) as it is.
pub fn decode_file(body: Bytes) -> Bytes {
    if !body.starts_with(MAGIC_FILE) {
        return body;
    }
    match decode(None, &body) {
        Ok(t) => Bytes::from(t),
        Err(_) => body,
    }
}

fn sql(e: rusqlite::Error) -> StoreError {
    StoreError::Internal(format!("recipes.sqlite: {e}"))
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push(v as u8 | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

fn get_varint(b: &[u8], at: &mut usize) -> Option<u64> {
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let x = *b.get(*at)?;
        *at += 1;
        v |= u64::from(x & 0x7f) << shift;
        if x & 0x80 == 0 {
            return Some(v);
        }
    }
    None
}

/// A row's body for `text`: compact when `text` is a plain recipe that reads back byte for byte
/// from it, else `text` itself.
fn encode(c: Option<&Connection>, text: &[u8]) -> Result<Vec<u8>> {
    let Some(compact) = compact(c, text)? else { return Ok(text.to_vec()) };
    if decode(c, &compact).ok().as_deref() == Some(text) {
        Ok(compact)
    } else {
        Ok(text.to_vec())
    }
}

fn compact(c: Option<&Connection>, text: &[u8]) -> Result<Option<Vec<u8>>> {
    if cutpoint_core::protocol::part::has_part_lines(text) {
        return Ok(None);
    }
    let Ok(r) = Recipe::read(text) else { return Ok(None) };
    let head = format!("{}\n{}", r.hash.name(), r.profile);
    let mut out;
    if let Some(c) = c {
        c.prepare_cached("INSERT OR IGNORE INTO heads(text) VALUES (?1)").map_err(sql)?.execute([&head]).map_err(sql)?;
        let id: i64 = c
            .prepare_cached("SELECT id FROM heads WHERE text = ?1")
            .map_err(sql)?
            .query_row([&head], |r| r.get(0))
            .map_err(sql)?;
        out = MAGIC.to_vec();
        put_varint(&mut out, id as u64);
    } else {
        out = MAGIC_FILE.to_vec();
        put_varint(&mut out, head.len() as u64);
        out.extend_from_slice(head.as_bytes());
    }
    // 0: no digest line; 1: the digest of the chunk list (left out); 2: another, stored.
    match r.digest {
        None => out.push(0),
        Some(d) if FileDigest::of(&r) == Some(d) => out.push(1),
        Some(d) => {
            out.push(2);
            out.extend_from_slice(&d);
        }
    }
    put_varint(&mut out, r.entries.len() as u64);
    for e in &r.entries {
        out.extend_from_slice(&e.fp);
        put_varint(&mut out, u64::from(e.size));
        out.push(u8::from(e.regular) | (u8::from(e.last.is_some()) << 1));
        if let Some(l) = e.last {
            out.push(l);
        }
    }
    Ok(Some(out))
}

/// The text of a row's body.
fn decode(c: Option<&Connection>, body: &[u8]) -> Result<Vec<u8>> {
    let Some(r) = decode_recipe(c, body)? else { return Ok(body.to_vec()) };
    let mut text = Vec::new();
    r.write(&mut text).map_err(|_| StoreError::Damaged("a compact recipe does not read".into()))?;
    Ok(text)
}

/// The recipe of a compact body (`None`: the body is not compact, it is the text itself).
fn decode_recipe(c: Option<&Connection>, body: &[u8]) -> Result<Option<Recipe>> {
    let bad = || StoreError::Damaged("a compact recipe does not read".into());
    let mut at = 0;
    let (b, head): (&[u8], String) = match (c, body.strip_prefix(MAGIC), body.strip_prefix(MAGIC_FILE)) {
        (Some(c), Some(b), _) => {
            let id = get_varint(b, &mut at).ok_or_else(bad)?;
            let head = c
                .prepare_cached("SELECT text FROM heads WHERE id = ?1")
                .map_err(sql)?
                .query_row([id as i64], |r| r.get(0))
                .optional()
                .map_err(sql)?
                .ok_or_else(bad)?;
            (b, head)
        }
        (None, _, Some(b)) => {
            let n = get_varint(b, &mut at).ok_or_else(bad)? as usize;
            let head = b.get(at..at.checked_add(n).ok_or_else(bad)?).ok_or_else(bad)?;
            at += n;
            (b, String::from_utf8(head.to_vec()).map_err(|_| bad())?)
        }
        _ => return Ok(None),
    };
    let (alg, profile) = head.split_once('\n').ok_or_else(bad)?;
    let hash = HashAlg::parse(alg).map_err(|_| bad())?;
    let mut take = |n: usize| -> Result<&[u8]> {
        let s = b.get(at..at + n).ok_or_else(bad)?;
        at += n;
        Ok(s)
    };
    let kind = take(1)?[0];
    let stored: Option<[u8; 32]> = if kind == 2 { Some(take(32)?.try_into().map_err(|_| bad())?) } else { None };
    let mut r = Recipe { profile: profile.to_string(), hash, digest: None, entries: Vec::new() };
    let n = get_varint(b, &mut at).ok_or_else(bad)?;
    for _ in 0..n {
        let fp: [u8; 32] = b.get(at..at + 32).ok_or_else(bad)?.try_into().map_err(|_| bad())?;
        at += 32;
        let size = u32::try_from(get_varint(b, &mut at).ok_or_else(bad)?).map_err(|_| bad())?;
        let flags = *b.get(at).ok_or_else(bad)?;
        at += 1;
        let last = if flags & 2 != 0 {
            at += 1;
            Some(*b.get(at - 1).ok_or_else(bad)?)
        } else {
            None
        };
        r.entries.push(RecipeEntry { fp, size, last, regular: flags & 1 != 0 });
    }
    if at != b.len() {
        return Err(bad());
    }
    r.digest = match kind {
        0 => None,
        1 => Some(FileDigest::of(&r).ok_or_else(bad)?),
        2 => stored,
        _ => return Err(bad()),
    };
    Ok(Some(r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_and_others_are_not_rows() {
        let k = format!("{}.deleted", crate::backend::recipe_key("t", &name_key("a/b.txt"), 7));
        assert_eq!(RowKey::parse(&k).unwrap().key(), k);
        assert!(is_row_key(&crate::backend::recipe_key("t", &name_key("x"), 1)));
        assert!(!is_row_key("ns/t/packs/ab/abcd"));
        assert!(!is_row_key("ns/t/recipes/78/1"), "not the 12-digit spelling");
        assert!(!is_row_key("ns/t/config"));
    }

    /// Every field of a plain recipe survives the compact body (a digest of the chunk list left
    /// out, another kept, none; last bytes and boundary kinds); other text is kept as it is.
    #[test]
    fn compact_bodies_read_back_byte_for_byte() {
        let rows = RecipeRows::open(&std::env::temp_dir().join(format!("cutpoint-rows-{}.sqlite", std::process::id()))).unwrap();
        let c = rows.c();
        let entries = vec![
            RecipeEntry { fp: [7; 32], size: 70000, last: Some(0xab), regular: true },
            RecipeEntry { fp: [9; 32], size: 1, last: None, regular: false },
        ];
        let mut r = Recipe { profile: "gear:2k:8k:64k".into(), hash: HashAlg::Blake3, digest: None, entries };
        let own = FileDigest::of(&r);
        for digest in [None, own, Some([1; 32])] {
            r.digest = digest;
            let mut text = Vec::new();
            r.write(&mut text).unwrap();
            let body = encode(Some(&c), &text).unwrap();
            assert!(body.starts_with(MAGIC) && body.len() < text.len() / 2, "{} of {}", body.len(), text.len());
            assert_eq!(decode(Some(&c), &body).unwrap(), text);
            let file = encode_file(&text);
            assert!(file.starts_with(MAGIC_FILE) && file.len() < text.len() * 2 / 3, "{} of {}", file.len(), text.len());
            assert_eq!(decode_file(Bytes::from(file.clone())), text);
            assert_eq!(decode_file(Bytes::from(file[..file.len() - 1].to_vec())), file[..file.len() - 1], "a truncated file is kept as it is");
        }
        for other in [&b"cutpoint-recipe 1\nnot a recipe"[..], b"part lines and all", b""] {
            assert_eq!(encode(Some(&c), other).unwrap(), other);
            assert_eq!(decode(Some(&c), other).unwrap(), other);
            assert_eq!(encode_file(other), other);
        }
        assert!(decode(Some(&c), b"\0cr1\x01\x01").is_err(), "a truncated body");
        drop(c);
        let _ = std::fs::remove_file(std::env::temp_dir().join(format!("cutpoint-rows-{}.sqlite", std::process::id())));
    }
}
