//! MT-FBC benchmark: the report's single- vs multi-thread comparison (`papers/mtfbc.txt`,
//! section 6, Figures 4–6) and TTTD / FBC beside the core's SS-CDC engine on a synthetic
//! versioned dataset.
//!
//! ```text
//! cargo run --release -p cutpoint-core --example mtfbc_bench -- [--base-mib 4] [--versions 6]
//!     [--edits 64] [--reps 5] [--seed 1] [--workers 1,2,3,4] [--quick]
//! ```
//!
//! Dataset (generated here from `--seed`): a random base of `--base-mib` MiB, then each version
//! made from the previous one by `--edits` edits at random places, each an insert, delete or
//! overwrite of 1..=128 bytes. As in the report, the versions are fed one after the other, and
//! FBC's frequency state accumulates over all of them.
//!
//! Every time is the median of `--reps` runs (min and max shown too); the pass-1 configurations
//! run round robin, one repetition of each in turn, and show the process's CPU seconds too. The
//! machine's cores may be shared with other work: under contention a process with more threads
//! also gets a larger share of the machine, so speedups there are not parallel efficiency.
//! Ratios are taken within one run.

use std::collections::HashSet;
use std::time::Instant;

use cutpoint_core::mtfbc::{CandidateKey, Fbc, FbcChunk, FbcParams, RunStats, Tttd, TttdParams, Workers};
use cutpoint_core::{Engine, HashAlg, Options, Profile};

struct Args {
    base_mib: usize,
    versions: usize,
    edits: usize,
    reps: usize,
    seed: u64,
    workers: Vec<usize>,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args { base_mib: 4, versions: 6, edits: 64, reps: 5, seed: 1, workers: vec![1, 2, 3, 4] };
    let mut it = std::env::args().skip(1);
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{k} needs a value"));
        let num = |v: String| v.parse::<usize>().map_err(|_| format!("{k}: '{v}' is not a number"));
        match k.as_str() {
            "--base-mib" => a.base_mib = num(val()?)?,
            "--versions" => a.versions = num(val()?)?,
            "--edits" => a.edits = num(val()?)?,
            "--reps" => a.reps = num(val()?)?,
            "--seed" => a.seed = num(val()?)? as u64,
            "--workers" => {
                a.workers = val()?
                    .split(',')
                    .map(|s| s.trim().parse::<usize>().map_err(|_| format!("--workers: '{s}' is not a number")))
                    .collect::<Result<_, _>>()?
            }
            "--quick" => {
                a.base_mib = 1;
                a.versions = 6;
                a.reps = 2;
            }
            "-h" | "--help" => {
                return Err("usage: mtfbc_bench [--base-mib N] [--versions N] [--edits N] [--reps N] [--seed N] [--workers 1,2,4] [--quick]".into())
            }
            other => return Err(format!("unknown argument '{other}' (try --help)")),
        }
    }
    if a.base_mib == 0 || a.versions == 0 || a.reps == 0 {
        return Err("--base-mib, --versions and --reps must be at least 1".into());
    }
    Ok(a)
}

struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let mut v = Vec::with_capacity(n + 8);
        while v.len() < n {
            v.extend_from_slice(&self.next().to_le_bytes());
        }
        v.truncate(n);
        v
    }
}

fn make_versions(a: &Args) -> Vec<Vec<u8>> {
    let mut rng = SplitMix(a.seed);
    let mut vs = vec![rng.bytes(a.base_mib << 20)];
    for i in 1..a.versions {
        let mut cur = vs[i - 1].clone();
        for _ in 0..a.edits {
            let len = 1 + rng.below(128);
            let at = rng.below(cur.len() - len);
            match rng.below(3) {
                0 => {
                    let ins = rng.bytes(len);
                    cur.splice(at..at, ins);
                }
                1 => {
                    cur.drain(at..at + len);
                }
                _ => {
                    let o = rng.bytes(len);
                    cur[at..at + len].copy_from_slice(&o);
                }
            }
        }
        vs.push(cur);
    }
    vs
}

