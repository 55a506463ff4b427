//! Property tests (proptest): random data (random, low-entropy, constant with noise), random
//! valid profiles of all three families, random backend / threads / segment size / span, and
//! random read-size sequences — every engine equals the reference, and every chunking satisfies
//! the invariants. `PROPTEST_CASES=N` runs more cases.

mod common;

use common::vectors::XorShift64Star;
use common::{check_engine, check_invariants, Config};
use cutpoint_core::{naive_cuts, reference_cuts, sequential_cuts, Engine, HashAlg, Options, Profile};
use proptest::prelude::*;

/// A valid profile of any family with small sizes (so inputs of tens of KiB hold many chunks).
fn profile() -> impl Strategy<Value = Profile> {
    (0u8..3, 1usize..=300, 0usize..600, 0u32..3, 0usize..=3000, any::<u64>(), 0u32..4, prop::bool::ANY)
        .prop_map(|(fam, w, min_extra, avg_shift, max_extra, r, nc, keyed)| {
            let (family, window) = match fam {
                0 => ("crc32", w),
                1 => ("rabin", 1 + w % 64),
                _ => ("gear", 64),
            };
            let min = window + min_extra;
            let avg_bits = (usize::BITS - (min - 1).leading_zeros()).max(1) + avg_shift;
            let avg = 1usize << avg_bits;
            let max = avg + max_extra % (3 * avg + 1);
            let key = match family {
                "gear" if keyed => format!("nc={},seed={}", nc.min(avg_bits - 1), r),
                "gear" => format!("nc={}", nc.min(avg_bits - 1)),
                _ if keyed => format!("window={window},magic={}", r as usize % avg),
                _ => format!("window={window}"),
            };
            let text = format!("{family}:{min}:{avg}:{max}:{key}");
            text.parse().unwrap_or_else(|e| panic!("strategy made an invalid profile {text}: {e}"))
        })
}

/// Input bytes: (kind, seed, length) expanded deterministically, so shrinking works on the
/// length and the kind rather than on 50 000 separate bytes.
fn data() -> impl Strategy<Value = Vec<u8>> {
    (0u8..4, 1u64.., 0usize..50_000).prop_map(|(kind, seed, len)| {
        let mut g = XorShift64Star::new(seed);
        match kind {
            0 => (0..len).map(|_| (g.next_u64() >> 56) as u8).collect(),
            // Low entropy: two symbols.
            1 => (0..len).map(|_| b"ab"[(g.next_u64() >> 63) as usize]).collect(),
            // Constant with rare noise: long MAX runs, occasional candidates.
            2 => (0..len).map(|_| { let v = g.next_u64(); if v >> 54 == 0 { (v >> 8) as u8 } else { 0 } }).collect(),
            // A short random period repeated.
            _ => {
                let period: Vec<u8> = (0..1 + seed as usize % 3000).map(|_| (g.next_u64() >> 56) as u8).collect();
                (0..len).map(|i| period[i % period.len()]).collect()
            }
        }
    })
}

fn config() -> impl Strategy<Value = Config> {
    let n = common::backends().len();
    (
        0..n,
        prop_oneof![Just(1usize), Just(2), Just(3), 0usize..=8],
        prop_oneof![Just(None), (1usize..=8).prop_map(Some), (9usize..5000).prop_map(Some), Just(Some(1 << 30))],
        prop_oneof![Just(0usize), 1usize..=64, 65usize..5000],
    )
        .prop_map(|(b, threads, lane_segment, span)| Config {
            backend: common::backends()[b],
            threads,
            lane_segment,
            span,
        })
}

fn read_sizes() -> impl Strategy<Value = Vec<usize>> {
    prop::collection::vec(
        prop_oneof![Just(0usize), Just(1), 2usize..64, 64usize..70_000, Just(64 << 20)],
        1..6,
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 160, ..ProptestConfig::default() })]

    /// Every engine view (cuts, chunks with fingerprints, stream with random read sizes) equals
    /// the reference; the reference satisfies the chunking invariants; sequential equals it.
    #[test]
    fn engines_equal_reference(p in profile(), data in data(), c in config(), reads in read_sizes(), h in 0u8..3) {
        let want = reference_cuts(&p, &data);
        prop_assert_eq!(check_invariants(&p, data.len(), &want), Ok(()));
        prop_assert_eq!(&sequential_cuts(&p, &data), &want, "sequential_cuts");
        let hash = [HashAlg::None, HashAlg::Blake3, HashAlg::Sha256][h as usize];
        let e = c.engine(&p, hash);
        prop_assert_eq!(check_engine(&e, &data, &want, &reads), Ok(()), "{} {:?}", p, c);
    }

    /// Streaming equals one-shot for the default engine, read in pieces of 1 byte, odd sizes,
    /// growing sizes, and up to 64 MiB.
    #[test]
    fn stream_equals_one_shot(p in profile(), data in data(), reads in read_sizes()) {
        let e = Engine::new(p.clone(), Options { hash: HashAlg::Blake3, ..Options::default() }).unwrap();
        let one: Vec<_> = e.chunks(&data).collect();
        let streamed: Vec<_> = e.stream(common::Pieces::new(&data, &reads)).map(|c| c.unwrap()).collect();
        prop_assert_eq!(&streamed, &one);
        let growing: Vec<usize> = (0..40).map(|i| 2 * i * i + 1).collect();
        let streamed: Vec<_> = e.stream(common::Pieces::new(&data, &growing)).map(|c| c.unwrap()).collect();
        prop_assert_eq!(&streamed, &one);
        let cuts: Vec<usize> = one.iter().map(|c| c.offset as usize + c.length).collect();
        prop_assert_eq!(check_invariants(&p, data.len(), &cuts), Ok(()));
    }

    /// The naive segment-parallel chunking differs from the reference by design; it must still
    /// cover every byte with contiguous non-empty chunks of at most MAX, and cut at every
    /// segment boundary.
    #[test]
    fn naive_covers_and_cuts_at_segments(p in profile(), data in data(), seg in prop_oneof![1usize..64, 64usize..100_000]) {
        let cuts = naive_cuts(&p, &data, seg);
        let n = data.len();
        prop_assert_eq!(cuts.last().copied().unwrap_or(0), n);
        let mut s = 0;
        for &e in &cuts {
            prop_assert!(e > s && e - s <= p.max, "bad chunk [{}, {})", s, e);
            // A chunk never crosses a segment boundary.
            prop_assert_eq!(s / seg, (e - 1) / seg);
            s = e;
        }
        for b in (seg..n).step_by(seg) {
            prop_assert!(cuts.binary_search(&b).is_ok(), "no cut at segment boundary {}", b);
        }
    }
}

/// A single fixed example the property above would catch, kept as a plain test: the default
/// engine on 2 MiB of random data over several blocks, every backend.
#[test]
fn multi_block_random_every_backend() {
    let mut g = XorShift64Star::new(99);
    let data: Vec<u8> = (0..(2 << 20) + 12345).map(|_| (g.next_u64() >> 56) as u8).collect();
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k", "gear:2k:8k:64k"] {
        let p: Profile = prof.parse().unwrap();
        let want = reference_cuts(&p, &data);
        for b in common::backends() {
            for threads in [1, 2, 3, 8] {
                let c = Config { backend: b, threads, lane_segment: None, span: 300_000 };
                check_engine(&c.engine(&p, HashAlg::None), &data, &want, &[65536, 1, 7])
                    .unwrap_or_else(|e| panic!("{prof} {c:?}: {e}"));
            }
        }
    }
}
