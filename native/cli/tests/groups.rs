//! Group frames (pack codec 2, PROTOCOL.md 3.1) against a real `cutpoint serve`, over both
//! backends: groups uploaded in both layouts are stored as they came; restores (whole, a Range
//! starting inside a group's member, after the index is rebuilt from the packs, after gc's
//! rewrite of a pack whose groups hold live and dead chunks) are byte-identical and `check`
//! passes; an older codec-1 pack beside them still reads; every defect of a group is a 400 with
//! nothing stored; and `cutpoint push --compression auto` sends groups to a store that lists
//! `zstd-group`.

mod common;
use common::*;
use cutpoint_core::protocol::codec::{Codec, Compressor, COMPRESSED, GROUP_MEMBER};
use cutpoint_core::protocol::pack::{encode_frame_head, encode_pack_header, FrameHead, Layout, PackWriter, FRAME_HEAD_LEN, HEADER_LEN, MAX_GROUP_RAW};
use cutpoint_core::{Digest, HashAlg};
use serde_json::Value;

crate::both_backends!(groups_are_stored_restored_collected_and_reindexed, bad_groups_get_400_and_nothing_stored, a_store_without_groups_takes_none);

/// Compressible text, different per seed.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let words = ["chunk ", "store ", "zstd ", "group ", "pack ", "member ", "recipe "];
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

/// A codec-2 pack of `groups` of chunks, each written as one group (or chunk by chunk where a
/// group would not save); asserts each run of two or more became a group.
fn gpack(groups: &[&[(Digest, Vec<u8>)]]) -> Vec<u8> {
    let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Group).unwrap();
    let mut cx = Compressor::new(3);
    let (mut buf, mut z, mut offs) = (Vec::new(), Vec::new(), Vec::new());
    for g in groups {
        let list: Vec<(Digest, &[u8])> = g.iter().map(|(i, d)| (*i, &d[..])).collect();
        let out = w.add_group(&list, &mut cx, &mut buf, &mut z, &mut offs).unwrap();
        assert_eq!(out.grouped, g.len() > 1);
    }
    w.finish().unwrap()
}

/// The same pack heads first: every head, the end frame, then the data (members have none).
fn heads_first(framed: &[u8]) -> Vec<u8> {
    let mut heads = framed[..HEADER_LEN].to_vec();
    heads[9] = 1;
    let mut data = Vec::new();
    let mut at = HEADER_LEN;
    loop {
        let h = u32::from_le_bytes(framed[at..at + 4].try_into().unwrap());
        heads.extend_from_slice(&framed[at..at + FRAME_HEAD_LEN]);
        at += FRAME_HEAD_LEN;
        if h == 0 {
            return [heads, data].concat();
        }
        if h & GROUP_MEMBER == 0 || h & COMPRESSED != 0 {
            let n = (h & !COMPRESSED) as usize;
            data.extend_from_slice(&framed[at..at + n]);
            at += n;
        }
    }
}

fn ok(c: &Value) {
    assert!(c["problems"].as_array().is_none_or(|p| p.is_empty()), "{c}");
}

