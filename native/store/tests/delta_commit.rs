//! A delta commit checks only its own chunk lines against the index: the runs it copies from
//! a base version the store holds (under the GC lock) are not looked up again, so a re-push
//! of a large file with a few changed chunks costs index work in the changed chunks only.

use cutpoint_core::protocol::delta;
#[path = "common/ingest.rs"]
mod ingest;
use ingest::{entry, upload};
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::HashAlg;
use cutpoint_store::{Limits, Store, StoreError};

fn chunk(i: u64) -> Vec<u8> {
    format!("chunk number {i} of the delta test").into_bytes()
}

fn recipe(entries: Vec<RecipeEntry>) -> Recipe {
    let mut r = Recipe {
        profile: "gear:2k:8k:64k".into(),
        hash: HashAlg::Blake3,
        digest: None,
        entries,
    };
    r.digest = FileDigest::of(&r);
    r
}


#[test]
fn a_delta_commit_looks_up_only_its_new_lines() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_dir(dir.path(), rt.handle().clone(), Limits::default(), false).unwrap();
    const N: u64 = 50_000;
    let base_chunks: Vec<Vec<u8>> = (0..N).map(chunk).collect();
    upload(&store, "n", &base_chunks);
    let base = recipe(base_chunks.iter().map(|c| entry(c)).collect());
    let mut text = Vec::new();
    base.write(&mut text).unwrap();
    let reads = store.index.length_reads();
    assert_eq!(store.commit("n", "big", &text).unwrap().version, 1);
    assert_eq!(store.index.length_reads() - reads, N, "a full commit checks every entry");

    // Version 2: three new chunks (uploaded) among the base's runs.
    let fresh: Vec<Vec<u8>> = (0..3).map(|i| format!("new chunk {i}").into_bytes()).collect();
    upload(&store, "n", &fresh);
    let mut e = base.entries.clone();
    e.insert(10, entry(&fresh[0]));
    e.insert(25_000, entry(&fresh[1]));
    e.push(entry(&fresh[2]));
    e.remove(40_000);
    let v2 = recipe(e);
    let body = delta::encode(&v2, &base, 1).unwrap();
    assert!(body.len() < 1000, "a delta of a few runs and 3 lines");
    let reads = store.index.length_reads();
    let row = store.commit("n", "big", &body).unwrap();
    assert_eq!((row.version, row.chunks), (2, N + 2));
    assert_eq!(store.index.length_reads() - reads, 3, "only the delta's 3 chunk lines are looked up");
    let (_, got) = store.recipe("n", "big", Some(2)).unwrap();
    assert_eq!(got.entries, v2.entries);

    // A new line whose chunk was never uploaded: 409 naming it, nothing committed.
    let absent = b"never uploaded".to_vec();
    let mut e = v2.entries.clone();
    e.insert(5, entry(&absent));
    let bad = delta::encode(&recipe(e), &v2, 2).unwrap();
    match store.commit("n", "big", &bad) {
        Err(StoreError::Missing { missing, .. }) => assert_eq!(missing, vec![HashAlg::Blake3.digest(&absent).unwrap()]),
        other => panic!("expected 409 missing, got {other:?}"),
    }
    // A new line whose length differs from the stored chunk's: 400.
    let mut e = v2.entries.clone();
    let mut wrong = entry(&fresh[0]);
    wrong.size += 1;
    e.insert(7, wrong);
    let bad = delta::encode(&recipe(e), &v2, 2).unwrap();
    assert!(matches!(store.commit("n", "big", &bad), Err(StoreError::BadRequest(m)) if m.contains("bytes in the store")));
    assert_eq!(store.index.versions("n", Some("big")).unwrap().len(), 2, "nothing committed by the refused deltas");

    // Another namespace's base is not this one's: a delta names a version of its own name and
    // namespace only (404), whatever chunks the other holds.
    assert!(matches!(store.commit("m", "big", &body), Err(StoreError::NotFound(_))));
}
