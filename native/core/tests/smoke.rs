use cutpoint_core::*;

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    (0..n).map(|_| { s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407); (s >> 33) as u8 }).collect()
}

#[test]
fn engines_equal_reference() {
    let data = bytes(3 << 20, 1);
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k", "gear:2k:8k:64k", "gear:2k:8k:64k:nc=0", "crc32:256:512:1k"] {
        let p: Profile = prof.parse().unwrap();
        let want = reference_cuts(&p, &data);
        assert_eq!(sequential_cuts(&p, &data), want, "{prof} sequential");
        for b in backend::available() {
            for threads in [1, 2, 3] {
                for seg in [None, Some(1), Some(777), Some(1 << 30)] {
                    if seg == Some(1) && threads != 2 { continue; }
                    let e = Engine::new(p.clone(), Options { backend: Some(b), threads, segment_size: seg, span: 100_000, hash: HashAlg::None }).unwrap();
                    assert_eq!(e.cuts(&data), want, "{prof} {b} t{threads} seg{seg:?}");
                    let streamed: Vec<usize> = e.stream(&data[..]).map(|c| { let c = c.unwrap(); c.offset as usize + c.length }).collect();
                    assert_eq!(streamed, want, "{prof} {b} stream");
                }
            }
        }
    }
}
