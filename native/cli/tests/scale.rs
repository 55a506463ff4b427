//! The store at scale and under fire (issue 17): several `cutpoint serve` nodes over one bucket
//! of a real S3-compatible server (versitygw on 127.0.0.1), SIGKILLs at random points during
//! pushes, concurrent clients through two nodes, connections cut by a fault-injecting TCP proxy,
//! slow and oversized requests. Sizes fit `npm test`; `npm run soak` runs the same tests with
//! larger counts (`CUTPOINT_SOAK=1`, see `scripts/soak.sh`).

mod common;
use common::*;
use cutpoint_core::protocol::query::encode_ids;
use cutpoint_core::Digest;
use serde_json::Value;
use std::collections::{BTreeMap, HashSet};
use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A count for the suite, or a larger one under `CUTPOINT_SOAK=1`.
fn count(suite: usize, soak: usize) -> usize {
    match std::env::var("CUTPOINT_SOAK").as_deref() {
        Ok("1") => soak,
        _ => suite,
    }
}

/// A small deterministic generator for test schedules.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn pack_bytes_on_disk(objects: &Path) -> u64 {
    fn walk(p: &Path, n: &mut u64) {
        if let Ok(d) = std::fs::read_dir(p) {
            for e in d.flatten() {
                let m = e.metadata().unwrap();
                if m.is_dir() {
                    walk(&e.path(), n);
                } else {
                    *n += m.len();
                }
            }
        }
    }
    let mut n = 0;
    if let Ok(nss) = std::fs::read_dir(objects.join("ns")) {
        for ns in nss.flatten() {
            walk(&ns.path().join("packs"), &mut n);
        }
    }
    n
}

