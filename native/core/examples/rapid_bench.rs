//! RapidCDC measurements: analogs of the paper's Figures 8, 10, 11, 12, 14 and 15 on synthetic
//! versioned datasets (`cutpoint_core::datagen`), printed as tables.
//!
//! `cargo run --release --example rapid_bench` with, in the environment:
//! * `CUTPOINT_MIB` — base file size in MiB (default 32; the paper used 500 MB);
//! * `CUTPOINT_FILES` — files per dataset, base included (default 10, as in the paper);
//! * `CUTPOINT_REPS` — timed repetitions, the median is reported (default 3);
//! * `CUTPOINT_WORST_REPS` — the same for the Figure 12 rows (default `CUTPOINT_REPS`): their
//!   slowdowns are a few % of a ~50 ms run, where a shared VM's drift is of the same size, so
//!   the full bench takes more repetitions of them;
//! * `CUTPOINT_FIGS` — which tables, e.g. `8,12` (default `8,12,15,10,11`);
//! * `CUTPOINT_MODS` — paper modification counts per 500 MB version (default
//!   `1000,2000,5000,10000,20000`). They are scaled to the base size so that the modification
//!   density (and so the dedup ratio) matches the paper's: `mods × MiB / 500`;
//! * `CUTPOINT_CRITERIA` — the Figure 8 rows' criteria, e.g. `ff,ff+rwt` (default all four;
//!   empty: none, e.g. for the Figure 12 rows alone);
//! * `CUTPOINT_FIRST_BLOCK` — RapidCDC's first fallback block in positions (default: the core's);
//! * `CUTPOINT_STAT=min` — report the best repetition's ratio instead of the median;
//! * `CUTPOINT_BACKEND` — the stage-1 backend of both regular CDC and RapidCDC's fallback
//!   (default: the best this CPU has); `scalar` is one sequential rolling chain, the kind of
//!   regular CDC the paper measured against;
//! * `CUTPOINT_THP=1` — the in-memory files ask Linux for transparent huge pages (both regular
//!   CDC and RapidCDC read the same memory; skipping through 4 KiB pages costs RapidCDC a TLB
//!   miss per hinted chunk);
//! * `CUTPOINT_REPLAYS=N` — for a profiler (`perf record`): each RapidCDC row replays its
//!   recorded fingerprints N times and reports no speedups (NaN);
//! * `CUTPOINT_DATASET=DIR` — instead, real versioned files: every file in `DIR`, in name order
//!   (e.g. successive releases of a package), each deduplicated against the ones before it, with
//!   `CUTPOINT_PROFILE` (default `rabin:4k:8k:12k`); the files are read into memory.
//!
//! Every run is single-threaded (the paper's default): regular CDC is this crate's SS-CDC engine
//! on one thread with the detected stage-1 backend; RapidCDC falls back to the same engine.
//! Times are process CPU time (Linux), which sees through time-slicing on a shared machine.
//! Chunking time of regular CDC = the engine's `cuts` over the files (no fingerprints).
//! Chunking time of RapidCDC = a run that replays the fingerprints a first run recorded
//! ([`FingerprintTape`]): hint tests, the hint table, the fallback blocks' stage 1 and 2, with
//! the fingerprints of produced chunks (and their last bytes, the marker a hint stores: the pass
//! that hashes a chunk reads it) free and those of failed FPT tests computed (they are
//! part of chunking); the replayed run must give the recorded chunks, or the bench stops.
//! (Until 2026-11-22 it was a full run's time less a separately timed hashing pass: hashing is
//! about 3× chunking, so a few % of noise or cache difference in either became tens of % of the
//! small difference.) Speedup = regular chunking time / RapidCDC chunking time. "cpu speedup"
//! (the paper's Figure 16) compares full runs: chunking + fingerprinting. Each repetition times
//! regular CDC right before and right after the replay (its time is the mean of the two) and
//! once more before the full run, and the figures are medians of the repetitions' ratios
//! (`CUTPOINT_REPS`). Dedup ratio = bytes / unique bytes over the whole dataset, files in order.

use cutpoint_core::datagen::{self, ModKind, VersionSpec};
use cutpoint_core::rapid::{Criterion, DedupCounter, FingerprintTape, Rapid, RapidOptions, RapidStats};
use cutpoint_core::{Backend, Engine, HashAlg, Options, Profile};
#[path = "common/cpu.rs"]
mod cpu;
use cpu::cpu_now;

