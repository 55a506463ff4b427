//! `RapidChunker::set_external_stage1`: stage 1 of large fallback blocks computed by the caller
//! (workers in the TypeScript layer) and supplied as candidate offsets, in pieces of any size,
//! gives the chunks and statistics of the internal path, for every criterion and profile; so
//! does a block whose pieces are partly supplied and partly scanned by the chunker itself.

use cutpoint_core::datagen::{self, ModKind, VersionSpec};
use cutpoint_core::rolling::Tables;
use cutpoint_core::rapid::{Criterion, FeedSource, Rapid, RapidChunk, RapidChunker, RapidOptions};
use cutpoint_core::{Engine, HashAlg, Options, Profile};

fn versions(size: u64, n: usize, seed: u64) -> Vec<Vec<u8>> {
    let spec = VersionSpec {
        base_size: size,
        versions: n,
        mods: 25,
        mod_size: 3000,
        region_percent: 60.0,
        kind: ModKind::Mixed,
        seed,
    };
    datagen::versions_in_memory(&spec).unwrap()
}

/// Stage 1 of positions `[a, b)` from the bytes `[a - W, b)` by the core's scalar kernel, as
/// offsets from `a` (what the WebAssembly `Stage1` returns to a worker's caller).
fn stage1(t: &Tables, p: &Profile, bytes: &[u8], a: usize, b: usize) -> (Vec<u32>, Vec<u32>) {
    let w = p.window;
    let slice = &bytes[a - w..b];
    let n = b - a;
    let words = n.div_ceil(64);
    let (mut s, mut l) = (vec![0u64; words], vec![0u64; words]);
    if n > 0 {
        // SAFETY: the scalar kernel runs on every CPU; the segment [W, W + n) lies in the slice.
        let seg = w..w + n;
        unsafe { cutpoint_core::stage1::scalar::stage1(t, slice, std::slice::from_ref(&seg), w, &mut s, &mut l) };
    }
    let offs = |v: &[u64]| {
        let mut o = Vec::new();
        for (i, &x) in v.iter().enumerate() {
            let mut x = x;
            while x != 0 {
                o.push((i * 64) as u32 + x.trailing_zeros());
                x &= x - 1;
            }
        }
        o
    };
    let loose = if p.two_classes() { offs(&l) } else { Vec::new() };
    (offs(&s), loose)
}

