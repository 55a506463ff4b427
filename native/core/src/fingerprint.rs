//! Chunk fingerprints: BLAKE3-256 (default) or SHA-256, from the `blake3` and `sha2` crates.

use crate::error::Error;
use sha2::Digest as _;

/// A 32-byte chunk fingerprint.
pub type Digest = [u8; 32];

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Default)]
pub enum HashAlg {
    #[default]
    Blake3,
    Sha256,
    /// No fingerprint (measures chunking alone).
    None,
}

impl HashAlg {
    pub fn name(self) -> &'static str {
        match self {
            HashAlg::Blake3 => "blake3",
            HashAlg::Sha256 => "sha256",
            HashAlg::None => "none",
        }
    }
    pub fn parse(s: &str) -> Result<HashAlg, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "blake3" => Ok(HashAlg::Blake3),
            "sha256" | "sha-256" => Ok(HashAlg::Sha256),
            "none" => Ok(HashAlg::None),
            other => Err(Error::config(format!("unknown hash '{other}' (known: blake3, sha256, none)"))),
        }
    }
    /// The fingerprint of `bytes`, or `None` for [`HashAlg::None`].
    pub fn digest(self, bytes: &[u8]) -> Option<Digest> {
        match self {
            HashAlg::Blake3 => Some(*blake3::hash(bytes).as_bytes()),
            HashAlg::Sha256 => Some(sha2::Sha256::digest(bytes).into()),
            HashAlg::None => None,
        }
    }
}

/// An incremental fingerprint of a whole stream (a file's digest), with one algorithm.
#[derive(Clone)]
pub enum StreamHasher {
    Blake3(Box<blake3::Hasher>),
    Sha256(sha2::Sha256),
    None,
}

impl StreamHasher {
    pub fn new(alg: HashAlg) -> StreamHasher {
        match alg {
            HashAlg::Blake3 => StreamHasher::Blake3(Box::new(blake3::Hasher::new())),
            HashAlg::Sha256 => StreamHasher::Sha256(sha2::Sha256::new()),
            HashAlg::None => StreamHasher::None,
        }
    }
    pub fn update(&mut self, bytes: &[u8]) {
        match self {
            StreamHasher::Blake3(h) => {
                h.update(bytes);
            }
            StreamHasher::Sha256(h) => h.update(bytes),
            StreamHasher::None => {}
        }
    }
    /// The digest, or `None` for [`HashAlg::None`].
    pub fn finish(self) -> Option<Digest> {
        match self {
            StreamHasher::Blake3(h) => Some(*h.finalize().as_bytes()),
            StreamHasher::Sha256(h) => Some(h.finalize().into()),
            StreamHasher::None => None,
        }
    }
}

/// Lower-case hex of a digest.
pub fn hex(d: &Digest) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    // Bytes first, one UTF-8 check of 64 ASCII bytes (a part's text is mostly these).
    let mut b = [0u8; 64];
    for (i, x) in d.iter().enumerate() {
        b[2 * i] = HEX[(x >> 4) as usize];
        b[2 * i + 1] = HEX[(x & 15) as usize];
    }
    String::from_utf8(b.to_vec()).expect("ASCII")
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn known_digests() {
        assert_eq!(
            hex(&HashAlg::Sha256.digest(b"abc").unwrap()),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            hex(&HashAlg::Blake3.digest(b"").unwrap()),
            "af1349b9f5f9a1a6a0404dea36dcc9499bcb25c9adc112b7cc9a93cae41f3262"
        );
        assert_eq!(HashAlg::None.digest(b"x"), None);
        for alg in [HashAlg::Blake3, HashAlg::Sha256] {
            let mut h = StreamHasher::new(alg);
            h.update(b"a");
            h.update(b"bc");
            assert_eq!(h.finish(), alg.digest(b"abc"));
        }
    }
}
