//! The store's index at scale: fills a real store (local directory) with N chunks through the
//! store's own upload path (`Store::ingest`: every chunk re-hashed, the pack fsync'd and stored,
//! then indexed by `Index::add_pack`), then times existence queries through `Store::query` in
//! batches as the client sends them (`MAX_QUERY_IDS` ids), half the ids present, half absent.
//!
//!   cargo run --release -p cutpoint-store --example index_scale -- \
//!       [--chunks 10000000] [--per-pack 65536] [--batches 200] [--batch 16384] [--dir DIR] [--json]
//!       [--sorted] [--serve target/release/cutpoint [--clients 4]]
//!
//! `--json`: bench rows (section `index`), one JSON object a line, for bench/harness/run.mjs.
//! `--sorted`: the chunks go to the packs in the order of their ids, so the index is filled by
//! appends (10^7 chunks in minutes rather than ~20 min of random-keyed inserts).
//! `--serve BIN`: then starts `BIN serve --data DIR` over the filled store (its own process) and
//! queries it over HTTP from `--clients` threads of the native client: batches of 1,000 ids
//! (latency) and of 16,384 (throughput), half present; the server's start-up time, RSS and CPU.
//!
//! Chunks are 8 bytes (a counter), so the run measures the index, not the disk: a pack of 65,536
//! chunks (the store's default `max_pack_chunks`) is ~3 MiB of frames. Prints the fill rate, per-batch query latency p50/p99, ids per
//! second, the index file size (database + WAL) and the process's peak RSS (`VmHWM`).
//! `--dir` keeps the store (and reuses one already filled to at least N chunks).

use cutpoint_core::protocol::pack::PackWriter;
use cutpoint_core::protocol::query::MAX_QUERY_IDS;
use cutpoint_core::{Digest, HashAlg};
use cutpoint_store::{Limits, Store};
use std::time::Instant;

fn arg(name: &str, default: u64) -> u64 {
    let a: Vec<String> = std::env::args().collect();
    a.iter()
        .position(|x| x == name)
        .and_then(|i| a.get(i + 1))
        .map(|v| v.parse().unwrap_or_else(|_| panic!("{name}: not a number: {v}")))
        .unwrap_or(default)
}

fn vm_hwm_kib() -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("VmHWM:")).map(|l| l.split_whitespace().nth(1).unwrap_or("0").parse().unwrap_or(0)))
        .unwrap_or(0)
}

fn chunk(i: u64) -> [u8; 8] {
    i.to_le_bytes()
}

fn id(i: u64) -> Digest {
    HashAlg::Blake3.digest(&chunk(i)).expect("blake3")
}

fn file_size(p: &std::path::Path) -> u64 {
    std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)
}

