//! Seeded differential fuzzing of every parser the server has (packs, deltas, queries, recipes,
//! ranges, names and namespaces, the Authorization header and the tokens file): valid bodies,
//! then mutated (bytes flipped, cut, spliced), through the shared checks of `common/wire_case.rs` (the cargo-fuzz target `wire` runs the same checks, unbounded).

#[path = "common/wire_case.rs"]
mod wire_case;

use cutpoint_core::protocol::{delta, pack::PackWriter, query::encode_ids};
use cutpoint_core::HashAlg;

fn seeds() -> Vec<Vec<u8>> {
    let base = wire_case::base();
    let mut p = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
    for i in 0..4u8 {
        let c = vec![i; 50 + i as usize];
        p.add(&HashAlg::Blake3.digest(&c).unwrap(), &c).unwrap();
    }
    let pack = p.finish().unwrap();
    let chunks: Vec<Vec<u8>> = (0..4u8).map(|i| vec![i; 50 + i as usize]).collect();
    let listed: Vec<_> = chunks.iter().map(|c| (HashAlg::Blake3.digest(c).unwrap(), &c[..])).collect();
    let heads_first = cutpoint_core::protocol::pack::encode_heads_first(HashAlg::Blake3, &listed).unwrap();
    let mut r = base.clone();
    r.entries.swap(1, 5);
    r.entries.truncate(6);
    r.digest = cutpoint_core::protocol::FileDigest::of(&r);
    let d = delta::encode(&r, &base, 1).unwrap();
    let mut recipe = Vec::new();
    base.write(&mut recipe).unwrap();
    let ids: Vec<_> = base.entries.iter().map(|e| e.fp).collect();
    // A zstd pack: two compressed frames and a raw one, heads first.
    let mut cx = cutpoint_core::protocol::codec::Compressor::new(3);
    let texts: Vec<Vec<u8>> = (0..3u8).map(|i| b"compress me, compress me ".repeat(4 + i as usize * 20)).collect();
    let zs: Vec<(cutpoint_core::Digest, Vec<u8>, bool)> = texts
        .iter()
        .map(|c| {
            let mut z = Vec::new();
            let comp = cx.compress(c, &mut z);
            (HashAlg::Blake3.digest(c).unwrap(), if comp { z } else { c.clone() }, comp)
        })
        .collect();
    let zlist: Vec<_> = zs.iter().map(|(i, d, c)| (*i, &d[..], *c)).collect();
    let zpack = cutpoint_core::protocol::pack::encode_heads_first_frames(HashAlg::Blake3, cutpoint_core::protocol::codec::Codec::Zstd, &zlist).unwrap();
    let tag = |t: u8, b: &[u8]| [&[t][..], b].concat();
    vec![tag(0, &pack), tag(1, &d), tag(2, &encode_ids(&ids)), tag(3, &recipe), tag(4, b"bytes=10-99"), tag(4, b"bytes=-5"), tag(4, b"bytes=3-"), tag(5, b"dir/file.txt"), tag(5, "caf\u{e9}/r\u{e9}sum\u{e9}.pdf".as_bytes()), tag(6, format!("Bearer {}", wire_case::TOKEN).as_bytes()), tag(0, &heads_first), tag(0, &zpack)]
}

#[test]
fn valid_bodies_pass_their_checks() {
    for s in seeds() {
        wire_case::check(&s).unwrap();
    }
    // scripts/fuzz.sh seeds the cargo-fuzz corpus of the `wire` target with these bodies.
    if let Some(dir) = std::env::var_os("CUTPOINT_FUZZ_SEEDS") {
        for (i, s) in seeds().iter().enumerate() {
            std::fs::write(std::path::Path::new(&dir).join(format!("seed-{i}")), s).unwrap();
        }
    }
    // And the valid ones are accepted, not merely not rejected badly.
    let s = seeds();
    assert_eq!(cutpoint_core::protocol::pack::decode_pack(&s[0][1..], true).unwrap().1.len(), 4);
    assert_eq!(cutpoint_core::protocol::pack::decode_upload(&s[10][1..], true).unwrap().1.len(), 4);
    let z = cutpoint_core::protocol::pack::decode_upload(&s[11][1..], true).unwrap().1;
    assert_eq!(z.iter().filter(|f| f.compressed).count(), 3, "{z:?}");
    assert_eq!(delta::parse(&s[1][1..]).unwrap().expand(&wire_case::base(), u64::MAX).unwrap().entries.len(), 6);
    assert!(cutpoint_core::protocol::name::validate_name(std::str::from_utf8(&s[8][1..]).unwrap()).is_ok());
    let grant = format!("{} a rw", cutpoint_core::hex(&HashAlg::Blake3.digest(wire_case::TOKEN.as_bytes()).unwrap()));
    let t = cutpoint_store::auth::Tokens::parse(&grant).unwrap();
    let h = std::str::from_utf8(&s[9][1..]).unwrap();
    assert!(cutpoint_store::auth::authorize(Some(&t), Some(h), "a", cutpoint_store::auth::Scope::Write).is_ok());
}

#[test]
fn mutated_bodies_never_panic_and_never_pass_wrong() {
    let mut x = 0x243F6A8885A308D3u64;
    let mut rnd = move |n: usize| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        (x % n.max(1) as u64) as usize
    };
    let seeds = seeds();
    for i in 0..20_000 {
        let mut b = seeds[i % seeds.len()].clone();
        for _ in 0..1 + rnd(4) {
            match rnd(4) {
                0 if b.len() > 1 => {
                    let at = 1 + rnd(b.len() - 1);
                    b[at] ^= 1 << rnd(8);
                }
                1 => {
                    let at = 1 + rnd(b.len());
                    b.truncate(at.min(b.len()));
                }
                2 => {
                    let at = 1 + rnd(b.len());
                    let junk: Vec<u8> = (0..rnd(40)).map(|_| rnd(256) as u8).collect();
                    b.splice(at.min(b.len())..at.min(b.len()), junk);
                }
                _ if b.len() > 2 => {
                    // Replace a byte with a digit, a space or a newline: stresses the text parsers.
                    let at = 1 + rnd(b.len() - 1);
                    b[at] = b"0123456789 \n-=,"[rnd(15)];
                }
                _ => {}
            }
        }
        if let Err(e) = wire_case::check(&b) {
            panic!("case {i}: {e}\ninput: {:?}", String::from_utf8_lossy(&b));
        }
    }
}
