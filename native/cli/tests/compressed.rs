//! Compressed frames (pack codec 1 = zstd, PROTOCOL.md 3.1) against a real `cutpoint serve`,
//! over both backends: a zstd pack is stored as it came, commits check raw lengths, restores
//! (whole, ranged, after gc's rewrite, after the index is rebuilt from the packs) are
//! byte-identical, `check` passes; and every defect of a compressed frame is a 400 with nothing
//! stored.

mod common;
use common::*;
use cutpoint_core::protocol::codec::{Codec, Compressor, COMPRESSED};
use cutpoint_core::protocol::pack::{encode_frame_head, encode_heads_first_frames, encode_pack_header, FrameHead, Layout, PackWriter, FRAME_HEAD_LEN, HEADER_LEN};
use cutpoint_core::{Digest, HashAlg};
use serde_json::Value;

crate::both_backends!(compressed_packs_are_stored_restored_and_collected, bad_compressed_frames_get_400_and_nothing_stored);

/// Compressible text, different per seed.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let words = ["chunk ", "store ", "zstd ", "frame ", "pack ", "delta ", "recipe "];
    let mut x = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(words[(x % 7) as usize].as_bytes());
    }
    out.truncate(n);
    out
}

/// (id, stored data, compressed) of each chunk: compressed where that saves.
fn frames(chunks: &[(Digest, Vec<u8>)]) -> Vec<(Digest, Vec<u8>, bool)> {
    let mut c = Compressor::new(3);
    chunks
        .iter()
        .map(|(id, raw)| {
            let mut z = Vec::new();
            let comp = c.compress(raw, &mut z);
            (*id, if comp { z } else { raw.clone() }, comp)
        })
        .collect()
}

fn zpack(fr: &[(Digest, Vec<u8>, bool)], layout: Layout) -> Vec<u8> {
    match layout {
        Layout::Framed => {
            let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
            for (id, d, c) in fr {
                w.add_frame(id, d, *c).unwrap();
            }
            w.finish().unwrap()
        }
        Layout::HeadsFirst => {
            let l: Vec<_> = fr.iter().map(|(i, d, c)| (*i, &d[..], *c)).collect();
            encode_heads_first_frames(HashAlg::Blake3, Codec::Zstd, &l).unwrap()
        }
    }
}

