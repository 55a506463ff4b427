//! Recipe parts (issue #32, PROTOCOL.md 3.7, 4.11–4.13) against a real `cutpoint serve` with a
//! tiny `--max-recipe`, on both backends: parts uploaded and committed by raw requests, the
//! file restored through them (whole and ranged), the expanded recipe, the checks of a commit
//! (missing parts, lying COUNT/BYTES), gc (parts are roots; unreferenced old ones deleted),
//! a restart with a rebuilt index, the native client pushing a file in parts, and the bound on
//! a commit's expansion (`max_commit_entries`).

mod common;
use common::*;
use cutpoint_core::protocol::part::{Line, Part, PartCutter, PartRecipe};
use cutpoint_core::protocol::part_delta::encode_part_delta;
use cutpoint_core::protocol::query::{decode_ids, encode_ids};
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::rapid::RecipeEntry;
use cutpoint_core::{hex, Digest, HashAlg};
use serde_json::Value;
use std::io::Write as _;
use std::process::Stdio;

crate::both_backends!(
    a_file_committed_in_parts_restores_and_its_commit_is_checked,
    gc_keeps_referenced_parts_and_their_chunks_and_deletes_old_unreferenced_ones,
    the_client_pushes_a_big_file_in_parts_and_a_re_push_sends_only_changed_parts,
    a_commit_naming_a_big_part_many_times_is_refused_before_any_part_is_read,
    a_part_repeated_within_max_commit_entries_commits_and_beyond_it_is_refused,
    a_stream_from_stdin_is_pushed_whole_or_in_parts_and_pulls_byte_identical,
    a_pull_reads_the_stored_recipe_and_its_parts_one_at_a_time,
    a_part_delta_is_stored_as_its_expansion_and_a_bad_one_stores_nothing,
);

const MAX_RECIPE: &str = "16k";

fn entries(chunks: &[(Digest, Vec<u8>)]) -> Vec<RecipeEntry> {
    chunks
        .iter()
        .map(|(id, c)| RecipeEntry {
            fp: *id,
            size: c.len() as u32,
            last: None,
            regular: true,
        })
        .collect()
}

fn cut(es: &[RecipeEntry]) -> Vec<Part> {
    let mut c = PartCutter::new(HashAlg::Blake3, 16 << 10);
    let mut parts = c.push_all(es.iter().cloned());
    parts.extend(c.finish());
    parts
}

fn part_recipe(es: &[RecipeEntry], parts: &[Part]) -> PartRecipe {
    PartRecipe::of_parts("gear:2k:8k:64k", HashAlg::Blake3, es, parts)
}

/// Chunks of 8,000 bytes (the last shorter) of `bytes`, uploaded in one pack to namespace `ns`.
fn upload(srv: &Server, ns: &str, bytes: &[u8]) -> Vec<(Digest, Vec<u8>)> {
    let mut sizes = vec![8000; bytes.len() / 8000];
    if bytes.len() % 8000 > 0 {
        sizes.push(bytes.len() % 8000);
    }
    let chunks = chunks_of(bytes, &sizes);
    let (st, _, b) = http("POST", &format!("{}/v1/ns/{ns}/packs", srv.url), None, &[], Some(&pack(&chunks)));
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&b));
    chunks
}

fn post_part(srv: &Server, ns: &str, p: &Part) -> (u16, Value) {
    let (st, _, b) = http("POST", &format!("{}/v1/ns/{ns}/parts", srv.url), None, &[], Some(p.text().as_bytes()));
    (st, json(&b))
}

fn commit(srv: &Server, ns: &str, name: &str, body: &[u8]) -> (u16, Value) {
    let (st, _, b) = http("PUT", &format!("{}/v1/ns/{ns}/files/{name}", srv.url), None, &[], Some(body));
    (st, json(&b))
}

fn get(srv: &Server, tail: &str) -> (u16, ureq::http::HeaderMap, Vec<u8>) {
    http("GET", &format!("{}/v1/ns/{tail}", srv.url), None, &[], None)
}