/// CPU seconds to fingerprint these chunks.
fn hash_time(files: &[Vec<u8>], ends: &[Vec<usize>]) -> f64 {
    let t = cpu_now();
    let mut x = 0u8;
    for (f, cs) in files.iter().zip(ends) {
        let mut a = 0;
        for &b in cs {
            x ^= HashAlg::Blake3.digest(&f[a..b]).unwrap()[0];
            a = b;
        }
    }
    std::hint::black_box(x);
    cpu_now() - t
}

fn env(name: &str, default: &str) -> String {
    std::env::var(name).unwrap_or_else(|_| default.to_string())
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    if std::env::var("CUTPOINT_STAT").is_ok_and(|s| s == "min") {
        return v[0];
    }
    v[v.len() / 2]
}

/// The median of ratios (higher is better), or with `CUTPOINT_STAT=min` the best.
fn median_ratio(v: Vec<f64>) -> f64 {
    1.0 / median(v.into_iter().map(|x| 1.0 / x).collect())
}

struct Regular {
    cut: f64,
    fp: f64,
    dedup: f64,
    cuts: Vec<Vec<usize>>,
}

fn regular(e: &Engine, files: &[Vec<u8>], reps: usize) -> Regular {
    let mut cut_t = Vec::new();
    let mut fp_t = Vec::new();
    let mut cuts = Vec::new();
    let mut dedup = DedupCounter::new();
    for rep in 0..reps {
        let t = cpu_now();
        let c: Vec<Vec<usize>> = files.iter().map(|f| e.cuts(f)).collect();
        cut_t.push(cpu_now() - t);
        fp_t.push(hash_time(files, &c));
        if rep == 0 {
            for (f, cs) in files.iter().zip(&c) {
                let mut a = 0;
                for &b in cs {
                    dedup.add(&HashAlg::Blake3.digest(&f[a..b]).unwrap(), b - a);
                    a = b;
                }
            }
            cuts = c;
        }
    }
    Regular {
        cut: median(cut_t),
        fp: median(fp_t),
        dedup: dedup.ratio(),
        cuts,
    }
}

struct RapidRun {
    /// Regular chunking time / RapidCDC chunking time (replayed fingerprints).
    speedup: f64,
    /// The same with fingerprints: (regular chunking + hashing) / a full RapidCDC run.
    cpu_speedup: f64,
    dedup: f64,
    stats: RapidStats,
    exact: bool,
}

fn rapid(e: &Engine, files: &[Vec<u8>], opts: &RapidOptions, list_len: usize, reps: usize, reg: &Regular) -> RapidRun {
    // One run records the fingerprints (and gives the chunks, dedup and statistics) ...
    // The chunks go to `chunks`, cleared first (a vector used before, so that its pages are
    // not faulted in during the timed run: storing the output is not chunking).
    let run = |tape: Option<FingerprintTape>, chunks: &mut Vec<(u64, usize, [u8; 32])>| {
        let mut r = Rapid::with_new_table(e, list_len, opts.clone()).expect("rapid");
        r.set_fingerprint_tape(tape);
        chunks.clear();
        let t = cpu_now();
        for f in files {
            for c in r.chunks(f) {
                let c = c.expect("in-memory chunking cannot fail");
                chunks.push((c.offset, c.length, c.hash));
            }
        }
        (cpu_now() - t, r)
    };
    let mut chunks = Vec::new();
    let (_, mut r) = run(Some(FingerprintTape::recorder()), &mut chunks);
    let tape = r.take_fingerprint_tape().expect("tape");
    let stats = r.stats().clone();
    drop(r);
    let mut d = DedupCounter::new();
    let mut ends: Vec<Vec<usize>> = vec![Vec::new(); files.len()];
    let mut file = 0;
    for &(off, len, ref h) in &chunks {
        d.add(h, len);
        if off == 0 && !ends[file].is_empty() {
            file += 1;
        }
        ends[file].push(off as usize + len);
    }
    // ... then each repetition times a run that replays them (chunking alone; failed FPT
    // tests' fingerprints are computed) and one that computes them (chunking +
    // fingerprinting). Regular CDC is timed again in every repetition, next to them, and each
    // figure is the median of the repetitions' ratios: on a shared VM, speed drifts by ±10%
    // over seconds, so times taken minutes apart do not compare.
    let mut sp = Vec::new();
    let mut cpu_sp = Vec::new();
    let mut c = chunks.clone();
    // `CUTPOINT_REPLAYS=N`: only N replays, untimed (for a profiler), and no figures.
    let replays: usize = std::env::var("CUTPOINT_REPLAYS").map_or(0, |v| v.parse().expect("CUTPOINT_REPLAYS: a count"));
    for _ in 0..replays {
        run(Some(tape.replay()), &mut c);
    }
    // Each repetition: regular, replay, regular, full run. The replay's ratio takes the mean of
    // the regular times on both sides of it, which cancels a drift that is linear over the
    // three (a paired "ABA" design); the full run's takes the regular time right before it.
    let regular_pass = || {
        let t = cpu_now();
        let cuts: Vec<Vec<usize>> = files.iter().map(|f| e.cuts(f)).collect();
        let reg_t = cpu_now() - t;
        std::hint::black_box(cuts);
        reg_t
    };
    for _ in 0..if replays > 0 { 0 } else { reps } {
        let before = regular_pass();
        let (t, mut r) = run(Some(tape.replay()), &mut c);
        assert!(
            c == chunks && !r.take_fingerprint_tape().is_some_and(|t| t.diverged()),
            "a replayed RapidCDC run differs from the recorded one"
        );
        drop(r);
        let after = regular_pass();
        sp.push((before + after) / 2.0 / t);
        let (t, _) = run(None, &mut c);
        assert!(c == chunks, "a RapidCDC run differs from the recorded one");
        cpu_sp.push((after + reg.fp) / t);
    }
    if replays > 0 {
        (sp, cpu_sp) = (vec![f64::NAN], vec![f64::NAN]);
    }
    RapidRun {
        speedup: median_ratio(sp),
        cpu_speedup: median_ratio(cpu_sp),
        dedup: d.ratio(),
        stats,
        exact: ends == reg.cuts,
    }
}