fn compressed_packs_are_stored_restored_and_collected(b: Backend) {
    let dir = tmpdir(&format!("zstd-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let mut srv = Server::start(&store, &[], &[]);
    let (s, _, body) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let info = json(&body);
    assert!(info["features"].as_array().unwrap().iter().any(|f| f == "zstd"), "{info}");
    let u = |srv: &Server, tail: &str| format!("{}/v1/ns/default/{tail}", srv.url);
    // File a: text chunks (compressed) and one random chunk (raw), framed; file b: heads first.
    let mut a = text(60_000, 1);
    a.extend(data(5_000, 2));
    let ca = chunks_of(&a, &[20_000, 20_000, 20_000, 5_000]);
    let fa = frames(&ca);
    assert_eq!(fa.iter().filter(|f| f.2).count(), 3);
    let bb = text(50_000, 3);
    let cb = chunks_of(&bb, &[25_000, 25_000]);
    let fb = frames(&cb);
    // Pack 1 (framed): a's first chunk and b's; pack 2 (heads first): a's others.
    let p1 = zpack(&[fa[..1].to_vec(), fb.clone()].concat(), Layout::Framed);
    let p2 = zpack(&fa[1..], Layout::HeadsFirst);
    assert!(p1.len() + p2.len() < (a.len() + bb.len()) / 2, "{} bytes for {}", p1.len() + p2.len(), a.len() + bb.len());
    for p in [&p1, &p2] {
        let (s, _, body) = http("POST", &u(&srv, "packs"), None, &[], Some(p));
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    }
    // At rest the packs stay compressed.
    let disk: u64 = walk_files(&srv.data).iter().map(|p| std::fs::metadata(p).unwrap().len()).sum();
    assert!(disk < (a.len() + bb.len()) as u64 / 2, "{disk} bytes at rest");
    // A commit names raw lengths: the stored length of a compressed chunk is refused.
    let good = recipe_text(&ca);
    let mut r = cutpoint_core::rapid::Recipe::read(&good[..]).unwrap();
    r.entries[0].size = fa[0].1.len() as u32;
    r.digest = cutpoint_core::protocol::FileDigest::of(&r);
    let mut bad = Vec::new();
    r.write(&mut bad).unwrap();
    let (s, _, body) = http("PUT", &u(&srv, "files/a"), None, &[], Some(&bad));
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("bytes in the store"), "{}", String::from_utf8_lossy(&body));
    let (s, _, body) = http("PUT", &u(&srv, "files/a"), None, &[], Some(&good));
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
    let (s, _, body) = http("PUT", &u(&srv, "files/b"), None, &[], Some(&recipe_text(&cb)));
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
    // Restores decompress on the way: whole, and a range across a compressed/raw boundary.
    assert_eq!(srv.pull("a", None, &[]), a);
    assert_eq!(srv.pull("b", None, &[]), bb);
    let (s, _, body) = http("GET", &u(&srv, "files/a"), None, &[("Range", "bytes=39990-60009")], None);
    assert_eq!(s, 206);
    assert_eq!(body, &a[39990..60010]);
    let c: Value = srv.check(&[]);
    assert!(c["problems"].as_array().map_or(true, |p| p.is_empty()), "{c}");
    // Duplicates sent raw again are not stored twice; the compressed copy still serves.
    let (s, _, _) = http("POST", &u(&srv, "packs"), None, &[], Some(&pack(&cb)));
    assert_eq!(s, 200);
    assert_eq!(srv.pull("b", None, &[]), bb);
    // The index rebuilt from the packs alone knows the raw lengths again.
    srv.kill();
    let _ = std::fs::remove_file(srv.cache.join("index.sqlite"));
    srv = Server::start(&store, &[], &[]);
    assert_eq!(srv.pull("a", None, &[]), a);
    // gc's rewrite copies frames as they are: pack 1 is rewritten with a's compressed chunk.
    let out = srv.cli(&["rm", "b"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let g: Value = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["packs_rewritten"].as_u64(), Some(1), "{g}");
    assert_eq!(srv.pull("a", None, &[]), a);
    let c: Value = srv.check(&[]);
    assert!(c["problems"].as_array().map_or(true, |p| p.is_empty()), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}

fn walk_files(p: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    if let Ok(d) = std::fs::read_dir(p) {
        for e in d.flatten() {
            if e.path().is_dir() {
                out.extend(walk_files(&e.path()));
            } else if e.path().to_string_lossy().contains("/packs/") {
                out.push(e.path());
            }
        }
    }
    out
}

fn bad_compressed_frames_get_400_and_nothing_stored(b: Backend) {
    let dir = tmpdir(&format!("zstd-bad-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let url = format!("{}/v1/ns/default/packs", srv.url);
    let raw = text(8192, 7);
    let ch = vec![(HashAlg::Blake3.digest(&raw).unwrap(), raw.clone())];
    let fr = frames(&ch);
    assert!(fr[0].2);
    let good = zpack(&fr, Layout::Framed);
    let at = HEADER_LEN + FRAME_HEAD_LEN;
    let with = |f: &dyn Fn(&mut Vec<u8>)| {
        let mut q = good.clone();
        f(&mut q);
        q
    };
    let set_raw = |n: u32| move |q: &mut Vec<u8>| q[at..at + 4].copy_from_slice(&n.to_le_bytes());
    let zlen = fr[0].1.len();
    // A bomb: 64 MiB of zeros in a few hundred bytes, declared as 8 KiB of a real chunk's id.
    let bomb_z = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
    let mut bomb = 8192u32.to_le_bytes().to_vec();
    bomb.extend_from_slice(&bomb_z);
    let mut bw = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
    bw.add_frame(&HashAlg::Blake3.digest(&[0u8; 8192]).unwrap(), &bomb, true).unwrap();
    let bomb_pack = bw.finish().unwrap();
    // A truncated zstd stream: the frame cut short (its head says so).
    let cut = {
        let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, Codec::Zstd).unwrap().to_vec();
        let l = (zlen - 10) as u32;
        q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: l, id: fr[0].0, compressed: true }));
        q.extend_from_slice(&fr[0].1[..zlen - 10]);
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 1 }));
        q
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("bit 31 with codec 0", with(&|q| q[10] = 0), "codec is 0"),
        ("unknown codec", with(&|q| q[10] = 7), "unknown codec 7"),
        ("raw length smaller", with(&set_raw(8000)), "declared 8000"),
        ("raw length larger", with(&set_raw(8200)), "decompresses to 8192"),
        ("raw length 0", with(&set_raw(0)), "raw length of 0"),
        ("raw length over MAX_CHUNK", with(&set_raw((64 << 20) + 1)), "raw length of"),
        ("saves nothing", with(&set_raw((zlen - 4) as u32)), "saves nothing"),
        ("corrupt zstd", with(&|q| q[at + 4..at + 8].copy_from_slice(b"XXXX")), "zstd"),
        ("wrong id", with(&|q| q[HEADER_LEN + 4] ^= 1), "(decompressed) hash to"),
        ("truncated zstd", cut, "zstd"),
        ("bomb", bomb_pack, "declared 8192"),
        ("too short", with(&|q| q[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&(4 | COMPRESSED).to_le_bytes())), "compressed frame of 4 bytes"),
    ];
    for (what, body, want) in cases {
        let (s, _, resp) = http("POST", &url, None, &[], Some(&body));
        let msg = String::from_utf8_lossy(&resp);
        assert_eq!(s, 400, "{what}: {msg}");
        assert!(msg.contains(want), "{what}: {msg}");
        assert!(!msg.contains(dir.to_str().unwrap()), "{what}: a server path in {msg}");
        assert_eq!(packs_on_disk(&srv.data), 0, "{what}: nothing stored");
        assert_eq!(srv.spool_files(), 0, "{what}: no spool left");
    }
    // The good one is taken.
    let (s, _, resp) = http("POST", &url, None, &[], Some(&good));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&resp));
    assert_eq!(packs_on_disk(&srv.data), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cutpoint push --compression auto` sends fewer bytes than `off` on compressible data (its
/// report says how many chunks went compressed), `max` fewer still or the same, and each pulls
/// back byte-identical; random data goes raw under auto.
#[test]
fn a_push_with_auto_sends_fewer_bytes_than_off_and_pulls_identical() {
    let dir = tmpdir("zstd-push");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let mut bytes = text(3 << 20, 11);
    bytes.extend(data(1 << 20, 12));
    let f = write(&dir, "f", &bytes);
    let sent = |ns: &str, how: &str| -> Value {
        let r = srv.push(&f, "f", &["--ns", ns, "--compression", how]);
        assert_eq!(srv.pull("f", None, &["--ns", ns]), bytes, "{how}");
        r
    };
    let off = sent("off", "off");
    let auto = sent("auto", "auto");
    let max = sent("max", "max");
    for r in [&off, &auto, &max] {
        assert_eq!(r["novel_bytes"].as_u64(), Some(bytes.len() as u64), "{r}");
    }
    assert_eq!(off["compressed_chunks"].as_u64(), Some(0), "{off}");
    assert_eq!(off["compressed_bytes"].as_u64(), Some(bytes.len() as u64), "{off}");
    let (o, a, m) = (off["sent_bytes"].as_u64().unwrap(), auto["sent_bytes"].as_u64().unwrap(), max["sent_bytes"].as_u64().unwrap());
    // The text (3/4 of the file) shrinks well; the random quarter travels raw.
    assert!(a < o * 2 / 4, "auto {a} vs off {o}");
    assert!(m <= a + a / 20, "max {m} vs auto {a}");
    assert!(auto["compressed_chunks"].as_u64().unwrap() > 0 && auto["compressed_bytes"].as_u64().unwrap() < a, "{auto}");
    let c: Value = srv.check(&["--ns", "auto"]);
    assert!(c["problems"].as_array().map_or(true, |p| p.is_empty()), "{c}");
    let _ = std::fs::remove_dir_all(&dir);
}
