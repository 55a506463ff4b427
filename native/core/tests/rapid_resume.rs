//! `Engine::resume` / `scan_resumed`: regular chunking resumed at any boundary, over any
//! blocks, equals the reference chunker run on the input from that boundary.

use cutpoint_core::{datagen, reference_cuts, Engine, HashAlg, Options, Profile};

fn engines(p: &Profile) -> Vec<Engine> {
    let mut v = Vec::new();
    for b in cutpoint_core::backend::available() {
        for threads in [1, 3] {
            v.push(
                Engine::new(
                    p.clone(),
                    Options {
                        backend: Some(b),
                        threads,
                        hash: HashAlg::None,
                        ..Options::default()
                    },
                )
                .unwrap(),
            );
        }
    }
    v
}

#[test]
fn resumed_scans_equal_reference_from_start() {
    let data = datagen::random_bytes(300_000, 11);
    for prof in [
        "gear:2k:8k:64k",
        "crc32:1k:4k:16k",
        "rabin:4k:8k:12k",
        "gear:256:1k:4k:nc=1",
    ] {
        let p: Profile = prof.parse().unwrap();
        for e in engines(&p) {
            for start in [0usize, 1, 777, 50_000, 299_000] {
                let want: Vec<usize> = reference_cuts(&p, &data[start..])
                    .into_iter()
                    .map(|c| c + start)
                    .collect();
                for step in [17usize, 4096, 100_000] {
                    let mut r = e.resume(start);
                    let mut got = Vec::new();
                    while r.next_position() < data.len() {
                        let q = (r.next_position() + step).min(data.len());
                        e.scan_resumed(&mut r, &data, 0, q, &mut got).unwrap();
                    }
                    r.finish(data.len(), &mut got);
                    assert_eq!(
                        got,
                        want,
                        "{prof} backend {} start {start} step {step}",
                        e.backend().name()
                    );
                }
            }
        }
    }
}

#[test]
fn resumed_scan_over_a_window_of_the_input() {
    // The buffer may hold only part of the input (streaming): base > 0.
    let data = datagen::random_bytes(200_000, 5);
    let p: Profile = "gear:2k:8k:64k".parse().unwrap();
    let e = Engine::new(
        p.clone(),
        Options {
            threads: 2,
            hash: HashAlg::None,
            ..Options::default()
        },
    )
    .unwrap();
    let start = 100_000;
    let base = start + p.min - p.window;
    let mut r = e.resume(start);
    let mut got = Vec::new();
    e.scan_resumed(&mut r, &data[base..], base, data.len(), &mut got)
        .unwrap();
    r.finish(data.len(), &mut got);
    let want: Vec<usize> = reference_cuts(&p, &data[start..])
        .into_iter()
        .map(|c| c + start)
        .collect();
    assert_eq!(got, want);
    // One byte too few before the first position is an error, not a panic.
    let mut r = e.resume(start);
    assert!(e
        .scan_resumed(&mut r, &data[base + 1..], base + 1, data.len(), &mut got)
        .is_err());
}
