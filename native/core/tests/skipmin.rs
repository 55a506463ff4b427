//! The skip-MIN engine (`cutpoint_core::skipmin`, `Engine::with_skip_min`): the same
//! boundaries as the reference for every gear profile, on one thread (sequential) and on
//! several (speculative parts joined where the chains meet), through `cuts()`, `chunks()`,
//! `stream()` with any read sizes, `stream_prefetch()` and `resume()`; the shared vectors; and
//! random inputs and profiles (MIN = 64 = the window, MIN near it, MIN = AVG = MAX, MAX cuts,
//! nc 0..=3, other seeds). `PROPTEST_CASES=N` runs more cases.
//!
//! gear's MIN cannot be below its 64-byte window (the profile is refused: the hash at a cut
//! must see only its own chunk's bytes), so "MIN < 64" is covered by that refusal.

mod common;

use common::vectors::{self, Input, XorShift64Star};
use common::{check_engine, check_invariants};
use cutpoint_core::{datagen, hex, reference_cuts, skip_min_cuts, Engine, HashAlg, Options, Profile};
use proptest::prelude::*;
use std::path::PathBuf;

fn engine(p: &Profile, threads: usize, hash: HashAlg) -> Engine {
    Engine::new(p.clone(), Options { threads, hash, ..Options::default() })
        .and_then(|e| e.with_skip_min(true))
        .unwrap_or_else(|e| panic!("{p} threads {threads}: {e}"))
}

/// A valid gear profile with small sizes: MIN from 64 (the window) up, AVG a power of two at
/// least MIN, MAX from AVG up to 4·AVG, nc 0..=3 where it fits, sometimes another seed.
fn gear_profile() -> impl Strategy<Value = Profile> {
    (prop_oneof![Just(0usize), 0usize..8, 0usize..600], 0u32..3, 0usize..=3000, 0u32..4, prop::option::of(any::<u64>()), prop::bool::ANY)
        .prop_map(|(min_extra, avg_shift, max_extra, nc, seed, flat)| {
            let min = 64 + min_extra;
            let avg_bits = (usize::BITS - (min - 1).leading_zeros()) + avg_shift;
            let avg = 1usize << avg_bits;
            // Sometimes MIN = AVG = MAX (every chunk is MAX unless the input ends).
            let (min, max) = if flat { (avg, avg) } else { (min, avg + max_extra % (3 * avg + 1)) };
            let mut key = format!("nc={}", nc.min(avg_bits - 1));
            if let Some(s) = seed {
                key.push_str(&format!(",seed={s}"));
            }
            let text = format!("gear:{min}:{avg}:{max}:{key}");
            text.parse().unwrap_or_else(|e| panic!("strategy made an invalid profile {text}: {e}"))
        })
}

/// Input bytes of four kinds (random, two symbols, constant with rare noise, a repeated short
/// period), from a seed and a length so that shrinking works.
fn data() -> impl Strategy<Value = Vec<u8>> {
    (0u8..4, 1u64.., 0usize..60_000).prop_map(|(kind, seed, len)| {
        let mut g = XorShift64Star::new(seed);
        match kind {
            0 => (0..len).map(|_| (g.next_u64() >> 56) as u8).collect(),
            1 => (0..len).map(|_| b"ab"[(g.next_u64() >> 63) as usize]).collect(),
            2 => (0..len).map(|_| { let v = g.next_u64(); if v >> 54 == 0 { (v >> 8) as u8 } else { 0 } }).collect(),
            _ => {
                let period: Vec<u8> = (0..1 + seed as usize % 3000).map(|_| (g.next_u64() >> 56) as u8).collect();
                (0..len).map(|i| period[i % period.len()]).collect()
            }
        }
    })
}

fn read_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(prop_oneof![Just(0usize), Just(1), 2usize..64, 64usize..70_000, Just(64 << 20)], 1..5)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    /// skip_min_cuts and the skip-MIN engine (1 to 4 threads; every view) equal the reference.
    #[test]
    fn skip_min_equals_reference(p in gear_profile(), data in data(), threads in 1usize..=4, reads in read_sizes()) {
        let want = reference_cuts(&p, &data);
        prop_assert_eq!(check_invariants(&p, data.len(), &want), Ok(()));
        prop_assert_eq!(skip_min_cuts(&p, &data).unwrap(), want.clone(), "skip_min_cuts {}", p);
        let e = engine(&p, threads, HashAlg::None);
        prop_assert!(e.skip_min());
        prop_assert_eq!(check_engine(&e, &data, &want, &reads), Ok(()), "{} threads {}", p, threads);
    }

    /// Resumed at any start, scanned in steps of any size: the reference of the rest.
    #[test]
    fn resumed_skip_min_equals_reference(p in gear_profile(), data in data(), threads in 1usize..=3, start_frac in 0.0f64..1.0, step in prop_oneof![1usize..100, 100usize..70_000]) {
        let start = (data.len() as f64 * start_frac) as usize;
        let want: Vec<usize> = reference_cuts(&p, &data[start..]).into_iter().map(|c| c + start).collect();
        let e = engine(&p, threads, HashAlg::None);
        let mut r = e.resume(start);
        let mut got = Vec::new();
        while r.next_position() < data.len() {
            let q = (r.next_position() + step).min(data.len());
            e.scan_resumed(&mut r, &data, 0, q, &mut got).unwrap();
        }
        r.finish(data.len(), &mut got);
        prop_assert_eq!(got, want, "{} threads {} start {} step {}", p, threads, start, step);
    }
}

