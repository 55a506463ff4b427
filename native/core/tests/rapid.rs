//! RapidCDC: FF+RWT+FPT equals the reference chunker whatever the hint table holds; the other
//! criteria, hint sources, streaming, statistics and errors.

use cutpoint_core::datagen::{self, ModKind, VersionSpec};
use cutpoint_core::rapid::{Criterion, DedupCounter, Found, Hint, HintTable, Rapid, RapidChunk, RapidOptions, Recipe};
use cutpoint_core::{reference_cuts, Engine, Error, HashAlg, Options, Profile};
use proptest::prelude::*;
use std::io::Read;

const PROFILES: [&str; 4] = [
    "gear:2k:8k:64k",
    "crc32:1k:4k:16k",
    "rabin:1k:4k:12k",
    "gear:256:1k:8k:nc=1",
];

fn engine(p: &str, threads: usize) -> Engine {
    Engine::new(
        p.parse().unwrap(),
        Options {
            threads,
            hash: HashAlg::Blake3,
            ..Options::default()
        },
    )
    .unwrap()
}

/// Options with small fallback blocks, so that tests on small inputs see hints used early.
fn small_blocks(c: Criterion) -> RapidOptions {
    RapidOptions {
        first_block: 4096,
        ..RapidOptions::new(c)
    }
}

fn fp(b: &[u8]) -> [u8; 32] {
    *blake3::hash(b).as_bytes()
}

fn ends(chunks: &[RapidChunk]) -> Vec<usize> {
    chunks.iter().map(|c| c.offset as usize + c.length).collect()
}

/// Chunks are contiguous, non-empty, cover the input, and carry the right fingerprint and
/// last byte.
fn check_cover(data: &[u8], chunks: &[RapidChunk]) {
    let mut at = 0;
    for c in chunks {
        assert_eq!(c.offset as usize, at);
        assert!(c.length > 0);
        let bytes = &data[at..at + c.length];
        assert_eq!(c.hash, fp(bytes));
        assert_eq!(c.last, bytes[c.length - 1]);
        at += c.length;
    }
    assert_eq!(at, data.len());
}

fn versions(size: u64, n: usize, mods: usize, kind: ModKind, region: f64, seed: u64) -> Vec<Vec<u8>> {
    let spec = VersionSpec {
        base_size: size,
        versions: n,
        mods,
        mod_size: 100,
        region_percent: region,
        kind,
        seed,
    };
    datagen::versions_in_memory(&spec).unwrap()
}

#[test]
fn fpt_equals_reference_over_versioned_files() {
    for prof in PROFILES {
        let p: Profile = prof.parse().unwrap();
        let e = engine(prof, 2);
        for kind in [ModKind::InsertDelete, ModKind::Overwrite, ModKind::Mixed] {
            let files = versions(400_000, 4, 5, kind, 100.0, 7);
            let mut r = Rapid::with_new_table(&e, 2, small_blocks(Criterion::FfRwtFpt)).unwrap();
            for (i, f) in files.iter().enumerate() {
                let chunks = r.chunk_all(f).unwrap();
                check_cover(f, &chunks);
                assert_eq!(ends(&chunks), reference_cuts(&p, f), "{prof} {kind:?} file {i}");
                assert!(chunks.iter().all(|c| c.regular));
            }
            let st = r.stats();
            assert!(
                st.hinted_chunks > st.chunks / 2,
                "{prof} {kind:?}: hints barely used: {st:?}"
            );
            assert!(st.skipped_positions() > st.bytes / 2, "{prof} {kind:?}: {st:?}");
        }
    }
}

#[test]
fn fpt_stays_exact_after_unverified_runs_polluted_the_table() {
    // FF and FF+MT runs put unverified hints and fingerprints into the table; an FF+RWT+FPT run
    // with the same table must still give the reference boundaries.
    for prof in PROFILES {
        let p: Profile = prof.parse().unwrap();
        let e = engine(prof, 1);
        let files = versions(300_000, 6, 40, ModKind::InsertDelete, 100.0, 3);
        let mut table = HintTable::new(&p, HashAlg::Blake3, 3).unwrap();
        for (i, f) in files.iter().enumerate() {
            let crit = [Criterion::Ff, Criterion::FfMt, Criterion::FfRwt][i % 3];
            let mut r = Rapid::new(&e, table, RapidOptions::new(crit)).unwrap();
            check_cover(f, &r.chunk_all(f).unwrap());
            table = r.into_table();
        }
        let mut r = Rapid::new(&e, table, RapidOptions::new(Criterion::FfRwtFpt)).unwrap();
        for (i, f) in files.iter().enumerate().rev() {
            assert_eq!(r.cuts(f).unwrap(), reference_cuts(&p, f), "{prof} file {i}");
        }
        assert!(r.stats().hinted_chunks > 0);
    }
}

