//! Helpers of the store's end-to-end tests (`store.rs`, `scale.rs`): real `cutpoint serve`
//! processes on 127.0.0.1 (free ports) over a temporary directory or over a bucket of a real
//! S3-compatible server (versitygw, posix backend on a temporary directory, started here on
//! 127.0.0.1 and killed when its test ends).
#![allow(dead_code)]

use cutpoint_core::protocol::pack::PackWriter;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::{Digest, HashAlg};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_cutpoint"));
    // The push cache of the tests' pushes lives under the temporary directory, not the user's.
    c.env("XDG_CACHE_HOME", std::env::temp_dir().join(format!("cutpoint-test-cache-{}", std::process::id())));
    c
}

pub fn data(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed.wrapping_mul(0x9E3779B97F4A7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s >> 12;
            s ^= s << 25;
            s ^= s >> 27;
            (s.wrapping_mul(0x2545F4914F6CDD1D) >> 56) as u8
        })
        .collect()
}

/// The two backends every store test runs against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend {
    /// A local directory (`--data DIR`).
    Local,
    /// A bucket of a real S3-compatible server (`--data s3://BUCKET/PREFIX`).
    S3,
}

/// Runs a test function `fn name(b: Backend)` once per backend, as `name::local` and `name::s3`.
#[macro_export]
macro_rules! both_backends {
    ($($name:ident),* $(,)?) => {$(
        mod $name {
            #[test]
            fn local() {
                super::$name($crate::common::Backend::Local)
            }
            #[test]
            fn s3() {
                super::$name($crate::common::Backend::S3)
            }
        }
    )*};
}

pub const S3_KEY: &str = "cutpointtest";
pub const S3_SECRET: &str = "cutpointtestsecret0123456789";
pub const S3_BUCKET: &str = "cutpoint";

/// The versitygw binary: `$CUTPOINT_VERSITYGW`, else `$CUTPOINT_GOBIN` or `~/go/bin`, where
/// `scripts/install.sh` (run first by `npm test`) builds it. Missing: the test fails, saying so.
pub fn versitygw() -> PathBuf {
    let p = match std::env::var_os("CUTPOINT_VERSITYGW") {
        Some(p) => PathBuf::from(p),
        None => std::env::var_os("CUTPOINT_GOBIN")
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").expect("HOME")).join("go/bin"))
            .join("versitygw"),
    };
    assert!(
        p.is_file(),
        "the S3 tests need versitygw at {} (an S3-compatible server, built by scripts/install.sh with `go install`; \
         run `bash scripts/install.sh`, or set CUTPOINT_VERSITYGW)",
        p.display()
    );
    p
}

pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A versitygw S3 server on 127.0.0.1 with its posix backend in `dir/s3`, bucket `cutpoint`
/// made; killed on drop.
pub struct S3Server {
    child: Child,
    pub endpoint: String,
    pub root: PathBuf,
}