fn main() {
    let n = arg("--chunks", 10_000_000);
    let per_pack = arg("--per-pack", cutpoint_store::store::DEFAULT_MAX_PACK_CHUNKS).clamp(1, cutpoint_store::store::DEFAULT_MAX_PACK_CHUNKS);
    let batches = arg("--batches", 200) as usize;
    let batch = (arg("--batch", MAX_QUERY_IDS as u64) as usize).clamp(2, MAX_QUERY_IDS);
    let json = std::env::args().any(|a| a == "--json");
    let sorted = std::env::args().any(|a| a == "--sorted");
    let serve_bin = std::env::args().position(|a| a == "--serve").and_then(|i| std::env::args().nth(i + 1));
    let clients = arg("--clients", 4).max(1) as usize;
    let keep = std::env::args().position(|a| a == "--dir").and_then(|i| std::env::args().nth(i + 1));
    let tmp = tempfile::tempdir().expect("tempdir");
    let dir = keep.as_ref().map(std::path::PathBuf::from).unwrap_or_else(|| tmp.path().to_path_buf());
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (store, _) = Store::open_dir(&dir, rt.handle().clone(), Limits::default(), false).expect("open store");
    let ns = "scale";

    // Fill: one pack of `per_pack` chunks at a time; a pack is built while none is ingested
    // (the store and this client share the machine's cores, as in the push benches).
    // `--sorted`: the chunks are given to the packs in the order of their ids (all ids
    // computed and sorted first), so that every index insert lands at the B-tree's right edge:
    // the same rows, filled in a fraction of the time of random-keyed inserts.
    let have = store.index.chunk_count(ns).unwrap_or(0);
    let t = Instant::now();
    let order: Option<Vec<(Digest, u64)>> = sorted.then(|| {
        let mut v: Vec<(Digest, u64)> = (have..n).map(|i| (id(i), i)).collect();
        v.sort_unstable();
        v
    });
    let mut next = have;
    let mut packs = 0;
    while next < n {
        let end = (next + per_pack).min(n);
        let mut w = PackWriter::new(Vec::with_capacity(((end - next) * 48) as usize), HashAlg::Blake3).expect("pack");
        for k in next..end {
            match &order {
                Some(o) => {
                    let (d, i) = &o[(k - have) as usize];
                    w.add(d, &chunk(*i)).expect("add");
                }
                None => {
                    w.add(&id(k), &chunk(k)).expect("add");
                }
            }
        }
        let body = w.finish().expect("finish");
        let rep = store.ingest(ns, &body[..]).expect("ingest");
        assert_eq!(rep.stored, end - next, "every chunk of a fresh pack is new");
        next = end;
        packs += 1;
        if packs % 10 == 0 && !json {
            eprintln!("  filled {next} chunks in {:.1} s", t.elapsed().as_secs_f64());
        }
    }
    drop(order);
    let fill_s = t.elapsed().as_secs_f64();
    let count = store.index.chunk_count(ns).expect("count");
    assert!(count >= n, "the index holds {count} chunks, wanted {n}");
    let rss_after_fill = vm_hwm_kib();

    // Queries: batch b asks for `batch/2` present ids (spread over the whole range) and as many
    // absent ones (ids of counters past the end), shuffled together.
    let mut x = 0x9E3779B97F4A7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut lat = Vec::with_capacity(batches);
    let t_all = Instant::now();
    for _ in 0..batches {
        let mut ids: Vec<Digest> = Vec::with_capacity(batch);
        for k in 0..batch {
            let i = if k % 2 == 0 { rnd() % count } else { count + 1_000_000_000 + rnd() % (1 << 40) };
            ids.push(id(i));
        }
        let t = Instant::now();
        let miss = store.query(ns, &ids).expect("query");
        lat.push(t.elapsed().as_secs_f64());
        assert_eq!(miss.len(), batch / 2, "half the ids are absent");
    }
    let q_s = t_all.elapsed().as_secs_f64();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1] * 1e3;
    let qtime: f64 = lat.iter().sum();
    let db = dir.join("index.sqlite");
    let wal = dir.join("index.sqlite-wal");
    let (db_b, wal_b) = (file_size(&db), file_size(&wal));
    let rss = vm_hwm_kib();
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_default();
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    if json {
        // Bench rows (bench/harness/run.mjs --only index-scale): one JSON object a line.
        let common = serde_json::json!({
            "section": "index", "runtime": "native", "chunks": count, "batch": batch, "batches": batches,
            "index_bytes": db_b, "wal_bytes": wal_b, "peak_rss_kib": rss, "fill_s": fill_s, "query_wall_s": q_s, "cpu": cpu, "loadavg": load,
        });
        let row = |name: &str, what: String, value: f64, unit: &str| {
            let mut r = common.clone();
            let o = r.as_object_mut().unwrap();
            o.insert("name".into(), name.into());
            o.insert("what".into(), what.into());
            o.insert("value".into(), value.into());
            o.insert("unit".into(), unit.into());
            println!("{r}");
        };
        let half = format!("{batch} ids, half present, index of {count} chunks");
        row("index/query/p50", format!("Store::query batch latency p50 ({half})"), pct(0.5), "ms");
        row("index/query/p99", format!("Store::query batch latency p99 ({half})"), pct(0.99), "ms");
        row("index/query/ids", format!("Store::query ids per second ({half})"), (batch * batches) as f64 / qtime, "ids/s");
        row("index/fill", format!("Store::ingest of {} chunks of 8 B in packs of {per_pack}{}", count - have, if sorted { ", ids in sorted order" } else { "" }), (count - have) as f64 / fill_s.max(1e-9), "chunks/s");
        row("index/size", format!("index file (SQLite + WAL) at {count} chunks"), (db_b + wal_b) as f64 / 1048576.0, "MiB");
        row("index/rss", format!("peak RSS of the process (store + client) at {count} chunks"), rss as f64 / 1024.0, "MiB");
    } else {
        println!("index: {count} chunks ({} added now in {fill_s:.1} s, {packs} packs: {:.0} chunks/s)", count - have, (count - have) as f64 / fill_s.max(1e-9));
        println!(
            "query: {batches} batches of {batch} ids (half present): p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms per batch; {:.0} ids/s",
            pct(0.5),
            pct(0.99),
            pct(1.0),
            (batch * batches) as f64 / qtime
        );
        println!("index file: {:.1} MiB (+ WAL {:.1} MiB); peak RSS {:.1} MiB (after fill {:.1} MiB)", db_b as f64 / 1048576.0, wal_b as f64 / 1048576.0, rss as f64 / 1024.0, rss_after_fill as f64 / 1024.0);
        println!("cpu: {cpu}; load average {}", load.join(" "));
    }
    if let Some(bin) = serve_bin {
        drop(store);
        drop(rt);
        http_phase(&bin, &dir, ns, count, clients, json);
    }
}