/// The guarantee rests on the regular flag: a fingerprint that is known but was not produced by
/// the rule must not pass the fingerprint test. Chunk `[c1, c3)` spans two regular chunks; its
/// end passes the window test (with one class, c3 matches), so only the flag stops it.
#[test]
fn fpt_rejects_known_chunks_that_the_rule_did_not_produce() {
    let prof = "crc32:1k:4k:16k";
    let p: Profile = prof.parse().unwrap();
    let e = engine(prof, 1);
    let full = datagen::random_bytes(200_000, 21);
    let rf = reference_cuts(&p, &full);
    let i = (1..rf.len() - 2).find(|&i| rf[i + 2] - rf[i] <= p.max).unwrap();
    // The input starts at the regular boundary before c1, so its first chunk is [0, c1).
    let data = &full[rf[i - 1]..];
    let r: Vec<usize> = rf[i..].iter().map(|c| c - rf[i - 1]).collect();
    assert_eq!(reference_cuts(&p, data), r);
    let (c0, c1, c2, c3) = (0, r[0], r[1], r[2]);
    // A first fallback block that ends just after c1, so that hint mode starts there.
    let opts = RapidOptions {
        criterion: Criterion::FfRwtFpt,
        worst_case: false,
        first_block: c1 - p.min + 1,
        max_block: 0,
    };
    let setup = |flag: bool| {
        let mut t = HintTable::new(&p, HashAlg::Blake3, 2).unwrap();
        t.learn(&fp(&data[c0..c1]), true);
        t.link(
            &fp(&data[c0..c1]),
            Hint {
                size: (c3 - c1) as u32,
                marker: Some(data[c3 - 1]),
            },
        );
        t.learn(&fp(&data[c1..c3]), flag);
        t
    };
    let mut honest = Rapid::new(&e, setup(false), opts.clone()).unwrap();
    assert_eq!(honest.cuts(data).unwrap(), r);
    assert_eq!((honest.stats().misses[0], honest.stats().fpt_wasted), (1, 1));
    // Were the flag ignored (every known fingerprint trusted), the boundary c2 would be lost.
    let mut fooled = Rapid::new(&e, setup(true), opts.clone()).unwrap();
    let got = fooled.cuts(data).unwrap();
    assert!(
        got.contains(&c3) && !got.contains(&c2),
        "the falsely flagged chunk was not taken; the test proves nothing"
    );
    // FF+RWT takes it too (the paper: only FPT is exact).
    let mut rwt = Rapid::new(
        &e,
        setup(false),
        RapidOptions {
            criterion: Criterion::FfRwt,
            ..opts
        },
    )
    .unwrap();
    assert!(!rwt.cuts(data).unwrap().contains(&c2));
}

/// A regular chunk that ended a file (cut by the end of input) may reappear mid-file, where its
/// end does not qualify: the window test must still reject it.
#[test]
fn fpt_window_test_rejects_a_former_last_chunk_in_the_middle() {
    for prof in PROFILES {
        let p: Profile = prof.parse().unwrap();
        let e = engine(prof, 1);
        let x = datagen::random_bytes(100_000, 5);
        let r = reference_cuts(&p, &x);
        let c = r[3];
        let mut a = x[..c].to_vec();
        a.extend_from_slice(&datagen::random_bytes(p.min + 777, 6)); // becomes the last chunk of A
        let mut b = a.clone();
        b.extend_from_slice(&datagen::random_bytes(50_000, 7));
        let mut rapid = Rapid::with_new_table(&e, 2, RapidOptions::new(Criterion::FfRwtFpt)).unwrap();
        assert_eq!(rapid.cuts(&a).unwrap(), reference_cuts(&p, &a), "{prof}");
        assert_eq!(rapid.cuts(&b).unwrap(), reference_cuts(&p, &b), "{prof}");
    }
}