fn dataset(
    mib: usize,
    files: usize,
    paper_mods: usize,
    kind: ModKind,
    region: f64,
    seed: u64,
) -> (usize, Vec<Vec<u8>>) {
    let mods = (paper_mods as f64 * mib as f64 / 500.0).round().max(1.0) as usize;
    let spec = VersionSpec {
        base_size: (mib << 20) as u64,
        versions: files - 1,
        mods,
        mod_size: 100,
        region_percent: region,
        kind,
        seed,
    };
    let files = datagen::versions_in_memory(&spec).expect("dataset");
    (mods, files.into_iter().map(huge).collect())
}

/// `CUTPOINT_THP=1`: the files' memory asks Linux for transparent huge pages (2 MiB), so that
/// skipping through it costs fewer TLB misses (regular CDC reads the same memory).
fn huge(f: Vec<u8>) -> Vec<u8> {
    if std::env::var("CUTPOINT_THP").map_or(true, |v| v != "1") {
        return f;
    }
    extern "C" {
        fn madvise(addr: *mut std::ffi::c_void, len: usize, advice: i32) -> i32;
    }
    const MADV_HUGEPAGE: i32 = 14;
    const HUGE: usize = 2 << 20;
    let mut v: Vec<u8> = Vec::with_capacity(f.len() + HUGE);
    let p = v.as_mut_ptr() as usize;
    let a = p.next_multiple_of(HUGE);
    let len = (p + v.capacity() - a) / HUGE * HUGE;
    // SAFETY: [a, a + len) lies inside the vector's allocation, untouched yet.
    unsafe { madvise(a as *mut std::ffi::c_void, len, MADV_HUGEPAGE) };
    v.extend_from_slice(&f);
    v
}

fn engine(p: &str) -> Engine {
    let p: Profile = p.parse().expect("profile");
    let backend = std::env::var("CUTPOINT_BACKEND")
        .ok()
        .map(|b| Backend::parse(&b).expect("CUTPOINT_BACKEND"));
    Engine::new(
        p,
        Options {
            backend,
            threads: 1,
            hash: HashAlg::Blake3,
            ..Options::default()
        },
    )
    .expect("engine")
}

/// `CUTPOINT_CRITERIA` (e.g. `ff,ff+mt`; default all four) for the Figure 8 rows.
fn criteria() -> Vec<Criterion> {
    match std::env::var("CUTPOINT_CRITERIA") {
        Err(_) => Criterion::ALL.to_vec(),
        Ok(s) if s.is_empty() => Vec::new(),
        Ok(s) => s.split(',').map(|c| Criterion::parse(c).expect("CUTPOINT_CRITERIA")).collect(),
    }
}

