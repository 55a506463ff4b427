//! A store that stops answering (issue #34): `ls`, `push` and `pull` through a [`FaultProxy`]
//! on 127.0.0.1 that never answers, stalls mid-answer, stalls mid-upload, or stalls once and
//! then forwards again. Each client gives up within its `--timeout` (1 s here, 2 retries) with a
//! message naming the store, the request and the wait, exit code 1, nothing half-written; where
//! the stall recovers, the command completes byte-identical, and a resumed pull reads no
//! verified byte twice.

mod common;
use common::*;
use std::path::Path;
use std::process::Output;
use std::time::{Duration, Instant};

/// The client flags of every command here: 1 s without progress, 2 retries (3 tries).
const FAST: [&str; 4] = ["--timeout", "1", "--retries", "2"];

fn via(proxy: &FaultProxy, args: &[&str]) -> (Output, Duration) {
    let t0 = Instant::now();
    let out = bin().args(args).args(["--store", &proxy.url]).args(FAST).env_remove("CUTPOINT_TOKEN").output().unwrap();
    (out, t0.elapsed())
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Gave up: exit 1, within a bound of its tries (3 × 1 s + backoff 0.2 + 0.4 s, on a loaded
/// machine), the message naming the store and the request.
fn gave_up(o: &Output, took: Duration, proxy: &FaultProxy, request: &str) -> String {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(1), "{err}");
    assert!(took < Duration::from_secs(30), "gave up after {took:?}: {err}");
    assert!(err.contains(&format!("{}: {request}", proxy.url)), "names the store and the request ({request}): {err}");
    err
}

fn setup(test: &str) -> (std::path::PathBuf, Server, FaultProxy) {
    let dir = tmpdir(test);
    let loc = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&loc, &[], &[]);
    let proxy = FaultProxy::start(&srv.url);
    (dir, srv, proxy)
}

fn no_partial_files(dir: &Path) {
    let left: Vec<_> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial") || n == "out")
        .collect();
    assert!(left.is_empty(), "nothing half-written: {left:?}");
}

