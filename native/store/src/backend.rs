//! Where packs and recipes rest: an object store (`object_store`): a local directory (with
//! fsync on every write, so a completed put is durable) or an S3-compatible bucket (a put is
//! durable when the server acknowledges it; create-only puts are `If-None-Match: *`).
//! The store's own code is synchronous and runs on blocking threads; each call here drives
//! the async object store on the server's runtime.
//!
//! Key layout (every key under its namespace, so nothing can cross one):
//!
//! ```text
//! ns/<ns>/config                         "hash blake3\n" — the namespace's fingerprint algorithm
//! ns/<ns>/packs/<id[0..2]>/<id>          a pack; <id> = `store::pack_id` (BLAKE3 of its frame list)
//! ns/<ns>/recipes/<name key>/<v:012>     the recipe of version v of a file (name key:
//!                                        `cutpoint_core::protocol::name::name_key`)
//! ns/<ns>/recipes/<name key>/<v:012>.deleted  the tombstone of the name's latest deleted version
//! ```
//!
//! A local directory also keeps the recipes of batch commits as rows of
//! `<dir>/recipes.sqlite` (`recipe_rows`), read, listed and deleted here under the same keys.

use crate::error::{Result, StoreError};
use bytes::Bytes;
use futures::TryStreamExt;
use object_store::local::LocalFileSystem;
use object_store::path::Path as OPath;
use object_store::{ObjectStore, ObjectStoreExt, PutMode, PutOptions, PutPayload};
use std::io::Read;
use std::ops::Range;
use std::path::Path;
use std::sync::Arc;
use tokio::runtime::Handle;

/// Parts of a multipart put (S3 wants at least 5 MiB but the last).
const PART: usize = 8 << 20;

pub struct Objects {
    store: Arc<dyn ObjectStore>,
    rt: Handle,
    desc: String,
    /// The directory of a local store: a spooled pack is renamed into place there instead of
    /// copied (one write of its bytes, not two).
    local_root: Option<std::path::PathBuf>,
    /// A local store's recipe rows (`recipe_rows`): batch commits' recipes.
    rows: Option<Arc<crate::recipe_rows::RecipeRows>>,
    /// Held by a create-only put of a recipe key and by a put of recipe rows in a local
    /// store, so that a file and a row never both take one version.
    recipe_put: std::sync::Mutex<()>,
}

pub fn pack_key(ns: &str, pack: &str) -> String {
    format!("ns/{ns}/packs/{}/{pack}", &pack[..2.min(pack.len())])
}
/// A recipe part (PROTOCOL.md 3.7), named by its id.
pub fn part_key(ns: &str, id: &str) -> String {
    format!("ns/{ns}/parts/{}/{id}", &id[..2.min(id.len())])
}
/// A range of a local store's object, read on the calling thread with one positioned read.
/// `object_store`'s local get_range hands every read to its runtime's blocking pool and back,
/// which cost a restore of a file spread over many packs (thousands of short runs) more CPU
/// than the reads themselves. A missing file is `NotFound` as there (a restore then looks its
/// chunks up again: a gc may have moved them); a range past the end is an error, as there.
#[cfg(unix)]
fn read_local_range(file: &Path, key: &str, r: Range<u64>) -> Result<Bytes> {
    use std::os::unix::fs::FileExt;
    let len = r.end.checked_sub(r.start).ok_or_else(|| StoreError::Internal(format!("object {key}: an inverted range {}..{}", r.start, r.end)))?;
    let f = match std::fs::File::open(file) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(StoreError::NotFound(format!("no object {key}"))),
        Err(e) => return Err(e.into()),
    };
    let mut buf = vec![0u8; usize::try_from(len).map_err(StoreError::internal)?];
    f.read_exact_at(&mut buf, r.start).map_err(|e| match e.kind() {
        std::io::ErrorKind::UnexpectedEof => StoreError::Internal(format!("object {key}: the range {}..{} passes its end", r.start, r.end)),
        _ => e.into(),
    })?;
    Ok(Bytes::from(buf))
}

pub fn part_prefix(ns: &str) -> String {
    format!("ns/{ns}/parts")
}
pub fn recipe_prefix(ns: &str, name_key: &str) -> String {
    format!("ns/{ns}/recipes/{name_key}")
}
pub fn recipe_key(ns: &str, name_key: &str, version: u64) -> String {
    format!("ns/{ns}/recipes/{name_key}/{version:012}")
}
/// A deleted version's tombstone: it keeps the version's number from being given again,
/// across restarts and a rebuilt index (`Store::delete`).
pub fn tombstone_key(ns: &str, name_key: &str, version: u64) -> String {
    format!("{}.deleted", recipe_key(ns, name_key, version))
}
pub fn config_key(ns: &str) -> String {
    format!("ns/{ns}/config")
}

