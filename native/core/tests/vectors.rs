//! The shared vectors `tests/vectors/*.json` (repository root):
//! * the checked-in files equal the generator's output byte for byte (rewrite them with
//!   `cargo run --release -p cutpoint-core --example gen_vectors -- ../tests/vectors`);
//! * every engine reproduces the expected cuts and fingerprints read from the files, with the
//!   inputs regenerated from the files' own descriptions (as another language would).

mod common;

use common::vectors::{self, Input};
use common::Config;
use cutpoint_core::{hex, reference_cuts, sequential_cuts, HashAlg, Profile};
use std::path::PathBuf;

fn dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

#[test]
fn generator_matches_known_bytes() {
    // Cross-checked with an independent implementation (Python, arbitrary-precision ints).
    assert_eq!(vectors::xorshift_bytes(1, 4), [0x47, 0xab, 0xb9, 0x4d]);
    assert_eq!(Input::LowEntropy { seed: 1, length: 4 }.bytes(), b"bccb");
    assert_eq!(Input::Repeat { seed: 1, period: 2, length: 5 }.bytes(), [0x47, 0xab, 0x47, 0xab, 0x47]);
}

#[test]
fn checked_in_files_equal_generator_output() {
    let mut stale = Vec::new();
    for (stem, profile) in vectors::PROFILES {
        let path = dir().join(format!("{stem}.json"));
        let on_disk = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        if on_disk != vectors::render(profile) {
            stale.push(path.display().to_string());
        }
    }
    // No stray files the generator does not write.
    let mut names: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".json"))
        .collect();
    names.sort();
    let mut want: Vec<String> = vectors::PROFILES.iter().map(|(s, _)| format!("{s}.json")).collect();
    want.sort();
    assert_eq!(names, want, "tests/vectors holds files the generator does not write");
    assert!(
        stale.is_empty(),
        "vector files differ from the generator's output (rerun gen_vectors, review the diff): {stale:?}"
    );
}

fn strings(v: &serde_json::Value, key: &str) -> Vec<String> {
    v[key].as_array().unwrap_or_else(|| panic!("missing {key}")).iter().map(|x| x.as_str().unwrap().to_string()).collect()
}

#[test]
fn every_engine_reproduces_the_vectors() {
    let backends = common::backends();
    let mut files = 0;
    let mut cases = 0;
    for (stem, _) in vectors::PROFILES {
        let path = dir().join(format!("{stem}.json"));
        let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert!(v["_comment"].as_str().unwrap().contains("xorshift64star"), "{stem}: _comment must explain the inputs");
        let p: Profile = v["profile"].as_str().unwrap().parse().unwrap();
        assert_eq!(p.to_string(), v["profile"].as_str().unwrap(), "{stem}: profile not canonical");
        assert_eq!((p.window, p.min, p.avg, p.max), (
            v["window"].as_u64().unwrap() as usize,
            v["min"].as_u64().unwrap() as usize,
            v["avg"].as_u64().unwrap() as usize,
            v["max"].as_u64().unwrap() as usize,
        ));
        let mut configs = Vec::new();
        for &b in &backends {
            for (threads, seg, span) in [(1, None, 0), (2, Some(1021), 4096), (3, None, 1000), (8, Some(1 << 30), 64)] {
                configs.push(Config { backend: b, threads, lane_segment: seg, span });
            }
        }
        let engines: Vec<_> = configs
            .iter()
            .enumerate()
            .map(|(i, c)| (c, c.engine(&p, if i % 2 == 0 { HashAlg::Blake3 } else { HashAlg::Sha256 })))
            .collect();
        let mut max_cut_seen = false;
        for case in v["cases"].as_array().unwrap() {
            let input = Input::from_json(&case["input"]).unwrap();
            let data = input.bytes();
            let cuts: Vec<usize> = case["cuts"].as_array().unwrap().iter().map(|x| x.as_u64().unwrap() as usize).collect();
            let b3 = strings(case, "blake3");
            let sha = strings(case, "sha256");
            let what = format!("{stem} {}", case["note"]);
            assert_eq!(b3.len(), cuts.len(), "{what}");
            assert_eq!(sha.len(), cuts.len(), "{what}");
            common::check_invariants(&p, data.len(), &cuts).unwrap_or_else(|e| panic!("{what}: {e}"));
            assert_eq!(reference_cuts(&p, &data), cuts, "{what}: reference");
            assert_eq!(sequential_cuts(&p, &data), cuts, "{what}: sequential");
            let mut s = 0;
            for (i, &e) in cuts.iter().enumerate() {
                max_cut_seen |= e - s == p.max;
                assert_eq!(hex(&HashAlg::Blake3.digest(&data[s..e]).unwrap()), b3[i], "{what}: blake3 of chunk {i}");
                assert_eq!(hex(&HashAlg::Sha256.digest(&data[s..e]).unwrap()), sha[i], "{what}: sha256 of chunk {i}");
                s = e;
            }
            for (k, (c, e)) in engines.iter().enumerate() {
                let sizes: &[usize] = [&[1][..], &[7, 0, 4093][..], &[65536][..], &[64 << 20][..]][k % 4];
                let want_hex = if e.hash_alg() == HashAlg::Blake3 { &b3 } else { &sha };
                let got: Vec<String> = e.chunks(&data).map(|c| hex(&c.hash.unwrap())).collect();
                assert_eq!(&got, want_hex, "{what}: {c:?} chunks() fingerprints");
                let got: Vec<String> = e
                    .stream(common::Pieces::new(&data, sizes))
                    .map(|c| hex(&c.unwrap().hash.unwrap()))
                    .collect();
                assert_eq!(&got, want_hex, "{what}: {c:?} stream({sizes:?}) fingerprints");
                common::check_engine(e, &data, &cuts, sizes).unwrap_or_else(|err| panic!("{what}: {c:?}: {err}"));
            }
            cases += 1;
        }
        assert!(max_cut_seen, "{stem}: no case exercises a MAX cut");
        files += 1;
    }
    assert_eq!(files, vectors::PROFILES.len());
    assert!(cases >= 7 * 15, "only {cases} cases");
}