#[test]
fn identical_file_is_chunked_by_hints_with_almost_no_rolling() {
    let prof = "gear:2k:8k:64k";
    let e = engine(prof, 1);
    let data = datagen::random_bytes(2_000_000, 9);
    for crit in Criterion::ALL {
        let mut r = Rapid::with_new_table(&e, 2, small_blocks(crit)).unwrap();
        let first = r.chunk_all(&data).unwrap();
        r.reset_stats();
        let second = r.chunk_all(&data).unwrap();
        let key = |c: &RapidChunk| (c.offset, c.length, c.hash, c.last);
        assert_eq!(
            first.iter().map(key).collect::<Vec<_>>(),
            second.iter().map(key).collect::<Vec<_>>(),
            "{crit:?}"
        );
        assert!(second[2..]
            .iter()
            .all(|c| c.found == Found::Hint(0) && c.regular == (crit == Criterion::FfRwtFpt)));
        let st = r.stats();
        // The first chunk comes from one small fallback block, the rest from first hints.
        assert_eq!(st.hits[0], st.hinted_chunks, "{crit:?} {st:?}");
        assert!(st.hinted_chunks + 3 >= st.chunks, "{crit:?} {st:?}");
        assert_eq!(st.misses, vec![0, 0]);
        assert!(st.scanned_positions <= 4 * 8192, "{crit:?} {st:?}");
        assert_eq!(st.skipped_positions(), st.bytes - st.scanned_positions);
        if matches!(crit, Criterion::FfRwt | Criterion::FfRwtFpt) {
            assert_eq!(
                st.window_tests,
                st.hinted_chunks - 1,
                "{crit:?}: all hinted chunks but the last (input end)"
            );
        }
    }
}

#[test]
fn unverified_criteria_stay_close_and_ff_loses_some_dedup() {
    let prof = "gear:2k:8k:64k";
    let p: Profile = prof.parse().unwrap();
    let e = engine(prof, 2);
    let files = versions(1_500_000, 4, 15, ModKind::InsertDelete, 100.0, 11);
    let mut regular = DedupCounter::new();
    for f in &files {
        let mut a = 0;
        for c in reference_cuts(&p, f) {
            regular.add(&fp(&f[a..c]), c - a);
            a = c;
        }
    }
    let mut ratios = Vec::new();
    for crit in Criterion::ALL {
        let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(crit)).unwrap();
        let mut d = DedupCounter::new();
        for f in &files {
            let chunks = r.chunk_all(f).unwrap();
            check_cover(f, &chunks);
            for c in &chunks {
                d.add(&c.hash, c.length);
            }
        }
        ratios.push((crit, d.ratio()));
    }
    let reg = regular.ratio();
    assert!(reg > 2.5, "dataset should deduplicate: {reg}");
    for (crit, ratio) in &ratios {
        match crit {
            Criterion::FfRwtFpt => assert_eq!(*ratio, reg),
            Criterion::FfRwt | Criterion::FfMt => assert!(*ratio >= reg * 0.99, "{crit:?}: {ratio} vs {reg}"),
            Criterion::Ff => assert!(*ratio <= reg && *ratio > reg * 0.7, "{crit:?}: {ratio} vs {reg}"),
        }
    }
}