fn pct_loss(reg: f64, r: f64) -> f64 {
    (reg - r) / reg * 100.0
}

/// Makes glibc keep freed memory and serve every allocation from its heap, so that the
/// allocator does not change regime partway through the bench: by default glibc raises its
/// mmap threshold once the first dataset's 16 MiB files are freed, and the later datasets live
/// in other memory than the first. Measured without it, three copies of one dataset
/// (`CUTPOINT_MODS=1000,1000,1000 CUTPOINT_FIGS=12 CUTPOINT_CRITERIA=`, 15 repetitions) read
/// +5.5/+8.0/+8.0%, then +2.2/+1.3/+2.1 and +1.1/-1.0/+0.4: the first copy stood out. With it,
/// two copies read -1.3/+1.2/+0.1 and +7.7/+2.7/+1.9: the first no longer stands out, but
/// offsets of several % of either sign, shared by the rows of one dataset, remain (a
/// measurement limit of this VM, not a cost of either side). Returns whether glibc took it;
/// `CUTPOINT_MALLOPT=0` leaves glibc's defaults.
fn steady_allocator() -> bool {
    if std::env::var("CUTPOINT_MALLOPT").is_ok_and(|v| v == "0") {
        return false;
    }
    extern "C" {
        fn mallopt(param: i32, value: i32) -> i32;
    }
    const M_TRIM_THRESHOLD: i32 = -1;
    const M_MMAP_THRESHOLD: i32 = -3;
    // SAFETY: mallopt only sets allocator parameters; no allocation is live across a change
    // of regime that it could invalidate (glibc handles both before and after).
    unsafe { mallopt(M_MMAP_THRESHOLD, 32 << 20) == 1 && mallopt(M_TRIM_THRESHOLD, i32::MAX) == 1 }
}

