//! MT-FBC: TTTD and FBC chunkers (`cutpoint_core::mtfbc`).

use std::collections::HashSet;

use cutpoint_core::mtfbc::{CandidateKey, Fbc, FbcChunk, FbcParams, Tttd, TttdParams, Workers};
use cutpoint_core::profile::Family;

/// splitmix64 bytes from a seed (self-contained so the tests do not depend on other modules).
fn random_bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        out.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    out.truncate(n);
    out
}

struct Rng(u64);
impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n
    }
}

/// Small TTTD parameters that exercise every branch (main hits, backup cuts, Tmax cuts).
fn small_tttd(family: Family) -> TttdParams {
    TttdParams { family, window: 48, min: 256, max: 2048, main_divisor: 1024, backup_divisor: 256 }
}

fn check_cover(cuts: &[usize], n: usize, min: usize, max: usize, what: &str) {
    if n == 0 {
        assert!(cuts.is_empty(), "{what}: cuts for empty input");
        return;
    }
    assert_eq!(*cuts.last().unwrap(), n, "{what}: last cut is not the end");
    let mut prev = 0;
    for (i, &c) in cuts.iter().enumerate() {
        assert!(c > prev, "{what}: cut {i} at {c} does not advance from {prev}");
        let len = c - prev;
        assert!(len <= max, "{what}: chunk {i} is {len} > Tmax {max}");
        if i + 1 < cuts.len() {
            assert!(len >= min, "{what}: chunk {i} is {len} < Tmin {min}");
        }
        prev = c;
    }
}

fn inputs() -> Vec<(String, Vec<u8>)> {
    let mut v = vec![
        ("random-300k".to_string(), random_bytes(300_000, 1)),
        ("zeros-50k".to_string(), vec![0u8; 50_000]),
        ("period-7".to_string(), (0..40_000u32).map(|i| (i % 7) as u8 * 31).collect()),
    ];
    // Edge lengths for small_tttd: 0; 1; window±1 (48); Tmin±1 (256); D (1024); Tmax±1 (2048); 2·Tmax+1.
    for n in [0usize, 1, 47, 48, 49, 255, 256, 257, 1024, 2047, 2048, 2049, 4097] {
        v.push((format!("random-{n}"), random_bytes(n, 100 + n as u64)));
    }
    v
}

#[test]
fn tttd_chunks_cover_input_within_thresholds() {
    for family in [Family::Rabin, Family::Crc32] {
        let p = small_tttd(family);
        let t = Tttd::new(p.clone()).unwrap();
        for (name, data) in inputs() {
            let cuts = t.cuts(&data);
            check_cover(&cuts, data.len(), p.min, p.max, &format!("{}/{name}", family.name()));
            assert_eq!(cuts, t.cuts(&data), "not deterministic");
        }
    }
    // The report's parameters (Tmin = 1 B, Tmax = 100 KB).
    let p = TttdParams::paper();
    let t = Tttd::new(p.clone()).unwrap();
    let data = random_bytes(2 << 20, 9);
    let cuts = t.cuts(&data);
    check_cover(&cuts, data.len(), p.min, p.max, "paper");
    let avg = data.len() / cuts.len();
    // Expected size with D = 8 KB and no minimum: about D (geometric), capped by Tmax.
    assert!((5_000..12_000).contains(&avg), "paper parameters: average chunk {avg}");
}

/// Eshghi & Tang's pseudo-code, line for line, with each hash computed from scratch over the
/// zero-padded window: an oracle for the rolling implementation.
fn tttd_oracle(t: &Tttd, data: &[u8]) -> (Vec<usize>, [usize; 3]) {
    let p = t.params();
    let w = p.window;
    let hash_at = |pos: usize| {
        let mut win = vec![0u8; w];
        let take = pos.min(w);
        win[w - take..].copy_from_slice(&data[pos - take..pos]);
        t.tables().hash_window(&win)
    };
    let (d, db) = (p.main_divisor, p.backup_divisor);
    let mut cuts = Vec::new();
    let mut kinds = [0usize; 3]; // main, backup, tmax
    let (mut last, mut backup) = (0usize, 0usize);
    for curr in 1..=data.len() {
        let h = hash_at(curr);
        if curr - last < p.min {
            continue;
        }
        if h % db == db - 1 {
            backup = curr;
        }
        if h % d == d - 1 {
            cuts.push(curr);
            kinds[0] += 1;
            backup = 0;
            last = curr;
            continue;
        }
        if curr - last < p.max {
            continue;
        }
        if backup != 0 {
            cuts.push(backup);
            kinds[1] += 1;
            last = backup;
            backup = 0;
        } else {
            cuts.push(curr);
            kinds[2] += 1;
            last = curr;
            backup = 0;
        }
    }
    if last < data.len() {
        cuts.push(data.len());
    }
    (cuts, kinds)
}

