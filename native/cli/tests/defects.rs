//! Store defects found by a hostile probe and an outside implementer (issue #27, part B), end
//! to end against a real `cutpoint serve` on 127.0.0.1, over both backends where the defect
//! is the store's: long names, version numbers reused after a delete, a damaged recipe, a
//! gc grace that wrapped, and the `Authorization` scheme's case.

mod common;
use common::*;
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

crate::both_backends!(
    names_of_every_valid_length_are_stored,
    a_version_number_is_never_given_twice,
    a_damaged_recipe_is_reported_and_blocks_nothing_else,
    a_huge_gc_grace_spares_every_pack,
);

fn ok(out: &std::process::Output, what: &str) {
    assert!(out.status.success(), "{what}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Names of 1 to 255 bytes (the protocol's limit), ASCII and multi-byte, push, list, pull,
/// delete and check; no key segment on disk is longer than 255 bytes.
fn names_of_every_valid_length_are_stored(b: Backend) {
    let dir = tmpdir(&format!("names-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let names: Vec<String> = vec![
        "x".repeat(127),
        "x".repeat(128),
        format!("dir/{}", "ü".repeat(100)),
        "y".repeat(254),
        "z".repeat(255),
        format!("{}é", "w".repeat(253)),
        // A name whose first 127 bytes are another name: two keys, neither inside the other.
        format!("{}{}", "x".repeat(127), "000000"),
    ];
    for (i, name) in names.iter().enumerate() {
        assert!(name.len() <= 255);
        let bytes = data(20_000 + i, 60 + i as u64);
        let f = write(&dir, &format!("f{i}"), &bytes);
        let r = srv.push(&f, name, &[]);
        assert_eq!(r["version"].as_u64(), Some(1), "{} bytes: {r}", name.len());
        assert_eq!(srv.pull(name, None, &[]), bytes, "{} bytes", name.len());
    }
    let list: Value = json(&srv.cli(&["ls", "--json"]).stdout);
    let mut listed: Vec<String> = list.as_array().unwrap().iter().map(|v| v["name"].as_str().unwrap().to_string()).collect();
    let mut want = names.clone();
    listed.sort();
    want.sort();
    assert_eq!(listed, want);
    assert!(longest_segment(&srv.data) <= 255);
    // Deleting the 127-byte name leaves the 133-byte one that starts with it.
    ok(&srv.cli(&["rm", &names[0]]), "rm");
    assert_eq!(srv.pull(&names[6], None, &[]), data(20_006, 66));
    srv.check(&[]);
    // And they survive a rebuilt index.
    drop(srv);
    let srv = Server::start(&store, &["--reindex"], &[]);
    for (i, name) in names.iter().enumerate().skip(1) {
        assert_eq!(srv.pull(name, None, &[]), data(20_000 + i, 60 + i as u64), "{} bytes after --reindex", name.len());
    }
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn longest_segment(p: &Path) -> usize {
    let mut m = 0;
    if let Ok(d) = std::fs::read_dir(p) {
        for e in d.flatten() {
            m = m.max(e.file_name().len());
            if e.path().is_dir() {
                m = m.max(longest_segment(&e.path()));
            }
        }
    }
    m
}

/// After a delete, the next commit of the name gets a number above every number it had: after
/// deleting the latest version, after deleting every version, and after a restart that
/// rebuilt the index from the objects.
fn a_version_number_is_never_given_twice(b: Backend) {
    let dir = tmpdir(&format!("versions-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let mut srv = Server::start(&store, &[], &[]);
    let mut n = 0u64;
    let mut push = |srv: &Server| -> u64 {
        n += 1;
        let f = write(&dir, "f", &data(10_000, 700 + n));
        srv.push(&f, "file", &[])["version"].as_u64().unwrap()
    };
    assert_eq!((push(&srv), push(&srv), push(&srv)), (1, 2, 3));
    ok(&srv.cli(&["rm", "file", "--version", "3"]), "rm v3");
    assert_eq!(push(&srv), 4, "v3 was deleted: the next is 4");
    ok(&srv.cli(&["rm", "file", "--version", "2"]), "rm v2");
    assert_eq!(push(&srv), 5, "a hole below the latest changes nothing");
    ok(&srv.cli(&["rm", "file"]), "rm every version");
    assert_eq!(push(&srv), 6, "every version deleted: the next is 6, not 1");
    ok(&srv.cli(&["rm", "file"]), "rm every version again");
    srv.kill();
    let srv = Server::start(&store, &["--reindex"], &[]);
    assert_eq!(push(&srv), 7, "after an index rebuilt from the objects");
    let v6 = srv.cli(&["pull", "file", "--version", "6", "-o", dir.join("v6").to_str().unwrap()]);
    assert!(!v6.status.success(), "v6 stays deleted");
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The recipe objects of `name` in namespace `default`, by version.
fn recipe_file(data: &Path, name: &str, v: u64) -> PathBuf {
    let key = cutpoint_core::protocol::name::name_key(name);
    data.join("ns/default/recipes").join(key).join(format!("{v:012}"))
}

/// A truncated recipe object: `check` reports it (before and after a rebuilt index, and the
/// restart says so), gc skips it with a warning and keeps its readable chunks, a pull of it
/// exits 3, and other versions and names, a new push of the same name and gc work.
fn a_damaged_recipe_is_reported_and_blocks_nothing_else(b: Backend) {
    let dir = tmpdir(&format!("damaged-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let mut srv = Server::start(&store, &[], &[]);
    let (a1, a2, other) = (data(400_000, 81), data(400_000, 82), data(300_000, 83));
    srv.push(&write(&dir, "a1", &a1), "a", &[]);
    srv.push(&write(&dir, "a2", &a2), "a", &[]);
    srv.push(&write(&dir, "b", &other), "b", &[]);
    let f = recipe_file(&srv.data, "a", 2);
    let text = std::fs::read(&f).unwrap();
    std::fs::write(&f, &text[..text.len() / 2]).unwrap();

    let problems = |srv: &Server| -> Vec<String> {
        let out = srv.cli(&["check", "--json"]);
        let v: Value = json(&out.stdout);
        v["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect()
    };
    let p = problems(&srv);
    assert!(p.iter().any(|p| p.contains("'a' v2") && p.contains("damaged")), "{p:?}");
    // A pull of it is a verification failure (3), of anything else a success.
    let out = srv.cli(&["pull", "a", "-o", dir.join("out-a").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged"));
    assert_eq!(srv.pull("a", Some(1), &[]), a1);
    assert_eq!(srv.pull("b", None, &[]), other);
    // gc sweeps with a warning, keeping what the damaged recipe still names.
    let out = srv.cli(&["gc", "--grace", "0", "--json"]);
    ok(&out, "gc");
    let g = json(&out.stdout);
    assert_eq!(g["warnings"].as_array().unwrap().len(), 1, "{g}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("damaged"));
    // A new push of the name commits its whole recipe as v3.
    let r = srv.push(&write(&dir, "a2", &a2), "a", &[]);
    assert_eq!(r["version"].as_u64(), Some(3), "{r}");
    assert_eq!(srv.pull("a", None, &[]), a2);
    assert_eq!(srv.pull("a", Some(1), &[]), a1);
    // After the index is rebuilt: the start and check report it, and its number is not reused.
    srv.kill();
    let srv = Server::start(&store, &["--reindex"], &[]);
    let p = problems(&srv);
    assert!(p.iter().any(|p| p.contains("'a' v2") && p.contains("damaged")), "{p:?}");
    assert!(p.iter().all(|p| !p.contains(dir.to_str().unwrap())), "no server path: {p:?}");
    let r = srv.push(&write(&dir, "a1", &a1), "a", &[]);
    assert_eq!(r["version"].as_u64(), Some(4), "{r}");
    ok(&srv.cli(&["gc", "--grace", "0"]), "gc after the rebuild");
    assert_eq!(srv.pull("b", None, &[]), other);
    assert_eq!(srv.pull("a", Some(3), &[]), a2);
    let mut srv = srv;
    srv.kill();
    let mut err = String::new();
    use std::io::Read;
    srv.child.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert!(err.contains("damaged"), "the start warns: {err}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `gc --grace` with the largest u64 spares every pack (it wrapped to -1: no grace at all).
fn a_huge_gc_grace_spares_every_pack(b: Backend) {
    let dir = tmpdir(&format!("grace-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    srv.push(&write(&dir, "a", &data(300_000, 91)), "a", &[]);
    ok(&srv.cli(&["rm", "a"]), "rm");
    for grace in [u64::MAX, i64::MAX as u64, i64::MAX as u64 + 1] {
        let out = srv.cli(&["gc", "--grace", &grace.to_string(), "--json"]);
        ok(&out, "gc");
        let g = json(&out.stdout);
        assert_eq!(g["packs_deleted"].as_u64(), Some(0), "grace {grace}: {g}");
        assert!(g["packs_in_grace"].as_u64().unwrap() > 0, "{g}");
    }
    // Past u64 it is a bad request, not a wrap.
    let (s, _, body) = http("POST", &format!("{}/v1/ns/default/gc?grace=18446744073709551616", srv.url), None, &[], None);
    assert_eq!(s, 400, "{}", String::from_utf8_lossy(&body));
    let g = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert!(g["packs_deleted"].as_u64().unwrap() > 0, "grace 0 still collects: {g}");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The `Authorization` scheme is case-insensitive (RFC 9110): `bearer`, `BEARER` work.
#[test]
fn the_bearer_scheme_is_case_insensitive() {
    let dir = tmpdir("bearer");
    let tokens = dir.join("tokens");
    let out = bin().args(["token", "--ns", "a", "--tokens", tokens.to_str().unwrap()]).output().unwrap();
    ok(&out, "token");
    let tok = String::from_utf8(out.stdout).unwrap().trim().to_string();
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--tokens", tokens.to_str().unwrap()], &[]);
    let url = format!("{}/v1/ns/a/files", srv.url);
    for scheme in ["Bearer", "bearer", "BEARER", "bEaReR"] {
        let h = format!("{scheme} {tok}");
        let (s, _, body) = http("GET", &url, None, &[("Authorization", &h)], None);
        assert_eq!(s, 200, "{scheme}: {}", String::from_utf8_lossy(&body));
    }
    for h in [format!("Basic {tok}"), tok.clone()] {
        assert_eq!(http("GET", &url, None, &[("Authorization", &h)], None).0, 401, "{h}");
    }
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server on a given port of 127.0.0.1 (to come back where a client expects it).
fn start_on(loc: &Loc, port: u16, env: &[(&str, &str)]) -> Server {
    let mut c = bin();
    c.arg("serve").args(&loc.args).args(["--listen", &format!("127.0.0.1:{port}")]);
    c.envs(loc.env.iter().map(|(k, v)| (k, v))).envs(env.iter().copied());
    let mut child = c.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap()).read_line(&mut first).unwrap();
    assert!(first.contains("listening on"), "{first}");
    Server {
        child,
        url: format!("http://127.0.0.1:{port}"),
        data: loc.objects.clone(),
        cache: loc.cache.clone(),
    }
}

/// A commit whose answer is lost (the server stops right after the commit point) is found by
/// `cutpoint push` once the store is back, and not committed a second time.
#[test]
fn a_commit_whose_answer_is_lost_is_found_not_sent_twice() {
    let dir = tmpdir("lost-commit");
    let store = Loc::new(Backend::Local, &dir, None);
    let port = free_port();
    let mut srv = start_on(&store, port, &[("CUTPOINT_FAILPOINT", "after-recipe-put")]);
    let bytes = data(200_000, 95);
    let f = write(&dir, "f", &bytes);
    let push = bin()
        .args(["push", f.to_str().unwrap(), "--name", "f", "--json", "--store", &srv.url])
        .env_remove("CUTPOINT_TOKEN")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    srv.wait_exit(Duration::from_secs(60));
    let srv = start_on(&store, port, &[]);
    let out = push.wait_with_output().unwrap();
    ok(&out, "push across the lost answer");
    let r: Value = json(&out.stdout);
    assert_eq!(r["version"].as_u64(), Some(1), "{r}");
    let list: Value = json(&srv.cli(&["ls", "--json"]).stdout);
    assert_eq!(list.as_array().unwrap().len(), 1, "one version, not two: {list}");
    assert_eq!(srv.pull("f", None, &[]), bytes);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A node killed during a gc (shared bucket) leaves its lock object: a lease, honoured while
/// it is fresh (commits and gcs answer 503) and ignored once it is older than `--gc-lease`.
#[test]
fn a_dead_nodes_gc_lock_expires() {
    let dir = tmpdir("gc-lease");
    let s3 = s3_for(Backend::S3, &dir);
    let store = Loc::new(Backend::S3, &dir, s3.as_ref());
    let bytes = data(100_000, 97);
    let f = write(&dir, "f", &bytes);
    let mut srv = Server::start(&store, &["--gc-settle", "0"], &[("CUTPOINT_FAILPOINT", "gc-locked")]);
    srv.push(&f, "f", &[]);
    let out = srv.cli(&["gc"]);
    assert!(!out.status.success(), "the node died during its gc");
    srv.wait_exit(Duration::from_secs(30));
    // Within the lease (the default, 120 s): the namespace is held.
    let srv = Server::start(&store, &["--gc-settle", "0"], &[]);
    let (s, _, body) = http("POST", &format!("{}/v1/ns/default/gc", srv.url), None, &[], None);
    assert_eq!(s, 503, "{}", String::from_utf8_lossy(&body));
    drop(srv);
    // Past it: commits go on and the next gc takes the lock over (and removes it).
    let srv = Server::start(&store, &["--gc-settle", "0", "--gc-lease", "1"], &[]);
    std::thread::sleep(Duration::from_millis(2500));
    let (s, _, body) = http("POST", &format!("{}/v1/ns/default/gc", srv.url), None, &[], None);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    assert_eq!(srv.push(&f, "f", &[])["version"].as_u64(), Some(2));
    assert!(!srv.data.join("ns/default/gc-lock").exists(), "the lock is gone after the gc");
    assert_eq!(srv.pull("f", None, &[]), bytes);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A commit on a node that stalls past the other node's `--gc-settle` (shared bucket): the gc
/// sweeps the chunks the commit checked; the commit, once its recipe is put, sees that a gc
/// ran meanwhile, finds its chunks gone and withdraws the version (409 with the missing ids)
/// instead of leaving a committed version that does not restore.
#[test]
fn a_commit_stalled_past_a_gc_is_withdrawn_not_left_broken() {
    let dir = tmpdir("stalled-commit");
    let s3 = s3_for(Backend::S3, &dir);
    let la = Loc::new(Backend::S3, &dir, s3.as_ref());
    let lb = la.node(&dir.join("b-cache"));
    let a = Server::start(&la, &[], &[("CUTPOINT_COMMIT_STALL_MS", "6000")]);
    let b = Server::start(&lb, &["--gc-settle", "0.2"], &[]);
    let bytes = data(30_000, 98);
    let ch = chunks_of(&bytes, &[10_000, 10_000, 10_000]);
    let u = |srv: &Server, tail: &str| format!("{}/v1/ns/default/{tail}", srv.url);
    assert_eq!(http("POST", &u(&a, "packs"), None, &[], Some(&pack(&ch))).0, 200);
    let recipe = recipe_text(&ch);
    let commit_url = u(&a, "files/f");
    let r2 = recipe.clone();
    let commit = std::thread::spawn(move || http("PUT", &commit_url, None, &[], Some(&r2)));
    // The commit has checked its chunks and stalls; node b's gc removes them (unreferenced).
    std::thread::sleep(Duration::from_secs(2));
    let (s, _, body) = http("POST", &format!("{}?grace=0", u(&b, "gc")), None, &[], None);
    assert_eq!(s, 200, "{}", String::from_utf8_lossy(&body));
    let (s, _, body) = commit.join().unwrap();
    let v = json(&body);
    assert_eq!(s, 409, "{v}");
    assert_eq!(v["missing"].as_array().unwrap().len(), 3, "{v}");
    let (_, _, list) = http("GET", &u(&b, "files"), None, &[], None);
    assert_eq!(json(&list)["files"].as_array().unwrap().len(), 0, "nothing committed");
    // Sent again (as a client does after a 409): committed, under a new number, and restorable.
    assert_eq!(http("POST", &u(&a, "packs"), None, &[], Some(&pack(&ch))).0, 200);
    let (s, _, body) = http("PUT", &u(&a, "files/f"), None, &[], Some(&recipe));
    assert_eq!(s, 201, "{}", String::from_utf8_lossy(&body));
    assert_eq!(json(&body)["version"].as_u64(), Some(2), "the withdrawn number is not given again");
    assert_eq!(b.pull("f", None, &[]), bytes);
    b.check(&[]);
    drop((a, b));
    let _ = std::fs::remove_dir_all(&dir);
}