/// A reader that returns at most `k` bytes per call, `k` cycling through odd sizes.
struct Pieces<'a> {
    data: &'a [u8],
    at: usize,
    sizes: Vec<usize>,
    i: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let k = self.sizes[self.i % self.sizes.len()]
            .min(buf.len())
            .min(self.data.len() - self.at);
        self.i += 1;
        buf[..k].copy_from_slice(&self.data[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

#[test]
fn streaming_equals_slices() {
    for prof in PROFILES {
        let p: Profile = prof.parse().unwrap();
        let e = Engine::new(
            p.clone(),
            Options {
                threads: 2,
                span: 64 << 10,
                ..Options::default()
            },
        )
        .unwrap();
        let files = versions(700_000, 3, 25, ModKind::Mixed, 50.0, 4);
        for crit in Criterion::ALL {
            let mut a = Rapid::with_new_table(&e, 2, RapidOptions::new(crit)).unwrap();
            let mut b = Rapid::with_new_table(&e, 2, RapidOptions::new(crit)).unwrap();
            for (i, f) in files.iter().enumerate() {
                let want = a.chunk_all(f).unwrap();
                let reader = Pieces {
                    data: f,
                    at: 0,
                    sizes: vec![1, 4093, 65_537, 777_777, 13],
                    i,
                };
                let got: Vec<RapidChunk> = b.stream(reader).collect::<Result<_, _>>().unwrap();
                assert_eq!(got, want, "{prof} {crit:?} file {i}");
            }
            assert_eq!(a.stats(), b.stats(), "{prof} {crit:?}");
        }
    }
}

#[test]
fn read_errors_end_the_stream() {
    struct Failing(usize);
    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            if self.0 == 0 {
                return Err(std::io::Error::other("disk on fire"));
            }
            let k = buf.len().min(self.0).min(10_000);
            buf[..k].fill(7);
            self.0 -= k;
            Ok(k)
        }
    }
    let e = engine("gear:2k:8k:64k", 1);
    let mut r = Rapid::with_new_table(&e, 2, RapidOptions::default()).unwrap();
    let items: Vec<Result<RapidChunk, Error>> = r.stream(Failing(300_000)).collect();
    let errs = items.iter().filter(|x| x.is_err()).count();
    assert_eq!(errs, 1);
    assert!(items
        .last()
        .unwrap()
        .as_ref()
        .unwrap_err()
        .to_string()
        .contains("disk on fire"));
}

