//! A commit naming parts takes each part as the store parsed it when it was put (the part cache,
//! issue #28): it reads and parses no part object again, and checks all it checked before —
//! the parts' presence in its own namespace, their COUNT and BYTES, the file digest. A store
//! opened again (nothing cached) reads the parts.

#[path = "common/ingest.rs"]
mod ingest;
use ingest::{entry, upload};
use cutpoint_core::protocol::part::{Line, Part, PartCutter, PartRecipe};
use cutpoint_core::rapid::RecipeEntry;
use cutpoint_core::HashAlg;
use cutpoint_store::{Limits, Store, StoreError};

fn chunk(i: u64) -> Vec<u8> {
    format!("chunk number {i} of the part commit test").into_bytes()
}

fn recipe(es: &[RecipeEntry], parts: &[Part]) -> PartRecipe {
    PartRecipe::of_parts("gear:2k:8k:64k", HashAlg::Blake3, es, parts)
}


#[test]
fn a_commit_takes_the_parts_as_they_were_put_and_checks_them_all_the_same() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let chunks: Vec<Vec<u8>> = (0..3000).map(chunk).collect();
    let es: Vec<RecipeEntry> = chunks.iter().map(|c| entry(c)).collect();
    let mut cutter = PartCutter::new(HashAlg::Blake3, 16 << 10);
    let mut parts = cutter.push_all(es.iter().cloned());
    parts.extend(cutter.finish());
    assert!(parts.len() >= 4, "{} parts", parts.len());
    let good = recipe(&es, &parts).text();
    {
        let (store, _) = Store::open_dir(dir.path(), rt.handle().clone(), Limits::default(), false).unwrap();
        upload(&store, "a", &chunks);
        upload(&store, "b", &chunks);
        for p in &parts {
            store.put_part("a", p.text().as_bytes()).unwrap();
        }
        let loads = store.part_loads();
        assert_eq!(store.commit("a", "f", good.as_bytes()).unwrap().version, 1);
        assert_eq!(store.part_loads(), loads, "no part read again");
        // A line whose COUNT lies: refused, as when the part was read.
        let mut lying = recipe(&es, &parts);
        if let Line::Part { count, .. } = &mut lying.lines[1] {
            *count += 1;
        }
        lying.count += 1;
        assert!(matches!(store.commit("a", "f", lying.text().as_bytes()), Err(StoreError::BadRequest(_))));
        // A wrong digest: refused.
        let mut wrong = recipe(&es[1..], &parts);
        wrong.count = es.len() as u64;
        wrong.bytes = es.iter().map(|e| e.size as u64).sum();
        assert!(matches!(store.commit("a", "f", wrong.text().as_bytes()), Err(StoreError::BadRequest(_))));
        // The parts were put to namespace a: b has the chunks but not the parts.
        match store.commit("b", "f", good.as_bytes()) {
            Err(StoreError::MissingParts { missing, .. }) => assert_eq!(missing.len(), parts.len()),
            other => panic!("{other:?}"),
        }
        // A part deleted from the objects (as a gc does) is missing, cached or not.
        let gone = cutpoint_core::hex(&parts[2].id());
        store.objects.delete(&format!("ns/a/parts/{}/{gone}", &gone[..2])).unwrap();
        match store.commit("a", "f", good.as_bytes()) {
            Err(StoreError::MissingParts { missing, .. }) => assert_eq!(missing, vec![parts[2].id()]),
            other => panic!("{other:?}"),
        }
        store.put_part("a", parts[2].text().as_bytes()).unwrap();
    }
    // Opened again: nothing cached, the parts are read, the same checks pass.
    let (store, _) = Store::open_dir(dir.path(), rt.handle().clone(), Limits::default(), false).unwrap();
    let loads = store.part_loads();
    assert_eq!(store.commit("a", "f", good.as_bytes()).unwrap().version, 2);
    assert_eq!(store.part_loads() - loads, parts.len() as u64, "each part read once");
}