#[test]
fn ls_gives_up_on_a_store_that_never_answers_and_gets_through_one_that_stalls_once() {
    let (dir, srv, proxy) = setup("stall-ls");
    proxy.stall(Stall::Silent);
    let (o, took) = via(&proxy, &["ls"]);
    let err = gave_up(&o, took, &proxy, "GET /v1/ns/default/files");
    assert!(err.contains("no answer for 1 s (gave up after 3 tries)"), "{err}");
    assert!(took >= Duration::from_secs(3), "waited its 3 tries: {took:?}");
    // The answer's head never comes, once: the second try lists.
    let f = write(&dir, "small", &data(100_000, 1));
    srv.push(&f, "small", &[]);
    proxy.stall_once(Stall::Answer(0));
    let (o, _) = via(&proxy, &["ls", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(json(&o.stdout)[0]["name"], "small");
    assert!(proxy.conns().iter().any(|c| c.stalled), "the stall happened");
    drop((proxy, srv));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn pull_gives_up_on_a_stall_mid_answer_and_resumes_after_one_reading_no_verified_byte_twice() {
    let (dir, srv, proxy) = setup("stall-pull");
    let bytes = data(8 << 20, 2);
    let f = write(&dir, "big", &bytes);
    srv.push(&f, "big", &[]);
    let out = dir.join("out");
    // Every answer stops after 1 MiB: each try resumes, stalls again; gives up, no output.
    proxy.stall(Stall::Answer(1 << 20));
    let (o, took) = via(&proxy, &["pull", "big", "-o", out.to_str().unwrap()]);
    let err = gave_up(&o, took, &proxy, "GET /v1/ns/default/files/big?version=1");
    assert!(err.contains("no answer for 1 s at byte"), "{err}");
    assert!(err.contains("(gave up after 3 tries)"), "{err}");
    no_partial_files(&dir);
    // Once: the pull resumes with a Range request where its verified chunks end.
    proxy.stall_once(Stall::Answer(3 << 20));
    let before = proxy.conns().len();
    let (o, _) = via(&proxy, &["pull", "big", "-o", out.to_str().unwrap()]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(&out).unwrap() == bytes, "byte-identical");
    let conns = proxy.conns()[before..].to_vec();
    assert!(conns.iter().any(|c| c.stalled), "the stall happened");
    let ranges: Vec<u64> = conns
        .iter()
        .filter_map(|c| {
            let t = String::from_utf8_lossy(&c.sent).to_ascii_lowercase();
            let at = t.find("range: bytes=")? + "range: bytes=".len();
            t[at..].split('-').next()?.parse().ok()
        })
        .collect();
    assert_eq!(ranges.len(), 1, "one resumed request: {ranges:?}");
    let from = ranges[0];
    assert!(from > 0 && from < bytes.len() as u64, "resumed at {from}");
    // Everything answered after the stall is the file from `from` on (plus heads): no byte
    // before it came again.
    let stalled = conns.iter().position(|c| c.stalled).unwrap();
    let after: u64 = conns[stalled + 1..].iter().map(|c| c.answered).sum();
    let rest = bytes.len() as u64 - from;
    assert!(after >= rest && after < rest + 4096, "after the stall {after} bytes answered for the {rest} from byte {from}");
    // And the stalled answer got at least up to `from` (it verified no byte it had not got).
    let total: u64 = conns.iter().map(|c| c.answered).sum();
    assert!(total < bytes.len() as u64 + (1 << 20) + (64 << 10), "re-read little: {total} answered for {} bytes", bytes.len());
    drop((proxy, srv));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn push_gives_up_on_a_stall_mid_upload_commits_nothing_and_completes_after_one() {
    let (dir, srv, proxy) = setup("stall-push");
    let bytes = data(6 << 20, 3);
    let f = write(&dir, "up", &bytes);
    // Every connection takes 300 KiB of what the client sends, then nothing.
    proxy.stall(Stall::Upload(300 << 10));
    let (o, took) = via(&proxy, &["push", f.to_str().unwrap(), "--name", "up", "--pack-size", "1m"]);
    let err = gave_up(&o, took, &proxy, "POST /v1/ns/default/packs");
    assert!(err.contains("for 1 s") && err.contains("(gave up after 3 tries)"), "{err}");
    let list = json(&srv.cli(&["ls", "up", "--json"]).stdout);
    assert!(list.as_array().unwrap().is_empty(), "nothing committed: {list}");
    // A store that answers nothing at all: the first request gives up.
    proxy.stall(Stall::Silent);
    let (o, took) = via(&proxy, &["push", f.to_str().unwrap(), "--name", "up"]);
    let err = gave_up(&o, took, &proxy, "GET /v1");
    assert!(err.contains("no answer for 1 s (gave up after 3 tries)"), "{err}");
    // Once: the push completes and pulls back byte-identical.
    proxy.stall_once(Stall::Upload(300 << 10));
    let (o, _) = via(&proxy, &["push", f.to_str().unwrap(), "--name", "up", "--pack-size", "1m", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(proxy.conns().iter().any(|c| c.stalled), "the stall happened");
    assert_eq!(json(&o.stdout)["version"], 1);
    assert!(srv.pull("up", None, &[]) == bytes, "byte-identical");
    drop((proxy, srv));
    let _ = std::fs::remove_dir_all(&dir);
}

/// The answer to a commit never comes, once: the client reads the name back, finds its commit
/// and does not commit a second version.
#[test]
fn a_commit_whose_answer_stalls_is_read_back_not_committed_twice() {
    let (dir, srv, proxy) = setup("stall-commit");
    let bytes = data(200_000, 4);
    let f = write(&dir, "c", &bytes);
    srv.push(&f, "c", &[]); // the chunks are there: the next push sends only its commit
    let mut v2 = bytes.clone();
    v2[10..20].fill(7);
    let f2 = write(&dir, "c2", &v2);
    proxy.stall_once(Stall::Commit);
    let (o, took) = via(&proxy, &["push", f2.to_str().unwrap(), "--name", "c", "--json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(took >= Duration::from_secs(1), "waited for the lost answer: {took:?}");
    assert!(proxy.conns().iter().any(|c| c.stalled), "the stall happened");
    assert_eq!(json(&o.stdout)["version"], 2);
    let list = json(&srv.cli(&["ls", "c", "--json"]).stdout);
    let versions: Vec<u64> = list.as_array().unwrap().iter().map(|v| v["version"].as_u64().unwrap()).collect();
    assert_eq!(versions, vec![1, 2], "one version per push: {list}");
    assert!(srv.pull("c", None, &[]) == v2);
    drop((proxy, srv));
    let _ = std::fs::remove_dir_all(&dir);
}
