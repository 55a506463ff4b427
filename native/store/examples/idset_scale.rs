//! The in-memory id map alone (`cutpoint_store::idset::IdSet`, what `Index::missing` asks: keys
//! and rows in memory, each key's rows confirmed in a rows file, here a temporary file) at a
//! scale that `index_scale` takes long to fill through the upload path: N random ids loaded as
//! the index loads them at start (rows written to the rows file, the map sorted), then `Index::missing`'s work — each id looked up,
//! each answered once — in batches, half the ids present and half absent; then N/10 more ids
//! inserted one by one (uploads) and the queries again, with the changes not yet compacted.
//!
//!   cargo run --release -p cutpoint-store --example idset_scale -- [--ids 10000000] [--batch 1000] [--batches 2000]
//!
//! Prints ids/s (by the wall clock, and by this process's CPU time), per-batch p50/p99, the set's heap bytes per 10⁶ ids and the process's RSS.

use cutpoint_core::Digest;
use cutpoint_store::idset::{Entry, IdSet, RowFile};
use std::collections::HashSet;
use std::time::Instant;

fn arg(name: &str, default: u64) -> u64 {
    let a: Vec<String> = std::env::args().collect();
    a.iter().position(|x| x == name).and_then(|i| a.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn status_kib(key: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with(key)).and_then(|l| l.split_whitespace().nth(1)?.parse().ok()))
        .unwrap_or(0)
}

/// This process's CPU seconds (user + system), from /proc.
fn cpu_s() -> f64 {
    let s = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    let f: Vec<&str> = s.rsplit(") ").next().unwrap_or("").split_whitespace().collect();
    let t = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn id(i: u64) -> Digest {
    *blake3::hash(&i.to_le_bytes()).as_bytes()
}

fn queries(s: &IdSet, present: u64, batch: usize, batches: usize, label: &str) {
    let mut x = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut lat = Vec::with_capacity(batches);
    let mut cpu = 0.0;
    for _ in 0..batches {
        let ids: Vec<Digest> = (0..batch).map(|k| if k % 2 == 0 { id(rnd() % present) } else { id(present + (1 << 40) + rnd() % (1 << 40)) }).collect();
        let c = cpu_s();
        let t = Instant::now();
        // As `Index::missing` does: grouped lookups, then the missing ids each once.
        let mut seen = HashSet::new();
        let mut miss = Vec::new();
        for (d, here) in ids.iter().zip(s.contains_each(&ids).expect("rows file")) {
            if !here && seen.insert(*d) {
                miss.push(*d);
            }
        }
        lat.push(t.elapsed().as_secs_f64());
        cpu += cpu_s() - c;
        assert_eq!(miss.len(), batch / 2);
    }
    let total: f64 = lat.iter().sum();
    lat.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let pct = |p: f64| lat[((lat.len() as f64 * p).ceil() as usize).clamp(1, lat.len()) - 1] * 1e3;
    println!(
        "{label}: {} ids/s ({} per CPU second: the machine's other load left out); per batch of {batch}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms",
        ((batch * batches) as f64 / total) as u64,
        ((batch * batches) as f64 / cpu.max(1e-9)) as u64,
        pct(0.5),
        pct(0.99),
        pct(1.0)
    );
}

fn main() {
    let n = arg("--ids", 10_000_000);
    let batch = arg("--batch", 1000) as usize;
    let batches = arg("--batches", 2000) as usize;
    let rss0 = status_kib("VmRSS:");
    let t = Instant::now();
    // As the index loads it: each row's record written to the rows file (row i + 1 holds id i),
    // the map's entries in a vector marked for huge pages, sorted once.
    let rows = std::sync::Arc::new(RowFile::temp().expect("a temporary rows file"));
    let mut v: Vec<Entry> = cutpoint_store::idset::huge_vec(n as usize);
    let mut recs = Vec::with_capacity(16_384);
    for i in 0..n {
        let d = id(i);
        v.push(Entry::new(&d, (i + 1) as u32));
        recs.push((i + 1, d, 8u32));
        if recs.len() == 16_384 {
            rows.write(&recs).expect("rows file");
            recs.clear();
        }
    }
    rows.write(&recs).expect("rows file");
    drop(recs);
    let (s, _) = IdSet::build(rows, v).expect("rows file");
    let rss1 = status_kib("VmRSS:");
    println!(
        "{n} ids: built in {:.1} s; heap {:.1} MiB ({:.1} B an id, {:.1} MiB per 10^6); RSS +{:.1} MiB",
        t.elapsed().as_secs_f64(),
        s.heap_bytes() as f64 / 1048576.0,
        s.heap_bytes() as f64 / n as f64,
        s.heap_bytes() as f64 / n as f64 * 1e6 / 1048576.0,
        (rss1 - rss0) as f64 / 1024.0
    );
    queries(&s, n, batch, batches, "compacted");
    let mut s = s;
    let t = Instant::now();
    for i in n..n + n / 10 {
        s.insert(&id(i), cutpoint_store::idset::Val { row: i + 1, len: 8 }).expect("rows file");
    }
    println!(
        "{} inserts in {:.1} s; heap {:.1} MiB; peak RSS {:.1} MiB",
        n / 10,
        t.elapsed().as_secs_f64(),
        s.heap_bytes() as f64 / 1048576.0,
        status_kib("VmHWM:") as f64 / 1024.0
    );
    queries(&s, n + n / 10, batch, batches, "after inserts");
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    println!("load average {}", load.split_whitespace().take(3).collect::<Vec<_>>().join(" "));
}