#[test]
fn tttd_matches_the_papers_pseudocode() {
    let mut kinds_seen = [0usize; 3];
    for family in [Family::Rabin, Family::Crc32] {
        for (i, p) in [
            small_tttd(family),
            // A non-power-of-two divisor pair, as in Eshghi & Tang's own parameters.
            TttdParams { family, window: 16, min: 460, max: 2800, main_divisor: 540, backup_divisor: 270 },
            TttdParams { family, window: 64, min: 1, max: 3000, main_divisor: 2048, backup_divisor: 1024 },
        ]
        .into_iter()
        .enumerate()
        {
            let t = Tttd::new(p).unwrap();
            let mut data = random_bytes(120_000, 40 + i as u64);
            // A low-entropy stretch forces Tmax cuts with and without backups.
            for b in &mut data[50_000..70_000] {
                *b = 0;
            }
            let (want, kinds) = tttd_oracle(&t, &data);
            assert_eq!(t.cuts(&data), want, "{} params #{i}", family.name());
            for k in 0..3 {
                kinds_seen[k] += kinds[k];
            }
        }
    }
    // The oracle exercised every branch: main-divisor cuts, backup cuts, and Tmax cuts.
    assert!(kinds_seen.iter().all(|&k| k > 0), "branches not all exercised: {kinds_seen:?}");
}

#[test]
fn tttd_boundaries_resynchronise_after_an_insert() {
    let t = Tttd::new(TttdParams::paper()).unwrap();
    let data = random_bytes(1 << 20, 5);
    let mut edited = random_bytes(100, 6);
    edited.extend_from_slice(&data);
    let a: HashSet<usize> = t.cuts(&data).into_iter().filter(|&c| c > 200_000).collect();
    let b: HashSet<usize> = t.cuts(&edited).into_iter().map(|c| c - 100.min(c)).collect();
    let kept = a.iter().filter(|c| b.contains(c)).count();
    assert!(kept * 10 >= a.len() * 9, "only {kept} of {} boundaries survived a 100-byte insert", a.len());
}

#[test]
fn bad_parameters_are_errors() {
    let ok = small_tttd(Family::Rabin);
    let tttd_cases: Vec<(TttdParams, &str)> = vec![
        (TttdParams { min: 0, ..ok.clone() }, "Tmin must be at least 1"),
        (TttdParams { max: 100, ..ok.clone() }, "Tmax (100) is smaller than Tmin"),
        (TttdParams { main_divisor: 1, ..ok.clone() }, "main divisor D must be at least 2"),
        (TttdParams { backup_divisor: 0, ..ok.clone() }, "D' must be at least 1"),
        (TttdParams { backup_divisor: 1024, ..ok.clone() }, "must be smaller than the main divisor"),
        (TttdParams { window: 0, ..ok.clone() }, "window must be at least 1"),
        (TttdParams { window: 2 << 20, ..ok.clone() }, "too large"),
        (TttdParams { family: Family::Gear, ..ok.clone() }, "gear"),
        (TttdParams { max: 2 << 30, ..ok.clone() }, "larger than the limit"),
        (TttdParams { family: Family::Crc32, main_divisor: 1 << 33, ..ok.clone() }, "exceeds the 32-bit"),
    ];
    for (p, want) in tttd_cases {
        let err = Tttd::new(p.clone()).err().unwrap_or_else(|| panic!("{p:?} accepted")).to_string();
        assert!(err.contains(want), "{p:?}: got '{err}', want '{want}'");
        let f = FbcParams { tttd: p, ..FbcParams::paper() };
        assert!(Fbc::new(f).is_err());
    }
    let okf = FbcParams::paper();
    let fbc_cases: Vec<(FbcParams, &str)> = vec![
        (FbcParams { sub_size: 0, ..okf.clone() }, "frequent chunk size must be at least 1"),
        (FbcParams { sub_size: 200 * 1024, ..okf.clone() }, "larger than TTTD's Tmax"),
        (FbcParams { sample_rate: 0, ..okf.clone() }, "sample rate"),
        (FbcParams { filters: 0, ..okf.clone() }, "Bloom filters must be 1..=16"),
        (FbcParams { filters: 17, ..okf.clone() }, "Bloom filters must be 1..=16"),
        (FbcParams { filter_bytes: 0, ..okf.clone() }, "Bloom filter size"),
        (FbcParams { filter_bytes: 1 << 30, ..okf.clone() }, "Bloom filter size"),
        (FbcParams { threshold: 1, ..okf.clone() }, "threshold must be at least 2"),
    ];
    for (p, want) in fbc_cases {
        let err = Fbc::new(p.clone()).err().unwrap_or_else(|| panic!("{p:?} accepted")).to_string();
        assert!(err.contains(want), "{p:?}: got '{err}', want '{want}'");
    }
    assert!(Tttd::new(TttdParams::paper()).is_ok());
    assert!(Fbc::new(FbcParams::paper()).is_ok());
}