#[test]
fn hint_sources_recipe_and_cache() {
    let prof = "gear:2k:8k:64k";
    let p: Profile = prof.parse().unwrap();
    let e = engine(prof, 2);
    let files = versions(800_000, 2, 5, ModKind::InsertDelete, 100.0, 12);

    // Source 2: the base file's recipe (written by a regular run).
    let mut base_run = Rapid::with_new_table(&e, 2, small_blocks(Criterion::FfRwtFpt)).unwrap();
    let base_chunks = base_run.chunk_all(&files[0]).unwrap();
    let recipe = Recipe::from_chunks(&p, HashAlg::Blake3, &base_chunks);
    let mut text = Vec::new();
    recipe.write(&mut text).unwrap();
    let recipe = Recipe::read(&text[..]).unwrap();
    let mut t = HintTable::new(&p, HashAlg::Blake3, 2).unwrap();
    t.add_recipe(&recipe).unwrap();
    let mut r = Rapid::new(&e, t, small_blocks(Criterion::FfRwtFpt)).unwrap();
    assert_eq!(r.cuts(&files[1]).unwrap(), reference_cuts(&p, &files[1]));
    let hinted = r.stats().hinted_chunks;
    assert!(hinted > r.stats().chunks * 3 / 4, "{:?}", r.stats());

    // Source 3: a persisted hint cache, bounded; the newest entries survive.
    let dir = std::env::temp_dir().join(format!("cutpoint-rapid-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let cache = dir.join("hints.bin");
    let kept = base_run.table().save_cache_file(&cache, Some(1 << 20)).unwrap();
    assert_eq!(kept, base_run.table().len());
    let small = dir.join("small.bin");
    let kept_small = base_run.table().save_cache_file(&small, Some(2048)).unwrap();
    assert!(kept_small > 0 && kept_small < kept && std::fs::metadata(&small).unwrap().len() <= 2048);
    let mut t = HintTable::new(&p, HashAlg::Blake3, 2).unwrap();
    t.load_cache_file(&cache).unwrap();
    let mut r = Rapid::new(&e, t, small_blocks(Criterion::FfRwtFpt)).unwrap();
    assert_eq!(r.cuts(&files[1]).unwrap(), reference_cuts(&p, &files[1]));
    assert_eq!(r.stats().hinted_chunks, hinted, "cache and recipe carry the same hints");

    // A cache for another profile is rejected, never used.
    let mut other = HintTable::new(&"gear:4k:8k:64k".parse().unwrap(), HashAlg::Blake3, 2).unwrap();
    let err = other.load_cache_file(&cache).unwrap_err();
    assert!(
        matches!(err, Error::Config(_)) && err.to_string().contains("hints.bin"),
        "{err}"
    );
    assert!(other.is_empty());
    let mut t = HintTable::new(&"gear:4k:8k:64k".parse().unwrap(), HashAlg::Blake3, 2).unwrap();
    assert!(t.add_recipe(&recipe).is_err());
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn worst_case_tests_every_hint_and_rejects_it() {
    let prof = "gear:2k:8k:64k";
    let p: Profile = prof.parse().unwrap();
    let e = engine(prof, 1);
    let files = versions(500_000, 2, 10, ModKind::InsertDelete, 100.0, 2);
    for crit in [Criterion::FfMt, Criterion::FfRwt, Criterion::FfRwtFpt] {
        let mut r = Rapid::with_new_table(
            &e,
            2,
            RapidOptions {
                criterion: crit,
                worst_case: true,
                first_block: 0,
                max_block: 0,
            },
        )
        .unwrap();
        for f in &files {
            assert_eq!(r.cuts(f).unwrap(), reference_cuts(&p, f), "{crit:?}");
        }
        let st = r.stats();
        assert_eq!(st.hinted_chunks, 0);
        assert!(st.fallbacks > 0 && st.misses[0] > 0);
        assert_eq!(st.hits, vec![0, 0]);
    }
}

#[test]
fn errors_not_panics() {
    let e = Engine::new(
        "gear:2k:8k:64k".parse().unwrap(),
        Options {
            hash: HashAlg::None,
            ..Options::default()
        },
    )
    .unwrap();
    assert!(Rapid::with_new_table(&e, 2, RapidOptions::default()).is_err());
    let e = engine("gear:2k:8k:64k", 1);
    let other = HintTable::new(&"crc32:2k:8k:64k".parse().unwrap(), HashAlg::Blake3, 2).unwrap();
    assert!(Rapid::new(&e, other, RapidOptions::default())
        .err()
        .unwrap()
        .to_string()
        .contains("crc32:2k:8k:64k"));
    assert!(HintTable::new(e.profile(), HashAlg::Blake3, 0).is_err());
    assert!(HintTable::new(e.profile(), HashAlg::None, 2).is_err());
    assert!(Criterion::parse("ff+xyz").is_err());
    for c in Criterion::ALL {
        assert_eq!(Criterion::parse(c.name()).unwrap(), c);
    }
    // Empty and tiny inputs.
    let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(Criterion::Ff)).unwrap();
    assert!(r.chunk_all(&[]).unwrap().is_empty());
    assert_eq!(r.cuts(&[1, 2, 3]).unwrap(), vec![3]);
    assert_eq!(r.cuts(&[1, 2, 3]).unwrap(), vec![3]);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 40, .. ProptestConfig::default() })]

    /// Random datasets, profiles, list lengths, block sizes, thread counts, histories mixing
    /// criteria: FF+RWT+FPT always equals the reference.
    #[test]
    fn prop_fpt_equals_reference(
        seed in any::<u64>(),
        prof in 0usize..PROFILES.len(),
        size in 1usize..250_000,
        mods in 0usize..60,
        kind in 0usize..3,
        region in 1u32..=100,
        list_len in 1usize..5,
        first_block in prop_oneof![Just(0usize), 1usize..100_000],
        threads in 1usize..4,
        history in proptest::collection::vec(0usize..4, 0..3),
    ) {
        let p: Profile = PROFILES[prof].parse().unwrap();
        let e = Engine::new(p.clone(), Options { threads, span: 32 << 10, ..Options::default() }).unwrap();
        let kind = [ModKind::InsertDelete, ModKind::Overwrite, ModKind::Mixed][kind];
        let files = versions(size as u64, 3, mods, kind, region as f64, seed);
        let mut table = HintTable::new(&p, HashAlg::Blake3, list_len).unwrap();
        // Earlier runs under any criteria (they may leave unverified hints behind).
        for (i, &c) in history.iter().enumerate() {
            let mut r = Rapid::new(&e, table, RapidOptions { criterion: Criterion::ALL[c], worst_case: false, first_block, max_block: 0 }).unwrap();
            r.cuts(&files[i % files.len()]).unwrap();
            table = r.into_table();
        }
        let mut r = Rapid::new(&e, table, RapidOptions { criterion: Criterion::FfRwtFpt, worst_case: false, first_block, max_block: 0 }).unwrap();
        for f in &files {
            prop_assert_eq!(r.cuts(f).unwrap(), reference_cuts(&p, f));
        }
    }
}