fn a_file_committed_in_parts_restores_and_its_commit_is_checked(b: Backend) {
    let dir = tmpdir(&format!("parts-commit-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let mut srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let (_, _, v1) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert!(json(&v1)["features"].as_array().unwrap().iter().any(|f| f == "parts"), "GET /v1 lists 'parts'");
    let file = data(3 << 20, 71);
    let chunks = upload(&srv, "t", &file);
    let es = entries(&chunks);
    let parts = cut(&es);
    assert!(parts.len() >= 6, "{} parts", parts.len());
    // The whole recipe is over --max-recipe: the old commit is refused by its length.
    let (st, v) = commit(&srv, "t", "big", &recipe_text(&chunks));
    assert_eq!(st, 413, "{v}");
    // A part naming a chunk the namespace lacks: 409, nothing stored.
    let mut stray = parts[0].clone();
    stray.entries[0].fp = [9; 32];
    let (st, v) = post_part(&srv, "t", &stray);
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_chunks")), "{v}");
    // A part whose chunk length lies: 400.
    let mut liar = parts[0].clone();
    liar.entries[0].size += 1;
    assert_eq!(post_part(&srv, "t", &liar).0, 400);
    // A part not in canonical form: 400.
    let upper = parts[0].text().replacen(&hex(&parts[0].entries[0].fp), &hex(&parts[0].entries[0].fp).to_uppercase(), 1);
    let (st, _, _) = http("POST", &format!("{}/v1/ns/t/parts", srv.url), None, &[], Some(upper.as_bytes()));
    assert_eq!(st, 400);
    // All but the last part uploaded.
    for p in &parts[..parts.len() - 1] {
        let (st, v) = post_part(&srv, "t", p);
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["part"].as_str().unwrap(), hex(&p.id()));
        assert_eq!(v["chunks"].as_u64().unwrap(), p.entries.len() as u64);
        assert_eq!(v["bytes"].as_u64().unwrap(), p.bytes());
    }
    // Again: 200, nothing written.
    assert_eq!(post_part(&srv, "t", &parts[0]).0, 200);
    let ids: Vec<Digest> = parts.iter().map(|p| p.id()).collect();
    let last = *ids.last().unwrap();
    let (st, _, b) = http("POST", &format!("{}/v1/ns/t/parts/query", srv.url), None, &[], Some(&encode_ids(&ids)));
    assert_eq!(st, 200);
    assert_eq!(decode_ids(&b, ids.len()).unwrap(), vec![last], "parts/query names the one missing part");
    let r = part_recipe(&es, &parts);
    let (st, v) = commit(&srv, "t", "big", r.text().as_bytes());
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_parts")), "{v}");
    assert_eq!(v["missing_parts"], serde_json::json!([hex(&last)]));
    assert_eq!(post_part(&srv, "t", parts.last().unwrap()).0, 200);
    // Lying COUNT or BYTES on a part line (the end line agreeing with the lie): 400.
    for (dc, db) in [(1u64, 8000u64), (0, 1)] {
        let mut lie = r.clone();
        if let Line::Part { count, bytes, .. } = &mut lie.lines[0] {
            *count += dc;
            *bytes += db;
        }
        lie.count += dc;
        lie.bytes += db;
        let (st, v) = commit(&srv, "t", "big", lie.text().as_bytes());
        assert_eq!(st, 400, "{dc} {db}: {v}");
    }
    // A wrong digest: 400.
    let mut wrong = r.clone();
    wrong.digest = Some([1; 32]);
    assert_eq!(commit(&srv, "t", "big", wrong.text().as_bytes()).0, 400);
    let (_, _, l) = get(&srv, "t/files");
    assert!(json(&l)["files"].as_array().unwrap().is_empty(), "nothing committed yet");
    // The commit: the same digest as the whole file's recipe.
    let (st, v) = commit(&srv, "t", "big", r.text().as_bytes());
    assert_eq!(st, 201, "{v}");
    assert_eq!(v["bytes"].as_u64().unwrap(), file.len() as u64);
    assert_eq!(v["chunks"].as_u64().unwrap(), es.len() as u64);
    assert_eq!(v["digest"].as_str().unwrap(), hex(&r.digest.unwrap()));
    let check_all = |srv: &Server| {
        let (st, h, body) = get(srv, "t/files/big");
        assert_eq!(st, 200);
        assert_eq!(h["etag"].to_str().unwrap(), format!("\"{}\"", hex(&r.digest.unwrap())));
        assert!(body == file, "restored through parts, byte-identical");
        for (a, z) in [(1_000_001u64, 2_500_000u64), (0, 10), (file.len() as u64 - 5, file.len() as u64 - 1), (7999, 8000)] {
            let (st, _, body) = http("GET", &format!("{}/v1/ns/t/files/big", srv.url), None, &[("Range", &format!("bytes={a}-{z}"))], None);
            assert_eq!(st, 206);
            assert!(body == file[a as usize..=z as usize], "range {a}-{z}");
        }
        // The expanded recipe is exactly the whole file's recipe; ?parts=1 the stored text.
        let (st, _, body) = get(srv, "t/recipes/big");
        assert_eq!(st, 200);
        assert!(body == recipe_text(&chunks), "the expanded recipe");
        let (_, _, body) = get(srv, "t/recipes/big?parts=1");
        assert_eq!(String::from_utf8(body).unwrap(), r.text());
        let (st, _, body) = get(srv, &format!("t/parts/{}", hex(&ids[1])));
        assert_eq!(st, 200);
        assert_eq!(String::from_utf8(body).unwrap(), parts[1].text());
        let c = srv.check(&["--ns", "t"]);
        assert_eq!(c["parts"].as_u64().unwrap(), parts.len() as u64, "{c}");
    };
    check_all(&srv);
    // Tenants apart: another namespace neither reads the part nor commits with it.
    assert_eq!(get(&srv, &format!("u/parts/{}", hex(&ids[1]))).0, 404);
    upload(&srv, "u", &file[..8000]);
    let (st, v) = commit(&srv, "u", "big", r.text().as_bytes());
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_parts")), "{v}");
    // A delta cannot have a recipe in parts as base.
    let delta = format!(
        "cutpoint-delta 1\nbase 1\nprofile gear:2k:8k:64k\nhash blake3\ndigest {}\n= 0 1\nend 1 8000\n",
        hex(&r.digest.unwrap())
    );
    assert_eq!(commit(&srv, "t", "big", delta.as_bytes()).0, 404);
    // A restart with a rebuilt index finds the version committed in parts.
    srv.kill();
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE, "--reindex"], &[]);
    check_all(&srv);
    let _ = std::fs::remove_dir_all(&dir);
}