/// Versions of a random base, each with a few small random edits of the previous one.
fn versions(base: usize, n: usize, edits: usize, seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(seed);
    let mut v = vec![random_bytes(base, seed ^ 0xABCD)];
    for i in 1..n {
        let mut cur = v[i - 1].clone();
        for _ in 0..edits {
            let at = rng.below(cur.len() as u64 - 64) as usize;
            let len = 1 + rng.below(64) as usize;
            match rng.below(3) {
                0 => {
                    let ins = random_bytes(len, rng.below(u64::MAX));
                    cur.splice(at..at, ins);
                }
                1 => {
                    cur.drain(at..at + len);
                }
                _ => cur[at..at + len].copy_from_slice(&random_bytes(len, rng.below(u64::MAX))),
            }
        }
        v.push(cur);
    }
    v
}

fn check_fbc_chunks(fbc: &Fbc, data: &[u8], chunks: &[FbcChunk]) {
    let mut pos = 0u64;
    for c in chunks {
        assert_eq!(c.offset, pos, "chunks not contiguous");
        assert!(c.length > 0, "empty chunk at {pos}");
        if c.frequent {
            assert_eq!(c.length, fbc.params().sub_size);
        }
        pos += c.length as u64;
    }
    assert_eq!(pos, data.len() as u64, "chunks do not cover the input");
    // FBC only refines TTTD: every coarse boundary is an FBC boundary.
    let ends: HashSet<u64> = chunks.iter().map(|c| c.offset + c.length as u64).collect();
    for cut in fbc.tttd().cuts(data) {
        assert!(ends.contains(&(cut as u64)), "coarse boundary {cut} lost");
    }
}

#[test]
fn fbc_single_stream_equals_multi_threaded() {
    single_equals_multi(FbcParams::paper(), 1000);
    // Tiny filters: false positives are common, so the state depends on the order of the
    // updates; only an in-order commit gives the single-stream result.
    let tiny = FbcParams { filter_bytes: 512, filters: 1, ..FbcParams::paper() };
    single_equals_multi(tiny, 1000);
    single_equals_multi(FbcParams { key: CandidateKey::Rolling, ..FbcParams::paper() }, 1000);
}

fn single_equals_multi(params: FbcParams, min_frequent: usize) {
    let vs = versions(400_000, 6, 20, 77);
    let configs = [
        Workers { workers: 1, buffers: 1 },
        Workers { workers: 1, buffers: 2 },
        Workers { workers: 1, buffers: 0 },
        Workers { workers: 2, buffers: 0 },
        Workers { workers: 3, buffers: 7 },
        Workers { workers: 4, buffers: 1 },
    ];
    let mut single = Fbc::new(params.clone()).unwrap();
    let mut single_stats = Vec::new();
    for v in &vs {
        single_stats.push(single.observe(v, Workers::single()).unwrap());
    }
    assert!(single.state().frequent_len(5) > min_frequent, "the data should have frequent candidates");
    let single_chunks: Vec<_> = vs.iter().map(|v| single.chunk(v, Workers::single()).unwrap()).collect();
    for (v, (c, st)) in vs.iter().zip(&single_chunks) {
        check_fbc_chunks(&single, v, c);
        assert_eq!(st.workers, 0);
    }
    assert!(single_chunks.iter().map(|(_, s)| s.frequent_cut).sum::<u64>() > 1000);
    for w in configs {
        let mut multi = Fbc::new(params.clone()).unwrap();
        for (v, s1) in vs.iter().zip(&single_stats) {
            let st = multi.observe(v, w).unwrap();
            if cfg!(feature = "parallel") {
                assert_eq!(st.workers, w.workers);
                assert_eq!(st.buffers, w.buffers_or_default());
            }
            let strip = |mut s: cutpoint_core::mtfbc::RunStats| {
                s.workers = 0;
                s.buffers = 0;
                s.master_waits = 0;
                s
            };
            assert_eq!(strip(st), strip(*s1), "{w:?}: pass-1 stats differ");
        }
        assert!(multi.state() == single.state(), "{w:?}: frequency state differs from single stream");
        for (v, (c1, _)) in vs.iter().zip(&single_chunks) {
            let (c, _) = multi.chunk(v, w).unwrap();
            assert_eq!(&c, c1, "{w:?}: chunks differ from single stream");
        }
    }
}

/// Random data with a 4 KiB block planted at 40 random places: pass 1 must find the block's
/// sub-chunks frequent and pass 2 must cut them out; a plain TTTD run cannot dedup them.
#[test]
fn fbc_isolates_planted_frequent_substrings() {
    for key in [CandidateKey::Blake3, CandidateKey::Rolling] {
        planted_case(FbcParams { key, ..FbcParams::paper() });
    }
}