fn main() {
    let steady = steady_allocator();
    let mib: usize = env("CUTPOINT_MIB", "32").parse().expect("CUTPOINT_MIB");
    let nfiles: usize = env("CUTPOINT_FILES", "10").parse().expect("CUTPOINT_FILES");
    let reps: usize = env("CUTPOINT_REPS", "3").parse().expect("CUTPOINT_REPS");
    let worst_reps: usize = std::env::var("CUTPOINT_WORST_REPS").map_or(reps, |v| v.parse().expect("CUTPOINT_WORST_REPS"));
    let figs = env("CUTPOINT_FIGS", "8,12,15,10,11");
    let figs: Vec<&str> = figs.split(',').collect();
    let mods_list: Vec<usize> = env("CUTPOINT_MODS", "1000,2000,5000,10000,20000")
        .split(',')
        .map(|s| s.parse().expect("CUTPOINT_MODS"))
        .collect();
    if let Ok(dir) = std::env::var("CUTPOINT_DATASET") {
        real_dataset(&dir, &env("CUTPOINT_PROFILE", "rabin:4k:8k:12k"), reps);
        return;
    }
    let paper = "rabin:4k:8k:12k";
    let e = engine(paper);
    println!(
        "# RapidCDC bench: {nfiles} files of ~{mib} MiB per dataset, 100-byte modifications, seed 1; backend {}, 1 thread, blake3; {} of {reps}; {} pages; freed memory {}",
        e.backend().name(),
        if std::env::var("CUTPOINT_STAT").is_ok_and(|s| s == "min") { "fastest" } else { "median" },
        if std::env::var("CUTPOINT_THP").is_ok_and(|s| s == "1") { "2 MiB (THP)" } else { "4 KiB" },
        if steady { "kept (mallopt)" } else { "returned (glibc's defaults)" }
    );
    println!("# cores available: {}", cutpoint_core::default_threads());

    if figs.contains(&"8") || figs.contains(&"12") {
        // Figure 8 rows only with criteria (`CUTPOINT_CRITERIA=` runs the Figure 12 rows alone).
        let fig8 = figs.contains(&"8") && !criteria().is_empty();
        for kind in [ModKind::InsertDelete, ModKind::Overwrite] {
            if !fig8 && !(figs.contains(&"12") && kind == ModKind::InsertDelete) {
                continue;
            }
            if fig8 {
                println!(
                    "\n## Figure 8 analog ({}) — {paper}; speedup of chunking vs regular CDC, dedup ratio",
                    kind.name()
                );
                println!("| paper mods | mods/version | regular dedup | regular MB/s | criterion | speedup | cpu speedup | dedup | loss % | hit ratio pos0 | rolled % | exact |");
                println!("|---|---|---|---|---|---|---|---|---|---|---|---|");
            }
            let mut worst_rows = Vec::new();
            for &m in &mods_list {
                let (mods, files) = dataset(mib, nfiles, m, kind, 100.0, 1);
                let bytes: usize = files.iter().map(|f| f.len()).sum();
                let reg = regular(&e, &files, reps);
                for crit in if fig8 { criteria() } else { Vec::new() } {
                    let fb: usize = env("CUTPOINT_FIRST_BLOCK", "0").parse().expect("CUTPOINT_FIRST_BLOCK");
                    let opts = RapidOptions {
                        first_block: fb,
                        ..RapidOptions::new(crit)
                    };
                    let r = rapid(&e, &files, &opts, 2, reps, &reg);
                    println!(
                        "| {m} | {mods} | {:.2} | {:.0} | {} | {:.2} | {:.2} | {:.3} | {:.3} | {:.3} | {:.1} | {} |",
                        reg.dedup,
                        bytes as f64 / reg.cut / 1e6,
                        crit.name(),
                        r.speedup,
                        r.cpu_speedup,
                        r.dedup,
                        pct_loss(reg.dedup, r.dedup),
                        r.stats.hit_ratio(0).unwrap_or(0.0),
                        r.stats.scanned_positions as f64 / r.stats.bytes as f64 * 100.0,
                        if r.exact { "yes" } else { "no" },
                    );
                }
                if figs.contains(&"12") && kind == ModKind::InsertDelete {
                    for crit in [Criterion::FfMt, Criterion::FfRwt, Criterion::FfRwtFpt] {
                        let opts = RapidOptions {
                            criterion: crit,
                            worst_case: true,
                            first_block: env("CUTPOINT_FIRST_BLOCK", "0").parse().expect("CUTPOINT_FIRST_BLOCK"),
                            max_block: 0,
                        };
                        let r = rapid(&e, &files, &opts, 2, worst_reps, &reg);
                        worst_rows.push(format!(
                            "| {m} | {} | {:.1} | {:.1} | {} | {} |",
                            crit.name(),
                            (1.0 / r.speedup - 1.0) * 100.0,
                            (1.0 / r.cpu_speedup - 1.0) * 100.0,
                            r.stats.misses.iter().sum::<u64>(),
                            r.stats.blocks
                        ));
                    }
                }
            }
            if !worst_rows.is_empty() {
                println!(
                    "\n## Figure 12 analog — worst case (every hint tested is rejected), insert/delete, {paper}"
                );
                println!("| paper mods | criterion | chunking slowdown % | cpu slowdown % | hints tested | fallback blocks |");
                println!("|---|---|---|---|---|---|");
                for r in worst_rows {
                    println!("{r}");
                }
            }
        }
    }

    if figs.contains(&"15") {
        println!("\n## Figures 14/15 analog — FF+RWT with size lists of 1, 2, 4 (insert/delete), {paper}");
        println!("| paper mods | list | speedup | dedup | fallbacks | hit ratio by position |");
        println!("|---|---|---|---|---|---|");
        for m in [1000, 5000] {
            let (_, files) = dataset(mib, nfiles, m, ModKind::InsertDelete, 100.0, 1);
            let reg = regular(&e, &files, reps);
            for list in [1, 2, 4] {
                let r = rapid(&e, &files, &RapidOptions::new(Criterion::FfRwt), list, reps, &reg);
                let ratios: Vec<String> = (0..list)
                    .map(|k| match r.stats.hit_ratio(k) {
                        Some(x) => format!(
                            "{:.2}% ({}/{})",
                            x * 100.0,
                            r.stats.hits[k],
                            r.stats.hits[k] + r.stats.misses[k]
                        ),
                        None => "-".into(),
                    })
                    .collect();
                println!(
                    "| {m} | {list} | {:.2} | {:.3} | {} | {} |",
                    r.speedup,
                    r.dedup,
                    r.stats.fallbacks,
                    ratios.join(", ")
                );
            }
        }
    }

    if figs.contains(&"10") {
        println!("\n## Figure 10 analog — minimum chunk size, rabin MIN:16k:64k, 1000 paper mods (insert/delete)");
        println!("| profile | regular dedup | regular MB/s | criterion | speedup | dedup | loss % |");
        println!("|---|---|---|---|---|---|---|");
        let (_, files) = dataset(mib, nfiles, 1000, ModKind::InsertDelete, 100.0, 1);
        let bytes: usize = files.iter().map(|f| f.len()).sum();
        for min in ["2k", "4k", "8k"] {
            let prof = format!("rabin:{min}:16k:64k");
            let e = engine(&prof);
            let reg = regular(&e, &files, reps);
            for crit in Criterion::ALL {
                let r = rapid(&e, &files, &RapidOptions::new(crit), 2, reps, &reg);
                println!(
                    "| {prof} | {:.2} | {:.0} | {} | {:.2} | {:.3} | {:.3} |",
                    reg.dedup,
                    bytes as f64 / reg.cut / 1e6,
                    crit.name(),
                    r.speedup,
                    r.dedup,
                    pct_loss(reg.dedup, r.dedup)
                );
            }
        }
    }

    if figs.contains(&"11") {
        println!("\n## Figure 11 analog — hash family (4k:8k:12k), insert/delete");
        println!(
            "| profile | paper mods | regular dedup | regular MB/s | ff | ff+mt | ff+rwt | ff+rwt+fpt | (speedups) |"
        );
        println!("|---|---|---|---|---|---|---|---|---|");
        for prof in ["gear:4k:8k:12k", "crc32:4k:8k:12k", "rabin:4k:8k:12k"] {
            let e = engine(prof);
            for &m in &mods_list {
                let (_, files) = dataset(mib, nfiles, m, ModKind::InsertDelete, 100.0, 1);
                let bytes: usize = files.iter().map(|f| f.len()).sum();
                let reg = regular(&e, &files, reps);
                let sp: Vec<String> = Criterion::ALL
                    .iter()
                    .map(|&c| {
                        let r = rapid(&e, &files, &RapidOptions::new(c), 2, reps, &reg);
                        format!("{:.2}", r.speedup)
                    })
                    .collect();
                println!(
                    "| {prof} | {m} | {:.2} | {:.0} | {} | |",
                    reg.dedup,
                    bytes as f64 / reg.cut / 1e6,
                    sp.join(" | ")
                );
            }
        }
    }
}

