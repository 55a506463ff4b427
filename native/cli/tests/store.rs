//! The store end to end, over both backends (a local directory and a bucket of a real
//! S3-compatible server): a real `cutpoint serve` started on 127.0.0.1 (a free port, a
//! temporary directory), the real `cutpoint push` / `pull` / `ls` / `gc` / `check`, and raw HTTP
//! for the requests a well-behaved client never makes. Every server is killed when its test
//! ends. Each test runs as `<name>::local` and `<name>::s3`.

mod common;
use common::*;
use cutpoint_core::protocol::query::encode_ids;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::Recipe;
use cutpoint_core::{Digest, HashAlg};
use serde_json::Value;
use std::process::Stdio;
use std::time::{Duration, Instant};

crate::both_backends!(
    push_pull_round_trips_are_byte_identical,
    a_second_push_sends_no_chunk_bytes_and_a_small_edit_sends_little_more_than_its_novel_bytes,
    bad_requests_get_their_4xx_and_store_nothing,
    a_crash_at_each_step_loses_nothing_committed,
    sigkill_during_an_upload_loses_nothing_and_a_resumed_push_sends_only_what_is_missing,
    gc_removes_only_what_no_version_references,
    a_second_server_on_one_directory_is_refused_and_reindex_rebuilds,
);