fn groups_are_stored_restored_collected_and_reindexed(b: Backend) {
    let dir = tmpdir(&format!("group-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let mut srv = Server::start(&store, &["--groups", "on"], &[]);
    let (s, _, body) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let info = json(&body);
    assert!(info["features"].as_array().unwrap().iter().any(|f| f == "zstd-group"), "{info}");
    let u = |srv: &Server, tail: &str| format!("{}/v1/ns/default/{tail}", srv.url);
    // a: 6 text chunks and a random one; b: 8 text chunks; c: an older codec-1 pack's.
    let mut a = text(30_000, 1);
    a.extend(data(4_000, 2));
    let ca = chunks_of(&a, &[5_000, 7_000, 3_000, 6_000, 4_000, 5_000, 4_000]);
    let bb = text(48_000, 3);
    let cb = chunks_of(&bb, &[6_000; 8]);
    let cc_bytes = text(20_000, 4);
    let cc = chunks_of(&cc_bytes, &[10_000, 10_000]);
    // Pack 1 (framed): a group of a's first two and b's first two chunks (shared), then a
    // b-only group; pack 2 (heads first): a group of a's next four, a's random chunk alone.
    let g1 = [ca[0].clone(), ca[1].clone(), cb[0].clone(), cb[1].clone()];
    let p1 = gpack(&[&g1, &cb[2..]]);
    let p2 = heads_first(&gpack(&[&ca[2..6], &ca[6..]]));
    assert_eq!(p2[9], 1);
    let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
    let mut cx = Compressor::new(3);
    for (id, d) in &cc {
        let mut z = Vec::new();
        assert!(cx.compress(d, &mut z));
        w.add_frame(id, &z, true).unwrap();
    }
    let p3 = w.finish().unwrap();
    for p in [&p1, &p2, &p3] {
        let (s, _, body) = http("POST", &u(&srv, "packs"), None, &[], Some(p));
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    }
    for (name, ch) in [("a", &ca), ("b", &cb), ("c", &cc)] {
        let (s, _, body) = http("PUT", &u(&srv, &format!("files/{name}")), None, &[], Some(&recipe_text(ch)));
        assert_eq!(s, 201, "{name}: {}", String::from_utf8_lossy(&body));
    }
    let restores_all = |srv: &Server| {
        assert_eq!(srv.pull("a", None, &[]), a);
        assert_eq!(srv.pull("b", None, &[]), bb);
        assert_eq!(srv.pull("c", None, &[]), cc_bytes);
        // A Range starting inside a group's member (a's second chunk, 5,000..12,000), across
        // into the next group and to its last member.
        let (s, _, body) = http("GET", &u(srv, "files/a"), None, &[("Range", "bytes=6001-20999")], None);
        assert_eq!(s, 206);
        assert_eq!(body, &a[6001..21000]);
        let (s, _, body) = http("GET", &u(srv, "files/b"), None, &[("Range", "bytes=13000-13010")], None);
        assert_eq!(s, 206);
        assert_eq!(body, &bb[13000..13011]);
    };
    restores_all(&srv);
    ok(&srv.check(&[]));
    // The index rebuilt from the packs alone (schema 7: members' raw offsets) restores the same.
    srv.kill();
    let _ = std::fs::remove_file(srv.cache.join("index.sqlite"));
    srv = Server::start(&store, &["--groups", "on"], &[]);
    restores_all(&srv);
    ok(&srv.check(&[]));
    // b deleted: pack 1's first group holds live (a's) and dead (b's) chunks, its second group
    // is dead. gc rewrites pack 1: the first group copied whole, only a's chunks indexed.
    let out = srv.cli(&["rm", "b"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let g: Value = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["packs_rewritten"].as_u64(), Some(1), "{g}");
    assert_eq!(srv.pull("a", None, &[]), a);
    assert_eq!(srv.pull("c", None, &[]), cc_bytes);
    let (s, _, body) = http("GET", &u(&srv, "files/a"), None, &[("Range", "bytes=6001-20999")], None);
    assert_eq!(s, 206);
    assert_eq!(body, &a[6001..21000]);
    ok(&srv.check(&[]));
    // b's chunks of the shared group are no longer indexed: a query finds them missing.
    let ids: Vec<u8> = cb.iter().flat_map(|c| c.0).collect();
    let (s, _, body) = http("POST", &u(&srv, "query"), None, &[], Some(&ids));
    assert_eq!(s, 200);
    assert_eq!(body.len(), ids.len(), "all of b's chunks are missing");
    // And after another rebuild from the packs (the rewritten pack's dead members stay
    // unreferenced; a restore of a still works).
    srv.kill();
    let _ = std::fs::remove_file(srv.cache.join("index.sqlite"));
    srv = Server::start(&store, &["--groups", "on"], &[]);
    assert_eq!(srv.pull("a", None, &[]), a);
    ok(&srv.check(&[]));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A codec-2 pack of one group written by hand: the first chunk's id, the declared raw total,
/// the zstd bytes of `raw`, then member heads `(raw length, id)`.
fn hand_group(first: Digest, total: u32, raw: &[u8], members: &[(u32, Digest)]) -> Vec<u8> {
    let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, Codec::Group).unwrap().to_vec();
    let mut data = total.to_le_bytes().to_vec();
    data.extend_from_slice(&zstd::bulk::compress(raw, 3).unwrap());
    q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: data.len() as u32, id: first, compressed: true }));
    q.extend_from_slice(&data);
    for &(r, id) in members {
        q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: r, id }));
    }
    q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 1 + members.len() as u64 }));
    q
}

