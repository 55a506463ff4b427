//! The push cache: what a push of many files remembers of each file it committed, so that a
//! later push of the same folder to the same store and namespace need not read a file whose
//! metadata did not change (restic's parent snapshot does the same).
//!
//! One file per store URL and namespace, `push-<32 hex>.jsonl` in the cache directory
//! (`--cache DIR`, else `$XDG_CACHE_HOME/cutpoint`, else `~/.cache/cutpoint`): a header line,
//! then one JSON object per file: its absolute path and the name it was pushed under, its
//! metadata (size, mtime and ctime in nanoseconds, inode, device), the profile and hash it was
//! chunked with, the version it was committed as (digest, chunks, bytes) and, where short, the
//! text that version was committed with (a whole recipe or a recipe of part lines).
//!
//! A file is *unchanged* when all of its metadata equal the entry's (and profile and hash the
//! push's): it is not read; its version is committed again, from the cached text, or as a
//! delta against the cached version that repeats all of it. The store checks either as it
//! checks every commit (chunks present, digest), so a cache that no longer matches the store
//! (a version deleted, chunks collected, another store at the same URL) gives an error answer,
//! and the file is then read and pushed as if it were not in the cache.
//!
//! A file modified within [`RACY`] of the moment it was read is not recorded (file times are
//! coarse: a change just after the read could leave the same times).

use cutpoint_core::HashAlg;
use std::collections::HashMap;
use std::io::{self, BufRead, Write};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Times closer than this to the read are not trusted (see the module doc).
pub const RACY: Duration = Duration::from_secs(1);
/// The longest commit text kept in an entry; a longer whole recipe is re-committed as a delta
/// against the cached version (which costs the store a commit of its own).
pub const MAX_TEXT: usize = 16 << 10;

/// A file's metadata as the cache compares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Stamp {
    pub size: u64,
    pub mtime_ns: i64,
    pub ctime_ns: i64,
    pub ino: u64,
    pub dev: u64,
}

impl Stamp {
    pub fn of(m: &std::fs::Metadata) -> Stamp {
        Stamp {
            size: m.size(),
            mtime_ns: m.mtime().saturating_mul(1_000_000_000).saturating_add(m.mtime_nsec()),
            ctime_ns: m.ctime().saturating_mul(1_000_000_000).saturating_add(m.ctime_nsec()),
            ino: m.ino(),
            dev: m.dev(),
        }
    }

    /// Modified (or its inode changed) less than [`RACY`] before `read_at`.
    pub fn racy(&self, read_at: SystemTime) -> bool {
        let at = read_at.duration_since(UNIX_EPOCH).map(|d| d.as_nanos() as i64).unwrap_or(0);
        self.mtime_ns.max(self.ctime_ns) > at - RACY.as_nanos() as i64
    }
}

/// One file as it was committed.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Entry {
    pub path: String,
    pub name: String,
    #[serde(flatten)]
    pub stamp: Stamp,
    pub profile: String,
    pub hash: String,
    pub version: u64,
    pub digest: String,
    pub chunks: u64,
    pub bytes: u64,
    /// The commit text (a whole recipe, or one of part lines), at most [`MAX_TEXT`] bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
}

impl Entry {
    /// The body that commits this file again: the cached text, or a delta that repeats the
    /// whole cached version.
    pub fn body(&self) -> Vec<u8> {
        match &self.text {
            Some(t) => t.clone().into_bytes(),
            None => format!(
                "cutpoint-delta 1\nbase {}\nprofile {}\nhash {}\ndigest {}\n= 0 {}\nend {} {}\n",
                self.version, self.profile, self.hash, self.digest, self.chunks, self.chunks, self.bytes
            )
            .into_bytes(),
        }
    }

    /// A delta against the cached version (not a cached text).
    pub fn is_delta(&self) -> bool {
        self.text.is_none()
    }
}

#[derive(serde::Serialize, serde::Deserialize)]
struct Header {
    cutpoint_push_cache: u32,
    store: String,
    ns: String,
}

/// The cache of one store URL and namespace, in memory; [`PushCache::save`] writes it back.
pub struct PushCache {
    file: PathBuf,
    store: String,
    ns: String,
    entries: HashMap<(String, String), Entry>,
}

