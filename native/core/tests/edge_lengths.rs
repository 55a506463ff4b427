//! Edge-length table (in the manner of BLAKE3's `TEST_CASES`): input lengths at every edge the
//! engines care about, each commented, for every backend × threads {1,2,3,8} × segment sizes
//! {1 (tiny), 1021 (odd), automatic, huge} × block spans {1000 (odd, so blocks edges fall off
//! the 64-bit words), default 1 MiB}, for all three families, on random, low-entropy and
//! constant data; `cuts()`, `chunks()` and `stream()` must equal `reference_cuts`.

mod common;

use common::vectors::Input;
use common::{check_engine, check_invariants, Config};
use cutpoint_core::{reference_cuts, sequential_cuts, Engine, HashAlg, Profile};

/// The per-thread block span used for the block-edge entries.
const SPAN: usize = 1000;
/// The odd segment size.
const SEG: usize = 1021;

/// (length, why). Stage 1 scans positions `[W, len)` (a cut at `e` needs the window
/// `[e - W, e)`), so most edges are `W + something`.
fn table(p: &Profile) -> Vec<(usize, String)> {
    let (w, min, avg, max) = (p.window, p.min, p.avg, p.max);
    let mut t: Vec<(usize, String)> = Vec::new();
    let mut add = |len: usize, why: &str| t.push((len, why.to_string()));
    add(0, "empty input: no chunks at all");
    add(1, "one byte: one chunk, shorter than the window");
    add(w - 1, "W-1: no complete window, no position is scanned");
    add(w, "W: exactly one window; the only position is the end of input");
    add(w + 1, "W+1: one scanned position");
    add(min - 1, "MIN-1: a single short last chunk");
    add(min, "MIN: a cut could only be at the end of input");
    add(min + 1, "MIN+1: the first position that may cut is MIN");
    add(avg - 1, "AVG-1: strict class up to here (gear, nc>0)");
    add(avg, "AVG: the class switches at AVG");
    add(avg + 1, "AVG+1: loose class from AVG on");
    add(max - 1, "MAX-1: one below the forced cut");
    add(max, "MAX: forced cut coincides with the end");
    add(max + 1, "MAX+1: a forced cut, then a 1-byte chunk (if no candidate)");
    add(2 * max - 1, "2·MAX-1: second chunk one short of MAX");
    add(2 * max + 1, "2·MAX+1: two forced cuts then one byte");
    add(w + 63, "W+63: positions fill one bitmap word but one");
    add(w + 64, "W+64: exactly one bitmap word of positions");
    add(w + 65, "W+65: one position in the second word");
    add(w + 511, "W+511: stage 2's 512-bit skip, one short");
    add(w + 512, "W+512: exactly one 512-bit skip");
    add(w + 513, "W+513: one past the 512-bit skip");
    for lanes in [4usize, 8, 16] {
        // Vector width × 64 positions: with the automatic segment size each lane gets 64 positions.
        add(w + lanes * 64 - 1, &format!("W+{lanes}·64-1: {lanes} lanes × one word, one short"));
        add(w + lanes * 64 + 1, &format!("W+{lanes}·64+1: {lanes} lanes × one word, one over"));
        add(w + lanes * w.max(64) * 4 - 1, &format!("W+{lanes}·4·max(W,64)-1: below the interleaved kernel's split threshold"));
        add(w + lanes * w.max(64) * 4 + 1, &format!("W+{lanes}·4·max(W,64)+1: above the interleaved kernel's split threshold"));
    }
    add(w + SEG - 1, "W+SEG-1: one odd segment, one short");
    add(w + SEG, "W+SEG: exactly one odd segment");
    add(w + SEG + 1, "W+SEG+1: a second segment of one position");
    add(w + 2 * SEG + 1, "W+2·SEG+1: third segment of one position");
    for threads in [1usize, 2, 3, 8] {
        let block = SPAN.max(64) * Engine::spans_per_block(threads);
        add(w + SPAN.max(64) * threads + 1, &format!("W+{threads}·SPAN+1: one span per thread and one position"));
        add(w + block - 1, &format!("W+{block}-1: one block of {threads} thread spans, one short"));
        add(w + block, &format!("W+{block}: exactly one block ({threads} threads)"));
        add(w + block + 1, &format!("W+{block}+1: a second block of one position ({threads} threads)"));
        add(w + 2 * block + 1, &format!("W+2·{block}+1: a third block of one position ({threads} threads)"));
        // Thread spans inside a block are 64-aligned: ceil(ceil(n/threads)/64)·64.
        add(w + threads * 64 + 1, &format!("W+{threads}·64+1: {threads} thread spans of one word, one over"));
    }
    t.retain(|(len, _)| *len <= 3 * max + 3 * SPAN * 16);
    // Keep the first reason for each length.
    let mut seen = std::collections::HashSet::new();
    t.retain(|(len, _)| seen.insert(*len));
    t
}

