//! The store under a hostile client (issue #27, resource bounds): delta bombs, bodies announced
//! larger than a limit, packs of too many chunks, slow uploads, downloads nobody reads, and a
//! bounded load test of 500 of each kind of hostile connection at once. Real `cutpoint serve`
//! processes on 127.0.0.1 (free ports, temporary directories), killed when each test ends.

mod common;
use common::*;
use cutpoint_core::protocol::pack::PackWriter;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::{hex, Digest, HashAlg};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// `host:port` of a server URL.
fn addr(url: &str) -> String {
    url.trim_start_matches("http://").trim_end_matches('/').to_string()
}

/// A connection that has sent `head` (a request head, `\r\n\r\n` included) and `body`.
fn send_raw(url: &str, head: &str, body: &[u8]) -> TcpStream {
    let mut s = TcpStream::connect(addr(url)).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    s
}

/// Reads a response's status line and headers (within `within`): (status, head text).
fn read_head(s: &mut TcpStream, within: Duration) -> Option<(u16, String)> {
    s.set_read_timeout(Some(within)).unwrap();
    let mut got = Vec::new();
    let mut b = [0u8; 1];
    while !got.ends_with(b"\r\n\r\n") {
        match s.read(&mut b) {
            Ok(1) => got.push(b[0]),
            _ => return None,
        }
    }
    let text = String::from_utf8_lossy(&got).to_string();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    Some((status, text))
}

