//! Chunks put into a store as packs of at most 20,000, and their recipe entries (the store
//! tests' set-up).

use cutpoint_core::protocol::pack::PackWriter;
use cutpoint_core::rapid::RecipeEntry;
use cutpoint_core::HashAlg;
use cutpoint_store::Store;

/// Ingests `cs` (each chunk's bytes) into namespace `ns`, BLAKE3, in packs of 20,000 chunks.
pub fn upload(store: &Store, ns: &str, cs: &[Vec<u8>]) {
    for part in cs.chunks(20_000) {
        let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
        for c in part {
            w.add(&HashAlg::Blake3.digest(c).unwrap(), c).unwrap();
        }
        store.ingest(ns, &w.finish().unwrap()[..]).unwrap();
    }
}

/// A chunk's recipe entry (BLAKE3).
pub fn entry(c: &[u8]) -> RecipeEntry {
    RecipeEntry {
        fp: HashAlg::Blake3.digest(c).unwrap(),
        size: c.len() as u32,
        last: None,
        regular: true,
    }
}