fn bad_groups_get_400_and_nothing_stored(b: Backend) {
    let dir = tmpdir(&format!("group-bad-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--groups", "on"], &[]);
    let url = format!("{}/v1/ns/default/packs", srv.url);
    let d = |x: &[u8]| HashAlg::Blake3.digest(x).unwrap();
    let (x, y, z) = (text(3000, 1), text(2000, 2), text(1000, 3));
    let all = [x.clone(), y.clone(), z.clone()].concat();
    let good = hand_group(d(&x), 6000, &all, &[(2000, d(&y)), (1000, d(&z))]);
    let one = [7u8; 10];
    let many = vec![7u8; 10 * 257];
    let big = text(MAX_GROUP_RAW, 5);
    let big2 = [big.clone(), z.clone()].concat();
    let member_first = {
        let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, Codec::Group).unwrap().to_vec();
        q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: 10, id: d(&one) }));
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 1 }));
        q
    };
    let member_after_raw = |codec: Codec| {
        let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, codec).unwrap().to_vec();
        q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: 10, id: d(&one), compressed: false }));
        q.extend_from_slice(&one);
        q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: 10, id: d(&one) }));
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 2 }));
        q
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        ("member head first", member_first, "may only follow"),
        ("member after a raw frame", member_after_raw(Codec::Group), "may only follow"),
        ("bit 30 in codec 1", member_after_raw(Codec::Zstd), "only in a pack of codec 2"),
        ("bit 30 in codec 0", member_after_raw(Codec::None), "only in a pack of codec 2"),
        ("raw total over 1 MiB", hand_group(d(&big), big2.len() as u32, &big2, &[(1000, d(&z))]), "at most 1048576"),
        ("over 256 chunks", hand_group(d(&one), many.len() as u32, &many, &vec![(10, d(&one)); 256]), "more than 256 chunks"),
        ("first chunk empty", hand_group(d(&x), 6000, &all, &[(5000, d(&y)), (1000, d(&z))]), "would have none"),
        ("raw total larger", hand_group(d(&x), 6001, &all, &[(2000, d(&y)), (1000, d(&z))]), "decompresses to 6000"),
        ("raw total smaller", hand_group(d(&x), 5999, &all, &[(1999, d(&y)), (1000, d(&z))]), "declared 5999"),
        ("bomb", hand_group(d(&x), 6000, &vec![0u8; 64 << 20], &[(2000, d(&y))]), "declared 6000"),
        ("a chunk under 1/64 of its group", hand_group(d(&x), 3010, &[x.clone(), one.to_vec()].concat(), &[(10, d(&one))]), "at least 1/64"),
        ("members summing to 2^32", hand_group(d(&x), 6000, &all, &vec![(64 << 20, d(&y)); 64]), "would have none"),
        ("member fingerprint wrong", hand_group(d(&x), 6000, &all, &[(2000, d(&z)), (1000, d(&z))]), "group member"),
        ("member heads first, fingerprint wrong", heads_first(&hand_group(d(&x), 6000, &all, &[(2000, d(&y)), (1000, d(&y))])), "group member"),
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
    // The good one is taken, in both layouts.
    for body in [&good, &heads_first(&good)] {
        let (s, _, resp) = http("POST", &url, None, &[], Some(body));
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&resp));
    }
    assert_eq!(packs_on_disk(&srv.data), 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The codec bytes (header byte 10) of the stored packs under `data`.
fn stored_codecs(p: &std::path::Path, out: &mut Vec<u8>) {
    if let Ok(d) = std::fs::read_dir(p) {
        for e in d.flatten() {
            if e.path().is_dir() {
                stored_codecs(&e.path(), out);
            } else if e.path().to_string_lossy().contains("/packs/") {
                out.push(std::fs::read(e.path()).unwrap()[10]);
            }
        }
    }
}

/// `cutpoint push --compression auto` sends groups (codec 2) to a store that lists them, fewer
/// bytes than one frame per chunk (`CUTPOINT_GROUP_RAW=0`), and pulls back byte-identical;
/// random bytes cost what they cost with `off`.
#[test]
fn a_push_with_auto_sends_groups() {
    let dir = tmpdir("group-push");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    // Lines drawn from a vocabulary larger than a chunk holds: repeats lie in other chunks, as
    // in source trees (one frame per chunk cannot use them; a group can).
    let mut x = 0x2545f4914f6cdd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let vocab: Vec<Vec<u8>> = (0..3000).map(|_| (0..60).map(|_| b'a' + (next() % 26) as u8).chain([b'\n']).collect()).collect();
    let mut bytes = Vec::new();
    while bytes.len() < 2 << 20 {
        bytes.extend_from_slice(&vocab[(next() % 3000) as usize]);
    }
    let f = write(&dir, "f", &bytes);
    let rnd = data(1 << 20, 12);
    let fr = write(&dir, "r", &rnd);
    let push = |file: &std::path::Path, ns: &str, how: &str, group: Option<&str>| -> Value {
        let mut cmd = bin();
        cmd.args(["push", file.to_str().unwrap(), "--name", "f", "--json", "--ns", ns, "--compression", how, "--store", &srv.url]);
        cmd.env_remove("CUTPOINT_TOKEN");
        if let Some(g) = group {
            cmd.env("CUTPOINT_GROUP_RAW", g);
        }
        let out = cmd.output().unwrap();
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let grouped = push(&f, "g", "auto", None);
    let single = push(&f, "s", "auto", Some("0"));
    let (g, s) = (grouped["sent_bytes"].as_u64().unwrap(), single["sent_bytes"].as_u64().unwrap());
    assert!(g < s, "groups {g} vs one frame per chunk {s}");
    assert!(grouped["compressed_bytes"].as_u64().unwrap() < single["compressed_bytes"].as_u64().unwrap(), "{grouped} {single}");
    assert_eq!(srv.pull("f", None, &["--ns", "g"]), bytes);
    ok(&srv.check(&["--ns", "g"]));
    let mut codecs = Vec::new();
    stored_codecs(&srv.data, &mut codecs);
    assert!(codecs.contains(&2) && codecs.contains(&1), "{codecs:?}");
    // Random bytes: about what off sends.
    let ra = push(&fr, "ra", "auto", None)["sent_bytes"].as_u64().unwrap();
    let ro = push(&fr, "ro", "off", None)["sent_bytes"].as_u64().unwrap();
    assert!(ra <= ro + ro / 100, "auto {ra} vs off {ro}");
    assert_eq!(srv.pull("f", None, &["--ns", "ra"]), rnd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store over a bucket takes no groups unless told (`--groups on`): the edge store, which may
/// share the bucket, refuses packs of codec 2 this revision. It does not list `zstd-group`, a
/// codec-2 pack is a 400 with nothing stored, and a push with `auto` stores no codec-2 pack;
/// `--groups off` does the same for a directory.
fn a_store_without_groups_takes_none(b: Backend) {
    let dir = tmpdir(&format!("group-off-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let extra: &[&str] = if b == Backend::S3 { &[] } else { &["--groups", "off"] };
    let srv = Server::start(&store, extra, &[]);
    let (s, _, body) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let info = json(&body);
    assert!(!info["features"].as_array().unwrap().iter().any(|f| f == "zstd-group"), "{info}");
    assert!(info["features"].as_array().unwrap().iter().any(|f| f == "zstd"), "{info}");
    let d = |x: &[u8]| HashAlg::Blake3.digest(x).unwrap();
    let (x, y) = (text(3000, 1), text(2000, 2));
    let good = hand_group(d(&x), 5000, &[x.clone(), y.clone()].concat(), &[(2000, d(&y))]);
    let (s, _, body) = http("POST", &format!("{}/v1/ns/default/packs", srv.url), None, &[], Some(&good));
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("zstd-group"));
    let f = write(&dir, "t", &text(1 << 20, 9));
    let out = bin()
        .args(["push", f.to_str().unwrap(), "--name", "t", "--json", "--compression", "auto", "--store", &srv.url])
        .env_remove("CUTPOINT_TOKEN")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["compressed_bytes"].as_u64().unwrap() < v["novel_bytes"].as_u64().unwrap(), "{v}");
    assert_eq!(srv.pull("t", None, &[]), std::fs::read(&f).unwrap());
    if b == Backend::Local {
        let mut codecs = Vec::new();
        stored_codecs(&srv.data, &mut codecs);
        assert!(!codecs.is_empty() && !codecs.contains(&2), "{codecs:?}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}