/// The server process's VmRSS and VmHWM (KiB).
fn rss_kib(pid: u32) -> (u64, u64) {
    let st = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let field = |k: &str| {
        st.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn entries_of(chunks: &[(Digest, Vec<u8>)]) -> Vec<RecipeEntry> {
    chunks.iter().map(|(id, c)| RecipeEntry { fp: *id, size: c.len() as u32, last: None, regular: true }).collect()
}

/// `n` distinct chunks of 16 bytes.
fn tiny_chunks(n: usize, seed: u64) -> Vec<(Digest, Vec<u8>)> {
    let d = data(n * 16, seed);
    chunks_of(&d, &vec![16; n])
}

#[test]
fn a_delta_bomb_is_refused_before_it_is_built() {
    let dir = tmpdir("delta-bomb");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-recipe", "16m"], &[]);
    let u = |tail: &str| format!("{}/v1/ns/x/{tail}", srv.url);
    // A base of 2,000 chunks.
    let ch = tiny_chunks(2000, 71);
    let (s, _, b) = http("POST", &u("packs"), None, &[], Some(&pack(&ch)));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (s, _, b) = http("PUT", &u("files/f"), None, &[], Some(&recipe_text(&ch)));
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    // 1,000 runs of the whole base: a ~4 KB delta of a 2,000,000-entry (~140 MB) recipe, with
    // the digest of that recipe (so that only its size can refuse it).
    let runs = 1000;
    let mut fd = FileDigest::new(HashAlg::Blake3);
    for _ in 0..runs {
        for (id, c) in &ch {
            fd.add(id, c.len() as u32);
        }
    }
    let bomb = |digest: &str, count: usize| {
        let mut t = format!("cutpoint-delta 1\nbase 1\nprofile gear:2k:8k:64k\nhash blake3\ndigest {digest}\n");
        for _ in 0..runs {
            t += "= 0 2000\n";
        }
        t += &format!("end {count} {}\n", count * 16);
        t.into_bytes()
    };
    let body = bomb(&hex(&fd.finish().unwrap()), runs * 2000);
    assert!(body.len() < 16 << 10);
    let t0 = Instant::now();
    let (s, _, b) = http("PUT", &u("files/f"), None, &[], Some(&body));
    let v = json(&b);
    assert_eq!(s, 413, "{v}");
    assert!(v["error"].as_str().unwrap().contains("16777216"), "{v}");
    // A wrong digest: refused on the count alone, before the digest is computed.
    let (s, _, b) = http("PUT", &u("files/f"), None, &[], Some(&bomb(&"ab".repeat(32), runs * 2000)));
    assert_eq!(s, 413, "{}", String::from_utf8_lossy(&b));
    // An end line of 10^8 chunks that the runs do not add up to: malformed (400), named.
    let (s, _, b) = http("PUT", &u("files/f"), None, &[], Some(&bomb(&"ab".repeat(32), 100_000_000)));
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&b));
    assert!(String::from_utf8_lossy(&b).contains("'end' line says 100000000"));
    // Nothing was expanded: both answers came at once, and the server never grew.
    assert!(t0.elapsed() < Duration::from_secs(10), "{:?}", t0.elapsed());
    let (_, hwm) = rss_kib(srv.child.id());
    assert!(hwm < 128 << 10, "the server's peak RSS {hwm} KiB: the delta was expanded");
    // Only version 1 exists, and a delta within the limit still commits.
    let mut r = Recipe { profile: "gear:2k:8k:64k".into(), hash: HashAlg::Blake3, digest: None, entries: entries_of(&ch) };
    r.entries.extend(entries_of(&ch));
    r.digest = FileDigest::of(&r);
    let mut base = r.clone();
    base.entries.truncate(2000);
    let d = cutpoint_core::protocol::delta::encode(&r, &base, 1).unwrap();
    let (s, _, b) = http("PUT", &u("files/f"), None, &[], Some(&d));
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&b));
    assert_eq!(json(&b)["version"], 2);
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_body_announced_over_its_limit_is_refused_at_once() {
    let dir = tmpdir("announced");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    for (method, path) in [("PUT", "/v1/ns/x/files/f"), ("POST", "/v1/ns/x/query"), ("POST", "/v1/ns/x/packs")] {
        let head = format!("{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000000000000\r\n\r\n");
        let mut s = send_raw(&srv.url, &head, b"cutpoint");
        let (status, text) = read_head(&mut s, Duration::from_secs(5)).unwrap_or_else(|| panic!("{method} {path}: no answer in 5 s"));
        assert_eq!(status, 413, "{method} {path}: {text}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_pack_of_too_many_chunks_is_refused_in_either_layout() {
    let dir = tmpdir("many-chunks");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let u = |tail: &str| format!("{}/v1/ns/x/{tail}", srv.url);
    // The default limit: 65,536 chunks (as many as a heads-first upload may list).
    let v = json(&http("GET", &format!("{}/v1", srv.url), None, &[], None).2);
    assert_eq!(v["limits"]["max_pack_chunks"], 65536, "{v}");
    let ch = tiny_chunks(65_537, 72);
    let (s, _, b) = http("POST", &u("packs"), None, &[], Some(&pack(&ch)));
    assert_eq!(s, 413, "{}", String::from_utf8_lossy(&b));
    assert!(String::from_utf8_lossy(&b).contains("65536 chunks"));
    // Within it: taken, every chunk indexed.
    let (s, _, b) = http("POST", &u("packs"), None, &[], Some(&pack(&ch[..65_536])));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    assert_eq!(json(&b)["stored"], 65536);
    drop(srv);
    // A lower limit, both layouts.
    let srv = Server::start(&store, &["--max-pack-chunks", "100"], &[]);
    let u = |tail: &str| format!("{}/v1/ns/y/{tail}", srv.url);
    let ch = tiny_chunks(101, 73);
    let list: Vec<(Digest, &[u8])> = ch.iter().map(|(id, c)| (*id, &c[..])).collect();
    let hf = cutpoint_core::protocol::pack::encode_heads_first(HashAlg::Blake3, &list).unwrap();
    for body in [pack(&ch), hf] {
        let (s, _, b) = http("POST", &u("packs"), None, &[], Some(&body));
        assert_eq!(s, 413, "{}", String::from_utf8_lossy(&b));
    }
    assert_eq!(http("POST", &u("packs"), None, &[], Some(&pack(&ch[..100]))).0, 200);
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_native_client_keeps_its_packs_within_the_stores_chunk_count() {
    let dir = tmpdir("client-count");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-pack-chunks", "100"], &[]);
    // ~770 chunks of the default profile: in packs of at most 100 (a pack over it would be 413).
    let a = data(6 << 20, 74);
    let f = write(&dir, "a.bin", &a);
    let r = srv.push(&f, "a", &[]);
    assert!(r["packs"].as_u64().unwrap() >= 7, "{r}");
    assert_eq!(srv.pull("a", None, &[]), a);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn uploads_over_the_limits_get_503_and_slow_bodies_are_cut() {
    let dir = tmpdir("slow-uploads");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(
        &store,
        &["--max-uploads", "6", "--max-uploads-per-token", "4", "--body-timeout", "2", "--min-rate", "1000"],
        &[],
    );
    let head = |token: &str| {
        format!("POST /v1/ns/x/packs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1000000\r\nAuthorization: {token}\r\n\r\n")
    };
    let header = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap().finish().unwrap()[..16].to_vec();
    let t0 = Instant::now();
    // Four slow uploads with one token: the fifth is refused at once (503, Retry-After).
    let mut slow: Vec<TcpStream> = (0..4).map(|_| send_raw(&srv.url, &head("Bearer a"), &header)).collect();
    std::thread::sleep(Duration::from_millis(300));
    let mut s = send_raw(&srv.url, &head("Bearer a"), &header);
    let (status, text) = read_head(&mut s, Duration::from_secs(5)).expect("an answer");
    assert_eq!(status, 503, "{text}");
    assert!(text.to_ascii_lowercase().contains("retry-after: "), "{text}");
    // Another token: two more, then the store's limit (6).
    slow.extend((0..2).map(|_| send_raw(&srv.url, &head("Bearer b"), &header)));
    std::thread::sleep(Duration::from_millis(300));
    let mut s = send_raw(&srv.url, &head("Bearer c"), &header);
    assert_eq!(read_head(&mut s, Duration::from_secs(5)).expect("an answer").0, 503);
    // `GET /v1` answers meanwhile.
    assert_eq!(http("GET", &format!("{}/v1", srv.url), None, &[], None).0, 200);
    // Trickling a byte a second is below 1000 bytes/s: each is cut (400) once the 2 s grace
    // has passed, well before its body would end.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_secs(1));
        for s in &mut slow {
            let _ = s.write_all(&[0]);
        }
    }
    for s in &mut slow {
        let (status, text) = read_head(s, Duration::from_secs(10)).expect("cut with an answer");
        assert_eq!(status, 400, "{text}");
    }
    assert!(t0.elapsed() < Duration::from_secs(20));
    // The slots are free again: a good upload is taken.
    let ch = tiny_chunks(10, 75);
    assert_eq!(http("POST", &format!("{}/v1/ns/x/packs", srv.url), None, &[], Some(&pack(&ch))).0, 200);
    assert_eq!(srv.spool_files(), 0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_download_nobody_reads_is_cut() {
    let dir = tmpdir("unread");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--send-timeout", "2"], &[]);
    let a = data(32 << 20, 76);
    let f = write(&dir, "a.bin", &a);
    srv.push(&f, "a", &[]);
    let mut s = send_raw(&srv.url, "GET /v1/ns/default/files/a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"");
    // Read nothing for longer than the send timeout, then all that comes: the connection was
    // closed well before the 32 MiB.
    std::thread::sleep(Duration::from_secs(6));
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut got = Vec::new();
    let r = s.read_to_end(&mut got);
    assert!(r.is_ok() || got.len() < a.len(), "{r:?}");
    assert!(got.len() < a.len(), "the whole file came ({} bytes): the connection was not cut", got.len());
    // A client that reads gets it whole.
    assert_eq!(srv.pull("a", None, &[]), a);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The bounded load test of the issue: 500 restores that nobody reads and 500 pack uploads that
/// trickle, at once, against one server with its default limits. Its RSS stays within 512 MiB and
/// a listing is answered within 1 s throughout.
#[test]
fn five_hundred_unread_downloads_and_five_hundred_slow_uploads_at_once() {
    // 2,000 sockets here and on the server: raise the soft limit to the hard one.
    unsafe {
        let mut l = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut l) == 0 && l.rlim_cur < 4096 {
            l.rlim_cur = l.rlim_max.min(8192);
            libc::setrlimit(libc::RLIMIT_NOFILE, &l);
        }
    }
    let dir = tmpdir("load");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let a = data(16 << 20, 77);
    let f = write(&dir, "a.bin", &a);
    srv.push(&f, "a", &[]);
    let pid = srv.child.id();
    let ls = || {
        let t = Instant::now();
        let (s, _, b) = http("GET", &format!("{}/v1/ns/default/files", srv.url), None, &[], None);
        assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
        t.elapsed()
    };
    let t0 = Instant::now();
    let mut conns = Vec::new();
    for _ in 0..500 {
        conns.push(send_raw(&srv.url, "GET /v1/ns/default/files/a HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b""));
    }
    let header = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap().finish().unwrap()[..16].to_vec();
    let mut slow = Vec::new();
    for _ in 0..500 {
        slow.push(send_raw(&srv.url, "POST /v1/ns/default/packs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000000\r\n\r\n", &header));
    }
    for s in &slow {
        s.set_nonblocking(true).unwrap();
    }
    let opened = t0.elapsed();
    let mut worst = Duration::ZERO;
    let mut peak_rss = 0;
    for _ in 0..15 {
        std::thread::sleep(Duration::from_secs(1));
        for s in &mut slow {
            let _ = s.write(&[0]);
        }
        worst = worst.max(ls());
        peak_rss = peak_rss.max(rss_kib(pid).0);
    }
    let (_, hwm) = rss_kib(pid);
    eprintln!("load: 1,000 connections opened in {opened:?}; worst listing {worst:?}; peak VmRSS {peak_rss} KiB, VmHWM {hwm} KiB");
    assert!(worst <= Duration::from_secs(1), "a listing took {worst:?}");
    assert!(hwm <= 512 << 10, "the server's peak RSS was {hwm} KiB");
    drop(conns);
    drop(slow);
    // And it still serves whole files.
    assert_eq!(srv.pull("a", None, &[]), a);
    let _ = std::fs::remove_dir_all(&dir);
}