/// Several blocks of the default profile and others, 1 to 8 threads: the speculative parts
/// (8 MiB blocks, parts of at least 8 × MAX) meet the true chain and join exactly.
#[test]
fn multi_block_threads_equal_reference() {
    let data = datagen::random_bytes((20 << 20) + 12_345, 77);
    for prof in ["gear:2k:8k:64k", "gear:64:128:256", "gear:4k:8k:16k:nc=0", "gear:1k:1k:1k"] {
        let p: Profile = prof.parse().unwrap();
        let want = reference_cuts(&p, &data);
        for threads in [1, 2, 3, 8] {
            let e = engine(&p, threads, HashAlg::None);
            assert_eq!(e.cuts(&data), want, "{prof} threads {threads}");
        }
        let e = engine(&p, 2, HashAlg::Blake3);
        check_engine(&e, &data, &want, &[1 << 20, 4097]).unwrap_or_else(|err| panic!("{prof}: {err}"));
    }
}

/// Input with no candidates at all: every chunk is MAX long, so a part's speculative chain
/// (MAX cuts from the part's start) never meets the true one; the join then goes on to the
/// part's end sequentially and the cuts are still the reference's.
#[test]
fn chains_that_never_meet_still_give_the_reference() {
    let data = vec![0u8; (9 << 20) + 5];
    for prof in ["gear:2k:8k:64k", "gear:64:128:256"] {
        let p: Profile = prof.parse().unwrap();
        let want = reference_cuts(&p, &data);
        for threads in [2, 3] {
            assert_eq!(engine(&p, threads, HashAlg::None).cuts(&data), want, "{prof} threads {threads}");
        }
    }
}

/// The shared vectors (tests/vectors/*.json): every gear file's cuts and fingerprints, from
/// the skip-MIN engine on 1, 2 and 3 threads.
#[test]
fn skip_min_reproduces_the_gear_vectors() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors");
    let mut gear_files = 0;
    for (stem, _) in vectors::PROFILES {
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join(format!("{stem}.json"))).unwrap()).unwrap();
        let p: Profile = v["profile"].as_str().unwrap().parse().unwrap();
        if p.family != cutpoint_core::Family::Gear {
            continue;
        }
        gear_files += 1;
        for case in v["cases"].as_array().unwrap() {
            let data = Input::from_json(&case["input"]).unwrap().bytes();
            let cuts: Vec<usize> = case["cuts"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
            let b3: Vec<String> = case["blake3"].as_array().unwrap().iter().map(|x| x.as_str().unwrap().to_string()).collect();
            assert_eq!(skip_min_cuts(&p, &data).unwrap(), cuts, "{stem} {}", case["note"]);
            for threads in [1, 2, 3] {
                let e = engine(&p, threads, HashAlg::Blake3);
                let got: Vec<String> = e.chunks(&data).map(|c| hex(&c.hash.unwrap())).collect();
                assert_eq!(got, b3, "{stem} {} threads {threads}", case["note"]);
                check_engine(&e, &data, &cuts, &[7, 0, 4093]).unwrap_or_else(|err| panic!("{stem} {}: {err}", case["note"]));
            }
        }
    }
    assert!(gear_files >= 1, "no gear vector files");
}

/// Only gear has the skip-MIN engine; a forced backend keeps the two stages.
#[test]
fn skip_min_is_gear_only_and_not_used_with_a_forced_backend() {
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k"] {
        let e = Engine::new(prof.parse().unwrap(), Options::default()).unwrap();
        assert!(!e.skip_min());
        let err = e.with_skip_min(true).err().expect("crc32/rabin refused").to_string();
        assert!(err.contains("gear profiles only"), "{err}");
    }
    let p = Profile::default_profile();
    let forced = Engine::new(p.clone(), Options { backend: Some(cutpoint_core::Backend::Scalar), ..Options::default() }).unwrap();
    assert!(!forced.skip_min());
    assert_eq!(forced.kernel_name(), "scalar");
    let on = engine(&p, 1, HashAlg::None);
    assert_eq!(on.kernel_name(), "skip-min");
    assert!(!on.with_skip_min(false).unwrap().skip_min());
    // The default engine follows the calibration's choice.
    let cal = cutpoint_core::backend::calibration(cutpoint_core::Family::Gear);
    if std::env::var("CUTPOINT_BACKEND").map_or(true, |v| v.trim().is_empty()) {
        assert_eq!(Engine::new(p, Options::default()).unwrap().skip_min(), cal.skip_min_chosen);
    }
}