/// Figure 13/14/15 analogs on real versioned files.
fn real_dataset(dir: &str, prof: &str, reps: usize) {
    let mut paths: Vec<std::path::PathBuf> = std::fs::read_dir(dir)
        .expect("CUTPOINT_DATASET")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    paths.sort();
    let files: Vec<Vec<u8>> = paths.iter().map(|p| huge(std::fs::read(p).expect("read"))).collect();
    let bytes: usize = files.iter().map(|f| f.len()).sum();
    let e = engine(prof);
    println!(
        "# RapidCDC on {} files in {dir} ({:.1} MB), {prof}, backend {}, 1 thread, median of {reps}",
        files.len(),
        bytes as f64 / 1e6,
        e.backend().name()
    );
    let reg = regular(&e, &files, reps);
    println!(
        "regular: dedup {:.3}, {:.0} MB/s chunking",
        reg.dedup,
        bytes as f64 / reg.cut / 1e6
    );
    println!(
        "| criterion | list | speedup | cpu speedup | dedup | loss % | rolled % | hit ratio by position | exact |"
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for crit in Criterion::ALL {
        for list in [1, 2, 4] {
            if list != 2 && crit != Criterion::FfRwt {
                continue;
            }
            let r = rapid(&e, &files, &RapidOptions::new(crit), list, reps, &reg);
            let pos: Vec<String> = (0..list)
                .map(|k| {
                    r.stats
                        .hit_ratio(k)
                        .map(|x| format!("{:.2}%", x * 100.0))
                        .unwrap_or("-".into())
                })
                .collect();
            println!(
                "| {} | {list} | {:.2} | {:.2} | {:.3} | {:.3} | {:.1} | {} | {} |",
                crit.name(),
                r.speedup,
                r.cpu_speedup,
                r.dedup,
                pct_loss(reg.dedup, r.dedup),
                r.stats.scanned_positions as f64 / r.stats.bytes.max(1) as f64 * 100.0,
                pos.join(", "),
                if r.exact { "yes" } else { "no" }
            );
        }
    }
}