fn gc_keeps_referenced_parts_and_their_chunks_and_deletes_old_unreferenced_ones(b: Backend) {
    let dir = tmpdir(&format!("parts-gc-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let file = data(2 << 20, 72);
    let chunks = upload(&srv, "t", &file);
    let es = entries(&chunks);
    let parts = cut(&es);
    for p in &parts {
        assert_eq!(post_part(&srv, "t", p).0, 200);
    }
    assert_eq!(commit(&srv, "t", "kept", part_recipe(&es, &parts).text().as_bytes()).0, 201);
    // A part no recipe names, over chunks no recipe names.
    let other = upload(&srv, "t", &data(200_000, 73));
    let loose = cut(&entries(&other));
    assert_eq!(loose.len(), 1);
    assert_eq!(post_part(&srv, "t", &loose[0]).0, 200);
    // Within the grace period the loose part (a root) keeps its chunks.
    let g: Value = json(&srv.cli(&["gc", "--ns", "t", "--json"]).stdout);
    assert_eq!(g["parts_deleted"].as_u64(), Some(0), "{g}");
    assert_eq!(g["parts_in_grace"].as_u64(), Some(1), "the loose part, counted: {g}");
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let g: Value = json(&srv.cli(&["gc", "--ns", "t", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["parts_deleted"].as_u64(), Some(1), "{g}");
    assert_eq!(g["parts_in_grace"].as_u64(), Some(0), "{g}");
    assert!(g["chunks_removed"].as_u64().unwrap() >= other.len() as u64, "{g}");
    assert_eq!(get(&srv, &format!("t/parts/{}", hex(&loose[0].id()))).0, 404);
    for p in &parts {
        assert_eq!(get(&srv, &format!("t/parts/{}", hex(&p.id()))).0, 200, "a named part is kept");
    }
    let ids: Vec<Digest> = chunks.iter().map(|c| c.0).collect();
    let (_, _, m) = http("POST", &format!("{}/v1/ns/t/query", srv.url), None, &[], Some(&encode_ids(&ids)));
    assert!(m.is_empty(), "every chunk of the parts is kept");
    let (_, _, body) = get(&srv, "t/files/kept");
    assert!(body == file);
    srv.check(&["--ns", "t"]);
    // Once the version is gone, its parts and chunks go too.
    assert!(srv.cli(&["rm", "kept", "--ns", "t"]).status.success());
    std::thread::sleep(std::time::Duration::from_millis(1100));
    let g: Value = json(&srv.cli(&["gc", "--ns", "t", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["parts_deleted"].as_u64(), Some(parts.len() as u64), "{g}");
    let (_, _, m) = http("POST", &format!("{}/v1/ns/t/query", srv.url), None, &[], Some(&encode_ids(&ids)));
    assert_eq!(m.len(), 32 * ids.len());
    let _ = std::fs::remove_dir_all(&dir);
}

fn the_client_pushes_a_big_file_in_parts_and_a_re_push_sends_only_changed_parts(b: Backend) {
    let dir = tmpdir(&format!("parts-client-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let file = data(4 << 20, 74);
    let f = write(&dir, "f", &file);
    let r = srv.push(&f, "f", &["--ns", "t"]);
    assert!(r["parts"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file);
    let (_, _, t) = get(&srv, "t/recipes/f?parts=1");
    assert!(String::from_utf8(t).unwrap().contains("\npart "));
    // A small edit in the middle: the parts away from it are found present.
    let mut file2 = file.clone();
    file2[2 << 20..(2 << 20) + 100].fill(7);
    let f2 = write(&dir, "f2", &file2);
    let r2 = srv.push(&f2, "f", &["--ns", "t"]);
    let sent = r2["parts_sent"].as_u64().unwrap();
    assert!(sent >= 1 && sent * 2 < r2["parts"].as_u64().unwrap(), "only the changed parts are sent: {r2}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file2);
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

fn post_body(srv: &Server, ns: &str, body: &[u8]) -> (u16, Value) {
    let (st, _, b) = http("POST", &format!("{}/v1/ns/{ns}/parts", srv.url), None, &[], Some(body));
    (st, json(&b))
}

fn parts_missing(srv: &Server, ns: &str, ids: &[Digest]) -> Vec<Digest> {
    let (st, _, b) = http("POST", &format!("{}/v1/ns/{ns}/parts/query", srv.url), None, &[], Some(&encode_ids(ids)));
    assert_eq!(st, 200);
    decode_ids(&b, ids.len()).unwrap()
}

/// Part deltas (PROTOCOL.md 3.8, feature `part-delta`): `POST parts` with a delta body stores
/// the expanded part under the id of its canonical text; a delta running past its base, naming
/// a base the namespace lacks (or another namespace's), expanding past `max_recipe_bytes`, with
/// a lying `end` line or naming a chunk the namespace lacks is refused (400, 409, 413) and
/// stores nothing.
fn a_part_delta_is_stored_as_its_expansion_and_a_bad_one_stores_nothing(b: Backend) {
    let dir = tmpdir(&format!("parts-delta-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let (_, _, v1) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert!(json(&v1)["features"].as_array().unwrap().iter().any(|f| f == "part-delta"), "GET /v1 lists 'part-delta'");
    let chunks = upload(&srv, "t", &data(2 << 20, 95));
    let parts = cut(&entries(&chunks));
    assert!(parts.len() >= 4 && parts[0].entries.len() >= 8, "{} parts", parts.len());
    let base = &parts[0];
    assert_eq!(post_part(&srv, "t", base).0, 200);
    // The base with two entries replaced by chunks of another part: runs and two lines.
    let mut new = base.clone();
    new.entries[3] = parts[1].entries[0].clone();
    new.entries[6] = parts[1].entries[1].clone();
    let good = String::from_utf8(encode_part_delta(&new, base)).unwrap();
    assert!(good.len() * 3 < new.text().len(), "{good}");
    // Another edit, for the bad deltas (so that nothing stored is seen by its id).
    let mut other = base.clone();
    other.entries[1] = parts[2].entries[0].clone();
    let d = String::from_utf8(encode_part_delta(&other, base)).unwrap();
    let n = other.entries.len();
    let runs: Vec<&str> = d.lines().filter(|l| l.starts_with("= ")).collect();
    let end_line = format!("end {n} {}", other.bytes());
    // Run past the base's end: 400.
    let past = d.replacen(runs[0], &format!("= {} 2", base.entries.len() - 1), 1);
    let (st, v) = post_body(&srv, "t", past.as_bytes());
    assert_eq!(st, 400, "{v}");
    assert!(v["error"].as_str().unwrap().contains("past the end"), "{v}");
    // A lying end line: 400.
    let (st, v) = post_body(&srv, "t", d.replace(&end_line, &format!("end {} {}", n + 1, other.bytes())).as_bytes());
    assert_eq!(st, 400, "{v}");
    // A base part the namespace lacks: 409 missing_parts naming it.
    let d3 = String::from_utf8(encode_part_delta(&other, &parts[3])).unwrap();
    let (st, v) = post_body(&srv, "t", d3.as_bytes());
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_parts")), "{v}");
    assert_eq!(v["missing_parts"], serde_json::json!([hex(&parts[3].id())]));
    // Another namespace's part is no base: 409 there too (tenants apart).
    upload(&srv, "u", &data(8000, 96));
    let (st, v) = post_body(&srv, "u", d.as_bytes());
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_parts")), "{v}");
    // An expansion over --max-recipe (16 KiB) from a ~1 KB body: 413 before it is built.
    let mut bomb = format!("cutpoint-part-delta 1\nhash blake3\nbase {}\n", hex(&base.id()));
    let times = 100;
    for _ in 0..times {
        bomb += &format!("= 0 {}\n", base.entries.len());
    }
    bomb += &format!("end {} {}\n", base.entries.len() * times, base.bytes() * times as u64);
    let (st, v) = post_body(&srv, "t", bomb.as_bytes());
    assert_eq!(st, 413, "{v}");
    // A chunk the namespace lacks: 409 missing_chunks, as for a part.
    let mut stray = other.clone();
    stray.entries[1].fp = [7; 32];
    let (st, v) = post_body(&srv, "t", &encode_part_delta(&stray, base));
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_chunks")), "{v}");
    // Nothing of these was stored.
    let ids = [other.id(), stray.id(), new.id()];
    assert_eq!(parts_missing(&srv, "t", &ids), ids.to_vec(), "a refused delta stores nothing");
    assert_eq!(parts_missing(&srv, "u", &[other.id()]), vec![other.id()]);
    // The good ones: stored as their expansion, under the id of its text.
    for (p, body) in [(&new, good.as_bytes().to_vec()), (&other, d.into_bytes())] {
        let (st, v) = post_body(&srv, "t", &body);
        assert_eq!(st, 200, "{v}");
        assert_eq!(v["part"].as_str().unwrap(), hex(&p.id()));
        assert_eq!(v["chunks"].as_u64().unwrap(), p.entries.len() as u64);
        let (st, _, t) = get(&srv, &format!("t/parts/{}", hex(&p.id())));
        assert_eq!(st, 200);
        assert_eq!(String::from_utf8(t).unwrap(), p.text());
    }
    assert!(parts_missing(&srv, "t", &[new.id(), other.id()]).is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}

/// The ids of `ids` the namespace lacks (`POST query`).
fn chunks_missing(srv: &Server, ns: &str, ids: &[Digest]) -> Vec<Digest> {
    let (st, _, b) = http("POST", &format!("{}/v1/ns/{ns}/query", srv.url), None, &[], Some(&encode_ids(ids)));
    assert_eq!(st, 200);
    decode_ids(&b, ids.len()).unwrap()
}

/// A part delta's `=` runs are not checked again (PROTOCOL.md 3.8): that is safe only while
/// its base part is stored and no gc runs between reading the base and storing the expansion.
/// A base part that gc deleted (with its chunks) is refused, 409 `missing_parts`, nothing
/// stored; a gc that starts while a delta stalls between reading its base and checking its
/// chunks (`CUTPOINT_PART_DELTA_STALL_MS`) waits for it, so a stored part's chunks are all
/// present whichever comes first. (Had the base been read outside the gc lock, the gc would
/// delete the base's chunks during the stall and the expansion would be stored without them.)
#[test]
fn a_part_delta_whose_base_part_gc_deleted_stores_nothing_and_a_racing_gc_waits() {
    let dir = tmpdir("parts-delta-gc");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[("CUTPOINT_PART_DELTA_STALL_MS", "1500")]);
    let setup = |seed: u64| {
        let chunks = upload(&srv, "t", &data(1 << 20, seed));
        let parts = cut(&entries(&chunks));
        let base = parts[0].clone();
        assert_eq!(post_part(&srv, "t", &base).0, 200);
        // The new part: the base with one entry replaced by a chunk that a committed version
        // keeps (so that gc leaves it: only the chunks the runs copy can go).
        let kept = chunks[base.entries.len()].clone();
        assert_eq!(commit(&srv, "t", &format!("keep{seed}"), &recipe_text(std::slice::from_ref(&kept))).0, 201);
        let mut new = base.clone();
        new.entries[2] = parts[1].entries[0].clone();
        assert_eq!(new.entries[2].fp, kept.0);
        let d = encode_part_delta(&new, &base);
        std::thread::sleep(std::time::Duration::from_millis(1100));
        (base, new, d)
    };
    // gc first: the base part and its chunks are gone; the delta is refused and stores nothing.
    let (base, new, d) = setup(101);
    let g: Value = json(&srv.cli(&["gc", "--ns", "t", "--grace", "0", "--json"]).stdout);
    assert_eq!(g["parts_deleted"].as_u64(), Some(1), "{g}");
    let (st, v) = post_body(&srv, "t", &d);
    assert_eq!((st, v["code"].as_str()), (409, Some("missing_parts")), "{v}");
    assert_eq!(v["missing_parts"], serde_json::json!([hex(&base.id())]));
    assert_eq!(parts_missing(&srv, "t", &[new.id(), base.id()]), vec![new.id(), base.id()], "nothing stored");
    assert_eq!(post_part(&srv, "t", &base).0, 409, "the base's chunks went with it");
    // A gc started while the delta stalls after reading its base: whichever runs first, a part
    // stored has every chunk.
    let (_, new, d) = setup(102);
    let url = srv.url.clone();
    let poster = std::thread::spawn(move || {
        let (st, _, b) = http("POST", &format!("{url}/v1/ns/t/parts"), None, &[], Some(&d));
        (st, json(&b))
    });
    std::thread::sleep(std::time::Duration::from_millis(500));
    let g: Value = json(&srv.cli(&["gc", "--ns", "t", "--grace", "0", "--json"]).stdout);
    let (st, v) = poster.join().unwrap();
    assert!(st == 200 || (st, v["code"].as_str()) == (409, Some("missing_parts")), "{st} {v}");
    let ids: Vec<Digest> = new.entries.iter().map(|e| e.fp).collect();
    if parts_missing(&srv, "t", &[new.id()]).is_empty() {
        assert!(chunks_missing(&srv, "t", &ids).is_empty(), "a stored part lost chunks: delta {st} {v}, gc {g}");
    }
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A re-push of a file in parts with edits spread over it (PROTOCOL.md 5.1 step 5): the ids of
/// the base version's parts are known present (not queried) and each changed part goes as a
/// part delta against its base part, so the push sends about its novel bytes; the pull is
/// byte-identical. (Before: every id queried again and every changed part sent whole.)
#[test]
fn a_re_push_in_parts_sends_part_deltas_and_queries_no_known_id() {
    let dir = tmpdir("parts-repush-delta");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let file = data(6 << 20, 97);
    let f = write(&dir, "f", &file);
    let r = srv.push(&f, "f", &["--ns", "t"]);
    assert!(r["parts"].as_u64().unwrap() > 10, "{r}");
    // Ten edits of 100 bytes, spread over the file.
    let mut file2 = file.clone();
    for k in 0..10 {
        let at = k * (file.len() / 10) + 12_345;
        file2[at..at + 100].fill(k as u8);
    }
    let f2 = write(&dir, "f2", &file2);
    let r2 = srv.push(&f2, "f", &["--ns", "t"]);
    let n = |k: &str| r2[k].as_u64().unwrap_or_else(|| panic!("{k}: {r2}"));
    let (chunks, novel_chunks, novel) = (n("chunks"), n("novel_chunks"), n("novel_bytes"));
    assert!(novel_chunks >= 10 && n("parts_sent") >= 5, "{r2}");
    assert_eq!(n("parts_delta"), n("parts_sent"), "every changed part went as a delta: {r2}");
    assert!(n("known_from_base") + novel_chunks >= chunks, "every unchanged id known from the base's parts: {r2}");
    assert!(n("base_part_bytes") > 0, "{r2}");
    // Beyond the packs and the recipe of part lines: the novel ids' queries, parts/query and
    // the deltas. Re-querying every id alone would be 32 bytes a chunk; whole parts ~4 KB each.
    let other = n("sent_bytes") - n("pack_bytes") - n("recipe_bytes");
    assert!(other * 4 < chunks * 32, "queries and parts: {other} bytes for {chunks} chunks: {r2}");
    assert!(n("sent_bytes") as f64 <= novel as f64 * 1.05 + n("recipe_bytes") as f64 + 4096.0, "{r2}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file2);
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Check before sending: a limit the client cannot meet is refused before a byte is uploaded,
/// with the store's limit in the message (never a "Broken pipe" after the upload).
#[test]
fn a_limit_the_client_cannot_meet_is_refused_before_a_byte_is_sent() {
    let dir = tmpdir("parts-limits");
    let store = Loc::new(Backend::Local, &dir, None);
    let mut srv = Server::start(&store, &["--max-recipe", "2k"], &[]);
    let f = write(&dir, "f", &data(3 << 20, 75));
    // A whole recipe (--no-parts: as with a store without parts) of at least 48 chunks.
    let out = srv.cli(&["push", f.to_str().unwrap(), "--name", "f", "--no-parts"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("max_recipe_bytes of 2048") && err.contains("nothing was sent"), "{err}");
    assert!(!err.contains("Broken pipe"), "{err}");
    assert_eq!(packs_on_disk(&srv.data), 0, "nothing was uploaded");
    // With parts the same store takes a file whose whole recipe (~2.4 KB) is over its limit.
    let small = write(&dir, "small", &data(256 << 10, 76));
    let r = srv.push(&small, "small", &[]);
    assert!(r["parts"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(srv.pull("small", None, &[]), std::fs::read(&small).unwrap());
    // A big one: its recipe of part lines is refused before it is sent (its chunks and parts
    // were sent), with the limit in the message (a part line per ~6 chunks here: see
    // PROTOCOL.md 8, "The number of part lines grows with the file").
    let out = srv.cli(&["push", f.to_str().unwrap(), "--name", "f"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("max_recipe_bytes of 2048") && err.contains("nothing was committed"), "{err}");
    srv.kill();
    // A pack limit below one chunk of the profile's MAX.
    let store = Loc::named(Backend::Local, &dir, None, "small-packs");
    let srv = Server::start(&store, &["--max-pack", "32k"], &[]);
    let out = srv.cli(&["push", f.to_str().unwrap(), "--name", "f"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(err.contains("32768"), "{err}");
    assert_eq!(packs_on_disk(&srv.data), 0, "nothing was uploaded");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A recipe body naming the part `p` `times` times (with any digest: the count is refused first).
fn repeated(p: &Part, times: usize, digest: Digest) -> PartRecipe {
    let line = Line::Part {
        id: p.id(),
        count: p.entries.len() as u64,
        bytes: p.bytes(),
    };
    PartRecipe {
        profile: "gear:2k:8k:64k".into(),
        hash: HashAlg::Blake3,
        digest: Some(digest),
        lines: vec![line; times],
        count: (p.entries.len() * times) as u64,
        bytes: p.bytes() * times as u64,
    }
}

fn files_listed(srv: &Server, ns: &str) -> usize {
    let (_, _, l) = get(srv, &format!("{ns}/files"));
    json(&l)["files"].as_array().unwrap().len()
}

/// The amplification of issue #32's review: a short body naming one big part thousands of times
/// made the store read and parse that part once per line (here 3,000 x 0.9 MB; a 1 MiB body
/// against the default limits could ask for ~1.5 TB). With the default `max_commit_entries`
/// (2^25) the line COUNTs are summed first: 413 `too_many_entries`, no part read, nothing stored.
fn a_commit_naming_a_big_part_many_times_is_refused_before_any_part_is_read(b: Backend) {
    let dir = tmpdir(&format!("parts-amplify-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", "1m"], &[]);
    // One part of 12,000 chunks of 64 bytes (~0.9 MB of text, within --max-recipe 1m).
    let file = data(12_000 * 64, 81);
    let chunks = chunks_of(&file, &[64; 12_000]);
    let (st, _, body) = http("POST", &format!("{}/v1/ns/t/packs", srv.url), None, &[], Some(&pack(&chunks)));
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&body));
    let part = Part {
        hash: HashAlg::Blake3,
        entries: entries(&chunks),
    };
    assert!(part.text().len() > 800_000);
    assert_eq!(post_part(&srv, "t", &part).0, 200);
    // 3,000 lines (~250 KB) naming it: 36,000,000 entries, over 2^25.
    let r = repeated(&part, 3000, [5; 32]);
    let (st, v) = commit(&srv, "t", "amp", r.text().as_bytes());
    assert_eq!((st, v["code"].as_str()), (413, Some("too_many_entries")), "{v}");
    assert!(v["error"].as_str().unwrap().contains("33554432"), "the message names the limit: {v}");
    assert_eq!(files_listed(&srv, "t"), 0, "nothing committed");
    // The same in a batch commit (one request, one limit).
    let body = r.text();
    let batch = format!("cutpoint-batch 1\nfile amp {}\n{body}end 1\n", body.len());
    let (st, _, b) = http("POST", &format!("{}/v1/ns/t/commits", srv.url), None, &[], Some(batch.as_bytes()));
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&b));
    let res = &json(&b)["results"][0];
    assert_eq!((res["status"].as_u64(), res["code"].as_str()), (Some(413), Some("too_many_entries")), "{res}");
    assert_eq!(files_listed(&srv, "t"), 0, "nothing committed");
    let (_, _, v1) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(json(&v1)["limits"]["max_commit_entries"].as_u64(), Some(1 << 25), "GET /v1 announces the default");
    let _ = std::fs::remove_dir_all(&dir);
}

/// A legit recipe may name one part on several lines (a file that repeats itself): within
/// `--max-commit-entries` it commits and restores; one line more is 413 `too_many_entries`; a
/// batch shares one limit among its files.
fn a_part_repeated_within_max_commit_entries_commits_and_beyond_it_is_refused(b: Backend) {
    let dir = tmpdir(&format!("parts-repeat-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE, "--max-commit-entries", "100"], &[]);
    let (_, _, v1) = http("GET", &format!("{}/v1", srv.url), None, &[], None);
    assert_eq!(json(&v1)["limits"]["max_commit_entries"].as_u64(), Some(100));
    let x = data(25 * 8000, 82);
    let chunks = upload(&srv, "t", &x);
    let es = entries(&chunks);
    let parts = cut(&es);
    assert_eq!(parts.len(), 1);
    assert_eq!(post_part(&srv, "t", &parts[0]).0, 200);
    let digest_of = |times: usize| {
        let mut d = FileDigest::new(HashAlg::Blake3);
        for _ in 0..times {
            for e in &es {
                d.add(&e.fp, e.size);
            }
        }
        d.finish().unwrap()
    };
    // 4 x 25 = 100 entries: the limit exactly.
    let r4 = repeated(&parts[0], 4, digest_of(4));
    let (st, v) = commit(&srv, "t", "four", r4.text().as_bytes());
    assert_eq!(st, 201, "{v}");
    let (_, _, body) = get(&srv, "t/files/four");
    assert!(body == x.repeat(4), "restored byte-identical");
    // 5 x 25: refused, with the right digest too.
    let r5 = repeated(&parts[0], 5, digest_of(5));
    let (st, v) = commit(&srv, "t", "five", r5.text().as_bytes());
    assert_eq!((st, v["code"].as_str()), (413, Some("too_many_entries")), "{v}");
    assert_eq!(get(&srv, "t/files/five").0, 404, "nothing committed");
    // A batch of two 100-entry files: the first commits, the second is over the request's limit.
    let body = r4.text();
    let batch = format!(
        "cutpoint-batch 1\nfile a {n}\n{body}file b {n}\n{body}end 2\n",
        n = body.len()
    );
    let (st, _, b) = http("POST", &format!("{}/v1/ns/t/commits", srv.url), None, &[], Some(batch.as_bytes()));
    assert_eq!(st, 200, "{}", String::from_utf8_lossy(&b));
    let res = json(&b)["results"].clone();
    assert_eq!(res[0]["status"].as_u64(), Some(201), "{res}");
    assert_eq!((res[1]["status"].as_u64(), res[1]["code"].as_str()), (Some(413), Some("too_many_entries")), "{res}");
    assert_eq!(get(&srv, "t/files/b").0, 404);
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cutpoint push - --name NAME ARGS...` with `input` on standard input.
fn push_stdin(srv: &Server, name: Option<&str>, input: &[u8], extra: &[&str]) -> std::process::Output {
    let mut c = bin();
    c.args(["push", "-", "--json", "--store", &srv.url]).args(extra).env_remove("CUTPOINT_TOKEN");
    if let Some(n) = name {
        c.args(["--name", n]);
    }
    let mut child = c.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let mut w = child.stdin.take().unwrap();
    // Written in pieces, as a pipe delivers it; a push that stops reading ends the write.
    for piece in input.chunks(100_000) {
        if w.write_all(piece).is_err() {
            break;
        }
    }
    drop(w);
    child.wait_with_output().unwrap()
}

fn pushed(out: &std::process::Output) -> Value {
    assert!(out.status.success(), "push -: {}", String::from_utf8_lossy(&out.stderr));
    json(&out.stdout)
}

/// `cutpoint push -`: standard input without --name is a clear usage error before anything is
/// sent; a short stream is committed whole (and pushed again changed, as a delta); a stream whose
/// recipe passes the threshold (--max-recipe 16k) is committed in parts; both pull
/// byte-identical.
fn a_stream_from_stdin_is_pushed_whole_or_in_parts_and_pulls_byte_identical(b: Backend) {
    let dir = tmpdir(&format!("parts-stdin-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let big = data(6 << 20, 91);
    let out = push_stdin(&srv, None, &big, &[]);
    assert_eq!(out.status.code(), Some(2), "a usage error");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--name"), "{err}");
    let (_, _, l) = get(&srv, "t/files");
    assert!(json(&l)["files"].as_array().unwrap().is_empty());
    assert_eq!(packs_on_disk(&srv.data), 0, "nothing was sent");
    // '-' with other files: a usage error too.
    let f = write(&dir, "f", b"x");
    let out = bin().args(["push", "-", f.to_str().unwrap(), "--store", &srv.url]).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    // A short stream: committed whole; again with an edit: a delta.
    let small = data(40_000, 92);
    let r = pushed(&push_stdin(&srv, Some("small"), &small, &["--ns", "t"]));
    assert_eq!((r["parts"].as_u64(), r["bytes"].as_u64()), (Some(0), Some(small.len() as u64)), "{r}");
    assert_eq!(srv.pull("small", None, &["--ns", "t"]), small);
    let mut small2 = small.clone();
    small2[20_000..20_010].fill(1);
    let r = pushed(&push_stdin(&srv, Some("small"), &small2, &["--ns", "t"]));
    assert_eq!(r["delta_base"].as_u64(), Some(1), "{r}");
    assert_eq!(srv.pull("small", None, &["--ns", "t"]), small2);
    // A big one: in parts.
    let r = pushed(&push_stdin(&srv, Some("big"), &big, &["--ns", "t"]));
    assert!(r["parts"].as_u64().unwrap() > 1, "{r}");
    assert_eq!(r["bytes"].as_u64(), Some(big.len() as u64));
    assert_eq!(srv.pull("big", None, &["--ns", "t"]), big);
    // The same stream again: nothing novel, no part sent, same digest.
    let r2 = pushed(&push_stdin(&srv, Some("big"), &big, &["--ns", "t"]));
    assert_eq!((r2["novel_chunks"].as_u64(), r2["parts_sent"].as_u64()), (Some(0), Some(0)), "{r2}");
    assert_eq!(r2["digest"], r["digest"]);
    // An empty stream is a file of 0 bytes.
    let r = pushed(&push_stdin(&srv, Some("empty"), b"", &["--ns", "t"]));
    assert_eq!(r["bytes"].as_u64(), Some(0), "{r}");
    assert_eq!(srv.pull("empty", None, &["--ns", "t"]), b"");
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `cutpoint pull` of a version committed in parts never asks for the expanded recipe (~75
/// bytes a chunk, growing with the file): it reads the stored text (`?parts=1`) and then each
/// part, verified against its id, when its turn comes. Seen through a proxy's request log.
fn a_pull_reads_the_stored_recipe_and_its_parts_one_at_a_time(b: Backend) {
    let dir = tmpdir(&format!("parts-pull-{b:?}"));
    let s3 = s3_for(b, &dir);
    let store = Loc::new(b, &dir, s3.as_ref());
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    let file = data(4 << 20, 93);
    let f = write(&dir, "f", &file);
    let r = srv.push(&f, "f", &["--ns", "t"]);
    let parts = r["parts"].as_u64().unwrap();
    assert!(parts > 4, "{r}");
    let proxy = FaultProxy::start(&srv.url);
    let out = dir.join("out");
    let o = bin()
        .args(["pull", "f", "--ns", "t", "-o", out.to_str().unwrap(), "--store", &proxy.url])
        .env_remove("CUTPOINT_TOKEN")
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(std::fs::read(&out).unwrap() == file, "byte-identical");
    let heads: String = proxy.conns().iter().map(|c| String::from_utf8_lossy(&c.sent).into_owned()).collect();
    assert!(heads.contains("GET /v1/ns/t/recipes/f?parts=1 "), "{heads}");
    assert!(!heads.contains("GET /v1/ns/t/recipes/f "), "the expanded recipe is not asked for: {heads}");
    assert_eq!(heads.matches("GET /v1/ns/t/parts/").count() as u64, parts, "each part once: {heads}");
    // A plain (small) version pulls as before.
    let small = data(100_000, 94);
    let fs = write(&dir, "small", &small);
    assert_eq!(srv.push(&fs, "small", &["--ns", "t"])["parts"].as_u64(), Some(0));
    assert_eq!(srv.pull("small", None, &["--ns", "t"]), small);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Flat client memory at any input size (issue #32): a push in parts holds a bounded number of
/// chunk ids (the ids asked about, at most `KNOWN_MAX` = 65,536 before the set is emptied; the
/// offsets and the recipe's entries only until the recipe goes to parts), counted by the
/// report's `ids_held`. Small chunks (256 B on average) make many ids from a few MiB: a stream of
/// 3× the length holds no more ids than the shorter one, far fewer than its chunks; a re-push
/// (ids asked again after the set was emptied) finds everything present.
#[test]
fn a_push_in_parts_holds_a_bounded_number_of_ids_at_any_length() {
    let dir = tmpdir("parts-ids-held");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &[], &[]);
    let args = ["--ns", "t", "--profile", "gear:64:256:1k", "--compression", "off"];
    let short = data(24 << 20, 93);
    let long = data(72 << 20, 94);
    let a = pushed(&push_stdin(&srv, Some("short"), &short, &args));
    let b = pushed(&push_stdin(&srv, Some("long"), &long, &args));
    let held = |r: &Value| r["ids_held"].as_u64().unwrap_or(u64::MAX);
    let chunks = |r: &Value| r["chunks"].as_u64().unwrap();
    assert!(a["parts"].as_u64().unwrap() > 1 && b["parts"].as_u64().unwrap() > 1, "{a} {b}");
    assert!(chunks(&b) > 3 * 65_536 && chunks(&b) > 2 * chunks(&a), "{a} {b}");
    // Before parts: the ids asked, their places and the entries (each ≤ 65,536 + a batch).
    let bound = 3 * (65_536 + 2_048);
    assert!(held(&a) <= bound && held(&b) <= bound, "ids held: {} and {} (bound {bound})", held(&a), held(&b));
    assert!(held(&b) <= held(&a) + 2_048, "ids held grew with the input: {} → {}", held(&a), held(&b));
    assert!(held(&b) < chunks(&b), "{b}");
    assert_eq!(srv.pull("long", None, &["--ns", "t"]), long);
    let again = pushed(&push_stdin(&srv, Some("long"), &long, &args));
    assert_eq!((again["novel_chunks"].as_u64(), again["parts_sent"].as_u64()), (Some(0), Some(0)), "{again}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The files under `dir` (recursively) and their modification times.
fn mtimes(dir: &std::path::Path) -> Vec<std::time::SystemTime> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let e = e.unwrap();
        let m = e.metadata().unwrap();
        if m.is_dir() {
            out.extend(mtimes(&e.path()));
        } else {
            out.push(m.modified().unwrap());
        }
    }
    out
}

/// A push in parts sends each part once the packs holding its novel chunks are stored, while
/// the file is still chunked and later packs still go (PROTOCOL.md 5.1 step 5), not every part
/// after the last pack: with small packs and small parts, the oldest part object is older than
/// the newest pack object. The bytes sent are those of a push that sent its parts at the end.
#[test]
fn a_push_in_parts_sends_parts_while_later_packs_are_still_sent() {
    let dir = tmpdir("parts-early");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-recipe", "64k"], &[]);
    // 1 KiB chunks: a batch of 2,048 chunks is ~2 MiB, so 12 MiB makes several batches, each
    // closing parts of ~200 entries; 64 KiB packs make ~190 of them.
    let args = ["--ns", "t", "--profile", "gear:512:1k:4k", "--compression", "off", "--pack-size", "64k"];
    let file = data(12 << 20, 41);
    let f = write(&dir, "f", &file);
    let r = srv.push(&f, "f", &args);
    let n = |k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
    assert!(n("parts") > 20 && n("packs") > 100 && n("parts_sent") == n("parts"), "{r}");
    let ns = store.objects.join("ns").join("t");
    let newest_pack = mtimes(&ns.join("packs")).into_iter().max().unwrap();
    let oldest_part = mtimes(&ns.join("parts")).into_iter().min().unwrap();
    assert!(oldest_part < newest_pack, "every part was stored after the last pack: {r}");
    assert_eq!(mtimes(&ns.join("parts")).len() as u64, n("parts"), "{r}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file);
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A re-push with a few edits spread over the file: its novel chunks fill far less than one
/// pack, yet the parts waiting on the open pack do not wait for the end of the file: the pack
/// is closed early once 4 parts wait on it (before: one pack, every changed part sent after
/// the file was chunked). The last part is sealed when chunking ends and sent with the others
/// (the commit stage sends none and asks no `parts/query`: `CUTPOINT_TRACE` shows every part
/// handled before the commit; before, the last part always went from the commit stage). The
/// same of a stream; both pull byte-identical.
#[test]
fn a_re_push_closes_its_pack_early_for_waiting_parts_and_sends_its_last_part_with_them() {
    let dir = tmpdir("parts-flush-early");
    let store = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&store, &["--max-recipe", MAX_RECIPE], &[]);
    // 1 KiB chunks: a batch of 2,048 chunks is ~2 MiB, parts of ~200 entries close ~10 a batch.
    let args = ["--ns", "t", "--profile", "gear:512:1k:4k", "--compression", "off", "--pack-size", "4m"];
    let file = data(12 << 20, 43);
    let r0 = srv.push(&write(&dir, "f0", &file), "f", &args);
    assert!(r0["parts"].as_u64().unwrap() > 30, "{r0}");
    // One edit of 100 bytes a MiB: novel chunks in every batch, a few KiB in all.
    let edit_at = |from: &[u8], salt: u8, mibs: &[usize]| {
        let mut v = from.to_vec();
        for &k in mibs {
            let at = k * (1 << 20) + 777 + salt as usize * 4096;
            v[at..at + 100].fill(k as u8 ^ salt);
        }
        v
    };
    let edit = |from: &[u8], salt: u8| edit_at(from, salt, &(0..12).collect::<Vec<_>>());
    let file1 = edit(&file, 1);
    let f1 = write(&dir, "f1", &file1);
    let out = bin().args(["push", f1.to_str().unwrap(), "--name", "f", "--json", "--store", &srv.url]).args(args).env("CUTPOINT_TRACE", "1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r1 = json(&out.stdout);
    let trace = String::from_utf8_lossy(&out.stderr);
    let n = |r: &Value, k: &str| r[k].as_u64().unwrap_or_else(|| panic!("{k}: {r}"));
    assert!(n(&r1, "novel_bytes") < 256 << 10 && n(&r1, "novel_chunks") >= 12, "{r1}");
    assert!(n(&r1, "packs") >= 2, "one pack for the whole re-push: every part waited for the end: {r1}");
    assert!(n(&r1, "parts_sent") >= 12 && n(&r1, "parts_delta") == n(&r1, "parts_sent"), "{r1}");
    let parts = n(&r1, "parts");
    let all_early = format!("commit: sealed, {parts} parts, {parts} handled early");
    assert!(trace.contains(&all_early), "the commit stage sent parts itself: {trace}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file1);
    // A stream (its spool counts the pack stage's lists: the empty ones that wake it are not).
    let file2 = edit(&file1, 2);
    let r2 = pushed(&push_stdin(&srv, Some("f"), &file2, &args));
    assert!(n(&r2, "packs") >= 2 && n(&r2, "novel_bytes") < 256 << 10, "{r2}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file2);
    // Edits in the first MiB only: the batches after it have no novel chunk, and the parts
    // they close wait on the open pack (it holds the first MiB's novel chunks), which closes
    // early for them (at the end of the first list, or woken by an empty list: which one is a
    // race this test does not steer), not at the end of the file. File, then stream.
    let file3 = edit_at(&file2, 3, &[0]);
    let f3 = write(&dir, "f3", &file3);
    let out = bin().args(["push", f3.to_str().unwrap(), "--name", "f", "--json", "--store", &srv.url]).args(args).env("CUTPOINT_TRACE", "1").output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let r3 = json(&out.stdout);
    let trace = String::from_utf8_lossy(&out.stderr);
    assert!(n(&r3, "novel_chunks") >= 1, "{r3}");
    assert!(trace.contains("pack: closed early for the parts waiting on it"), "the parts of the quiet batches waited for the end of the file: {trace}");
    let parts = n(&r3, "parts");
    assert!(trace.contains(&format!("commit: sealed, {parts} parts, {parts} handled early")), "{trace}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file3);
    let file4 = edit_at(&file3, 4, &[0]);
    let r4 = pushed(&push_stdin(&srv, Some("f"), &file4, &args));
    assert!(n(&r4, "packs") >= 1 && n(&r4, "novel_chunks") >= 1, "{r4}");
    assert_eq!(srv.pull("f", None, &["--ns", "t"]), file4);
    srv.check(&["--ns", "t"]);
    let _ = std::fs::remove_dir_all(&dir);
}