/// An endless-looking stream generated on the fly: `versions` copies of a random block with a
/// few edits each, so that hints are used, never held whole anywhere.
struct Generated {
    parts: Vec<Vec<u8>>,
    i: usize,
    at: usize,
}

impl Read for Generated {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        while self.i < self.parts.len() && self.at == self.parts[self.i].len() {
            self.i += 1;
            self.at = 0;
        }
        if self.i == self.parts.len() {
            return Ok(0);
        }
        let p = &self.parts[self.i];
        let k = buf.len().min(p.len() - self.at).min(100_003);
        buf[..k].copy_from_slice(&p[self.at..self.at + k]);
        self.at += k;
        Ok(k)
    }
}

#[test]
fn streaming_memory_is_bounded() {
    // 16 × 8 MiB = 128 MiB through the chunker; the buffer must stay near one block + MAX.
    let p: Profile = "gear:2k:8k:64k".parse().unwrap();
    let e = Engine::new(
        p.clone(),
        Options {
            threads: 2,
            ..Options::default()
        },
    )
    .unwrap();
    let files = versions(8 << 20, 15, 20, ModKind::Mixed, 100.0, 8);
    let total: usize = files.iter().map(|f| f.len()).sum();
    let mut r = Rapid::with_new_table(&e, 2, RapidOptions::new(Criterion::FfMt)).unwrap();
    let mut it = r.stream(Generated {
        parts: files,
        i: 0,
        at: 0,
    });
    let (mut bytes, mut peak) = (0usize, 0usize);
    while let Some(c) = it.next() {
        bytes += c.unwrap().length;
        peak = peak.max(it.buffered());
    }
    assert_eq!(bytes, total);
    let bound = e.block_size() + p.max + (3 << 20);
    assert!(peak <= bound, "peak buffer {peak} > {bound}");
    assert!(r.stats().hinted_chunks > r.stats().chunks / 2, "{:?}", r.stats());
}

#[test]
fn rwt_takes_a_max_sized_hint_only_when_its_marker_matches() {
    // A cut at MAX has no window to test: ff+rwt then checks the hint's marker byte.
    let mut tried = 0;
    for prof in PROFILES {
        let p: Profile = prof.parse().unwrap();
        let e = engine(prof, 1);
        let x = datagen::random_bytes(200_000, 9);
        let r = reference_cuts(&p, &x);
        let (c0, c1) = (r[0], r[1]);
        assert!(c1 - c0 < p.max, "{prof}: pick data whose second chunk is not cut at MAX");
        let last = x[c0 + p.max - 1];
        for (marker, taken) in [(Some(last), true), (Some(last.wrapping_add(1)), false), (None, true)] {
            let mut t = HintTable::new(&p, HashAlg::Blake3, 2).unwrap();
            t.learn(&fp(&x[..c0]), true);
            t.link(&fp(&x[..c0]), Hint { size: p.max as u32, marker });
            // Tiny fallback blocks, so that the first block ends at the first chunk and its
            // hint is tried (hints are tried at the end of a block).
            let opts = RapidOptions { first_block: 64, ..RapidOptions::new(Criterion::FfRwt) };
            let mut rapid = Rapid::new(&e, t, opts).unwrap();
            let chunks = rapid.chunk_all(&x).unwrap();
            check_cover(&x, &chunks);
            assert_eq!(chunks[0].length, c0, "{prof}");
            let st = rapid.stats();
            if st.hits[0] + st.misses[0] == 0 {
                continue; // the block that found c0 went on past it
            }
            tried += 1;
            assert_eq!(chunks[1].length == p.max, taken, "{prof} marker {marker:?}");
            assert_eq!(matches!(chunks[1].found, Found::Hint(0)), taken, "{prof} marker {marker:?}");
        }
    }
    assert!(tried >= 6, "the hint was tried in only {tried} cases");
}
