//! What a local store spends beside the chunks themselves (issue #33: a store of small
//! incompressible files at most 1.05 of their size): the index and the recipe rows of a folder
//! push stay within a byte budget per file once the server stopped cleanly, and an index of a
//! previous schema is rebuilt from the objects at start.

mod common;
use common::*;
use std::path::Path;
use std::time::Duration;

/// Files in the folder, their names as long as a real tree's (~45 characters).
const FILES: usize = 600;

/// Index (`index.sqlite*`) plus recipe rows (`recipes.sqlite`) per file, once the server
/// stopped cleanly. Schema 4 took 553 B a file here (204,800 + 126,976 B for these 600 files:
/// the digest as hex text, an index on the chunks' pack, pages left part full); schema 5 with
/// the clean stop's compaction takes 451 (159,744 + 110,592); schema 6, a version whose recipe
/// is a recipe row answered from the row (each name stored once, not also in the index's
/// versions table), takes 335 (90,112 + 110,592).
const BUDGET_PER_FILE: u64 = 360;

/// A folder of `FILES` files of seeded random bytes, 1 B to 24 KiB (one to a few chunks each).
fn folder(dir: &Path) -> u64 {
    let mut total = 0;
    for i in 0..FILES {
        let n = 1 + (i * 7919) % (24 << 10);
        let sub = format!("node_modules/some-package-{}/lib/components", i % 17);
        std::fs::create_dir_all(dir.join(&sub)).unwrap();
        write(&dir.join(&sub), &format!("file-number-{i:05}.js"), &data(n, 1000 + i as u64));
        total += n as u64;
    }
    total
}

/// Stops the server as an operator would (SIGTERM) and waits for it to exit.
fn stop(mut srv: Server) {
    unsafe {
        libc::kill(srv.child.id() as i32, libc::SIGTERM);
    }
    let st = srv.wait_exit(Duration::from_secs(60));
    assert!(st.success(), "serve exited with {st}");
}

fn file_bytes(p: &Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

/// `index.sqlite` and its log and shared-memory files.
fn index_bytes(store: &Path) -> u64 {
    ["index.sqlite", "index.sqlite-wal", "index.sqlite-shm"].iter().map(|f| file_bytes(&store.join(f))).sum()
}

fn push_folder(srv: &Server, dir: &Path) {
    let out = srv.cli(&["push", dir.to_str().unwrap(), "--json", "--no-cache"]);
    assert!(out.status.success(), "push: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn a_small_file_push_stays_within_its_byte_budget() {
    let dir = tmpdir("size-budget");
    let src = dir.join("folder");
    let bytes = folder(&src);
    let loc = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&loc, &[], &[]);
    push_folder(&srv, &src);
    let (store, objects) = (srv.cache.clone(), srv.data.clone());
    stop(srv);
    let index = index_bytes(&store);
    let rows = file_bytes(&objects.join("recipes.sqlite"));
    eprintln!(
        "{FILES} files, {bytes} B: index {index} B, recipe rows {rows} B, {:.0} B a file (budget {BUDGET_PER_FILE})",
        (index + rows) as f64 / FILES as f64
    );
    assert_eq!(file_bytes(&store.join("index.sqlite-wal")), 0, "a clean stop leaves the index's log empty");
    assert!(
        index + rows <= BUDGET_PER_FILE * FILES as u64,
        "index {index} B + recipe rows {rows} B for {FILES} files: over {BUDGET_PER_FILE} B a file"
    );
    // Compacted, the store still serves every file.
    let srv = Server::start(&loc, &[], &[]);
    let name = "node_modules/some-package-3/lib/components/file-number-00003.js";
    assert_eq!(srv.pull(name, None, &[]), data(1 + (3 * 7919) % (24 << 10), 1003));
    srv.check(&[]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// An index of an older schema is dropped and rebuilt from the objects at start: every version
/// is listed again, once, restores, and the rebuilt index has the current shape (schema 7).
fn an_older_index_is_rebuilt(tag: &str, old: &str) {
    let dir = tmpdir(tag);
    let src = dir.join("folder");
    folder(&src);
    let loc = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&loc, &[], &[]);
    push_folder(&srv, &src);
    let store = srv.cache.clone();
    stop(srv);
    {
        let c = rusqlite::Connection::open(store.join("index.sqlite")).unwrap();
        c.execute_batch(old).unwrap();
    }
    let srv = Server::start(&loc, &[], &[]);
    let (s, _, b) = http("GET", &format!("{}/v1/ns/default/files", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let files = json(&b)["files"].as_array().unwrap().clone();
    assert_eq!(files.len(), FILES, "every pushed version, once, and no other");
    assert!(files.iter().all(|f| f["name"] != "ghost"));
    let name = "node_modules/some-package-5/lib/components/file-number-00005.js";
    assert_eq!(srv.pull(name, None, &[]), data(1 + (5 * 7919) % (24 << 10), 1005));
    srv.check(&[]);
    stop(srv);
    let c = rusqlite::Connection::open(store.join("index.sqlite")).unwrap();
    let v: i64 = c.query_row("PRAGMA user_version", [], |r| r.get(0)).unwrap();
    assert_eq!(v, 7);
    let text: i64 = c.query_row("SELECT count(*) FROM versions WHERE typeof(digest) <> 'blob'", [], |r| r.get(0)).unwrap();
    assert_eq!(text, 0, "digests are 32-byte blobs");
    let copies: i64 = c.query_row("SELECT count(*) FROM versions", [], |r| r.get(0)).unwrap();
    assert_eq!(copies, 0, "a version whose recipe is a recipe row is answered from the row, not copied");
    let by_pack: i64 = c
        .query_row("SELECT count(*) FROM sqlite_schema WHERE name = 'chunks_by_pack'", [], |r| r.get(0))
        .unwrap();
    assert_eq!(by_pack, 0, "the chunks' pack is found by the pack's row range");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Schema 4: a version's digest as hex text, an index on the chunks' pack (and a row the
/// objects do not hold: a rebuilt index drops it).
#[test]
fn an_index_of_schema_4_is_rebuilt_from_the_objects() {
    an_older_index_is_rebuilt(
        "size-schema4",
        "DROP TABLE versions;
         CREATE TABLE versions(nsid INTEGER NOT NULL, name TEXT NOT NULL, version INTEGER NOT NULL,
           bytes INTEGER NOT NULL, chunks INTEGER NOT NULL, digest TEXT NOT NULL, created INTEGER NOT NULL,
           PRIMARY KEY(nsid, name, version)) WITHOUT ROWID;
         INSERT INTO versions VALUES (1, 'ghost', 1, 10, 1, 'ab', 0);
         CREATE INDEX IF NOT EXISTS chunks_by_pack ON chunks(pid);
         PRAGMA user_version = 4;",
    );
}

/// Schema 5: every version copied into the versions table, those of the recipe rows too (a
/// copy of each pushed version here, and a ghost): rebuilt, each is listed once.
#[test]
fn an_index_of_schema_5_is_rebuilt_from_the_objects() {
    let copy = "node_modules/some-package-3/lib/components/file-number-00003.js";
    an_older_index_is_rebuilt(
        "size-schema5",
        &format!(
            "INSERT INTO versions VALUES (1, 'ghost', 1, 10, 1, zeroblob(32), 0);
             INSERT INTO versions VALUES (1, '{copy}', 1, 10, 1, zeroblob(32), 0);
             PRAGMA user_version = 5;"
        ),
    );
}