impl Objects {
    /// Objects in a local directory (created if missing), fsync'd on every write.
    pub fn local(dir: &Path, rt: Handle) -> Result<Objects> {
        std::fs::create_dir_all(dir).map_err(|e| StoreError::Internal(format!("{}: {e}", dir.display())))?;
        let fs = LocalFileSystem::new_with_prefix(dir)?.with_fsync(true).with_automatic_cleanup(true);
        Ok(Objects {
            store: Arc::new(fs),
            rt,
            desc: format!("directory {}", dir.display()),
            local_root: Some(dir.to_path_buf()),
            rows: Some(Arc::new(crate::recipe_rows::RecipeRows::open(&dir.join("recipes.sqlite"))?)),
            recipe_put: std::sync::Mutex::new(()),
        })
    }

    /// Objects in an S3-compatible bucket, under `prefix` (may be empty). Credentials, region
    /// and endpoint come from the usual `AWS_*` variables (`AmazonS3Builder::from_env`);
    /// `endpoint` overrides `AWS_ENDPOINT_URL`. Plain http is allowed for a loopback endpoint
    /// (or with `AWS_ALLOW_HTTP=true`). Create-only puts (the commit point) are sent as
    /// `If-None-Match: *`, which AWS S3, R2, MinIO and versitygw honour.
    pub fn s3(bucket: &str, prefix: &str, endpoint: Option<&str>, rt: Handle) -> Result<Objects> {
        use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
        // TLS (https endpoints) through rustls with ring; installed once per process.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut b = AmazonS3Builder::from_env()
            .with_bucket_name(bucket)
            .with_conditional_put(S3ConditionalPut::ETagMatch);
        let ep = endpoint.map(str::to_string).or_else(|| std::env::var("AWS_ENDPOINT_URL").ok());
        if let Some(ep) = &ep {
            b = b.with_endpoint(ep).with_virtual_hosted_style_request(false);
            let loopback = ["http://127.0.0.1", "http://localhost", "http://[::1]"].iter().any(|p| ep.starts_with(p));
            if loopback {
                b = b.with_allow_http(true);
            }
        }
        if std::env::var("AWS_REGION").is_err() && std::env::var("AWS_DEFAULT_REGION").is_err() {
            b = b.with_region("us-east-1");
        }
        let s3 = b.build().map_err(|e| StoreError::BadRequest(format!("s3://{bucket}: {e}")))?;
        let prefix = prefix.trim_matches('/');
        let store: Arc<dyn ObjectStore> = if prefix.is_empty() {
            Arc::new(s3)
        } else {
            Arc::new(object_store::prefix::PrefixStore::new(s3, Self::path(prefix)?))
        };
        Ok(Objects {
            store,
            rt,
            desc: format!("bucket s3://{bucket}/{prefix}{}", ep.map(|e| format!(" at {e}")).unwrap_or_default()),
            local_root: None,
            rows: None,
            recipe_put: std::sync::Mutex::new(()),
        })
    }

    /// `text` without this store's local directory in it (a message a client may see).
    pub fn scrub(&self, text: &str) -> String {
        match &self.local_root {
            Some(root) => text.replace(&root.display().to_string(), "<objects>"),
            None => text.to_string(),
        }
    }

    pub fn is_local(&self) -> bool {
        self.local_root.is_some()
    }

