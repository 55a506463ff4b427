//! A restore that races a gc rewriting the pack it reads: it looks its chunks up again and goes
//! on from the new pack (it stopped early: "no object ..." after the old pack was deleted).

use cutpoint_core::protocol::pack::PackWriter;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::HashAlg;
use cutpoint_store::{Limits, Store};

/// `n` chunks of `size` pseudo-random bytes (seeded).
fn chunks(n: usize, size: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            (0..size)
                .map(|_| {
                    x ^= x << 13;
                    x ^= x >> 7;
                    x ^= x << 17;
                    x as u8
                })
                .collect()
        })
        .collect()
}

fn recipe_of(cs: &[Vec<u8>]) -> Vec<u8> {
    let mut r = Recipe {
        profile: "gear:2k:8k:64k".into(),
        hash: HashAlg::Blake3,
        digest: None,
        entries: cs
            .iter()
            .map(|c| RecipeEntry {
                fp: HashAlg::Blake3.digest(c).unwrap(),
                size: c.len() as u32,
                last: None,
                regular: true,
            })
            .collect(),
    };
    r.digest = FileDigest::of(&r);
    let mut t = Vec::new();
    r.write(&mut t).unwrap();
    t
}

#[test]
fn a_restore_racing_a_gc_rewrite_goes_on_from_the_new_pack() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_dir(dir.path(), rt.handle().clone(), Limits::default(), false).unwrap();
    // One pack: 'keep' (10 MiB, many pieces of the restore), then 'gone' (12 MiB),
    // so that once 'gone' is deleted the pack is less than half referenced and gc rewrites it.
    let keep = chunks(40, 256 << 10, 1);
    let gone = chunks(48, 256 << 10, 2);
    let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
    for c in keep.iter().chain(&gone) {
        w.add(&HashAlg::Blake3.digest(c).unwrap(), c).unwrap();
    }
    let rep = store.ingest("n", &w.finish().unwrap()[..]).unwrap();
    assert_eq!(rep.stored, 88);
    store.commit("n", "keep", &recipe_of(&keep)).unwrap();
    store.commit("n", "gone", &recipe_of(&gone)).unwrap();
    store.delete("n", "gone", None).unwrap();

    let (_, recipe) = store.recipe("n", "keep", None).unwrap();
    let want: Vec<u8> = keep.concat();
    let mut got = Vec::new();
    let mut errors = Vec::new();
    let mut rewritten = 0;
    let mut c = store.restore_cursor("n", recipe, 0..want.len() as u64);
    loop {
        match store.restore_next(&mut c) {
            Ok(Some(b)) => got.extend_from_slice(&b),
            Ok(None) => break,
            Err(e) => {
                errors.push(e.to_string());
                break;
            }
        }
        if rewritten == 0 {
            // The first piece is sent: gc rewrites the pack the rest is in.
            rewritten = store.gc("n", 0).unwrap().packs_rewritten;
        }
    }
    assert_eq!(rewritten, 1, "gc rewrote the pack mid-restore");
    assert!(errors.is_empty(), "{errors:?}");
    assert!(got == want, "the restore went on from the new pack ({} of {} bytes)", got.len(), want.len());
    assert!(store.check("n").unwrap().problems.is_empty());
}

#[test]
fn restore_steps_join_runs_up_to_their_size_and_make_the_whole_range() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let (store, _) = Store::open_dir(dir.path(), rt.handle().clone(), Limits::default(), false).unwrap();
    // Chunks spread over two packs, interleaved in the file: runs of one chunk each.
    let a = chunks(30, 8 << 10, 3);
    let b = chunks(30, 8 << 10, 4);
    for set in [&a, &b] {
        let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
        for c in set.iter() {
            w.add(&HashAlg::Blake3.digest(c).unwrap(), c).unwrap();
        }
        store.ingest("n", &w.finish().unwrap()[..]).unwrap();
    }
    let file: Vec<Vec<u8>> = a.iter().zip(&b).flat_map(|(x, y)| [x.clone(), y.clone()]).collect();
    store.commit("n", "f", &recipe_of(&file)).unwrap();
    let want: Vec<u8> = file.concat();
    for (range, step) in [(0..want.len() as u64, 64 << 10), (5000..want.len() as u64 - 7, 20_000), (100..101, 1 << 20)] {
        let step = step as u64;
        let (_, recipe) = store.recipe("n", "f", None).unwrap();
        let mut c = store.restore_cursor("n", recipe, range.clone());
        let mut got = Vec::new();
        let mut steps = Vec::new();
        while let Some(bytes) = store.restore_step(&mut c, step).unwrap() {
            steps.push(bytes.len());
            got.extend_from_slice(&bytes);
        }
        assert!(got == want[range.start as usize..range.end as usize], "range {range:?}");
        // Every step but the last holds its size (many one-chunk runs joined), and none holds
        // more than its size and one chunk.
        for s in &steps[..steps.len() - 1] {
            assert!(*s >= step as usize, "a step of {s} bytes < {step}: {steps:?}");
        }
        for s in &steps {
            assert!(*s < step as usize + (8 << 10), "a step of {s} bytes > {step} + a chunk: {steps:?}");
        }
    }
}