fn push_pull_round_trips_are_byte_identical(b: Backend) {
    let dir = tmpdir(&format!("roundtrip-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let rnd = data(3 << 20, 1);
    // The default profile's MAX is 64 KiB: a file of MAX-1, MAX and MAX+1 bytes is one chunk,
    // one chunk, two chunks.
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", vec![]),
        ("one-byte", vec![42]),
        ("max-minus-1", data(65535, 2)),
        ("max", data(65536, 3)),
        ("max-plus-1", data(65537, 4)),
        ("random-3m", rnd.clone()),
        ("zeros-1m", vec![0; 1 << 20]),
    ];
    for (name, bytes) in &cases {
        let f = write(&dir, name, bytes);
        let r = srv.push(&f, name, &[]);
        assert_eq!(r["bytes"].as_u64().unwrap(), bytes.len() as u64, "{name}");
        assert_eq!(r["version"].as_u64().unwrap(), 1);
        assert_eq!(&srv.pull(name, None, &[]), bytes, "{name} restores byte-identical");
    }
    // All-zero: one chunk repeated, stored once.
    let z = srv.push(&dir.join("zeros-1m"), "zeros-again", &[]);
    assert_eq!(z["novel_chunks"].as_u64().unwrap(), 0, "{z}");
    // A versioned dataset, version by version under one name, every version restorable.
    let ds = dir.join("ds");
    let out = bin().args(["gen", "--out", ds.to_str().unwrap(), "--size", "2m", "--versions", "3", "--mods", "50", "--seed", "7"]).output().unwrap();
    assert!(out.status.success());
    let mut versions = Vec::new();
    for i in 0..4 {
        let f = ds.join(format!("v{i}.bin"));
        let r = srv.push(&f, "dataset.bin", &[]);
        assert_eq!(r["version"].as_u64().unwrap(), i + 1);
        if i > 0 {
            assert!(r["novel_bytes"].as_u64().unwrap() < r["bytes"].as_u64().unwrap() / 2, "version {i} dedups: {r}");
        }
        versions.push(std::fs::read(&f).unwrap());
    }
    for (i, want) in versions.iter().enumerate() {
        assert_eq!(&srv.pull("dataset.bin", Some(i as u64 + 1), &[]), want, "dataset version {}", i + 1);
    }
    assert_eq!(&srv.pull("dataset.bin", None, &[]), versions.last().unwrap(), "latest");
    // ls lists every name and version.
    let out = srv.cli(&["ls", "--json"]);
    let list = json(&out.stdout);
    assert_eq!(list.as_array().unwrap().len(), cases.len() + 1 + 4);
    srv.check(&[]);
    // Names with slashes and non-ASCII letters travel intact.
    let f = write(&dir, "odd", b"odd name");
    srv.push(&f, "dir/sub/ünïcode name.txt", &[]);
    assert_eq!(srv.pull("dir/sub/ünïcode name.txt", None, &[]), b"odd name");
    let _ = std::fs::remove_dir_all(&dir);
}

fn a_second_push_sends_no_chunk_bytes_and_a_small_edit_sends_little_more_than_its_novel_bytes(b: Backend) {
    let dir = tmpdir(&format!("novel-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let base = data(8 << 20, 11);
    let f = write(&dir, "base.bin", &base);
    let first = srv.push(&f, "f", &[]);
    assert_eq!(first["novel_bytes"].as_u64().unwrap(), base.len() as u64);
    assert!(first["pack_bytes"].as_u64().unwrap() >= base.len() as u64);
    let again = srv.push(&f, "f", &[]);
    assert_eq!(again["novel_chunks"].as_u64().unwrap(), 0, "{again}");
    assert_eq!(again["pack_bytes"].as_u64().unwrap(), 0, "{again}");
    assert!(again["sent_bytes"].as_u64().unwrap() < 1024, "an identical re-push is a short delta commit: {again}");
    // 1% of the bytes overwritten, in 20 places.
    let mut v2 = base.clone();
    let mut s = 5u64;
    for _ in 0..20 {
        s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
        let at = (s >> 20) as usize % (v2.len() - 4200);
        for b in &mut v2[at..at + base.len() / 100 / 20] {
            *b ^= 0x5a;
        }
    }
    let f2 = write(&dir, "v2.bin", &v2);
    let r = srv.push(&f2, "f", &[]);
    let (novel, sent) = (r["novel_bytes"].as_u64().unwrap(), r["sent_bytes"].as_u64().unwrap());
    assert!(novel > 0 && novel < base.len() as u64 / 4, "{r}");
    assert!(sent as f64 <= 1.05 * novel as f64, "sent {sent} for {novel} novel bytes: {r}");
    assert_eq!(srv.pull("f", None, &[]), v2);
    assert_eq!(srv.pull("f", Some(1), &[]), base);
    // RapidCDC with the base's hints gives the same result for ff+rwt+fpt.
    let rr = srv.push(&f2, "f", &["--rapid", "ff+rwt+fpt"]);
    assert_eq!(rr["chunks"], r["chunks"], "{rr}");
    assert!(rr["hinted_chunks"].as_u64().unwrap() > 0, "{rr}");
    assert_eq!(rr["pack_bytes"].as_u64().unwrap(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Every bad request gets its 4xx with a JSON message, and none of them stores anything.
fn bad_requests_get_their_4xx_and_store_nothing(b: Backend) {
    let dir = tmpdir(&format!("bad-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let tokens = dir.join("tokens");
    let mk = |ns: &str, ro: bool| -> String {
        let mut a = vec!["token", "--ns", ns, "--tokens", tokens.to_str().unwrap()];
        if ro {
            a.push("--read-only");
        }
        let out = bin().args(&a).output().unwrap();
        assert!(out.status.success());
        String::from_utf8(out.stdout).unwrap().trim().to_string()
    };
    let (wa, ra, wb) = (mk("a", false), mk("a", true), mk("b", false));
    let srv = Server::start(&store, &["--tokens", tokens.to_str().unwrap(), "--max-pack", "64k"], &[]);
    let u = |tail: &str| format!("{}/v1/ns/{tail}", srv.url);
    let bytes = data(30000, 3);
    let ch = chunks_of(&bytes, &[10000, 10000, 10000]);
    let ids: Vec<Digest> = ch.iter().map(|c| c.0).collect();
    let good = pack(&ch);
    let expect = |r: (u16, ureq::http::HeaderMap, Vec<u8>), status: u16, words: &str| {
        let (s, _, b) = r;
        let v = json(&b);
        assert_eq!(s, status, "{v}");
        let msg = v["error"].as_str().unwrap();
        assert!(msg.contains(words), "expected '{words}' in: {msg}");
        v
    };
    // Tokens: none, unknown, another namespace's (read, write, query), read-only writing.
    expect(http("POST", &u("a/query"), None, &[], Some(&encode_ids(&ids))), 401, "needs a token");
    expect(http("POST", &u("a/query"), Some("cpt_nope"), &[], Some(&encode_ids(&ids))), 401, "unknown token");
    expect(http("POST", &u("a/query"), Some(&wb), &[], Some(&encode_ids(&ids))), 403, "not valid for namespace 'a'");
    expect(http("POST", &u("a/packs"), Some(&wb), &[], Some(&good)), 403, "not valid");
    expect(http("GET", &u("a/files"), Some(&wb), &[], None), 403, "not valid");
    expect(http("GET", &u("a/files/x"), Some(&wb), &[], None), 403, "not valid");
    expect(http("POST", &u("a/packs"), Some(&ra), &[], Some(&good)), 403, "may only read");
    expect(http("PUT", &u("a/files/x"), Some(&ra), &[], Some(&recipe_text(&ch))), 403, "may only read");
    // A chunk whose bytes do not hash to its id.
    let mut wrong = good.clone();
    let at = 16 + 36 + 10000 + 36 + 5; // inside the second chunk's data
    wrong[at] ^= 1;
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&wrong)), 400, "frame 1");
    // A truncated pack, cut in several places.
    for cut in [10, 16 + 20, 16 + 36 + 500, good.len() - 1] {
        expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&good[..cut])), 400, "truncated");
    }
    // A malformed one: bad magic; bytes after the end frame.
    let mut m = good.clone();
    m[0] = b'X';
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&m)), 400, "magic");
    let mut m = good.clone();
    m.push(0);
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&m)), 400, "after the end");
    // The same, heads first (every head, then all the data: what a browser sends): a wrong
    // byte, cuts in the heads and in the data.
    let hf = |ch: &[(Digest, Vec<u8>)]| {
        let list: Vec<(Digest, &[u8])> = ch.iter().map(|(id, c)| (*id, &c[..])).collect();
        cutpoint_core::protocol::pack::encode_heads_first(HashAlg::Blake3, &list).unwrap()
    };
    let mut wrong = hf(&ch);
    wrong[16 + 4 * 36 + 10000 + 5] ^= 1;
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&wrong)), 400, "frame 1");
    for cut in [16 + 36 + 20, 16 + 4 * 36 + 500] {
        expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&hf(&ch)[..cut])), 400, "truncated");
    }
    let mut m = hf(&ch);
    m[9] = 7;
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&m)), 400, "unknown layout 7");
    // Over the store's limit (64 KiB here).
    let big = pack(&chunks_of(&data(100_000, 4), &[50_000, 50_000]));
    expect(http("POST", &u("a/packs"), Some(&wa), &[], Some(&big)), 413, "larger than this store's limit");
    // A recipe naming chunks the store lacks: 409 with the missing ids, nothing committed.
    let v = expect(http("PUT", &u("a/files/x"), Some(&wa), &[], Some(&recipe_text(&ch))), 409, "nothing was committed");
    let missing: Vec<&str> = v["missing"].as_array().unwrap().iter().map(|x| x.as_str().unwrap()).collect();
    assert_eq!(missing, ids.iter().map(cutpoint_core::hex).collect::<Vec<_>>());
    // A recipe whose digest line is not its chunk list's.
    let bad_digest = String::from_utf8(recipe_text(&ch)).unwrap();
    let d = FileDigest::of(&Recipe::read(bad_digest.as_bytes()).unwrap()).unwrap();
    let bad_digest = bad_digest.replace(&cutpoint_core::hex(&d), &"0".repeat(64));
    expect(http("PUT", &u("a/files/x"), Some(&wa), &[], Some(bad_digest.as_bytes())), 400, "digest");
    // Malformed recipes, queries and names.
    expect(http("PUT", &u("a/files/x"), Some(&wa), &[], Some(b"hello")), 400, "recipe");
    expect(http("PUT", &u("a/files/x"), Some(&wa), &[], Some(&[0xff; 40])), 400, "recipe");
    expect(http("POST", &u("a/query"), Some(&wa), &[], Some(&[1u8; 33])), 400, "multiple of 32");
    // Over the limit: refused by its Content-Length before the body is read (the server does
    // not read it, so the head alone is sent here; a client writing on gets a broken pipe).
    {
        use std::io::{Read, Write};
        let mut s = std::net::TcpStream::connect(srv.url.trim_start_matches("http://")).unwrap();
        let head = format!("POST /v1/ns/a/query HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer {wa}\r\nContent-Length: {}\r\n\r\n", 32 * 16385);
        s.write_all(head.as_bytes()).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut got = vec![0u8; 4096];
        let n = s.read(&mut got).unwrap();
        let text = String::from_utf8_lossy(&got[..n]);
        assert!(text.starts_with("HTTP/1.1 413") && text.contains("limit"), "{text}");
    }
    expect(http("GET", &u("a/files/..%2Fetc"), Some(&wa), &[], None), 400, "'..'");
    expect(http("GET", &u("bad%20ns/files"), Some(&wa), &[], None), 400, "invalid namespace");
    // Nothing of it was stored: no pack on disk, every id still missing, no file.
    assert_eq!(packs_on_disk(&srv.data), 0);
    let (s, _, b) = http("POST", &u("a/query"), Some(&wa), &[], Some(&encode_ids(&ids)));
    assert_eq!((s, b), (200, encode_ids(&ids)));
    let (s, _, b) = http("GET", &u("a/files"), Some(&ra), &[], None);
    assert_eq!(s, 200);
    assert!(json(&b)["files"].as_array().unwrap().is_empty());
    // The good requests work, and then namespace b still sees nothing of a's.
    let (s, _, b) = http("POST", &u("a/packs"), Some(&wa), &[], Some(&good));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    assert_eq!(json(&b)["stored"].as_u64(), Some(3));
    let (s, _, b) = http("POST", &u("a/packs"), Some(&wa), &[], Some(&good));
    assert_eq!((s, json(&b)["stored"].as_u64()), (200, Some(0)), "the same pack twice is stored once");
    assert_eq!(packs_on_disk(&srv.data), 1);
    let (s, _, _) = http("PUT", &u("a/files/x"), Some(&wa), &[], Some(&recipe_text(&ch)));
    assert_eq!(s, 201);
    // A heads-first upload is stored (framed, like every stored pack) and restores.
    let bytes2 = data(30000, 5);
    let ch2 = chunks_of(&bytes2, &[7000, 13000, 10000]);
    let (s, _, b) = http("POST", &u("a/packs"), Some(&wa), &[], Some(&hf(&ch2)));
    assert_eq!((s, json(&b)["stored"].as_u64()), (200, Some(3)), "{}", String::from_utf8_lossy(&b));
    assert_eq!(packs_on_disk(&srv.data), 2);
    let (s, _, _) = http("PUT", &u("a/files/y"), Some(&wa), &[], Some(&recipe_text(&ch2)));
    assert_eq!(s, 201);
    let (s, _, b) = http("GET", &u("a/files/y"), Some(&ra), &[("Range", "bytes=6990-7009")], None);
    assert_eq!((s, &b[..]), (206, &bytes2[6990..7010]));
    let (s, _, b) = http("GET", &u("a/files/y"), Some(&ra), &[], None);
    assert_eq!((s, b == bytes2), (200, true));
    let (_, _, b) = http("POST", &u("b/query"), Some(&wb), &[], Some(&encode_ids(&ids)));
    assert_eq!(b, encode_ids(&ids), "namespace b does not see a's chunks");
    let (s, _, _) = http("GET", &u("b/files/x"), Some(&wb), &[], None);
    assert_eq!(s, 404);
    let (s, _, b) = http("GET", &u("a/files/x"), Some(&ra), &[], None);
    assert_eq!((s, b), (200, bytes.clone()));
    // Ranges and ETags.
    let (s, h, b) = http("GET", &u("a/files/x"), Some(&ra), &[("Range", "bytes=9990-10019")], None);
    assert_eq!((s, &b[..]), (206, &bytes[9990..10020]));
    assert_eq!(h["content-range"], "bytes 9990-10019/30000");
    let etag = h["etag"].to_str().unwrap().to_string();
    let (s, _, _) = http("GET", &u("a/files/x"), Some(&ra), &[("If-None-Match", &etag)], None);
    assert_eq!(s, 304);
    let (s, h, _) = http("GET", &u("a/files/x"), Some(&ra), &[("Range", "bytes=30000-")], None);
    assert_eq!((s, h["content-range"].to_str().unwrap()), (416, "bytes */30000"));
    // The CLI says the same in words, with exit codes: 1 for a refused token, 2 for bad usage.
    let out = srv.cli(&["ls", "--ns", "a", "--token", &wb]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("403"), "{}", String::from_utf8_lossy(&out.stderr));
    let out = srv.cli(&["push", "/nonexistent", "--ns", "a"]);
    assert_eq!(out.status.code(), Some(1));
    let out = srv.cli(&["push", "/nonexistent", "--ns", "a", "--pack-size", "1"]);
    assert_eq!(out.status.code(), Some(2));
    let _ = std::fs::remove_dir_all(&dir);
}