    /// How many seconds ago `key` was last written (by the object store's clock), or `None`
    /// if it does not exist.
    pub fn age(&self, key: &str) -> Result<Option<i64>> {
        if let Some((_, modified)) = self.row_meta(key)? {
            return Ok(Some(crate::index::now() - modified));
        }
        let p = Self::path(key)?;
        match self.rt.block_on(self.store.head(&p)) {
            Ok(m) => Ok(Some(crate::index::now() - m.last_modified.timestamp())),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// Puts `bytes` under `key`, overwriting.
    pub fn put(&self, key: &str, bytes: Vec<u8>) -> Result<()> {
        let p = Self::path(key)?;
        self.rt.block_on(self.store.put(&p, PutPayload::from(Bytes::from(bytes))))?;
        Ok(())
    }

    /// Whether `key` exists.
    pub fn exists(&self, key: &str) -> Result<bool> {
        if self.row_meta(key)?.is_some() {
            return Ok(true);
        }
        let p = Self::path(key)?;
        match self.rt.block_on(self.store.head(&p)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub fn describe(&self) -> &str {
        &self.desc
    }

    fn path(key: &str) -> Result<OPath> {
        OPath::parse(key).map_err(|e| StoreError::Internal(format!("object key {key}: {e}")))
    }

    /// Moves a spooled file (fsync'd by the caller, on the same file system as a local store)
    /// under `key`: renamed into place in a local store, then the directory fsync'd; put in
    /// parts elsewhere. Overwrites (pack keys are content addresses). Durable when this returns.
    pub fn put_spooled(&self, key: &str, file: &Path) -> Result<()> {
        if let Some(root) = &self.local_root {
            let dest = root.join(Self::path(key)?.as_ref());
            let dir = dest.parent().ok_or_else(|| StoreError::Internal(format!("object key {key} has no directory")))?;
            std::fs::create_dir_all(dir)?;
            match std::fs::rename(file, &dest) {
                Ok(()) => {
                    std::fs::File::open(dir)?.sync_all()?;
                    return Ok(());
                }
                // Another file system (EXDEV): copy it instead.
                Err(e) if e.raw_os_error() == Some(18) => {}
                Err(e) => return Err(e.into()),
            }
        }
        self.put_file(key, file)
    }

    /// Puts a file's bytes under `key` (overwriting: pack keys are content addresses), streamed
    /// in parts; durable when this returns.
    pub fn put_file(&self, key: &str, file: &Path) -> Result<()> {
        let p = Self::path(key)?;
        let mut f = std::fs::File::open(file)?;
        let size = f.metadata()?.len() as usize;
        self.rt.block_on(async {
            if size <= PART {
                let mut buf = Vec::with_capacity(size);
                f.read_to_end(&mut buf)?;
                self.store.put(&p, PutPayload::from(Bytes::from(buf))).await?;
                return Ok(());
            }
            let mut up = self.store.put_multipart(&p).await?;
            loop {
                let mut buf = vec![0u8; PART];
                let mut n = 0;
                while n < PART {
                    let k = f.read(&mut buf[n..])?;
                    if k == 0 {
                        break;
                    }
                    n += k;
                }
                if n == 0 {
                    break;
                }
                buf.truncate(n);
                if let Err(e) = up.put_part(PutPayload::from(Bytes::from(buf))).await {
                    let _ = up.abort().await;
                    return Err(e.into());
                }
                if n < PART {
                    break;
                }
            }
            up.complete().await?;
            Ok(())
        })
    }

    /// Puts `bytes` under `key` only if nothing is there; `false` if something was.
    pub fn put_new(&self, key: &str, bytes: Vec<u8>) -> Result<bool> {
        let _one = self.rows_for(key).map(|_| self.recipe_put.lock().unwrap_or_else(|p| p.into_inner()));
        if self.row_meta(key)?.is_some() {
            return Ok(false);
        }
        // A local store's recipe file is written compact (read back as its text by `get`).
        let bytes = if self.rows_for(key).is_some() { crate::recipe_rows::encode_file(&bytes) } else { bytes };
        let p = Self::path(key)?;
        let opts = PutOptions {
            mode: PutMode::Create,
            ..Default::default()
        };
        match self.rt.block_on(self.store.put_opts(&p, PutPayload::from(Bytes::from(bytes)), opts)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::AlreadyExists { .. }) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }

    pub fn get(&self, key: &str) -> Result<Option<Bytes>> {
        if let Some(rows) = self.rows_for(key) {
            if let Some(b) = rows.get(key)? {
                return Ok(Some(b));
            }
        }
        let p = Self::path(key)?;
        let local_recipe = self.rows_for(key).is_some();
        self.rt.block_on(async {
            match self.store.get(&p).await {
                Ok(r) if local_recipe => Ok(Some(crate::recipe_rows::decode_file(r.bytes().await?))),
                Ok(r) => Ok(Some(r.bytes().await?)),
                Err(object_store::Error::NotFound { .. }) => Ok(None),
                Err(e) => Err(e.into()),
            }
        })
    }

    /// The size of the object under `key` (`None`: there is none).
    pub fn size(&self, key: &str) -> Result<Option<u64>> {
        if let Some((size, _)) = self.row_meta(key)? {
            return Ok(Some(size));
        }
        let p = Self::path(key)?;
        match self.rt.block_on(self.store.head(&p)) {
            Ok(m) => Ok(Some(m.size)),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The object under `key` (of `size` bytes) read front to back in ranged reads of
    /// `piece` bytes: a pack is never held whole.
    pub fn reader(&self, key: &str, size: u64, piece: u64) -> ObjectReader<'_> {
        ObjectReader {
            objects: self,
            key: key.to_string(),
            size,
            pos: 0,
            buf: Bytes::new(),
            piece: piece.max(1),
        }
    }

    pub fn get_range(&self, key: &str, r: Range<u64>) -> Result<Bytes> {
        let p = Self::path(key)?;
        #[cfg(unix)]
        if let Some(root) = self.local_root.as_ref().filter(|_| self.rows_for(key).is_none()) {
            return read_local_range(&root.join(p.as_ref()), key, r);
        }
        Ok(self.rt.block_on(self.store.get_range(&p, r))?)
    }

    /// Every object under `prefix`: (key, size, last modified as Unix seconds).
    /// A local store's recipe rows are listed with its files.
    pub fn list(&self, prefix: &str) -> Result<Vec<(String, u64, i64)>> {
        let p = Self::path(prefix)?;
        let mut out: Vec<(String, u64, i64)> = self.rt.block_on(async {
            let metas: Vec<_> = self.store.list(Some(&p)).try_collect().await?;
            Ok::<_, StoreError>(
                metas
                    .into_iter()
                    .map(|m| (m.location.to_string(), m.size, m.last_modified.timestamp()))
                    .collect(),
            )
        })?;
        if let Some(rows) = &self.rows {
            out.extend(rows.list(prefix)?);
        }
        Ok(out)
    }

    /// A local store's recipe rows (`None`: a bucket), for the index to answer their versions.
    pub fn recipe_rows(&self) -> Option<Arc<crate::recipe_rows::RecipeRows>> {
        self.rows.clone()
    }

    /// At a clean stop: the recipe rows' database compacted (`RecipeRows::compact`).
    pub fn compact(&self) -> Result<()> {
        match &self.rows {
            Some(rows) => rows.compact(),
            None => Ok(()),
        }
    }

    /// The recipe rows that may hold `key` (a local store's, for a recipe or tombstone key).
    fn rows_for(&self, key: &str) -> Option<&crate::recipe_rows::RecipeRows> {
        self.rows.as_deref().filter(|_| crate::recipe_rows::is_row_key(key))
    }

    /// The size and last write of the row under `key`, if a row holds it.
    fn row_meta(&self, key: &str) -> Result<Option<(u64, i64)>> {
        match self.rows_for(key) {
            Some(rows) => rows.meta(key),
            None => Ok(None),
        }
    }

    /// A local store: a batch's recipes as rows, in one transaction (all or none; durable when
    /// this returns): `(ns, name, first version to try, text)` each, put under the first version
    /// from there that no row and no file holds. Returns each one's version.
    pub fn put_recipe_rows(&self, items: &[(&str, &str, u64, Vec<u8>)]) -> Result<Vec<u64>> {
        let (Some(rows), Some(root)) = (&self.rows, &self.local_root) else {
            return Err(StoreError::Internal("recipe rows in a bucket".into()));
        };
        let _one = self.recipe_put.lock().unwrap_or_else(|p| p.into_inner());
        rows.put_next_versions(items, |key| Ok(root.join(Self::path(key)?.as_ref()).exists()))
    }

    /// Deletes `key` (its row and its file); absent is fine.
    pub fn delete(&self, key: &str) -> Result<()> {
        if let Some(rows) = self.rows_for(key) {
            rows.delete(key)?;
        }
        let p = Self::path(key)?;
        match self.rt.block_on(self.store.delete(&p)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(e.into()),
        }
    }
}

/// See [`Objects::reader`].
pub struct ObjectReader<'a> {
    objects: &'a Objects,
    key: String,
    size: u64,
    pos: u64,
    buf: Bytes,
    piece: u64,
}

impl std::io::Read for ObjectReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        if self.buf.is_empty() {
            if self.pos >= self.size || out.is_empty() {
                return Ok(0);
            }
            let end = (self.pos + self.piece).min(self.size);
            self.buf = self
                .objects
                .get_range(&self.key, self.pos..end)
                .map_err(|e| std::io::Error::other(e.to_string()))?;
            if self.buf.is_empty() {
                return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the object is shorter than its size"));
            }
            self.pos += self.buf.len() as u64;
        }
        let n = self.buf.len().min(out.len());
        out[..n].copy_from_slice(&self.buf[..n]);
        self.buf = self.buf.slice(n..);
        Ok(n)
    }
}