fn planted_case(params: FbcParams) {
    let planted = random_bytes(4096, 1234);
    let mut rng = Rng(99);
    let mut data = Vec::new();
    let mut spots = Vec::new();
    for _ in 0..40 {
        let gap = 20_000 + rng.below(30_000) as usize;
        data.extend_from_slice(&random_bytes(gap, rng.below(u64::MAX)));
        spots.push(data.len());
        data.extend_from_slice(&planted);
    }
    data.extend_from_slice(&random_bytes(10_000, 3));

    let mut fbc = Fbc::new(params.clone()).unwrap();
    // Before pass 1 the state is empty: FBC gives TTTD's chunks.
    let (c0, _) = fbc.chunk(&data, Workers::single()).unwrap();
    let tttd_cuts = fbc.tttd().cuts(&data);
    assert_eq!(c0.iter().map(|c| (c.offset + c.length as u64) as usize).collect::<Vec<_>>(), tttd_cuts);
    assert!(c0.iter().all(|c| !c.frequent));

    fbc.observe(&data, Workers::threads(2)).unwrap();
    let (chunks, st) = fbc.chunk(&data, Workers::threads(2)).unwrap();
    check_fbc_chunks(&fbc, &data, &chunks);
    assert!(st.frequent_cut > 0);

    // Every frequent chunk lies inside a planted copy (random data elsewhere never repeats).
    let inside = |off: usize, len: usize| spots.iter().any(|&s| off >= s && off + len <= s + planted.len());
    let mut covered = 0usize;
    for c in chunks.iter().filter(|c| c.frequent) {
        assert!(inside(c.offset as usize, c.length), "frequent chunk at {} is not planted data", c.offset);
        covered += c.length;
    }
    // Most planted bytes end up in frequent chunks (the greedy choice leaves gaps of about one
    // sample interval between chosen sub-chunks, and coarse boundaries split a few windows).
    let total = spots.len() * planted.len();
    assert!(covered * 10 >= total * 6, "frequent chunks cover {covered} of {total} planted bytes");

    // Dedup: the planted copies are stored about once under FBC, not under TTTD.
    let unique = |spans: Vec<(usize, usize)>| {
        let mut seen = HashSet::new();
        spans.into_iter().filter(|&(o, l)| seen.insert(blake3::hash(&data[o..o + l]))).map(|(_, l)| l).sum::<usize>()
    };
    let fbc_unique = unique(chunks.iter().map(|c| (c.offset as usize, c.length)).collect());
    let mut prev = 0;
    let tttd_unique = unique(
        tttd_cuts
            .iter()
            .map(|&c| {
                let s = (prev, c - prev);
                prev = c;
                s
            })
            .collect(),
    );
    assert!(
        fbc_unique + total / 2 < tttd_unique,
        "FBC stores {fbc_unique} unique bytes, TTTD {tttd_unique}: the planted {total} bytes were not deduplicated"
    );

    // With a threshold above the 40 copies nothing is frequent, and FBC gives TTTD's chunks.
    let mut strict = Fbc::new(FbcParams { threshold: 1000, ..params.clone() }).unwrap();
    let c = strict.observe_and_chunk(&data, Workers::single()).unwrap();
    assert!(c.iter().all(|c| !c.frequent));
    assert_eq!(c.len(), tttd_cuts.len());
    // The counting table saw the planted candidates: about 4096/32 distinct ones, 39 counts each.
    let est = strict.estimate(&planted[1000..1512]);
    assert!(est == 0 || est == 40, "estimate of a planted window: {est}");
    // Some planted window was examined: estimate them all, at least one must be 40.
    let best = (0..=planted.len() - 512).map(|i| strict.estimate(&planted[i..i + 512])).max().unwrap();
    assert_eq!(best, 40, "{:?}: no planted window was counted 40 times", params.key);
    assert!(strict.state().frequent_len(40) > 50, "planted candidates not counted");
}

#[test]
fn fbc_empty_and_tiny_inputs() {
    let mut fbc = Fbc::new(FbcParams::paper()).unwrap();
    for w in [Workers::single(), Workers::threads(2)] {
        let st = fbc.observe(&[], w).unwrap();
        assert_eq!(st.coarse_chunks, 0);
        assert!(fbc.chunk(&[], w).unwrap().0.is_empty());
        let one = fbc.chunk(&[7], w).unwrap().0;
        assert_eq!(one, vec![FbcChunk { offset: 0, length: 1, frequent: false }]);
        let small = random_bytes(511, 1);
        fbc.observe(&small, w).unwrap();
        let c = fbc.chunk(&small, w).unwrap().0;
        check_fbc_chunks(&fbc, &small, &c);
    }
    fbc.reset();
    assert_eq!(fbc.state().table_len(), 0);
}