/// The default cache directory: `$XDG_CACHE_HOME/cutpoint`, else `$HOME/.cache/cutpoint`.
pub fn default_dir() -> Option<PathBuf> {
    let xdg = std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()).map(PathBuf::from);
    let base = xdg.filter(|p| p.is_absolute()).or_else(|| std::env::var_os("HOME").filter(|v| !v.is_empty()).map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("cutpoint"))
}

/// A file's key in the cache: its absolute path (not resolved: a link keeps its own entry).
pub fn key_path(p: &Path) -> Option<String> {
    std::path::absolute(p).ok()?.to_str().map(str::to_string)
}

impl PushCache {
    /// The cache of `store` + `ns` in `dir` (empty if there is none yet, or if the file is not
    /// a cache of this store: it is then replaced when saved). An unreadable file is an error.
    pub fn open(dir: &Path, store: &str, ns: &str) -> io::Result<PushCache> {
        let id = HashAlg::Blake3.digest(format!("{store}\n{ns}").as_bytes()).expect("blake3");
        let file = dir.join(format!("push-{}.jsonl", &cutpoint_core::hex(&id)[..32]));
        let mut c = PushCache {
            file,
            store: store.to_string(),
            ns: ns.to_string(),
            entries: HashMap::new(),
        };
        let f = match std::fs::File::open(&c.file) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(c),
            Err(e) => return Err(e),
        };
        let mut lines = io::BufReader::new(f).lines();
        let ok = match lines.next() {
            Some(Ok(h)) => serde_json::from_str::<Header>(&h).is_ok_and(|h| h.cutpoint_push_cache == 1 && h.store == store && h.ns == ns),
            _ => false,
        };
        if !ok {
            return Ok(c);
        }
        for l in lines {
            // A line that does not parse (a torn write) is left out: a miss, never a wrong hit.
            if let Ok(e) = serde_json::from_str::<Entry>(&l?) {
                c.entries.insert((e.path.clone(), e.name.clone()), e);
            }
        }
        Ok(c)
    }

    /// Where the cache lives.
    pub fn file(&self) -> &Path {
        &self.file
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The entry of `path` pushed as `name` whose metadata, profile and hash are these.
    pub fn lookup(&self, path: &str, name: &str, stamp: &Stamp, profile: &str, hash: HashAlg) -> Option<&Entry> {
        self.entries
            .get(&(path.to_string(), name.to_string()))
            .filter(|e| e.stamp == *stamp && e.profile == profile && e.hash == hash.name())
    }

    /// Forgets `path` as `name` (its push failed, or it was read and not recorded).
    pub fn forget(&mut self, path: &str, name: &str) {
        self.entries.remove(&(path.to_string(), name.to_string()));
    }

    pub fn record(&mut self, e: Entry) {
        self.entries.insert((e.path.clone(), e.name.clone()), e);
    }

    /// Writes the cache (a temporary file renamed over the old one: a reader sees the old or
    /// the new cache, never a mix; a torn line is a miss when read).
    pub fn save(&self) -> io::Result<()> {
        let dir = self.file.parent().unwrap_or(Path::new("."));
        std::fs::create_dir_all(dir)?;
        let tmp = dir.join(format!(
            ".{}.{}.tmp",
            self.file.file_name().and_then(|n| n.to_str()).unwrap_or("push"),
            std::process::id()
        ));
        let write = || -> io::Result<()> {
            let mut w = io::BufWriter::new(std::fs::File::create(&tmp)?);
            let h = Header {
                cutpoint_push_cache: 1,
                store: self.store.clone(),
                ns: self.ns.clone(),
            };
            serde_json::to_writer(&mut w, &h)?;
            w.write_all(b"\n")?;
            let mut es: Vec<&Entry> = self.entries.values().collect();
            es.sort_by(|a, b| (&a.path, &a.name).cmp(&(&b.path, &b.name)));
            for e in es {
                serde_json::to_writer(&mut w, e)?;
                w.write_all(b"\n")?;
            }
            // Not synced: a cache lost in a crash only costs reading the files again.
            w.flush()
        };
        let r = write().and_then(|()| std::fs::rename(&tmp, &self.file));
        if r.is_err() {
            let _ = std::fs::remove_file(&tmp);
        }
        r
    }
}
