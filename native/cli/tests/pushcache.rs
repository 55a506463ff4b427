//! The push cache (`cutpoint push DIR`, `--cache`, `--no-cache`; native/store/src/pushcache.rs)
//! against a real `cutpoint serve` on 127.0.0.1: a re-push of an unchanged folder reads no file
//! and commits nothing (each file unchanged as its latest version; `--new-versions` commits each
//! version again); a file whose name got a newer version from another push has its cached
//! version committed again; a changed or touched file is read; a file whose version (or chunks)
//! the store no longer has is read and pushed again; `--no-cache` reads all.
//! And each file's own compressed and sent bytes in a many-file push's `--json`.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A folder of small files and one of 4 MB (its recipe is too long to cache: re-committed as a
/// delta against its cached version), older than the cache's 1 s rule when this returns.
fn folder(dir: &Path) -> (PathBuf, Vec<(String, Vec<u8>)>) {
    let src = dir.join("src");
    std::fs::create_dir_all(src.join("sub")).unwrap();
    let mut files = Vec::new();
    for i in 0..40usize {
        let name = if i % 3 == 0 { format!("sub/f{i}.bin") } else { format!("f{i}.bin") };
        let bytes = data(1 + (i * 977) % 20_000, 500 + i as u64);
        write(&src, &name, &bytes);
        files.push((name, bytes));
    }
    let big = data(4_000_000, 77);
    write(&src, "big.bin", &big);
    files.push(("big.bin".to_string(), big));
    files.sort();
    std::thread::sleep(Duration::from_millis(1200));
    (src, files)
}

/// `cutpoint push SRC --json` with these options; the results by name.
fn push(srv: &Server, src: &Path, extra: &[&str]) -> Vec<Value> {
    let mut a = vec!["push", src.to_str().unwrap(), "--json"];
    a.extend_from_slice(extra);
    let out = srv.cli(&a);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let mut v: Vec<Value> = String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    v.sort_by(|a, b| a["name"].as_str().cmp(&b["name"].as_str()));
    v
}

fn read_bytes(rs: &[Value]) -> u64 {
    rs.iter().map(|r| r["read_bytes"].as_u64().unwrap()).sum()
}

fn by_name<'a>(rs: &'a [Value], name: &str) -> &'a Value {
    rs.iter().find(|r| r["name"] == name).unwrap_or_else(|| panic!("no result for {name}"))
}