/// Median, min, max of `reps` timings of `f` (seconds).
fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> (f64, f64, f64, T) {
    let mut ts = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let t0 = Instant::now();
        let r = f();
        ts.push(t0.elapsed().as_secs_f64());
        last = Some(r);
    }
    ts.sort_by(|a, b| a.total_cmp(b));
    let r = last.expect("reps >= 1");
    (ts[ts.len() / 2], ts[0], ts[ts.len() - 1], r)
}

fn median_u64(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v[v.len() / 2]
}

/// Dedup figures of a chunking of all versions: (chunks, unique chunks, unique bytes).
fn dedup(vs: &[Vec<u8>], spans: &[Vec<(usize, usize)>]) -> (usize, usize, usize) {
    let mut seen = HashSet::new();
    let (mut n, mut uniq, mut ubytes) = (0, 0, 0);
    for (v, sp) in vs.iter().zip(spans) {
        for &(o, l) in sp {
            n += 1;
            if seen.insert(*blake3::hash(&v[o..o + l]).as_bytes()) {
                uniq += 1;
                ubytes += l;
            }
        }
    }
    (n, uniq, ubytes)
}

fn cuts_to_spans(cuts: &[usize]) -> Vec<(usize, usize)> {
    let mut prev = 0;
    cuts.iter()
        .map(|&c| {
            let s = (prev, c - prev);
            prev = c;
            s
        })
        .collect()
}

fn fbc_spans(c: &[FbcChunk]) -> Vec<(usize, usize)> {
    c.iter().map(|c| (c.offset as usize, c.length)).collect()
}

fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("model name")).map(|l| l.split(':').nth(1).unwrap_or("").trim().to_string()))
        .unwrap_or_else(|| "unknown".into())
}

type Timing = (f64, f64, f64);

/// The report's experiment: FBC pass 1 single stream, then 1 worker with 2..7 buffers, then
/// 1..N workers with the default buffers. Returns the single-stream FBC (state filled).
fn pass1(a: &Args, vs: &[Vec<u8>], params: &FbcParams, tttd_time: Timing) -> Result<Fbc, cutpoint_core::Error> {
    let total: usize = vs.iter().map(|v| v.len()).sum();
    let mb = total as f64 / 1e6;
    let (t_tttd, t_tttd_min, t_tttd_max) = tttd_time;
    println!("\n## FBC pass 1 (frequency table over all versions), candidate key {}: single stream vs master + N FBC workers", params.key.name());
    println!("(report, section 6: 28 s single stream, 17 s with 1 worker and 6 buffers, 16 s with 2..4 workers)");
    let observe_all = |w: Workers| -> Result<(Fbc, Vec<RunStats>), cutpoint_core::Error> {
        let mut f = Fbc::new(params.clone())?;
        let mut st = Vec::new();
        for v in vs {
            st.push(f.observe(v, w)?);
        }
        Ok((f, st))
    };
    let mut configs: Vec<(String, Workers)> = vec![("single stream".into(), Workers::single())];
    for b in 2..=7 {
        configs.push((format!("1 worker, {b} buffers"), Workers { workers: 1, buffers: b }));
    }
    for &w in &a.workers {
        let d = Workers::threads(w).buffers_or_default();
        configs.push((format!("{w} worker(s), {d} buffers (default)"), Workers::threads(w)));
    }
    // Round robin: every repetition runs every configuration, so load that comes and goes
    // touches all of them alike.
    let mut wall = vec![Vec::new(); configs.len()];
    let mut cpu = vec![Vec::new(); configs.len()];
    let mut master = vec![Vec::new(); configs.len()];
    let mut waits = vec![Vec::new(); configs.len()];
    let mut same = vec![true; configs.len()];
    let (single, sst) = observe_all(Workers::single())?;
    for _ in 0..a.reps {
        for (i, (_, w)) in configs.iter().enumerate() {
            let (c0, m0) = (cpu_seconds("self"), cpu_seconds("thread-self"));
            let t0 = Instant::now();
            let (f, st) = observe_all(*w)?;
            wall[i].push(t0.elapsed().as_secs_f64());
            cpu[i].push(cpu_seconds("self") - c0);
            master[i].push(cpu_seconds("thread-self") - m0);
            waits[i].push(st.iter().map(|s| s.master_waits).sum::<u64>());
            same[i] &= f.state() == single.state();
        }
    }
    let med = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        (v[v.len() / 2], v[0], v[v.len() - 1])
    };
    println!(
        "{:<34} {:>8} {:>16} {:>7} {:>7} {:>7} {:>7} {:>7} {:>6} {:>6} {:>5}",
        "configuration", "median s", "[min..max]", "MB/s", "speedup", "cpu s", "master", "workers", "bound", "waits", "same"
    );
    println!(
        "{:<34} {t_tttd:>8.3} {:>16} {:>7.1}",
        "TTTD alone (stage 1 cost)",
        format!("[{t_tttd_min:.3}..{t_tttd_max:.3}]"),
        mb / t_tttd,
    );
    let t1 = med(&mut wall[0].clone()).0;
    let c1 = med(&mut cpu[0].clone()).0;
    for (i, (name, w)) in configs.iter().enumerate() {
        let (t, lo, hi) = med(&mut wall[i]);
        let (c, _, _) = med(&mut cpu[i]);
        let (m, _, _) = med(&mut master[i]);
        let wt = if i == 0 { "-".to_string() } else { median_u64(waits[i].clone()).to_string() };
        let sm = if i == 0 { "(ref)" } else if same[i] { "yes" } else { "NO" };
        // Speedup on idle cores that these CPU times allow: single-stream CPU over the busier of
        // the master and the workers (their CPU spread over `workers` cores).
        let bound = if w.workers == 0 { 1.0 } else { c1 / m.max((c - m) / w.workers as f64).max(1e-9) };
        println!(
            "{name:<34} {t:>8.3} {:>16} {:>7.1} {:>6.2}x {c:>7.2} {m:>7.2} {:>7.2} {bound:>5.2}x {wt:>6} {sm:>5}",
            format!("[{lo:.3}..{hi:.3}]"),
            mb / t,
            t1 / t,
            c - m
        );
    }
    println!("(cpu s: process CPU; master: the calling thread (TTTD + ordered commit); workers: the rest;");
    println!(" bound: single-stream CPU / max(master, workers / N) = the speedup these CPU costs allow on N+1 idle cores)");
    let sampled: u64 = sst.iter().map(|s| s.sampled).sum();
    let counted: u64 = sst.iter().map(|s| s.counted).sum();
    println!(
        "pass-1 state: {} coarse chunks, {} candidates examined, {} counted, table {} entries, {} frequent, filter fill {:.1}%",
        sst.iter().map(|s| s.coarse_chunks).sum::<u64>(),
        sampled,
        counted,
        single.state().table_len(),
        single.state().frequent_len(params.threshold),
        100.0 * single.state().filter_fill()
    );
    Ok(single)
}