impl S3Server {
    pub fn start(dir: &Path) -> S3Server {
        let bin = versitygw();
        let root = dir.join("s3");
        std::fs::create_dir_all(root.join(S3_BUCKET)).unwrap();
        let t0 = Instant::now();
        loop {
            let port = free_port();
            let mut child = Command::new(&bin)
                .args(["--access", S3_KEY, "--secret", S3_SECRET, "--port", &format!("127.0.0.1:{port}"), "posix"])
                .arg(&root)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
            // Ready when it answers on its port (or gone: the port was taken meanwhile).
            loop {
                if let Some(st) = child.try_wait().unwrap() {
                    let mut err = String::new();
                    let _ = std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err);
                    assert!(t0.elapsed() < Duration::from_secs(30), "versitygw exited ({st}): {err}");
                    break;
                }
                if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                    return S3Server {
                        child,
                        endpoint: format!("http://127.0.0.1:{port}"),
                        root,
                    };
                }
                assert!(t0.elapsed() < Duration::from_secs(30), "versitygw did not start listening");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Where a test's store lives: the `serve` arguments and environment, the objects' directory
/// on disk, the node's index/spool directory.
#[derive(Clone)]
pub struct Loc {
    pub args: Vec<String>,
    pub env: Vec<(String, String)>,
    pub objects: PathBuf,
    pub cache: PathBuf,
}

impl Loc {
    /// The store of a test in `dir`: `dir/store` (local), or prefix `name` of the bucket of
    /// `s3` with this node's cache in `dir/<name>-cache`.
    pub fn new(b: Backend, dir: &Path, s3: Option<&S3Server>) -> Loc {
        Loc::named(b, dir, s3, "store")
    }
    pub fn named(b: Backend, dir: &Path, s3: Option<&S3Server>, name: &str) -> Loc {
        match b {
            Backend::Local => {
                let d = dir.join(name);
                Loc {
                    args: vec!["--data".into(), d.to_str().unwrap().into()],
                    env: vec![],
                    objects: d.join("objects"),
                    cache: d,
                }
            }
            Backend::S3 => {
                let s3 = s3.expect("an S3 server for the S3 backend");
                Loc {
                    args: vec![
                        "--data".into(),
                        format!("s3://{S3_BUCKET}/{name}"),
                        "--s3-endpoint".into(),
                        s3.endpoint.clone(),
                        "--cache".into(),
                        dir.join(format!("{name}-cache")).to_str().unwrap().into(),
                    ],
                    env: vec![
                        ("AWS_ACCESS_KEY_ID".into(), S3_KEY.into()),
                        ("AWS_SECRET_ACCESS_KEY".into(), S3_SECRET.into()),
                        ("AWS_REGION".into(), "us-east-1".into()),
                    ],
                    objects: s3.root.join(S3_BUCKET).join(name),
                    cache: dir.join(format!("{name}-cache")),
                }
            }
        }
    }
    /// Another node over the same bucket (its own cache directory `cache`); a local store has
    /// one node only.
    pub fn node(&self, cache: &Path) -> Loc {
        let mut l = self.clone();
        let i = l.args.iter().position(|a| a == "--cache").expect("several nodes need the S3 backend");
        l.args[i + 1] = cache.to_str().unwrap().into();
        l.cache = cache.to_path_buf();
        l
    }
}

/// The S3 server a test of backend `b` needs (none for a local store).
pub fn s3_for(b: Backend, dir: &Path) -> Option<S3Server> {
    (b == Backend::S3).then(|| S3Server::start(dir))
}

/// A fresh directory for one test.
pub fn tmpdir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("cutpoint-store-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A running `cutpoint serve`; killed on drop.
pub struct Server {
    pub child: Child,
    pub url: String,
    /// Where the objects lie on disk (the store's `objects/` or the bucket's prefix directory).
    pub data: PathBuf,
    /// The node's directory with its index and its `tmp/` spool.
    pub cache: PathBuf,
}

impl Server {
    pub fn start(loc: &Loc, extra: &[&str], env: &[(&str, &str)]) -> Server {
        let mut c = bin();
        c.arg("serve").args(&loc.args).args(["--listen", "127.0.0.1:0"]).args(extra);
        for (k, v) in &loc.env {
            c.env(k, v);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
        let mut first = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
        let url = first
            .trim()
            .strip_prefix("cutpoint serve: listening on ")
            .unwrap_or_else(|| panic!("unexpected first line from serve: {first:?}"))
            .to_string();
        Server {
            child,
            url,
            data: loc.objects.clone(),
            cache: loc.cache.clone(),
        }
    }
    pub fn kill(&mut self) {
        let _ = self.child.kill(); // SIGKILL
        let _ = self.child.wait();
    }
    /// Waits for the server to exit by itself (a failpoint) and says how.
    pub fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let t0 = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                return s;
            }
            assert!(t0.elapsed() < within, "the server did not stop at its failpoint");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    pub fn cli(&self, args: &[&str]) -> std::process::Output {
        bin().args(args).args(["--store", &self.url]).env_remove("CUTPOINT_TOKEN").output().unwrap()
    }
    pub fn push(&self, file: &Path, name: &str, extra: &[&str]) -> Value {
        let mut a = vec!["push", file.to_str().unwrap(), "--name", name, "--json"];
        a.extend_from_slice(extra);
        let out = self.cli(&a);
        assert!(out.status.success(), "push {name}: {}", String::from_utf8_lossy(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }
    pub fn pull(&self, name: &str, version: Option<u64>, extra: &[&str]) -> Vec<u8> {
        let dir = tmpdir(&format!("pull-{}", rand_suffix()));
        let out_file = dir.join("out");
        let v = version.map(|v| v.to_string());
        let mut a = vec!["pull", name, "-o", out_file.to_str().unwrap()];
        if let Some(v) = &v {
            a.extend(["--version", v]);
        }
        a.extend_from_slice(extra);
        let out = self.cli(&a);
        assert!(out.status.success(), "pull {name}: {}", String::from_utf8_lossy(&out.stderr));
        let b = std::fs::read(&out_file).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
        b
    }
    pub fn check(&self, extra: &[&str]) -> Value {
        let mut a = vec!["check", "--json"];
        a.extend_from_slice(extra);
        let out = self.cli(&a);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|_| panic!("check: {}", String::from_utf8_lossy(&out.stderr)));
        assert!(v["problems"].as_array().unwrap().is_empty(), "check found problems: {v}");
        assert!(out.status.success());
        v
    }
    pub fn spool_files(&self) -> usize {
        std::fs::read_dir(self.cache.join("tmp")).map(|d| d.count()).unwrap_or(0)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

pub fn rand_suffix() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    format!("{}-{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed))
}

pub fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, bytes).unwrap();
    p
}

/// A raw HTTP request; returns (status, headers, body).
pub fn http(method: &str, url: &str, token: Option<&str>, headers: &[(&str, &str)], body: Option<&[u8]>) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    let agent: ureq::Agent = ureq::Agent::config_builder().http_status_as_error(false).build().into();
    let mut req = ureq::http::Request::builder().method(method).uri(url);
    if let Some(t) = token {
        req = req.header("Authorization", format!("Bearer {t}"));
    }
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    let resp = match body {
        Some(b) => agent.run(req.body(b.to_vec()).unwrap()),
        None => agent.run(req.body(()).unwrap()),
    }
    .unwrap();
    let status = resp.status().as_u16();
    let h = resp.headers().clone();
    let b = resp.into_body().with_config().limit(1 << 30).read_to_vec().unwrap();
    (status, h, b)
}

pub fn json(b: &[u8]) -> Value {
    serde_json::from_slice(b).unwrap_or_else(|_| panic!("not JSON: {}", String::from_utf8_lossy(b)))
}

pub fn chunks_of(bytes: &[u8], sizes: &[usize]) -> Vec<(Digest, Vec<u8>)> {
    let mut out = Vec::new();
    let mut at = 0;
    for &s in sizes {
        let c = bytes[at..at + s].to_vec();
        out.push((HashAlg::Blake3.digest(&c).unwrap(), c));
        at += s;
    }
    out
}

pub fn pack(chunks: &[(Digest, Vec<u8>)]) -> Vec<u8> {
    let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
    for (id, c) in chunks {
        w.add(id, c).unwrap();
    }
    w.finish().unwrap()
}

pub fn recipe_text(chunks: &[(Digest, Vec<u8>)]) -> Vec<u8> {
    let mut r = Recipe {
        profile: "gear:2k:8k:64k".into(),
        hash: HashAlg::Blake3,
        digest: None,
        entries: chunks.iter().map(|(id, c)| RecipeEntry { fp: *id, size: c.len() as u32, last: None, regular: true }).collect(),
    };
    r.digest = FileDigest::of(&r);
    let mut t = Vec::new();
    r.write(&mut t).unwrap();
    t
}

pub fn packs_on_disk(data: &Path) -> usize {
    fn walk(p: &Path, n: &mut usize) {
        if let Ok(d) = std::fs::read_dir(p) {
            for e in d.flatten() {
                if e.path().is_dir() {
                    walk(&e.path(), n);
                } else {
                    *n += 1;
                }
            }
        }
    }
    let mut n = 0;
    if let Ok(nss) = std::fs::read_dir(data.join("ns")) {
        for ns in nss.flatten() {
            walk(&ns.path().join("packs"), &mut n);
        }
    }
    n
}


/// How a [`FaultProxy`] misbehaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stall {
    /// Forwards everything.
    Off,
    /// Accepts connections and never answers (nothing reaches the store).
    Silent,
    /// Forwards the first N bytes the store answers on a connection, then nothing more (the
    /// connection stays open).
    Answer(u64),
    /// Forwards the first N bytes a client sends on a connection, then takes no more from it
    /// and forwards nothing of the store's answer.
    Upload(u64),
    /// Forwards every request; from a `PUT` (a commit) on, nothing of the store's answers (the
    /// commit is made, its answer lost).
    Commit,
}

/// What a [`FaultProxy`] saw on one connection.
#[derive(Clone, Debug, Default)]
pub struct ConnLog {
    /// What the client sent, up to 64 KiB (request heads of GETs; the start of an upload).
    pub sent: Vec<u8>,
    /// Bytes of the store's answers forwarded to the client.
    pub answered: u64,
    /// Whether the stall hit this connection.
    pub stalled: bool,
}

/// A TCP proxy on 127.0.0.1 in front of a store that stalls as [`Stall`] says: on every
/// connection, or (`stalls` = 1) once and then forwards again. A stalled connection is held
/// open, its bytes going nowhere, until the client gives up (or the proxy is dropped).
pub struct FaultProxy {
    pub url: String,
    mode: std::sync::Arc<std::sync::Mutex<(Stall, u64)>>,
    pub log: std::sync::Arc<std::sync::Mutex<Vec<ConnLog>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FaultProxy {
    pub fn start(upstream: &str) -> FaultProxy {
        use std::sync::atomic::AtomicBool;
        use std::sync::{Arc, Mutex};
        let up = upstream.trim_start_matches("http://").to_string();
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.set_nonblocking(true).unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        let mode = Arc::new(Mutex::new((Stall::Off, u64::MAX)));
        let log = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (m, lg, st) = (mode.clone(), log.clone(), stop.clone());
        std::thread::spawn(move || {
            while !st.load(std::sync::atomic::Ordering::SeqCst) {
                match l.accept() {
                    Ok((c, _)) => {
                        c.set_nonblocking(false).unwrap();
                        let stall = {
                            let g = m.lock().unwrap();
                            let s = g.0;
                            if s != Stall::Off && g.1 > 0 {
                                s
                            } else {
                                Stall::Off
                            }
                        };
                        let i = {
                            let mut g = lg.lock().unwrap();
                            g.push(ConnLog::default());
                            g.len() - 1
                        };
                        let (m, lg, st, up) = (m.clone(), lg.clone(), st.clone(), up.clone());
                        std::thread::spawn(move || proxy_conn(c, &up, stall, &m, &lg, i, &st));
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        });
        FaultProxy { url, mode, log, stop }
    }

    /// Stalls every new connection as `s` says (`Stall::Off`: none).
    pub fn stall(&self, s: Stall) {
        *self.mode.lock().unwrap() = (s, u64::MAX);
    }

    /// Stalls the next connection the stall hits as `s` says, and none after it.
    pub fn stall_once(&self, s: Stall) {
        *self.mode.lock().unwrap() = (s, 1);
    }

    /// The connections so far.
    pub fn conns(&self) -> Vec<ConnLog> {
        self.log.lock().unwrap().clone()
    }
}

impl Drop for FaultProxy {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// One proxied connection (see [`FaultProxy`]).
fn proxy_conn(
    client: std::net::TcpStream,
    up: &str,
    stall: Stall,
    mode: &std::sync::Mutex<(Stall, u64)>,
    log: &std::sync::Mutex<Vec<ConnLog>>,
    i: usize,
    stop: &std::sync::atomic::AtomicBool,
) {
    use std::io::{Read, Write};
    use std::net::Shutdown;
    use std::sync::atomic::{AtomicBool, Ordering};
    // Whether the stall applies now: it takes one from the budget the first time it hits this
    // connection (none left: another connection took the last).
    let hit = || {
        let mut g = mode.lock().unwrap();
        let mut l = log.lock().unwrap();
        if l[i].stalled {
            return true;
        }
        if g.1 == 0 {
            return false;
        }
        g.1 -= 1;
        l[i].stalled = true;
        true
    };
    let hold = |done: &AtomicBool| {
        while !done.load(Ordering::SeqCst) && !stop.load(Ordering::SeqCst) {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    if stall == Stall::Silent && hit() {
        // Reads and drops what the client sends until it goes.
        let mut c = client;
        c.set_read_timeout(Some(Duration::from_millis(50))).unwrap();
        let mut buf = [0u8; 16384];
        while !stop.load(Ordering::SeqCst) {
            match c.read(&mut buf) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
                Err(_) => break,
            }
        }
        return;
    }
    let Ok(server) = std::net::TcpStream::connect(up) else { return };
    let (mut cr, mut sw) = (client.try_clone().unwrap(), server.try_clone().unwrap());
    let (mut sr, mut cw) = (server, client);
    let upload_stalled = AtomicBool::new(false);
    let put_seen = AtomicBool::new(false);
    let up_done = AtomicBool::new(false);
    let down_done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // client → store
        s.spawn(|| {
            let mut buf = [0u8; 16384];
            let mut n = 0u64;
            loop {
                let k = match cr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => k,
                };
                let mut fwd = k;
                if stall == Stall::Commit && buf[..k].starts_with(b"PUT ") {
                    put_seen.store(true, Ordering::SeqCst);
                }
                if let Stall::Upload(lim) = stall {
                    if n + k as u64 > lim && hit() {
                        fwd = (lim - n.min(lim)) as usize;
                    }
                }
                {
                    let mut g = log.lock().unwrap();
                    let sent = &mut g[i].sent;
                    let room = (64usize << 10).saturating_sub(sent.len());
                    sent.extend_from_slice(&buf[..fwd.min(room)]);
                }
                if sw.write_all(&buf[..fwd]).is_err() {
                    break;
                }
                n += fwd as u64;
                if fwd < k {
                    upload_stalled.store(true, Ordering::SeqCst);
                    // Takes nothing more from the client: its writes fill the buffers and block.
                    hold(&down_done);
                    break;
                }
            }
            let _ = sw.shutdown(Shutdown::Write);
            up_done.store(true, Ordering::SeqCst);
        });
        // store → client
        s.spawn(|| {
            let mut buf = [0u8; 16384];
            let mut n = 0u64;
            let mut stalled = false;
            loop {
                let k = match sr.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(k) => k,
                };
                if stalled || upload_stalled.load(Ordering::SeqCst) {
                    continue; // dropped: the client waits for bytes that never come
                }
                let mut fwd = k;
                if put_seen.load(Ordering::SeqCst) && hit() {
                    fwd = 0;
                    stalled = true;
                }
                if let Stall::Answer(lim) = stall {
                    if n + k as u64 > lim && hit() {
                        fwd = (lim - n.min(lim)) as usize;
                        stalled = true;
                    }
                }
                if cw.write_all(&buf[..fwd]).is_err() {
                    break;
                }
                n += fwd as u64;
                log.lock().unwrap()[i].answered += fwd as u64;
            }
            if stalled || upload_stalled.load(Ordering::SeqCst) {
                // The store closed; the client still gets nothing until it gives up.
                hold(&up_done);
            }
            let _ = cw.shutdown(Shutdown::Both);
            let _ = sr.shutdown(Shutdown::Both);
            down_done.store(true, Ordering::SeqCst);
        });
    });
}
