//! A local store keeps the recipes of a batch commit as rows of `objects/recipes.sqlite`
//! (`cutpoint_store::recipe_rows`), one transaction per group: these tests check that such a
//! batch commits whole or not at all across a kill, that the rows are stored compact and read
//! back byte for byte (after a rebuilt index too), that a store of the older layout (one recipe
//! file per version) still restores and numbers on, that gc keeps what the rows name (both
//! backends: a bucket keeps one object per version), and that a damaged row is reported, not
//! fatal.

mod common;
use common::*;
use cutpoint_core::protocol::batch::BatchWriter;
use cutpoint_core::Digest;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn versions(url: &str) -> Vec<(String, u64)> {
    let (s, _, b) = http("GET", &format!("{url}/v1/ns/default/files"), None, &[], None);
    assert_eq!(s, 200);
    let mut v: Vec<(String, u64)> = json(&b)["files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| (f["name"].as_str().unwrap().to_string(), f["version"].as_u64().unwrap()))
        .collect();
    v.sort();
    v
}

fn post_batch(url: &str, names: &[&str], recipe: &[u8]) -> (u16, Value) {
    let mut w = BatchWriter::new();
    for n in names {
        w.add(n, recipe);
    }
    let (s, _, b) = http("POST", &format!("{url}/v1/ns/default/commits"), None, &[], Some(&w.finish()));
    (s, if s == 200 { json(&b) } else { Value::Null })
}

fn upload(url: &str, ch: &[(Digest, Vec<u8>)]) {
    let (s, _, _) = http("POST", &format!("{url}/v1/ns/default/packs"), None, &[], Some(&pack(ch)));
    assert_eq!(s, 200);
}

/// The recipe file of the older layout (`objects/ns/default/recipes/<name key>/<v:012>`).
fn recipe_file(data: &Path, name: &str, v: u64) -> PathBuf {
    let key = cutpoint_core::protocol::name::name_key(name);
    data.join("ns/default/recipes").join(key).join(format!("{v:012}"))
}

fn rows_db(data: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(data.join("recipes.sqlite")).unwrap()
}

fn row_count(data: &Path) -> i64 {
    rows_db(data).query_row("SELECT count(*) FROM recipes", [], |r| r.get(0)).unwrap()
}

/// A server killed (abort, as SIGKILL would) in the middle of its transaction of recipe rows:
/// at the next start none of the group is a version, check finds nothing wrong, and the same
/// batch then commits every name as version 1.
#[test]
fn a_kill_in_the_middle_of_a_batch_commits_none_of_it() {
    let dir = tmpdir("rows-kill");
    let store = Loc::new(Backend::Local, &dir, None);
    let bytes = data(20000, 21);
    let ch = chunks_of(&bytes, &[10000, 10000]);
    let names = ["a", "b", "c", "d", "e", "f"];
    {
        let srv = Server::start(&store, &[], &[]);
        upload(&srv.url, &ch);
    }
    let mut srv = Server::start(&store, &[], &[("CUTPOINT_FAILPOINT", "mid-batch-rows")]);
    let url = srv.url.clone();
    let text = recipe_text(&ch);
    let answered = std::thread::spawn(move || post_batch(&url, &names, &text).0).join();
    assert!(answered.is_err() || answered.unwrap() != 200, "the failpoint did not stop the server");
    assert!(!srv.wait_exit(std::time::Duration::from_secs(20)).success());
    let srv = Server::start(&store, &[], &[]);
    assert_eq!(versions(&srv.url), vec![], "a half-written group is no version");
    assert_eq!(row_count(&srv.data), 0);
    srv.check(&[]);
    let (s, v) = post_batch(&srv.url, &names, &recipe_text(&ch));
    assert_eq!(s, 200);
    assert!(v["results"].as_array().unwrap().iter().all(|r| r["status"] == 201 && r["version"] == 1), "{v}");
    assert_eq!(srv.pull("d", None, &[]), bytes);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A batch writes no recipe file: its recipes are rows, stored compact, served byte for byte
/// as committed, indexed again from the rows after `--reindex`; a single commit still writes
/// a file, and both kinds are listed, restored and deleted alike.
#[test]
fn batch_recipes_are_compact_rows_read_back_byte_for_byte() {
    let dir = tmpdir("rows-compact");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let bytes = data(30000, 22);
    let ch = chunks_of(&bytes, &[10000, 10000, 10000]);
    upload(&srv.url, &ch);
    let text = recipe_text(&ch);
    let (s, v) = post_batch(&srv.url, &["x", "dir/y z", "w"], &text);
    assert_eq!(s, 200, "{v}");
    assert!(!srv.data.join("ns/default/recipes").exists(), "a batch wrote recipe files");
    let bodies: Vec<Vec<u8>> = {
        let db = rows_db(&srv.data);
        let mut s = db.prepare("SELECT body FROM recipes").unwrap();
        let b = s.query_map([], |r| r.get(0)).unwrap().collect::<Result<Vec<Vec<u8>>, _>>().unwrap();
        b
    };
    assert_eq!(bodies.len(), 3);
    for b in &bodies {
        assert!(b.starts_with(b"\0cr1") && b.len() * 2 < text.len(), "not compact: {} bytes of {}", b.len(), text.len());
    }
    let (s, _, got) = http("GET", &format!("{}/v1/ns/default/recipes/dir%2Fy%20z", srv.url), None, &[], None);
    assert_eq!(s, 200);
    assert_eq!(got, text, "the recipe read back is the one committed");
    // A single commit of another name is a file, as before.
    let single = srv.push(&write(&dir, "one", &bytes), "one", &[]);
    assert_eq!(single["version"], 1, "{single}");
    assert!(recipe_file(&srv.data, "one", 1).exists());
    // Rows and files alike: listed, pulled, deleted (the next number above the deleted one).
    assert_eq!(versions(&srv.url).len(), 4);
    assert_eq!(srv.pull("dir/y z", None, &[]), bytes);
    assert!(srv.cli(&["rm", "w"]).status.success());
    assert_eq!(row_count(&srv.data), 2);
    let (_, v) = post_batch(&srv.url, &["w", "x"], &text);
    let got: Vec<u64> = v["results"].as_array().unwrap().iter().map(|r| r["version"].as_u64().unwrap()).collect();
    assert_eq!(got, vec![2, 2], "{v}");
    srv.check(&[]);
    drop(srv);
    let srv = Server::start(&store, &["--reindex"], &[]);
    assert_eq!(
        versions(&srv.url),
        vec![("dir/y z".into(), 1), ("one".into(), 1), ("w".into(), 2), ("x".into(), 1), ("x".into(), 2)]
    );
    assert_eq!(srv.pull("x", Some(1), &[]), bytes);
    assert_eq!(srv.pull("w", None, &[]), bytes);
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A store of the older layout (every recipe a file, also a batch's): it opens, its versions
/// restore, a batch numbers on above them (never over a file), gc keeps their chunks, check
/// finds nothing wrong.
#[test]
fn an_older_layout_store_still_restores_and_numbers_on() {
    let dir = tmpdir("rows-old");
    let store = Loc::new(Backend::Local, &dir, None);
    let bytes = data(20000, 23);
    let ch = chunks_of(&bytes, &[10000, 10000]);
    let text = recipe_text(&ch);
    let data_dir;
    {
        let srv = Server::start(&store, &[], &[]);
        upload(&srv.url, &ch);
        data_dir = srv.data.clone();
    }
    // Recipe files as the older batch commit left them, unindexed (as after a crash), plus the
    // recipes database of a store that never had a row.
    for (name, v) in [("old", 1), ("old", 2), ("other", 1)] {
        let f = recipe_file(&data_dir, name, v);
        std::fs::create_dir_all(f.parent().unwrap()).unwrap();
        std::fs::write(&f, &text).unwrap();
    }
    let _ = std::fs::remove_file(data_dir.join("recipes.sqlite"));
    let srv = Server::start(&store, &[], &[]);
    assert_eq!(versions(&srv.url), vec![("old".into(), 1), ("old".into(), 2), ("other".into(), 1)]);
    assert_eq!(srv.pull("old", Some(1), &[]), bytes);
    let (_, v) = post_batch(&srv.url, &["old", "other", "new"], &recipe_text(&ch[..1]));
    let got: Vec<u64> = v["results"].as_array().unwrap().iter().map(|r| r["version"].as_u64().unwrap()).collect();
    assert_eq!(got, vec![3, 2, 1], "{v}");
    let g = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["chunks_removed"], 0, "{g}");
    assert_eq!(srv.pull("old", Some(2), &[]), bytes);
    assert_eq!(srv.pull("old", Some(3), &[]), bytes[..10000]);
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

/// gc keeps every chunk a batch's recipes name and sweeps the rest; once the batch's versions
/// are deleted their chunks go too.
fn gc_keeps_the_chunks_of_batch_recipes(b: Backend) {
    let dir = tmpdir(&format!("rows-gc-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let kept = data(20000, 24);
    let ch = chunks_of(&kept, &[10000, 10000]);
    let orphan = chunks_of(&data(5000, 25), &[5000]);
    upload(&srv.url, &ch);
    upload(&srv.url, &orphan);
    let (s, v) = post_batch(&srv.url, &["p", "q", "r"], &recipe_text(&ch));
    assert_eq!(s, 200, "{v}");
    let g = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["chunks_removed"], 1, "{g}");
    assert_eq!(g["referenced_chunks"], 2, "{g}");
    for n in ["p", "q", "r"] {
        assert_eq!(srv.pull(n, None, &[]), kept, "{n}");
    }
    for n in ["p", "q", "r"] {
        assert!(srv.cli(&["rm", n]).status.success());
    }
    let g = json(&srv.cli(&["gc", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["chunks_removed"], 2, "{g}");
    srv.check(&[]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

crate::both_backends!(gc_keeps_the_chunks_of_batch_recipes);

/// A damaged row: check names it, a pull of it fails verification (exit 3), gc sweeps on with
/// a warning, other versions are untouched.
#[test]
fn a_damaged_row_is_reported_and_blocks_nothing_else() {
    let dir = tmpdir("rows-damaged");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let bytes = data(20000, 26);
    let ch = chunks_of(&bytes, &[10000, 10000]);
    upload(&srv.url, &ch);
    let (s, _) = post_batch(&srv.url, &["good", "bad"], &recipe_text(&ch));
    assert_eq!(s, 200);
    let n = rows_db(&srv.data)
        .execute("UPDATE recipes SET body = substr(body, 1, 20) WHERE name = 'bad'", [])
        .unwrap();
    assert_eq!(n, 1);
    let p = json(&srv.cli(&["check", "--json"]).stdout);
    let problems: Vec<String> = p["problems"].as_array().unwrap().iter().map(|p| p.as_str().unwrap().to_string()).collect();
    assert!(problems.iter().any(|p| p.contains("'bad' v1") && p.contains("damaged")), "{problems:?}");
    assert_eq!(problems.len(), 1, "{problems:?}");
    let out = srv.cli(&["pull", "bad", "-o", dir.join("out").to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", String::from_utf8_lossy(&out.stderr));
    let out = srv.cli(&["gc", "--grace", "0", "--json"]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(json(&out.stdout)["warnings"].as_array().unwrap().len(), 1);
    assert_eq!(srv.pull("good", None, &[]), bytes);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