/// User + system CPU seconds so far of this process (`who = "self"`) or of the calling thread
/// (`"thread-self"`), from Linux `/proc/<who>/stat` (100 Hz ticks); 0 elsewhere.
fn cpu_seconds(who: &str) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{who}/stat")) else { return 0.0 };
    let Some(rest) = s.rsplit_once(')').map(|(_, r)| r) else { return 0.0 };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let tick = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    // Fields after ")": state is index 0, utime is field 14 of the line (index 11 here), stime 12.
    (tick(11) + tick(12)) / 100.0
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(2);
        }
    };
    if let Err(e) = run(&a) {
        eprintln!("mtfbc_bench: {e}");
        std::process::exit(1);
    }
}

fn run(a: &Args) -> Result<(), cutpoint_core::Error> {
    let vs = make_versions(a);
    let total: usize = vs.iter().map(|v| v.len()).sum();
    let mb = total as f64 / 1e6;
    let cores = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
    println!("# MT-FBC benchmark");
    println!("cpu: {} | cores available: {cores} | parallel feature: {}", cpu_model(), cfg!(feature = "parallel"));
    println!(
        "dataset: seed {} | base {} MiB | {} versions | {} edits/version (insert/delete/overwrite 1..=128 B) | {:.1} MB in all",
        a.seed, a.base_mib, a.versions, a.edits, mb
    );
    println!("times: median of {} runs [min..max]; the cores may be shared, so expect noise", a.reps);
    let p = FbcParams::paper();
    println!(
        "TTTD (report): Tmin {} B, Tmax {} B, D {}, D' {}, window {} B ({}) | FBC (report): sub-chunk {} B, sample 1/{}, {} Bloom filters x {} KB, threshold {}",
        p.tttd.min,
        p.tttd.max,
        p.tttd.main_divisor,
        p.tttd.backup_divisor,
        p.tttd.window,
        p.tttd.family.name(),
        p.sub_size,
        p.sample_rate,
        p.filters,
        p.filter_bytes / 1024,
        p.threshold
    );

    let tttd = Tttd::new(TttdParams::paper())?;
    let (t_tttd, t_tttd_min, t_tttd_max, _) = time(a.reps, || vs.iter().map(|v| tttd.cuts(v).len()).sum::<usize>());
    let mut states = Vec::new();
    for key in [CandidateKey::Blake3, CandidateKey::Rolling] {
        let params = FbcParams { key, ..FbcParams::paper() };
        states.push((key, pass1(a, &vs, &params, (t_tttd, t_tttd_min, t_tttd_max))?));
    }

    // ---- Chunkers side by side -------------------------------------------------------------
    println!("\n## Chunkers on the versioned dataset: speed, chunks, average size, dedup ratio");
    println!("(dedup ratio = input bytes / unique chunk bytes; '+meta' also charges 32 B per chunk reference; <64 B = share of chunks under 64 bytes)");
    println!(
        "{:<40} {:>8} {:>9} {:>9} {:>10} {:>7} {:>10} {:>8} {:>8}",
        "chunker", "median s", "MB/s", "chunks", "avg size", "<64 B", "unique", "dedup", "+meta"
    );
    let report = |name: &str, t: f64, spans: &[Vec<(usize, usize)>]| {
        let (n, uniq, ubytes) = dedup(&vs, spans);
        let tiny = spans.iter().flatten().filter(|&&(_, l)| l < 64).count();
        println!(
            "{name:<40} {t:>8.3} {:>9.1} {n:>9} {:>10.0} {:>6.1}% {uniq:>10} {:>8.3} {:>8.3}",
            mb / t,
            total as f64 / n as f64,
            100.0 * tiny as f64 / n as f64,
            total as f64 / ubytes as f64,
            total as f64 / (ubytes + 32 * n) as f64
        );
    };
    let tttd_spans: Vec<_> = vs.iter().map(|v| cuts_to_spans(&tttd.cuts(v))).collect();
    report("TTTD (report parameters)", t_tttd, &tttd_spans);

    for (key, single) in &states {
        let k = key.name();
        let params = FbcParams { key: *key, ..FbcParams::paper() };
        for (name, w) in [("pass 2, single stream", Workers::single()), ("pass 2, 2 workers", Workers::threads(2))] {
            let (t, _, _, r) = time(a.reps, || vs.iter().map(|v| single.chunk(v, w)).collect::<Result<Vec<_>, _>>());
            let spans: Vec<_> = r?.iter().map(|(c, _)| fbc_spans(c)).collect();
            report(&format!("FBC/{k} {name}"), t, &spans);
        }
        // Both passes: the whole FBC cost.
        for (name, w) in [("both passes, single stream", Workers::single()), ("both passes, 2 workers", Workers::threads(2))] {
            let (t, _, _, r) = time(a.reps, || -> Result<Vec<Vec<FbcChunk>>, cutpoint_core::Error> {
                let mut f = Fbc::new(params.clone())?;
                for v in &vs {
                    f.observe(v, w)?;
                }
                vs.iter().map(|v| Ok(f.chunk(v, w)?.0)).collect()
            });
            let spans: Vec<_> = r?.iter().map(|c| fbc_spans(c)).collect();
            report(&format!("FBC/{k} {name}"), t, &spans);
        }
    }
    for prof in ["gear:2k:8k:64k", "rabin:2k:8k:64k"] {
        let profile: Profile = prof.parse()?;
        for threads in [1usize, 2] {
            let e = Engine::new(profile.clone(), Options { threads, hash: HashAlg::None, ..Default::default() })?;
            let (t, _, _, spans) = time(a.reps, || {
                vs.iter()
                    .map(|v| e.chunks(v).map(|c| (c.offset as usize, c.length)).collect::<Vec<_>>())
                    .collect::<Vec<_>>()
            });
            report(&format!("SS-CDC {prof}, {threads} thread(s), {}", e.backend().name()), t, &spans);
        }
    }
    Ok(())
}