/// Queries through the real HTTP path: `BIN serve --data DIR` over the index just filled (a
/// process of its own, whose start-up, RSS and CPU are read from /proc), `clients` threads of
/// the native client (`Client::query`), first batches of 1,000 ids (latency), then of
/// `MAX_QUERY_IDS` (throughput), half the ids present. The ids are hashed before the clock starts.
fn http_phase(bin: &str, dir: &std::path::Path, ns: &str, count: u64, clients: usize, json: bool) {
    use std::io::BufRead;
    let t = Instant::now();
    let mut child = std::process::Command::new(bin)
        .args(["serve", "--data"])
        .arg(dir)
        .args(["--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start cutpoint serve");
    let mut out = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    out.read_line(&mut line).expect("serve's first line");
    let start_s = t.elapsed().as_secs_f64();
    let url = line.split_whitespace().find(|w| w.starts_with("http://")).expect("serve printed its URL").to_string();
    // Keep reading its stdout so that it never blocks on a full pipe.
    std::thread::spawn(move || std::io::copy(&mut out, &mut std::io::sink()));
    let pid = child.id();
    let proc_kib = |key: &str| -> u64 {
        std::fs::read_to_string(format!("/proc/{pid}/status"))
            .ok()
            .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1).and_then(|v| v.parse().ok())))
            .unwrap_or(0)
    };
    let cpu_s = || -> f64 {
        let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        let f: Vec<&str> = s.rsplit(") ").next().unwrap_or("").split_whitespace().collect();
        (f.get(11).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0) + f.get(12).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0)) / 100.0
    };
    let rss_start = proc_kib("VmRSS:");
    for (batch, per_client) in [(1000usize, 400usize), (MAX_QUERY_IDS, 25)] {
        let mut seed = 0x2545F4914F6CDD1Du64 ^ batch as u64;
        let mut rnd = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let work: Vec<Vec<Vec<Digest>>> = (0..clients)
            .map(|_| {
                (0..per_client)
                    .map(|_| (0..batch).map(|k| id(if k % 2 == 0 { rnd() % count } else { count + 1_000_000_000 + rnd() % (1 << 40) })).collect())
                    .collect()
            })
            .collect();
        let c0 = cpu_s();
        let t = Instant::now();
        let mut lat: Vec<f64> = std::thread::scope(|sc| {
            let hs: Vec<_> = work
                .iter()
                .map(|w| {
                    let url = &url;
                    sc.spawn(move || {
                        let c = cutpoint_store::client::Client::new(url, ns, None).expect("client");
                        w.iter()
                            .map(|ids| {
                                let t = Instant::now();
                                let miss = c.query(ids).expect("query");
                                let s = t.elapsed().as_secs_f64();
                                assert_eq!(miss.len(), ids.len() / 2, "half the ids are absent");
                                s
                            })
                            .collect::<Vec<f64>>()
                    })
                })
                .collect();
            hs.into_iter().flat_map(|h| h.join().expect("client thread")).collect()
        });
        let wall = t.elapsed().as_secs_f64();
        let server_cpu = cpu_s() - c0;
        lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
        let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1] * 1e3;
        let ids = (batch * per_client * clients) as f64;
        let (rss, hwm) = (proc_kib("VmRSS:"), proc_kib("VmHWM:"));
        if json {
            let what = format!("POST query through cutpoint serve, {clients} clients, {batch} ids a batch, half present, index of {count} chunks");
            let common = serde_json::json!({"section": "index", "runtime": "native", "chunks": count, "batch": batch, "clients": clients,
                "batches": per_client * clients, "wall_s": wall, "server_cpu_s": server_cpu, "server_rss_kib": rss, "server_hwm_kib": hwm, "server_start_s": start_s});
            for (name, w, v, unit) in [
                (format!("index/http/{batch}/ids"), format!("ids per second ({what})"), ids / wall, "ids/s"),
                (format!("index/http/{batch}/p50"), format!("batch latency p50 ({what})"), pct(0.5), "ms"),
                (format!("index/http/{batch}/p99"), format!("batch latency p99 ({what})"), pct(0.99), "ms"),
                (format!("index/http/{batch}/rss"), format!("server peak RSS (VmHWM) ({what})"), hwm as f64 / 1024.0, "MiB"),
                (format!("index/http/{batch}/cpu"), format!("server CPU per 10^6 ids ({what})"), server_cpu / ids * 1e6, "s"),
            ] {
                let mut r = common.clone();
                let o = r.as_object_mut().unwrap();
                o.insert("name".into(), name.into());
                o.insert("what".into(), w.into());
                o.insert("value".into(), v.into());
                o.insert("unit".into(), unit.into());
                println!("{r}");
            }
        } else {
            println!(
                "http: {clients} clients x {per_client} batches of {batch} ids: {:.0} ids/s, p50 {:.2} ms, p99 {:.2} ms, max {:.2} ms; server CPU {server_cpu:.2} s ({:.2} s per 10^6 ids), RSS {:.1} MiB (peak {:.1} MiB)",
                ids / wall,
                pct(0.5),
                pct(0.99),
                pct(1.0),
                server_cpu / ids * 1e6,
                rss as f64 / 1024.0,
                hwm as f64 / 1024.0
            );
        }
    }
    if !json {
        println!("server: started over {count} chunks in {start_s:.2} s (RSS {:.1} MiB once started)", rss_start as f64 / 1024.0);
    }
    let _ = child.kill();
    let _ = child.wait();
}