/// Two nodes over one bucket give the same answers: what is stored through one is found by a
/// query, a pull, a listing and a commit on the other; commits of one name through both at
/// once never lose a version; a gc holds the namespace against commits on every node.
#[test]
fn two_nodes_over_one_bucket_agree() {
    let dir = tmpdir("two-nodes");
    let s3 = S3Server::start(&dir);
    let la = Loc::new(Backend::S3, &dir, Some(&s3));
    let lb = la.node(&dir.join("node-b-cache"));
    // A settle of 3 s: the window in which a commit through B must meet A's gc lock (1 s was
    // missed on a loaded 2-core machine, where one commit through B can take most of a second).
    let a = Server::start(&la, &["--gc-settle", "3"], &[]);
    let b = Server::start(&lb, &["--gc-settle", "3"], &[]);
    // A file pushed through A: B finds every chunk (its query falls through to the bucket), lists
    // it and restores it byte-identical.
    let x = data(2 << 20, 71);
    let fx = write(&dir, "x", &x);
    let r = a.push(&fx, "x", &[]);
    assert_eq!(r["version"].as_u64(), Some(1));
    let rb = b.push(&fx, "x", &[]);
    assert_eq!(rb["novel_chunks"].as_u64(), Some(0), "B's queries find A's chunks: {rb}");
    assert_eq!(rb["version"].as_u64(), Some(2), "B sees A's version 1: {rb}");
    assert_eq!(b.pull("x", Some(1), &[]), x);
    assert_eq!(a.pull("x", Some(2), &[]), x, "A sees B's version 2");
    // Raw: a pack uploaded to A, queried on B at once, committed through B.
    let bytes = data(30000, 72);
    let ch = chunks_of(&bytes, &[10000, 10000, 10000]);
    let ids: Vec<Digest> = ch.iter().map(|c| c.0).collect();
    let u = |s: &Server, tail: &str| format!("{}/v1/ns/default/{tail}", s.url);
    let (s, _, body) = http("POST", &u(&b, "query"), None, &[], Some(&encode_ids(&ids)));
    assert_eq!((s, body.len()), (200, 96), "B lacks them before the upload");
    let (s, _, body) = http("POST", &u(&a, "packs"), None, &[], Some(&pack(&ch)));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    let (s, _, body) = http("POST", &u(&b, "query"), None, &[], Some(&encode_ids(&ids)));
    assert_eq!((s, body), (200, vec![]), "B finds them right after A stored them");
    // Commits of one name through both nodes at once: every one gets its own version.
    let n = count(16, 64);
    let recipe = recipe_text(&ch);
    let versions: Vec<u64> = std::thread::scope(|sc| {
        let hs: Vec<_> = (0..n)
            .map(|i| {
                let url = u(if i % 2 == 0 { &a } else { &b }, "files/same");
                let recipe = &recipe;
                sc.spawn(move || {
                    let (s, _, body) = http("PUT", &url, None, &[], Some(recipe));
                    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
                    json(&body)["version"].as_u64().unwrap()
                })
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let distinct: HashSet<u64> = versions.iter().copied().collect();
    assert_eq!(distinct.len(), n, "no two commits got one version: {versions:?}");
    for srv in [&a, &b] {
        let list = json(&srv.cli(&["ls", "same", "--json"]).stdout);
        let mut vs: Vec<u64> = list.as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
        vs.sort();
        assert_eq!(vs, (1..=n as u64).collect::<Vec<_>>(), "every version is listed on {}", srv.url);
        assert_eq!(srv.pull("same", Some(n as u64), &[]), bytes);
    }
    // A gc through A holds the namespace: a commit through B meanwhile gets 503 (the client
    // retries it), and is accepted once the gc is over.
    // A gc can end before B's first commit lands (a loaded machine): then try again, a bounded
    // number of rounds.
    let mut saw_busy = false;
    for _round in 0..20 {
        let gc_url = format!("{}?grace=0", u(&a, "gc"));
        let t = std::thread::spawn(move || http("POST", &gc_url, None, &[], None));
        let t0 = Instant::now();
        while !t.is_finished() && t0.elapsed() < Duration::from_secs(30) {
            let (s, _, body) = http("PUT", &u(&b, "files/during-gc"), None, &[], Some(&recipe));
            if s == 503 {
                assert_eq!(json(&body)["code"], "busy");
                saw_busy = true;
                break;
            }
            assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
        }
        let (s, _, body) = t.join().unwrap();
        assert_eq!(s, 200, "gc: {}", String::from_utf8_lossy(&body));
        if saw_busy {
            break;
        }
    }
    assert!(saw_busy, "a commit through B during A's gc is refused");
    let (s, _, _) = http("PUT", &u(&b, "files/during-gc"), None, &[], Some(&recipe));
    assert_eq!(s, 201);
    // Another gc at once is refused while one runs; after both, both nodes restore everything.
    assert_eq!(b.pull("x", Some(1), &[]), x);
    assert_eq!(a.pull("same", Some(1), &[]), bytes);
    a.check(&[]);
    b.check(&[]);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node's cache is only a cache: deleted, or left behind while other nodes wrote, it is
/// rebuilt from the bucket at start (and by `--reindex`).
#[test]
fn a_node_cache_is_rebuilt_from_the_bucket() {
    let dir = tmpdir("cache-rebuild");
    let s3 = S3Server::start(&dir);
    let la = Loc::new(Backend::S3, &dir, Some(&s3));
    let lb = la.node(&dir.join("node-b-cache"));
    let x = data(1 << 20, 81);
    let y = data(1 << 20, 82);
    let (fx, fy) = (write(&dir, "x", &x), write(&dir, "y", &y));
    {
        let b = Server::start(&lb, &[], &[]);
        b.push(&fx, "x", &[]);
    }
    {
        // B is down: A writes more.
        let a = Server::start(&la, &[], &[]);
        a.push(&fy, "y", &[]);
    }
    let b = Server::start(&lb, &[], &[]);
    assert_eq!(b.pull("y", None, &[]), y, "B's stale cache caught up at start");
    b.check(&[]);
    drop(b);
    std::fs::remove_dir_all(&lb.cache).unwrap();
    let b = Server::start(&lb, &[], &[]);
    assert_eq!(b.pull("x", None, &[]), x, "a missing cache is rebuilt");
    assert_eq!(b.push(&fy, "y", &[])["novel_bytes"].as_u64(), Some(0));
    b.check(&[]);
    drop(b);
    let _ = std::fs::remove_dir_all(&dir);
}

/// SIGKILL of the store at random points during a run of pushes (restarted each time): every
/// version a push reported committed restores byte-identical, every listed version restores
/// to a file pushed under its name, `check` is clean, and gc afterwards keeps all of it.
fn sigkill_at_random_points_loses_no_committed_version(b: Backend) {
    let dir = tmpdir(&format!("kill9-{b:?}"));
    let s3 = s3_for(b, &dir);
    let loc = Loc::new(b, &dir, s3.as_ref());
    let pushes = count(12, 100);
    let mut rng = Rng(0x9e3779b97f4a7c15 ^ pushes as u64);
    // A few names, versions that share most of their bytes.
    let base = data(3 << 20, 91);
    let mut files: Vec<Vec<u8>> = Vec::new();
    let mut srv = Server::start(&loc, &[], &[]);
    let mut committed: BTreeMap<(String, u64), usize> = BTreeMap::new();
    let mut pushed_under: BTreeMap<String, HashSet<usize>> = BTreeMap::new();
    let mut kills = 0;
    // How long an uninterrupted push takes here (the first push is not killed, and every push
    // that ran to its end updates it): kill times are drawn inside it, so that a fast machine
    // (a 3 MiB push to a local store can take 30 ms) still sees its store die mid-push.
    let mut push_ms: u64 = 0;
    for i in 0..pushes {
        let mut f = base.clone();
        let at = rng.below(base.len() as u64 - 300_000) as usize;
        f[at..at + 200_000].copy_from_slice(&data(200_000, 1000 + i as u64));
        f.truncate(base.len() - rng.below(100_000) as usize);
        files.push(f);
        let path = write(&dir, &format!("f{i}"), &files[i]);
        let name = format!("n{}", i % 4);
        pushed_under.entry(name.clone()).or_default().insert(i);
        let mut attempt = 0;
        loop {
            let started = std::time::Instant::now();
            let mut push = bin()
                .args(["push", path.to_str().unwrap(), "--name", &name, "--json", "--pack-size", "256k", "--store", &srv.url])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap();
            // Every third push gets a SIGKILL of the store early (its first attempt), half the
            // others at a random moment.
            let window = (push_ms * 9 / 10).max(2);
            let kill_after = if i == 0 {
                None
            } else if i % 3 == 0 && attempt == 0 {
                Some(Duration::from_millis(rng.below(window / 2)))
            } else {
                (rng.below(2) == 0).then(|| Duration::from_millis(rng.below(window)))
            };
            attempt += 1;
            if let Some(after) = kill_after {
                std::thread::sleep(after);
                if push.try_wait().unwrap().is_none() {
                    srv.kill();
                    kills += 1;
                    let _ = push.wait();
                    srv = Server::start(&loc, &[], &[]);
                    continue; // pushed again, until a push reports success
                }
            }
            let out = push.wait_with_output().unwrap();
            assert!(out.status.success(), "push {i}: {}", String::from_utf8_lossy(&out.stderr));
            push_ms = started.elapsed().as_millis() as u64;
            let r: Value = serde_json::from_slice(&out.stdout).unwrap();
            committed.insert((name.clone(), r["version"].as_u64().unwrap()), i);
            break;
        }
    }
    assert!(kills > 0, "the schedule killed the store at least once");
    // A fresh node (a local store restarts on its directory; an S3 one from its cache).
    srv.kill();
    let srv = Server::start(&loc, &[], &[]);
    for ((name, v), i) in &committed {
        assert_eq!(&srv.pull(name, Some(*v), &[]), &files[*i], "{name} v{v} (push {i})");
    }
    let list = json(&srv.cli(&["ls", "--json"]).stdout);
    for v in list.as_array().unwrap() {
        let (name, ver) = (v["name"].as_str().unwrap(), v["version"].as_u64().unwrap());
        if committed.contains_key(&(name.to_string(), ver)) {
            continue;
        }
        // A version committed by a push whose reply the kill cut: it is one of the files.
        let got = srv.pull(name, Some(ver), &[]);
        assert!(pushed_under[name].iter().any(|&i| files[i] == got), "{name} v{ver} is no file pushed under it");
    }
    srv.check(&[]);
    let g = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    for ((name, v), i) in &committed {
        assert_eq!(&srv.pull(name, Some(*v), &[]), &files[*i], "after gc {g}: {name} v{v}");
    }
    srv.check(&[]);
    eprintln!("kill9 {b:?}: {pushes} pushes, {kills} kills, {} versions committed, gc {g}", committed.len());
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

crate::both_backends!(sigkill_at_random_points_loses_no_committed_version);

/// Many clients at once, pushing overlapping data through two nodes of one bucket: every push
/// succeeds, every version restores byte-identical, each chunk is indexed once, and the
/// duplicate bytes that races leave in the bucket are bounded by the overlap times the number of
/// clients (and removed by gc).
#[test]
fn concurrent_clients_through_two_nodes() {
    let dir = tmpdir("concurrent");
    let s3 = S3Server::start(&dir);
    let la = Loc::new(Backend::S3, &dir, Some(&s3));
    let lb = la.node(&dir.join("node-b-cache"));
    let a = Server::start(&la, &["--gc-settle", "0.2"], &[]);
    let b = Server::start(&lb, &["--gc-settle", "0.2"], &[]);
    let clients = count(8, 32);
    let shared = data(1 << 20, 101);
    let own = 256 << 10;
    let files: Vec<Vec<u8>> = (0..clients)
        .map(|i| {
            let mut f = shared.clone();
            f.extend(data(own, 200 + i as u64));
            f
        })
        .collect();
    let paths: Vec<_> = files.iter().enumerate().map(|(i, f)| write(&dir, &format!("c{i}"), f)).collect();
    let t0 = Instant::now();
    let reports: Vec<Value> = std::thread::scope(|sc| {
        let hs: Vec<_> = paths
            .iter()
            .enumerate()
            .map(|(i, p)| {
                let srv = if i % 2 == 0 { &a } else { &b };
                sc.spawn(move || srv.push(p, &format!("c{i}"), &["--pack-size", "128k"]))
            })
            .collect();
        hs.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let secs = t0.elapsed().as_secs_f64();
    for (i, f) in files.iter().enumerate() {
        let srv = if i % 2 == 0 { &b } else { &a };
        assert_eq!(&srv.pull(&format!("c{i}"), None, &[]), f, "c{i} through the other node");
    }
    let novel: u64 = reports.iter().map(|r| r["novel_bytes"].as_u64().unwrap()).sum();
    let on_disk = pack_bytes_on_disk(&la.objects);
    let unique = (shared.len() + clients * own) as u64;
    // Each client may race the others for the shared MiB once: at most `clients` copies.
    assert!(on_disk <= unique + (clients as u64) * shared.len() as u64 + (1 << 20), "{on_disk} bytes of packs for {unique} unique");
    let c = a.check(&[]);
    b.check(&[]);
    let g = json(&a.cli(&["gc", "--grace", "0", "--json"]).stdout);
    let after = pack_bytes_on_disk(&la.objects);
    assert!(after as f64 <= unique as f64 * 1.6, "after gc: {after} bytes of packs for {unique} unique ({g})");
    for (i, f) in files.iter().enumerate() {
        assert_eq!(&b.pull(&format!("c{i}"), None, &[]), f, "c{i} after gc");
    }
    b.check(&[]);
    eprintln!(
        "concurrent: {clients} clients, {secs:.1}s, novel bytes reported {novel}, packs {on_disk} B before gc / {after} B after for {unique} B unique; {} chunks indexed",
        c["chunks"]
    );
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}

/// A TCP proxy on 127.0.0.1 in front of a store that, while `cut` is set, cuts every connection
/// once it has carried `cut_after` bytes towards the store (mid-pack), or, with `cut_commits`,
/// drops the reply to every `PUT` (a commit whose answer never comes back).
struct Proxy {
    url: String,
    cut: Arc<AtomicBool>,
    cut_commits: Arc<AtomicBool>,
    cuts: Arc<AtomicU64>,
}

impl Proxy {
    fn start(upstream: &str, cut_after: u64) -> Proxy {
        let up = upstream.trim_start_matches("http://").to_string();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let cut = Arc::new(AtomicBool::new(false));
        let cut_commits = Arc::new(AtomicBool::new(false));
        let cuts = Arc::new(AtomicU64::new(0));
        let (c1, c2, c3) = (cut.clone(), cut_commits.clone(), cuts.clone());
        std::thread::spawn(move || {
            for conn in l.incoming() {
                let Ok(client) = conn else { break };
                let Ok(server) = TcpStream::connect(&up) else { continue };
                let (cut, cut_commits, cuts) = (c1.clone(), c2.clone(), c3.clone());
                let (mut cr, mut sw) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let (mut sr, mut cw) = (server, client);
                let is_put = Arc::new(AtomicBool::new(false));
                let put2 = is_put.clone();
                // client → store
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    let mut n = 0u64;
                    loop {
                        let k = match cr.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => k,
                        };
                        if buf[..k].starts_with(b"PUT ") {
                            put2.store(true, Ordering::SeqCst);
                        }
                        if cut.load(Ordering::SeqCst) && n + k as u64 > cut_after {
                            let _ = sw.write_all(&buf[..(cut_after - n.min(cut_after)) as usize]);
                            cuts.fetch_add(1, Ordering::SeqCst);
                            let _ = sw.shutdown(Shutdown::Both);
                            let _ = cr.shutdown(Shutdown::Both);
                            break;
                        }
                        n += k as u64;
                        if sw.write_all(&buf[..k]).is_err() {
                            break;
                        }
                    }
                    let _ = sw.shutdown(Shutdown::Write);
                });
                // store → client
                std::thread::spawn(move || {
                    let mut buf = [0u8; 16384];
                    loop {
                        let k = match sr.read(&mut buf) {
                            Ok(0) | Err(_) => break,
                            Ok(k) => k,
                        };
                        if cut_commits.load(Ordering::SeqCst) && is_put.load(Ordering::SeqCst) {
                            // The commit reached the store; its answer is lost.
                            let _ = cw.shutdown(Shutdown::Both);
                            break;
                        }
                        if cw.write_all(&buf[..k]).is_err() {
                            break;
                        }
                    }
                    let _ = cw.shutdown(Shutdown::Write);
                });
            }
        });
        Proxy { url, cut, cut_commits, cuts }
    }
}

/// Connections cut mid-pack and mid-commit: the push fails; pushed again with the network
/// healed, it sends only what the store lacks; no half-committed recipe is ever visible.
fn cut_connections_lose_nothing_and_a_resumed_push_sends_only_what_is_missing(b: Backend) {
    let dir = tmpdir(&format!("proxy-{b:?}"));
    let s3 = s3_for(b, &dir);
    let loc = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&loc, &[], &[]);
    let proxy = Proxy::start(&srv.url, 600 << 10);
    let big = data(6 << 20, 111);
    let fbig = write(&dir, "big", &big);
    let via = |args: &[&str]| bin().args(args).args(["--store", &proxy.url, "--json"]).output().unwrap();
    // Mid-pack: packs of 1 MiB, every connection cut after 600 KiB; the small ones get through.
    proxy.cut.store(true, Ordering::SeqCst);
    let out = via(&["push", fbig.to_str().unwrap(), "--name", "big", "--pack-size", "1m"]);
    assert!(!out.status.success(), "the push cannot finish through a proxy that cuts every pack");
    assert!(proxy.cuts.load(Ordering::SeqCst) > 0);
    let list = json(&srv.cli(&["ls", "big", "--json"]).stdout);
    assert!(list.as_array().unwrap().is_empty(), "no half-committed version: {list}");
    let before = srv.check(&[]);
    proxy.cut.store(false, Ordering::SeqCst);
    let out = via(&["push", fbig.to_str().unwrap(), "--name", "big", "--pack-size", "256k"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r = json(&out.stdout);
    let after = srv.check(&[]);
    let new_chunks = after["chunks"].as_u64().unwrap() - before["chunks"].as_u64().unwrap();
    assert_eq!(r["novel_chunks"].as_u64().unwrap(), new_chunks, "only the missing chunks were sent: {r}");
    assert_eq!(srv.pull("big", None, &[]), big);
    // Mid-commit: the commit's answer is lost; the push asks the store whether it committed
    // (a version above its base with its digest) before sending it again: it finds its version,
    // committed once; every listed version restores byte-identical.
    let mut v2 = big.clone();
    v2[100..5000].fill(9);
    let f2 = write(&dir, "v2", &v2);
    proxy.cut_commits.store(true, Ordering::SeqCst);
    let out = via(&["push", f2.to_str().unwrap(), "--name", "big"]);
    proxy.cut_commits.store(false, Ordering::SeqCst);
    assert!(out.status.success(), "the push found the commit whose answer was lost: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out.stdout)["version"].as_u64(), Some(2));
    let list = json(&srv.cli(&["ls", "big", "--json"]).stdout);
    assert_eq!(list.as_array().unwrap().len(), 2, "committed once: {list}");
    let out = via(&["push", f2.to_str().unwrap(), "--name", "big"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(json(&out.stdout)["novel_bytes"].as_u64().unwrap() == 0, "the chunks were stored before the cut commit");
    let list = json(&srv.cli(&["ls", "big", "--json"]).stdout);
    for v in list.as_array().unwrap() {
        let ver = v["version"].as_u64().unwrap();
        let got = srv.pull("big", Some(ver), &[]);
        assert!(got == big || got == v2, "big v{ver} is one of the files");
    }
    assert_eq!(srv.pull("big", None, &[]), v2);
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

crate::both_backends!(cut_connections_lose_nothing_and_a_resumed_push_sends_only_what_is_missing);

/// Slow clients (slowloris): a request head that never ends is cut after `--header-timeout`,
/// a body that stalls after `--body-timeout` (400, nothing stored, no spool file left), and the
/// server keeps serving everyone else meanwhile. Plus inputs the earlier suite lacks: ranges
/// that are reversed, multiple or empty, names that are not UTF-8.
#[test]
fn slow_clients_are_cut_and_odd_inputs_get_their_4xx() {
    let dir = tmpdir("slow");
    let loc = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&loc, &["--header-timeout", "1", "--body-timeout", "1"], &[]);
    let hostport = srv.url.trim_start_matches("http://").to_string();
    let u = |tail: &str| format!("{}/v1/ns/default/{tail}", srv.url);
    // Ten connections that send half a request head and then nothing.
    let slow: Vec<TcpStream> = (0..10)
        .map(|_| {
            let mut s = TcpStream::connect(&hostport).unwrap();
            s.write_all(b"POST /v1/ns/default/query HTTP/1.1\r\nHost: 127.0.0.1\r\n").unwrap();
            s
        })
        .collect();
    // The server answers others meanwhile.
    let (s, _, _) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let t0 = Instant::now();
    for mut s in slow {
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = Vec::new();
        let _ = s.read_to_end(&mut buf); // closed by the server (possibly after a 408)
        let text = String::from_utf8_lossy(&buf);
        assert!(buf.is_empty() || text.starts_with("HTTP/1.1 408"), "{text}");
    }
    assert!(t0.elapsed() < Duration::from_secs(10), "slow heads cut within the timeout, not left open: {:?}", t0.elapsed());
    // A pack upload whose body stalls after a few bytes.
    let bytes = data(30000, 5);
    let ch = chunks_of(&bytes, &[15000, 15000]);
    let good = pack(&ch);
    let mut s = TcpStream::connect(&hostport).unwrap();
    write!(s, "POST /v1/ns/default/packs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {}\r\n\r\n", good.len()).unwrap();
    s.write_all(&good[..good.len() / 2]).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let t0 = Instant::now();
    let _ = s.read_to_end(&mut buf);
    let text = String::from_utf8_lossy(&buf);
    assert!(text.starts_with("HTTP/1.1 400"), "a stalled body gets a 400: {text}");
    assert!(text.contains("sent nothing"), "{text}");
    assert!(t0.elapsed() < Duration::from_secs(10));
    assert_eq!(packs_on_disk(&srv.data), 0, "nothing of it stored");
    assert_eq!(srv.spool_files(), 0, "its spool file is gone");
    // A query body that stalls.
    let mut s = TcpStream::connect(&hostport).unwrap();
    s.write_all(b"POST /v1/ns/default/query HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 64\r\n\r\n0123").unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    assert!(String::from_utf8_lossy(&buf).starts_with("HTTP/1.1 400"), "{}", String::from_utf8_lossy(&buf));
    // Odd ranges and names on a stored file.
    let (s, _, b) = http("POST", &u("packs"), None, &[], Some(&good));
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&b));
    let (s, _, _) = http("PUT", &u("files/f"), None, &[], Some(&recipe_text(&ch)));
    assert_eq!(s, 201);
    for (range, want) in [
        ("bytes=20-10", 416),
        ("bytes=30000-30010", 416),
        ("bytes=999999999999999999999-", 416),
        ("bytes=-0", 416),
        ("bytes=0-1,5-6", 416),
        ("chunks=0-1", 416),
        ("bytes=29990-99999", 206),
        ("bytes=-10", 206),
    ] {
        let (s, h, b) = http("GET", &u("files/f"), None, &[("Range", range)], None);
        assert!(s == want || (want == 416 && s == 200), "{range}: {s}");
        if s == 206 {
            assert_eq!(b, bytes[29990..], "{range}");
            assert_eq!(h["content-range"], "bytes 29990-29999/30000");
        }
        if s == 200 {
            assert_eq!(b, bytes, "{range} ignored: the whole file");
        }
    }
    for name in ["%FF%FE", "a%00b", "..", "%2E%2E", "a%2F..%2Fb"] {
        let (s, _, b) = http("GET", &u(&format!("files/{name}")), None, &[], None);
        assert_eq!(s, 400, "{name}: {}", String::from_utf8_lossy(&b));
        let (s, _, _) = http("PUT", &u(&format!("files/{name}")), None, &[], Some(&recipe_text(&ch)));
        assert_eq!(s, 400, "{name}");
    }
    let list = json(&srv.cli(&["ls", "--json"]).stdout);
    assert_eq!(list.as_array().unwrap().len(), 1, "only f: {list}");
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
