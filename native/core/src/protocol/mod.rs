//! The chunk store's wire format (protocol v1), shared by the server (`cutpoint-store`), the
//! native client and the WebAssembly build, so that there is one encoder and one parser:
//!
//! * [`pack`] — a pack: many chunks in one body, each framed with its length and fingerprint;
//! * [`query`] — the body of an existence query (fingerprints in, the missing ones out);
//! * [`name`] — what a namespace and a file name may be;
//! * [`part`] — recipe parts (bounded pieces of a big file's recipe) and the part cutter.
//!
//! File recipes (the body of a commit) are [`crate::rapid::Recipe`]s with a `digest` line.
//! Every parser here is a pure function over bytes or a reader, with no I/O of its own beyond
//! that reader, so a fuzz target can call it directly (`native/fuzz`).
//! The requests themselves are documented in `native/store/PROTOCOL.md`.

pub mod batch;
pub mod codec;
pub mod delta;
pub mod ingest;
pub mod name;
pub mod pack;
pub mod part;
pub mod part_delta;
pub mod query;
pub mod range;

use std::fmt;

/// Why a body is not valid protocol.
#[derive(Debug)]
pub enum WireError {
    /// The body ended early (a cut connection, or a truncated body).
    Truncated(String),
    /// The body is malformed (bad magic, a bad frame, a fingerprint that does not match).
    Malformed(String),
    /// Reading the body failed.
    Io(std::io::Error),
}

impl WireError {
    pub(crate) fn malformed(m: impl Into<String>) -> WireError {
        WireError::Malformed(m.into())
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated(m) => write!(f, "truncated: {m}"),
            WireError::Malformed(m) => write!(f, "{m}"),
            WireError::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

impl std::error::Error for WireError {}

/// A stored file's digest: the namespace's fingerprint algorithm over a domain tag and, for
/// each chunk in file order, its fingerprint and its length (u32 little-endian). Every chunk is
/// verified against its fingerprint when it is restored, so this names the file's bytes as
/// firmly as a hash over them would, and it costs no second pass over the data — neither when a
/// client pushes nor when the store or a client restores. (Xet's file hash is built the same
/// way, from chunk hashes.) The store refuses a commit whose `digest` line is not this.
pub struct FileDigest {
    h: crate::fingerprint::StreamHasher,
}

impl FileDigest {
    pub const TAG: &'static [u8] = b"cutpoint file digest v1\0";

    pub fn new(alg: crate::HashAlg) -> FileDigest {
        let mut h = crate::fingerprint::StreamHasher::new(alg);
        h.update(Self::TAG);
        FileDigest { h }
    }

    pub fn add(&mut self, id: &crate::Digest, len: u32) {
        self.h.update(id);
        self.h.update(&len.to_le_bytes());
    }

    /// `None` for `HashAlg::None`.
    pub fn finish(self) -> Option<crate::Digest> {
        self.h.finish()
    }

    /// The digest of a recipe's chunk list.
    pub fn of(recipe: &crate::rapid::Recipe) -> Option<crate::Digest> {
        let mut d = FileDigest::new(recipe.hash);
        for e in &recipe.entries {
            d.add(&e.fp, e.size);
        }
        d.finish()
    }
}

#[cfg(test)]
mod digest_tests {
    use super::FileDigest;
    use crate::HashAlg;

    #[test]
    fn file_digest_depends_on_ids_lengths_and_order() {
        let (a, b) = ([1u8; 32], [2u8; 32]);
        let d = |parts: &[(&[u8; 32], u32)]| {
            let mut f = FileDigest::new(HashAlg::Blake3);
            for (id, l) in parts {
                f.add(id, *l);
            }
            f.finish().unwrap()
        };
        assert_ne!(d(&[(&a, 1), (&b, 2)]), d(&[(&b, 2), (&a, 1)]));
        assert_ne!(d(&[(&a, 1)]), d(&[(&a, 2)]));
        assert_ne!(d(&[]), d(&[(&a, 1)]));
        // The empty file: the tag alone.
        assert_eq!(d(&[]), HashAlg::Blake3.digest(FileDigest::TAG).unwrap());
        let mut s = FileDigest::new(HashAlg::Sha256);
        s.add(&a, 1);
        assert_ne!(s.finish().unwrap(), d(&[(&a, 1)]));
    }
}
