//! Batch commits (`POST /v1/ns/{ns}/commits`, PROTOCOL.md §4.14) against a real `cutpoint
//! serve` on 127.0.0.1, over both backends: each file answered as its own commit would be,
//! framing errors and bodies over the limits refused whole, nothing committed.

mod common;
use common::*;
use cutpoint_core::protocol::batch::BatchWriter;
use cutpoint_core::protocol::delta;
use cutpoint_core::rapid::Recipe;
use serde_json::Value;

#[test]
fn a_push_of_a_directory_of_2000_files_makes_at_most_one_request_per_20_files() {
    use std::io::Read;
    let dir = tmpdir("batch-many");
    let src = dir.join("src");
    let mut want = Vec::new();
    for i in 0..2000usize {
        let name = format!("d{}/f{i}.bin", i % 10);
        let bytes = data(100 + (i * 37) % 3000, 1000 + i as u64);
        std::fs::create_dir_all(src.join(format!("d{}", i % 10))).unwrap();
        write(&src, &name, &bytes);
        want.push((name, bytes));
    }
    want.sort();
    let store = Loc::new(Backend::Local, &dir, None);
    let mut srv = Server::start(&store, &[], &[("CUTPOINT_LOG_REQUESTS", "1")]);
    let push = |srv: &Server| -> Vec<Value> {
        // --no-cache: the second push commits every file again (with the push cache, whether a
        // file is recorded depends on whether it was written within a second of being read).
        let out = srv.cli(&["push", src.to_str().unwrap(), "--json", "--no-cache"]);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    };
    let first = push(&srv);
    let mut got: Vec<(String, u64, u64)> =
        first.iter().map(|r| (r["name"].as_str().unwrap().to_string(), r["version"].as_u64().unwrap(), r["bytes"].as_u64().unwrap())).collect();
    got.sort();
    assert_eq!(got, want.iter().map(|(n, b)| (n.clone(), 1, b.len() as u64)).collect::<Vec<_>>());
    // The novel chunks of all the files share packs (about 3 MB: one pack).
    assert!(packs_on_disk(&srv.data) <= 2, "{} packs", packs_on_disk(&srv.data));
    let again = push(&srv);
    assert!(again.iter().all(|r| r["version"] == 2 && r["novel_chunks"] == 0), "{:?}", &again[..2]);
    for (name, bytes) in want.iter().step_by(397) {
        assert_eq!(&srv.pull(name, None, &[]), bytes, "{name}");
    }
    srv.kill();
    let mut log = String::new();
    srv.child.stderr.take().unwrap().read_to_string(&mut log).unwrap();
    let requests: Vec<&str> = log.lines().filter(|l| l.starts_with("cutpoint serve: request ")).collect();
    // Two pushes of 2,000 files and 6 pulls (2 requests each: the recipe, the file).
    let pushes = requests.len() - 6 * 2;
    eprintln!("requests of two pushes of 2,000 files: {pushes}: {:?}", &requests[..pushes.min(20)]);
    assert!(pushes as f64 / 4000.0 <= 0.05, "{pushes} requests for 4,000 file pushes: {requests:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A server stopped (as abruptly as SIGKILL) after a batch's recipes are put (the rows'
/// transaction committed) and before they are indexed: at the next start every recipe is a whole version
/// (indexed by the reconcile), `check` finds nothing wrong, and nothing half-stored is left.
#[test]
fn a_crash_in_a_batch_commit_leaves_whole_versions_or_none() {
    let dir = tmpdir("batch-crash");
    let store = Loc::new(Backend::Local, &dir, None);
    let bytes = data(20000, 11);
    let ch = chunks_of(&bytes, &[10000, 10000]);
    {
        let srv = Server::start(&store, &[], &[]);
        let (s, _, _) = http("POST", &format!("{}/v1/ns/default/packs", srv.url), None, &[], Some(&pack(&ch)));
        assert_eq!(s, 200);
    }
    let mut srv = Server::start(&store, &[], &[("CUTPOINT_FAILPOINT", "after-batch-link")]);
    let mut w = BatchWriter::new();
    for i in 0..5 {
        w.add(&format!("f{i}"), &recipe_text(&ch));
    }
    let (url, body) = (format!("{}/v1/ns/default/commits", srv.url), w.finish());
    // The connection drops (the helper panics on that, in its own thread).
    let answered = std::thread::spawn(move || http("POST", &url, None, &[], Some(&body)).0).join();
    assert!(answered.is_err() || answered.unwrap() != 200, "the failpoint did not stop the server");
    assert!(!srv.wait_exit(std::time::Duration::from_secs(20)).success());
    let srv = Server::start(&store, &[], &[]);
    let v = versions(&srv.url);
    // The transaction committed before the stop: the 5 versions are there, each whole (a
    // stop inside the transaction keeps none of them: tests/batch_rows.rs).
    assert_eq!(v.len(), 5, "{v:?}");
    assert!(v.iter().all(|(_, ver)| *ver == 1), "{v:?}");
    for (name, _) in &v {
        assert_eq!(srv.pull(name, None, &[]), bytes, "{name}");
    }
    srv.check(&[]);
    assert_eq!(srv.spool_files(), 0, "spool files left");
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

crate::both_backends!(
    a_batch_is_answered_per_name_in_order,
    framing_errors_and_bodies_over_the_limits_commit_nothing,
);

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

fn post_batch(url: &str, body: &[u8]) -> (u16, Value) {
    let (s, _, b) = http("POST", &format!("{url}/v1/ns/default/commits"), None, &[], Some(body));
    (s, json(&b))
}

fn a_batch_is_answered_per_name_in_order(b: Backend) {
    let dir = tmpdir(&format!("batch-mixed-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &[], &[]);
    let (s, _, info) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(s, 200);
    let info = json(&info);
    assert!(info["features"].as_array().unwrap().iter().any(|f| f == "batch"), "{info}");
    assert_eq!(info["limits"]["max_batch_files"], 4096);

    let bytes = data(30000, 7);
    let ch = chunks_of(&bytes, &[10000, 10000, 10000]);
    let (s, _, _) = http("POST", &format!("{}/v1/ns/default/packs", srv.url), None, &[], Some(&pack(&ch)));
    assert_eq!(s, 200);
    let absent = chunks_of(&data(5000, 8), &[5000]);
    let full = recipe_text(&ch);
    let mut bad_digest = recipe_text(&ch[..2]);
    let at = bad_digest.windows(7).position(|w| w == b"digest ").unwrap() + 7;
    bad_digest[at] = if bad_digest[at] == b'0' { b'1' } else { b'0' };
    // A delta of `x` against version 1 of `x` (made earlier in this batch), and one of `gone`
    // against a version that was never there.
    let r: Recipe = Recipe::read(&full[..]).unwrap();
    let r2: Recipe = Recipe::read(&recipe_text(&ch[..2])[..]).unwrap();
    let delta_x = delta::encode(&r2, &r, 1).unwrap();
    let delta_gone = delta::encode(&r2, &r, 5).unwrap();

    let mut w = BatchWriter::new();
    w.add("x", &full); // 201 v1
    w.add("dir/a b%", &full); // 201 v1: a name percent-encoded
    w.add("missing", &recipe_text(&absent)); // 409
    w.add("bad", &bad_digest); // 400
    w.add("gone", &delta_gone); // 404
    w.add("x", &delta_x); // 201 v2, against v1 from this batch
    w.add("../evil", &full); // 400: not a valid name
    w.add("x", &full); // 201 v3
    let (s, v) = post_batch(&srv.url, &w.finish());
    assert_eq!(s, 200, "{v}");
    let res = v["results"].as_array().unwrap();
    let got: Vec<(&str, u64)> = res.iter().map(|r| (r["name"].as_str().unwrap(), r["status"].as_u64().unwrap())).collect();
    assert_eq!(
        got,
        vec![("x", 201), ("dir/a b%", 201), ("missing", 409), ("bad", 400), ("gone", 404), ("x", 201), ("../evil", 400), ("x", 201)],
        "{v}"
    );
    assert_eq!(res[0]["version"], 1);
    assert_eq!(res[0]["bytes"], 30000);
    assert_eq!(res[0]["chunks"], 3);
    assert_eq!(res[5]["version"], 2);
    assert_eq!(res[5]["bytes"], 20000);
    assert_eq!(res[7]["version"], 3);
    assert_eq!(res[2]["code"], "missing_chunks");
    let missing: Vec<&str> = res[2]["missing"].as_array().unwrap().iter().map(|m| m.as_str().unwrap()).collect();
    assert_eq!(missing, vec![cutpoint_core::hex(&absent[0].0)]);
    assert!(res[3]["error"].as_str().unwrap().contains("digest"), "{v}");
    assert_eq!(res[4]["code"], "not_found");
    assert!(!v.to_string().contains(dir.to_str().unwrap()), "a server path in the answer: {v}");

    assert_eq!(
        versions(&srv.url),
        vec![("dir/a b%".to_string(), 1), ("x".to_string(), 1), ("x".to_string(), 2), ("x".to_string(), 3)],
        "only the 201s are versions"
    );
    assert_eq!(srv.pull("x", Some(1), &[]), bytes);
    assert_eq!(srv.pull("x", Some(2), &[]), bytes[..20000]);
    assert_eq!(srv.pull("dir/a b%", None, &[]), bytes);
    srv.check(&[]);
    drop(srv);
    // Every 201 is durable and indexed again from the objects alone.
    let srv = Server::start(&store, &["--reindex"], &[]);
    assert_eq!(versions(&srv.url).len(), 4);
    assert_eq!(srv.pull("x", Some(2), &[]), bytes[..20000]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn framing_errors_and_bodies_over_the_limits_commit_nothing(b: Backend) {
    let dir = tmpdir(&format!("batch-bad-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", "64k"], &[]);
    let bytes = data(20000, 9);
    let ch = chunks_of(&bytes, &[10000, 10000]);
    let (s, _, _) = http("POST", &format!("{}/v1/ns/default/packs", srv.url), None, &[], Some(&pack(&ch)));
    assert_eq!(s, 200);
    let full = recipe_text(&ch);
    let good = |n: usize| {
        let mut w = BatchWriter::new();
        for i in 0..n {
            w.add(&format!("f{i}"), &full);
        }
        w.finish()
    };
    // A good first file, then a broken frame: nothing of it committed.
    let mut cases: Vec<(Vec<u8>, &str)> = Vec::new();
    let g = good(2);
    cases.push((g[..g.len() - 1].to_vec(), "line feed"));
    let mut extra = g.clone();
    extra.extend_from_slice(b"x");
    cases.push((extra, "after the 'end' line"));
    cases.push((String::from_utf8(g.clone()).unwrap().replace("end 2", "end 3").into_bytes(), "counts 3"));
    let mut long = String::from_utf8(good(1)).unwrap();
    long = long.replacen(&format!(" {}\n", full.len()), &format!(" {}\n", full.len() + 100), 1);
    cases.push((long.into_bytes(), "left"));
    cases.push((b"cutpoint-batch 9\nend 0\n".to_vec(), "cutpoint-batch 1"));
    cases.push((String::from_utf8(good(1)).unwrap().replacen("file f0", "file f%zz", 1).into_bytes(), "two hex digits"));
    for (body, words) in &cases {
        let (s, v) = post_batch(&srv.url, body);
        assert_eq!(s, 400, "{v}");
        assert!(v["error"].as_str().unwrap().contains(words), "expected '{words}' in {v}");
    }
    // Over max_batch_files (4096 empty bodies: a small body) and over max_recipe_bytes.
    let mut w = BatchWriter::new();
    for i in 0..4097 {
        w.add(&format!("f{i}"), b"");
    }
    let body = w.finish();
    assert!(body.len() < 64 << 10);
    let (s, v) = post_batch(&srv.url, &body);
    assert_eq!(s, 413, "{v}");
    assert!(v["error"].as_str().unwrap().contains("4096"), "{v}");
    let n = (64 << 10) / full.len() + 1;
    let (s, v) = post_batch(&srv.url, &good(n));
    assert_eq!(s, 413, "{v}");
    assert!(versions(&srv.url).is_empty(), "something was committed: {:?}", versions(&srv.url));
    // And the well-formed batch commits.
    let (s, v) = post_batch(&srv.url, &good(2));
    assert_eq!(s, 200, "{v}");
    assert_eq!(versions(&srv.url), vec![("f0".to_string(), 1), ("f1".to_string(), 1)]);
    drop(srv);
    let _ = std::fs::remove_dir_all(&dir);
}