/// Pushes `data` in pieces, running the chunker whenever it is ready; with `external`, supplies
/// the awaited candidates in pieces of the sizes in `pieces` (cycled), computed from the bytes
/// the chunker holds, and has every third piece scanned by the chunker itself.
fn fed(r: &mut Rapid<'_>, data: &[u8], external: Option<(usize, &[usize])>, supplied: &mut usize) -> Vec<RapidChunk> {
    let p = r.engine().profile().clone();
    let t = Tables::new(&p);
    let mut out = Vec::new();
    let mut ch: RapidChunker<'_, '_, FeedSource> = r.feed();
    if let Some((min, _)) = external {
        ch.set_external_stage1(min);
    }
    let sizes = [70_001, 1, 1 << 20, 4093];
    let (mut at, mut k, mut j) = (0, 0, 0);
    loop {
        let mut ended = false;
        while ch.ready() {
            match ch.next() {
                Some(c) => out.push(c.unwrap()),
                None => {
                    ended = true;
                    break;
                }
            }
        }
        if let Some((a, q)) = ch.stage1_needed() {
            let pieces = external.unwrap().1;
            let b = (a + pieces[j % pieces.len()]).min(q);
            j += 1;
            if j % 3 == 2 {
                // Some pieces scanned by the chunker's own engine (the caller's share).
                ch.scan_stage1(a, b).unwrap();
                continue;
            }
            let w = p.window;
            // The bytes come from the chunker's buffer, as the wasm binding copies them out.
            let held = ch.input(a - w, b).expect("the block's bytes are held").to_vec();
            let mut whole = vec![0u8; a - w];
            whole.extend_from_slice(&held);
            let (s, l) = stage1(&t, &p, &whole, a, b);
            ch.supply_stage1(a, b, &s, &l).unwrap();
            *supplied += b - a;
            continue;
        }
        if ended {
            return out;
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
fn external_stage1_equals_internal() {
    let mut novel = vec![0u8; 3_000_000];
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for b in novel.iter_mut() {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        *b = (x >> 32) as u8;
    }
    let mut files = versions(1_500_000, 3, 5);
    files.push(novel);
    for prof in ["gear:2k:8k:64k", "crc32:1k:4k:16k", "rabin:1k:4k:12k", "gear:256:1k:8k:nc=1"] {
        let p: Profile = prof.parse().unwrap();
        for threads in [1, 2] {
            let e = Engine::new(p.clone(), Options { threads, span: 64 << 10, hash: HashAlg::Blake3, ..Options::default() }).unwrap();
            for crit in Criterion::ALL {
                for (min, pieces) in [(1usize, &[1usize << 30][..]), (20_000, &[1, 64, 100_000, 7777][..]), (300_000, &[65_536][..])] {
                    let opts = RapidOptions { first_block: 8192, max_block: 512 << 10, ..RapidOptions::new(crit) };
                    let mut a = Rapid::with_new_table(&e, 2, opts.clone()).unwrap();
                    let mut b = Rapid::with_new_table(&e, 2, opts).unwrap();
                    let mut supplied = 0;
                    for (i, f) in files.iter().enumerate() {
                        let mut none = 0;
                        let want = fed(&mut a, f, None, &mut none);
                        assert_eq!(none, 0);
                        let got = fed(&mut b, f, Some((min, pieces)), &mut supplied);
                        assert_eq!(got, want, "{prof} threads {threads} {crit:?} min {min} file {i}");
                    }
                    assert_eq!(a.stats(), b.stats(), "{prof} threads {threads} {crit:?} min {min}");
                    let st = a.stats();
                    assert!(st.hinted_chunks > 0 && st.blocks > 20, "{prof} {crit:?}: hits and fallback blocks {st:?}");
                    assert!(crit == Criterion::Ff || st.fallbacks > 0, "{prof} {crit:?}: misses {st:?}");
                    assert!(supplied > 0 && supplied as u64 <= st.scanned_positions, "{prof} {crit:?} min {min}: {supplied} supplied");
                    if min == 1 && pieces.len() == 1 {
                        // One piece per block, the first of every third block scanned inside.
                        assert!(supplied as u64 * 3 >= st.scanned_positions, "{supplied} of {}", st.scanned_positions);
                    }
                }
            }
        }
    }
}

#[test]
fn external_stage1_misuse_is_an_error() {
    let p: Profile = "gear:2k:8k:64k".parse().unwrap();
    let e = Engine::new(p.clone(), Options { threads: 1, hash: HashAlg::Blake3, ..Options::default() }).unwrap();
    let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(Criterion::Ff)).unwrap();
    let data = versions(300_000, 1, 3).remove(0);
    let mut ch = r.feed();
    ch.set_external_stage1(1);
    assert!(ch.supply_stage1(0, 10, &[], &[]).is_err(), "nothing awaited yet");
    ch.source_mut().push(&data).unwrap();
    ch.source_mut().end();
    assert!(ch.ready());
    // The first step parks on the first block: no chunk, not the end.
    assert!(ch.next().is_none());
    let (a, q) = ch.stage1_needed().unwrap();
    assert_eq!(a, p.min);
    assert!(!ch.ready());
    assert!(ch.supply_stage1(a + 1, q, &[], &[]).is_err(), "out of order");
    assert!(ch.supply_stage1(a, q + 1, &[], &[]).is_err(), "past the block");
    assert_eq!(ch.stage1_needed(), Some((a, q)), "a refused range changes nothing");
    // A candidate offset outside the piece fails the run.
    assert!(ch.supply_stage1(a, a + 10, &[10], &[]).is_err());
    assert_eq!(ch.stage1_needed(), None);
    assert!(ch.next().is_none());
}