fn configs() -> Vec<Config> {
    let mut v = Vec::new();
    for backend in common::backends() {
        for threads in [1, 2, 3, 8] {
            for lane_segment in [Some(1), Some(SEG), None, Some(1 << 30)] {
                v.push(Config { backend, threads, lane_segment, span: SPAN });
            }
            // The default span (1 MiB): every input here is one block.
            v.push(Config { backend, threads, lane_segment: None, span: 0 });
        }
    }
    v
}

const READS: [&[usize]; 5] = [&[1], &[7, 13, 0, 1021], &[4096], &[65537, 3], &[64 << 20]];

fn run_family(profiles: &[&str]) {
    let configs = configs();
    let mut checked = 0usize;
    for prof in profiles {
        let p: Profile = prof.parse().unwrap();
        let engines: Vec<_> = configs.iter().map(|c| (c, c.engine(&p, HashAlg::None))).collect();
        for (len, why) in table(&p) {
            let inputs = [
                Input::Xorshift { seed: 1 + len as u64, length: len },
                if len % 2 == 0 {
                    Input::LowEntropy { seed: 7 + len as u64, length: len }
                } else {
                    Input::Fill { byte: 0, length: len }
                },
            ];
            for input in inputs {
                let data = input.bytes();
                let want = reference_cuts(&p, &data);
                check_invariants(&p, len, &want).unwrap_or_else(|e| panic!("{prof} {why}: reference: {e}"));
                assert_eq!(sequential_cuts(&p, &data), want, "{prof} len {len} ({why}) {input:?}: sequential");
                for (k, (c, e)) in engines.iter().enumerate() {
                    // Segments of one byte re-warm a W-byte window per position: keep them to
                    // inputs where that stays cheap.
                    if c.lane_segment == Some(1) && len * p.window > 4 << 20 {
                        continue;
                    }
                    // cuts() for every config; chunks() and stream() (rotating read sizes) for
                    // every third one, rotating with the length so each config meets them.
                    let res = if (k + len) % 3 == 0 {
                        check_engine(e, &data, &want, READS[(k / 3 + len) % READS.len()])
                    } else {
                        let got = e.cuts(&data);
                        if got == want { Ok(()) } else { Err(format!("cuts() {got:?} != reference {want:?}")) }
                    };
                    res.unwrap_or_else(|err| panic!("{prof} len {len} ({why}) {input:?} {c:?}: {err}"));
                    checked += 1;
                }
            }
        }
    }
    assert!(checked > 1000, "only {checked} engine runs");
}

#[test]
fn edge_lengths_crc32() {
    // Paper-sized window with small sizes; and a dense profile (a candidate every 128 positions).
    run_family(&["crc32:512:2k:8k", "crc32:64:128:1k:window=32"]);
}

#[test]
fn edge_lengths_rabin() {
    run_family(&["rabin:256:1k:4k", "rabin:48:64:512:magic=5"]);
}

#[test]
fn edge_lengths_gear() {
    // nc=2 (default) two classes; nc=0 one class; dense nc=1.
    run_family(&["gear:256:1k:4k", "gear:64:128:1k:nc=1", "gear:128:256:2k:nc=0"]);
}

/// Block edges at the default span (1 MiB per thread): lengths `W + threads·1 MiB ± 1`, where
/// the engine starts a second block (and the stream a second fill) with one position in it.
#[test]
fn edge_lengths_default_span_blocks() {
    const MIB: usize = 1 << 20;
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k", "gear:2k:8k:64k"] {
        let p: Profile = prof.parse().unwrap();
        let w = p.window;
        let big = Input::Xorshift { seed: 77, length: w + 2 * MIB + 1 }.bytes();
        let mut runs = 0;
        for threads in [1usize, 2] {
            let engines: Vec<_> = common::backends()
                .into_iter()
                .flat_map(|backend| {
                    [None, Some(SEG)].map(|lane_segment| Config { backend, threads, lane_segment, span: 0 })
                })
                .map(|c| (c.engine(&p, HashAlg::None), c))
                .collect();
            for (len, why) in [
                (w + threads * MIB - 1, "W+block-1: one block, one position short"),
                (w + threads * MIB, "W+block: exactly one block"),
                (w + threads * MIB + 1, "W+block+1: a second block of one position"),
            ] {
                let data = &big[..len];
                let want = reference_cuts(&p, data);
                for (k, (e, c)) in engines.iter().enumerate() {
                    let res = if k % 2 == 0 {
                        check_engine(e, data, &want, READS[(k / 2 + len) % READS.len()])
                    } else {
                        let got = e.cuts(data);
                        if got == want { Ok(()) } else { Err("cuts() differs from reference".to_string()) }
                    };
                    res.unwrap_or_else(|err| panic!("{prof} len {len} ({why}) {c:?}: {err}"));
                    runs += 1;
                }
            }
        }
        assert!(runs >= 2 * 3 * 4, "{prof}: only {runs} runs");
    }
}