#[test]
fn a_re_push_of_an_unchanged_folder_reads_no_file_and_commits_nothing() {
    let dir = tmpdir("pushcache-unchanged");
    let (src, files) = folder(&dir);
    let cache = dir.join("cache");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let c = ["--cache", cache.to_str().unwrap()];
    let total: u64 = files.iter().map(|(_, b)| b.len() as u64).sum();
    let first = push(&srv, &src, &c);
    assert_eq!(first.len(), files.len());
    assert_eq!(read_bytes(&first), total);
    assert!(first.iter().all(|r| r["unchanged"] == false && r["version"] == 1));
    assert_eq!(std::fs::read_dir(&cache).unwrap().count(), 1, "one cache file for this store and namespace");

    // Every file's version 1 is still its latest: reported unchanged, nothing committed or sent.
    let same = push(&srv, &src, &c);
    assert_eq!(read_bytes(&same), 0, "a file was read: {same:?}");
    for (r, f) in same.iter().zip(&first) {
        assert_eq!(r["unchanged"], true, "{r}");
        assert_eq!(r["version"], 1, "{r}");
        assert_eq!(r["digest"], f["digest"], "{r}");
        assert_eq!(r["bytes"], f["bytes"], "{r}");
        assert_eq!(r["sent_bytes"], 0, "{r}");
        assert_eq!(r["recipe_bytes"], 0, "{r}");
    }
    let out = srv.cli(&["ls", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let listed: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(listed.len(), files.len());
    assert!(listed.iter().all(|v| v["version"] == 1), "a new version was committed: {listed:?}");

    // --new-versions: the cached versions committed again as version 2.
    let mut nv = c.to_vec();
    nv.push("--new-versions");
    let again = push(&srv, &src, &nv);
    assert_eq!(read_bytes(&again), 0, "a file was read: {again:?}");
    for (r, f) in again.iter().zip(&first) {
        assert_eq!(r["unchanged"], true, "{r}");
        assert_eq!(r["version"], 2, "{r}");
        assert_eq!(r["digest"], f["digest"], "{r}");
        assert_eq!(r["bytes"], f["bytes"], "{r}");
        assert_eq!(r["novel_chunks"], 0);
    }
    // The big file's recipe is not cached: a delta against version 1 that repeats it.
    assert_eq!(by_name(&again, "big.bin")["delta_base"], 1);
    assert!(by_name(&again, "f1.bin")["delta_base"].is_null());
    for (name, bytes) in files.iter().step_by(7).chain(files.iter().filter(|(n, _)| n == "big.bin")) {
        assert_eq!(&srv.pull(name, Some(2), &[]), bytes, "{name}");
    }
    // Once more: the cache was updated with the new versions (the delta's base is version 2).
    let third = push(&srv, &src, &nv);
    assert_eq!(read_bytes(&third), 0);
    assert_eq!(by_name(&third, "big.bin")["delta_base"], 2);
    // And without the flag: version 3 (the cache's) is every name's latest.
    let fourth = push(&srv, &src, &c);
    assert!(fourth.iter().all(|r| r["unchanged"] == true && r["version"] == 3 && r["sent_bytes"] == 0), "{fourth:?}");

    // --no-cache reads every file (and commits a version of each).
    let all = push(&srv, &src, &["--no-cache"]);
    assert_eq!(read_bytes(&all), total);
    assert!(all.iter().all(|r| r["unchanged"] == false && r["version"] == 4));
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_changed_or_touched_file_is_read_again() {
    let dir = tmpdir("pushcache-changed");
    let (src, files) = folder(&dir);
    let cache = dir.join("cache");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let c = ["--cache", cache.to_str().unwrap()];
    push(&srv, &src, &c);
    // f1.bin: other bytes of the same length; f2.bin: the same bytes, touched (a new mtime).
    let (n1, old1) = files.iter().find(|(n, _)| n == "f1.bin").unwrap();
    let new1: Vec<u8> = old1.iter().map(|b| b ^ 0x5a).collect();
    std::fs::write(src.join(n1), &new1).unwrap();
    let f2 = std::fs::File::options().write(true).open(src.join("f2.bin")).unwrap();
    f2.set_modified(std::time::SystemTime::now() - Duration::from_secs(3600)).unwrap();
    drop(f2);
    let again = push(&srv, &src, &c);
    for r in &again {
        let changed = r["name"] == "f1.bin" || r["name"] == "f2.bin";
        assert_eq!(r["unchanged"], !changed, "{r}");
        assert_eq!(r["read_bytes"], if changed { r["bytes"].clone() } else { 0.into() }, "{r}");
        assert_eq!(r["version"], if changed { 2 } else { 1 }, "{r}");
    }
    assert_eq!(srv.pull("f1.bin", None, &[]), new1);
    let (_, b2) = files.iter().find(|(n, _)| n == "f2.bin").unwrap();
    assert_eq!(&srv.pull("f2.bin", None, &[]), b2);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_file_whose_version_the_store_lost_is_pushed_again() {
    let dir = tmpdir("pushcache-lost");
    let (src, files) = folder(&dir);
    let cache = dir.join("cache");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let c = ["--cache", cache.to_str().unwrap()];
    push(&srv, &src, &c);
    // f4.bin's only version deleted and its chunks collected (its cached recipe names chunks
    // the store lacks: 409); big.bin's version deleted (its cached delta has no base: 404).
    for name in ["f4.bin", "big.bin"] {
        let out = srv.cli(&["rm", name]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    }
    let out = srv.cli(&["gc", "--grace", "0"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = push(&srv, &src, &c);
    for r in &again {
        let lost = r["name"] == "f4.bin" || r["name"] == "big.bin";
        assert_eq!(r["unchanged"], !lost, "{r}");
        if lost {
            assert_eq!(r["read_bytes"], r["bytes"], "{r}");
            assert!(r["novel_chunks"].as_u64().unwrap() > 0, "{r}");
        }
    }
    for name in ["f4.bin", "big.bin", "f5.bin"] {
        let (_, b) = files.iter().find(|(n, _)| n == name).unwrap();
        assert_eq!(&srv.pull(name, None, &[]), b, "{name}");
    }
    srv.check(&[]);
    // A cache file of another store (a different URL) is not this store's: everything is read.
    let other = Server::start(&Loc::new(Backend::Local, &dir.join("other"), None), &[], &[]);
    let fresh = push(&other, &src, &c);
    assert!(fresh.iter().all(|r| r["unchanged"] == false && r["version"] == 1));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_name_whose_latest_version_is_another_push_gets_the_cached_version_again() {
    let dir = tmpdir("pushcache-other");
    let (src, files) = folder(&dir);
    let cache = dir.join("cache");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let c = ["--cache", cache.to_str().unwrap()];
    push(&srv, &src, &c);
    // Another push (not of this folder) makes version 2 of f5.bin with other bytes.
    let other = dir.join("other.bin");
    std::fs::write(&other, data(3_000, 991)).unwrap();
    let out = srv.cli(&["push", other.to_str().unwrap(), "--name", "f5.bin"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let again = push(&srv, &src, &c);
    assert_eq!(read_bytes(&again), 0, "a file was read: {again:?}");
    for r in &again {
        let other = r["name"] == "f5.bin";
        assert_eq!(r["unchanged"], true, "{r}");
        assert_eq!(r["version"], if other { 3 } else { 1 }, "{r}");
        assert_eq!(r["sent_bytes"].as_u64().unwrap() > 0, other, "{r}");
    }
    let (_, b5) = files.iter().find(|(n, _)| n == "f5.bin").unwrap();
    assert_eq!(&srv.pull("f5.bin", None, &[]), b5, "the folder's f5.bin is the latest again");
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Not the cache: in a push of many files each file's `--json` counts its own novel chunks as
/// they travelled (compressed where that saved), not the whole push's.
#[test]
fn each_file_of_a_many_file_push_reports_its_own_compressed_and_sent_bytes() {
    let dir = tmpdir("pushcache-sent");
    let src = dir.join("src");
    std::fs::create_dir_all(&src).unwrap();
    // Compressible text files, and one of random bytes (sent raw).
    for i in 0..6usize {
        let line = format!("line {i} of a text that repeats itself, as logs and sources do\n");
        write(&src, &format!("t{i}.txt"), line.repeat(300 + 100 * i).as_bytes());
    }
    write(&src, "r.bin", &data(30_000, 5));
    let store = Loc::new(Backend::Local, &dir, None);
    // Chunks one frame each (no groups): a group of consecutive novel chunks may span files,
    // and its bytes are then shared out among them, so a random file's chunks would count as
    // compressed when they travel inside a text file's group.
    let srv = Server::start(&store, &["--groups", "off"], &[]);
    let rs = push(&srv, &src, &["--no-cache", "--compression", "auto"]);
    let sum = |k: &str| rs.iter().map(|r| r[k].as_u64().unwrap()).sum::<u64>();
    for r in &rs {
        let (novel, stored, sent) = (r["novel_bytes"].as_u64().unwrap(), r["compressed_bytes"].as_u64().unwrap(), r["sent_bytes"].as_u64().unwrap());
        assert!(stored <= novel, "{r}");
        assert_eq!(sent, r["pack_bytes"].as_u64().unwrap() + r["recipe_bytes"].as_u64().unwrap(), "{r}");
        assert_eq!(r["pack_bytes"].as_u64().unwrap(), stored + 36 * r["novel_chunks"].as_u64().unwrap(), "{r}");
        if r["name"] == "r.bin" {
            assert_eq!(stored, novel, "{r}");
            assert_eq!(r["compressed_chunks"], 0, "{r}");
        } else {
            assert!(sent < r["bytes"].as_u64().unwrap() / 4, "{r}");
        }
    }
    // The files' own counts add up to what the packs carried (no file counts the push's total).
    assert!(sum("compressed_bytes") < sum("novel_bytes"), "{rs:?}");
    let _ = std::fs::remove_dir_all(&dir);
}