/// Durability order: the server stopped at each step (abort, like SIGKILL) and restarted loses
/// no committed version, and the index agrees with the packs.
fn a_crash_at_each_step_loses_nothing_committed(b: Backend) {
    let dir = tmpdir(&format!("failpoints-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let a = data(600_000, 21);
    let fa = write(&dir, "a.bin", &a);
    {
        let srv = Server::start(&store, &[], &[]);
        srv.push(&fa, "a", &[]);
    }
    for (step, b_seed) in [("before-pack-put", 22), ("after-pack-put", 23), ("after-recipe-put", 24)] {
        let b = data(500_000, b_seed);
        let fb = write(&dir, "b.bin", &b);
        let mut srv = Server::start(&store, &[], &[("CUTPOINT_FAILPOINT", step)]);
        let out = srv.cli(&["push", fb.to_str().unwrap(), "--name", step, "--json"]);
        assert!(!out.status.success(), "{step}: the push cannot succeed against a server that stops");
        assert!(!srv.wait_exit(Duration::from_secs(20)).success());
        let srv = Server::start(&store, &[], &[]);
        assert_eq!(srv.spool_files(), 0, "spool files of the crashed upload are removed at start");
        assert_eq!(srv.pull("a", None, &[]), a, "{step}: the committed version restores");
        srv.check(&[]);
        let list = json(&srv.cli(&["ls", step, "--json"]).stdout);
        match step {
            // The commit point passed: the version is committed and restores.
            "after-recipe-put" => {
                assert_eq!(list.as_array().unwrap().len(), 1, "{list}");
                assert_eq!(srv.pull(step, None, &[]), b);
            }
            _ => assert!(list.as_array().unwrap().is_empty(), "{step}: {list}"),
        }
        // Pushed again, it sends only what the store lacks: nothing after the pack was stored.
        let r = srv.push(&fb, step, &[]);
        let novel = r["novel_bytes"].as_u64().unwrap();
        match step {
            "before-pack-put" => assert_eq!(novel, b.len() as u64, "{r}"),
            _ => assert_eq!(novel, 0, "{step}: the stored pack was indexed at start: {r}"),
        }
        assert_eq!(srv.pull(step, None, &[]), b);
        srv.check(&[]);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL while a pack is being uploaded; then an interrupted push resumed.
fn sigkill_during_an_upload_loses_nothing_and_a_resumed_push_sends_only_what_is_missing(b: Backend) {
    let dir = tmpdir(&format!("sigkill-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let v1 = data(2 << 20, 31);
    let mut v2 = v1.clone();
    v2[1 << 20..(1 << 20) + 5000].fill(7);
    let big = data(48 << 20, 32);
    let (f1, f2, fbig) = (write(&dir, "v1", &v1), write(&dir, "v2", &v2), write(&dir, "big", &big));
    let mut srv = Server::start(&store, &[], &[]);
    srv.push(&f1, "f", &[]);
    srv.push(&f2, "f", &[]);
    // A big push with small packs, one upload at a time; kill the server while a pack is
    // being received (its spool file exists).
    let mut push = bin()
        .args(["push", fbig.to_str().unwrap(), "--name", "big", "--pack-size", "256k", "--uploads", "1", "--store", &srv.url])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let packs_before = packs_on_disk(&srv.data);
    let t0 = Instant::now();
    while packs_on_disk(&srv.data) < packs_before + 2 || srv.spool_files() == 0 {
        assert!(t0.elapsed() < Duration::from_secs(60), "no upload in progress");
        assert!(push.try_wait().unwrap().is_none(), "the push ended before the kill");
        std::thread::sleep(Duration::from_millis(1));
    }
    srv.kill();
    let status = push.wait().unwrap();
    assert!(!status.success(), "the push fails when its store dies");
    let srv = Server::start(&store, &[], &[]);
    assert_eq!(srv.pull("f", Some(1), &[]), v1);
    assert_eq!(srv.pull("f", Some(2), &[]), v2);
    let list = json(&srv.cli(&["ls", "big", "--json"]).stdout);
    assert!(list.as_array().unwrap().is_empty(), "no half-committed version: {list}");
    let before = srv.check(&[]);
    // Resumed: the chunks that reached the store before the kill are not sent again.
    let stored_before = before["chunks"].as_u64().unwrap();
    // Packs of 12 MiB: over a bucket, uploads above 8 MiB go up in parts (multipart).
    let r = srv.push(&fbig, "big", &["--pack-size", "12m"]);
    let after = srv.check(&[]);
    let new_chunks = after["chunks"].as_u64().unwrap() - stored_before;
    assert_eq!(r["novel_chunks"].as_u64().unwrap(), new_chunks, "only the missing chunks were sent: {r}");
    assert!(new_chunks < r["chunks"].as_u64().unwrap(), "some packs were durable before the kill: {r}");
    assert_eq!(srv.pull("big", None, &[]), big);
    let _ = std::fs::remove_dir_all(&dir);
}

fn gc_removes_only_what_no_version_references(b: Backend) {
    let dir = tmpdir(&format!("gc-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let a = data(3 << 20, 41);
    let mut b = a[..1 << 20].to_vec();
    b.extend(data(2 << 20, 42));
    let (fa, fb) = (write(&dir, "a", &a), write(&dir, "b", &b));
    srv.push(&fa, "a", &[]);
    srv.push(&fb, "b", &[]);
    // With the default grace period nothing is collected yet.
    let out = srv.cli(&["rm", "a"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let g: Value = json(&srv.cli(&["gc", "--json"]).stdout);
    assert_eq!(g["packs_deleted"].as_u64().unwrap() + g["packs_rewritten"].as_u64().unwrap(), 0, "{g}");
    assert!(g["packs_in_grace"].as_u64().unwrap() > 0);
    let g: Value = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    let freed = g["bytes_freed"].as_u64().unwrap();
    assert!(freed >= (3 << 20) / 2, "a's own 2 MiB go: {g}");
    assert_eq!(srv.pull("b", None, &[]), b, "b keeps the first MiB it shares with a");
    srv.check(&[]);
    // Pushing a again sends the bytes gc removed, and only those.
    let r = srv.push(&fa, "a", &[]);
    assert!(r["novel_bytes"].as_u64().unwrap() >= 2 << 20 && r["novel_bytes"].as_u64().unwrap() < 3 << 20, "{r}");
    assert_eq!(srv.pull("a", None, &[]), a);
    let _ = std::fs::remove_dir_all(&dir);
}

/// One server per directory: a second one, with or without `--reindex`, is refused and the
/// first keeps its index, its uploads and its versions; `--reindex` alone rebuilds the index.
fn a_second_server_on_one_directory_is_refused_and_reindex_rebuilds(b: Backend) {
    let dir = tmpdir(&format!("second-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let a = data(300_000, 51);
    let fa = write(&dir, "a", &a);
    let mut srv = Server::start(&store, &[], &[]);
    srv.push(&fa, "a", &[]);
    for extra in [&[][..], &["--reindex"][..]] {
        let out = bin()
            .arg("serve")
            .args(&store.args)
            .args(["--listen", "127.0.0.1:0"])
            .args(extra)
            .envs(store.env.iter().map(|(k, v)| (k, v)))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("in use by another process"), "{}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(srv.pull("a", None, &[]), a);
    srv.check(&[]);
    srv.kill();
    let srv = Server::start(&store, &["--reindex"], &[]);
    assert_eq!(srv.pull("a", None, &[]), a, "the index rebuilt from the objects");
    assert_eq!(srv.push(&fa, "a", &[])["novel_bytes"].as_u64(), Some(0));
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store with a small `--max-pack`: the push aims its packs below the limit whatever its
/// `--pack-size` (they pass their target by up to one chunk), and a limit too small for one
/// chunk of the profile is a usage error before anything is sent.
#[test]
fn packs_fit_the_stores_limit_whatever_the_pack_size() {
    let dir = tmpdir("maxpack");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-pack", "1m"], &[]);
    for (size, seed) in [("8m", 61u64), ("256m", 62)] {
        // Packs over the limit would be refused (413): the push succeeding is the check.
        let a = data(6 << 20, seed);
        let f = write(&dir, &format!("a-{size}.bin"), &a);
        let r = srv.push(&f, size, &["--pack-size", size]);
        let (packs, bytes) = (r["packs"].as_u64().unwrap(), r["pack_bytes"].as_u64().unwrap());
        assert!(packs >= 6, "6 MiB in packs of at most 1 MiB: {r}");
        assert!(bytes / packs <= 1 << 20, "{r}");
        assert_eq!(srv.pull(size, None, &[]), a);
    }
    srv.check(&[]);
    drop(srv);
    let srv = Server::start(&store, &["--max-pack", "32k"], &[]);
    let f = write(&dir, "b.bin", &data(100_000, 63));
    let out = srv.cli(&["push", f.to_str().unwrap(), "--name", "b", "--json"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("at most 32768 bytes") && err.contains("--max-pack"), "{err}");
    // Refused before anything was sent: no version.
    let ls = json(&srv.cli(&["ls", "--json"]).stdout);
    let names: Vec<&str> = ls.as_array().unwrap().iter().map(|f| f["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["256m", "8m"], "no 'b': {ls}");
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}
