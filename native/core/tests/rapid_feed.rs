//! `Rapid::feed`: an input pushed in pieces of any size (the WebAssembly binding's path) gives
//! the chunks and statistics of `Rapid::chunks` over the whole input, for every criterion.

use cutpoint_core::datagen::{self, ModKind, VersionSpec};
use cutpoint_core::rapid::{Criterion, Rapid, RapidChunk, RapidOptions};
use cutpoint_core::{Engine, HashAlg, Options, Profile};

fn versions(size: u64, n: usize, seed: u64) -> Vec<Vec<u8>> {
    let spec = VersionSpec {
        base_size: size,
        versions: n,
        mods: 25,
        mod_size: 100,
        region_percent: 60.0,
        kind: ModKind::Mixed,
        seed,
    };
    datagen::versions_in_memory(&spec).unwrap()
}

/// Pushes `data` in pieces of the given sizes (cycled), running the chunker whenever it is ready.
fn fed(r: &mut Rapid<'_>, data: &[u8], sizes: &[usize]) -> Vec<RapidChunk> {
    let mut out = Vec::new();
    let mut ch = r.feed();
    let mut at = 0;
    let mut k = 0;
    loop {
        while ch.ready() {
            match ch.next() {
                Some(c) => out.push(c.unwrap()),
                None => return out,
            }
        }
        if at < data.len() {
            let n = sizes[k % sizes.len()].min(data.len() - at);
            ch.source_mut().push(&data[at..at + n]).unwrap();
            at += n;
            k += 1;
        } else {
            ch.source_mut().end();
        }
    }
}

#[test]
fn feeding_pieces_equals_slices() {
    for prof in ["gear:2k:8k:64k", "crc32:1k:4k:16k", "rabin:1k:4k:12k"] {
        let p: Profile = prof.parse().unwrap();
        for threads in [1, 2] {
            let e = Engine::new(p.clone(), Options { threads, span: 64 << 10, hash: HashAlg::Blake3, ..Options::default() }).unwrap();
            let files = versions(600_000, 3, 9);
            for crit in Criterion::ALL {
                let mut a = Rapid::with_new_table(&e, 2, RapidOptions::new(crit)).unwrap();
                let mut b = Rapid::with_new_table(&e, 2, RapidOptions::new(crit)).unwrap();
                for (i, f) in files.iter().enumerate() {
                    let want = a.chunk_all(f).unwrap();
                    let got = fed(&mut b, f, &[1, 4093, 65_537, 300_001, 13 + i]);
                    assert_eq!(got, want, "{prof} threads {threads} {crit:?} file {i}");
                }
                assert_eq!(a.stats(), b.stats(), "{prof} {crit:?}");
            }
        }
    }
}

#[test]
fn feeding_nothing_and_pushing_after_the_end() {
    let e = Engine::new("gear:2k:8k:64k".parse().unwrap(), Options { threads: 1, ..Options::default() }).unwrap();
    let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(Criterion::Ff)).unwrap();
    assert!(fed(&mut r, &[], &[7]).is_empty());
    let mut ch = r.feed();
    ch.source_mut().push(b"abc").unwrap();
    assert!(!ch.ready());
    ch.source_mut().end();
    assert!(ch.ready());
    assert!(ch.source_mut().push(b"d").is_err());
    let c = ch.next().unwrap().unwrap();
    assert_eq!((c.offset, c.length), (0, 3));
    assert!(ch.next().is_none());
}
