//! The native half of `npm run bench` (bench/harness/run.mjs): every native measurement as one
//! JSON object per line on stdout, for the harness to merge with the WebAssembly rows.
//!
//! ```text
//! bench_rows --input FILE [--reps 5] [--threads 1,2] [--sections limits,chunking,peers,hash,dedup]
//!            [--syn F1,F2,..] [--real F1,F2,..] [--quick]
//! ```
//!
//! * `limits`   — memcpy and read bandwidth of the input buffer;
//! * `chunking` — per family (crc32, rabin, gear) × average (8k, 16k, 64k; MIN = AVG/4,
//!   MAX = AVG×8): the readable reference chunker, the optimized sequential chunker (the
//!   baseline for "ratio to reference"), stage 1 alone per kernel (scalar, interleaved, avx2,
//!   avx512-gather = the paper's design, avx512 = what dispatch runs), the SS-CDC engine per
//!   backend on one thread, the engine on 1..N threads, and the naive segment-parallel mode
//!   (1 MiB segments, each chunked sequentially, N threads);
//! * `peers`    — the `fastcdc` crate (v2020 and v2016) at the same MIN/AVG/MAX, same bytes;
//! * `hash`     — BLAKE3 and SHA-256 over pieces of 2, 8, 16 and 64 KiB, one thread;
//! * `dedup`    — on versioned datasets (`--syn`, `--real`: files in order, each deduplicated
//!   against the ones before it): SS-CDC vs fastcdc per profile, and SS-CDC (= sequential) vs
//!   naive segment-parallel at segments of 512 KiB..4 MiB and the min/avg/max sweeps of the
//!   SS-CDC paper's Figures 8–9 (1 MiB segments).
//!
//! Every time is the median of `--reps` runs after one warm-up (min and max kept); throughput is
//! bytes / wall seconds / 1e9. Ratios are taken by the harness within this run. A backend this
//! CPU lacks is printed as a `skipped` row with the reason.

use cutpoint_core::rolling::Tables;
use cutpoint_core::stage1::{self, Stage1Fn};
use cutpoint_core::*;
use serde_json::{json, Value};
use std::collections::HashSet;
use std::hint::black_box;
use std::time::Instant;

struct Args {
    input: String,
    reps: usize,
    threads: Vec<usize>,
    sections: Vec<String>,
    syn: Vec<String>,
    real: Vec<String>,
    quick: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        input: String::new(),
        reps: 5,
        threads: vec![1, default_threads()],
        sections: ["limits", "chunking", "peers", "hash", "dedup"].iter().map(|s| s.to_string()).collect(),
        syn: vec![],
        real: vec![],
        quick: false,
    };
    let mut it = std::env::args().skip(1);
    let list = |v: String| v.split(',').filter(|s| !s.is_empty()).map(|s| s.to_string()).collect::<Vec<_>>();
    while let Some(k) = it.next() {
        let mut val = || it.next().ok_or_else(|| format!("{k} needs a value"));
        match k.as_str() {
            "--input" => a.input = val()?,
            "--reps" => a.reps = val()?.parse().map_err(|_| "--reps: not a number")?,
            "--threads" => {
                a.threads = list(val()?)
                    .iter()
                    .map(|s| s.parse().map_err(|_| format!("--threads: '{s}'")))
                    .collect::<Result<_, _>>()?
            }
            "--sections" => a.sections = list(val()?),
            "--syn" => a.syn = list(val()?),
            "--real" => a.real = list(val()?),
            "--quick" => a.quick = true,
            other => return Err(format!("unknown argument '{other}'")),
        }
    }
    if a.input.is_empty() {
        return Err("--input FILE is required".into());
    }
    a.reps = a.reps.max(1);
    a.threads.sort();
    a.threads.dedup();
    Ok(a)
}

fn emit(v: Value) {
    println!("{v}");
}

fn skipped(section: &str, name: &str, reason: &str) {
    emit(json!({"section": section, "runtime": "native", "name": name, "skipped": true, "reason": reason}));
}

/// (median, min, max) wall seconds of `reps` runs after one warm-up.
fn time<F: FnMut()>(reps: usize, mut f: F) -> (f64, f64, f64) {
    f();
    let mut xs: Vec<f64> = (0..reps)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .collect();
    xs.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

/// A throughput row: GB/s from the median time; min/max GB/s from the slowest/fastest run.
fn speed(section: &str, name: &str, bytes: usize, t: (f64, f64, f64), extra: Value) {
    let g = |s: f64| bytes as f64 / s / 1e9;
    let mut row = json!({"section": section, "runtime": "native", "name": name, "value": g(t.0), "unit": "GB/s",
        "min": g(t.2), "max": g(t.1), "seconds": t.0, "bytes": bytes});
    if let (Some(r), Value::Object(e)) = (row.as_object_mut(), extra) {
        r.extend(e);
    }
    emit(row);
}

/// The naive segment-parallel mode (P-Dedupe / SFSS): fixed segments, each chunked from its own
/// start with the sequential chunker, `threads` threads taking segments round robin. Same cuts
/// as `cutpoint_core::naive_cuts`.
fn naive_parallel(p: &Profile, data: &[u8], seg: usize, threads: usize) -> Vec<usize> {
    let nseg = data.len().div_ceil(seg);
    let mut parts: Vec<Vec<usize>> = vec![Vec::new(); nseg];
    std::thread::scope(|s| {
        let mut slots: Vec<Vec<(usize, &mut Vec<usize>)>> = (0..threads).map(|_| Vec::new()).collect();
        for (i, part) in parts.iter_mut().enumerate() {
            slots[i % threads].push((i, part));
        }
        for mine in slots {
            s.spawn(move || {
                for (i, part) in mine {
                    let a = i * seg;
                    let b = (a + seg).min(data.len());
                    *part = sequential_cuts(p, &data[a..b]).into_iter().map(|c| c + a).collect();
                }
            });
        }
    });
    parts.concat()
}

fn profile_for(family: &str, avg: usize) -> Profile {
    format!("{family}:{}:{}:{}", avg / 4, avg, avg * 8).parse().expect("profile")
}

fn kernels() -> Vec<(String, Stage1Fn, usize)> {
    let mut ks = Vec::new();
    for b in backend::available() {
        if let Some(k) = b.stage1_kernel() {
            ks.push((b.name().to_string(), k, b.lanes()));
        }
    }
    #[cfg(target_arch = "x86_64")]
    if Backend::avx512().is_some() {
        ks.push(("avx512-gather".into(), stage1::avx512::stage1_gather, 64));
    }
    ks
}

fn limits(a: &Args, data: &[u8]) {
    let n = data.len();
    let mut dst = vec![0u8; n];
    let t = time(a.reps, || {
        dst.copy_from_slice(black_box(data));
        black_box(&dst);
    });
    speed("limits", "limits/native/memcpy", n, t, json!({"what": "memcpy"}));
    let t = time(a.reps, || {
        let mut acc = [0u64; 8];
        for c in data.chunks_exact(64) {
            for (i, w) in c.chunks_exact(8).enumerate() {
                acc[i] ^= u64::from_le_bytes(w.try_into().unwrap());
            }
        }
        black_box(acc);
    });
    speed("limits", "limits/native/read", n, t, json!({"what": "read"}));
}

fn chunking(a: &Args, data: &[u8]) {
    let n = data.len();
    let ks = kernels();
    let avail: Vec<&str> = backend::available().iter().map(|b| b.name()).collect();
    if !ks.iter().any(|k| k.0 == "avx512-gather") {
        skipped("chunking", "stage1/native/avx512-gather", "the SS-CDC paper's gather kernel needs avx512f+avx512bw (x86_64), which this CPU lacks");
    }
    for want in ["avx2", "avx512"] {
        if !avail.contains(&want) {
            skipped(
                "chunking",
                &format!("chunk/native/sscdc/{want}"),
                &format!("this CPU lacks {want} (available: {})", avail.join(", ")),
            );
        }
    }
    // FAMILY:AVG/4:AVG:AVG*8 for three averages, plus the SS-CDC paper's own setting.
    let mut profiles: Vec<(&str, usize, Profile)> = Vec::new();
    for family in ["crc32", "rabin", "gear"] {
        for avg in [8 << 10, 16 << 10, 64 << 10] {
            profiles.push((family, avg, profile_for(family, avg)));
        }
    }
    profiles.push(("crc32", 16 << 10, "crc32:2k:16k:64k".parse().unwrap()));
    for (family, avg, p) in profiles {
        {
            let ps = p.to_string();
            let base = json!({"family": family, "avg": avg, "profile": ps});
            let ex = |v: Value| {
                let mut b = base.clone();
                b.as_object_mut().unwrap().extend(v.as_object().unwrap().clone());
                b
            };
            let expect = sequential_cuts(&p, data);
            let chunks = expect.len();
            // The readable oracle is slow: one run of it is enough on the full input (quick: a slice).
            let t = time(1, || {
                black_box(reference_cuts(&p, black_box(data)));
            });
            speed(
                "chunking",
                &format!("chunk/native/reference/{ps}"),
                n,
                t,
                ex(json!({"engine": "reference", "threads": 1, "chunks": chunks})),
            );
            let t = time(a.reps, || {
                black_box(sequential_cuts(&p, black_box(data)));
            });
            speed(
                "chunking",
                &format!("chunk/native/sequential/{ps}"),
                n,
                t,
                ex(json!({"engine": "sequential", "threads": 1, "chunks": chunks})),
            );
            let tables = Tables::new(&p);
            for (name, k, lanes) in &ks {
                let (mut s, mut l) = (Vec::new(), Vec::new());
                let two = p.two_classes();
                // SAFETY: only kernels of available backends (or avx512-gather after Backend::avx512()
                // verified avx512f+avx512bw) are listed.
                let t = time(a.reps, || unsafe { stage1::scan_all(*k, *lanes, &tables, data, &mut s, &mut l, two) });
                speed(
                    "chunking",
                    &format!("stage1/native/{name}/{ps}"),
                    n,
                    t,
                    ex(json!({"engine": "stage1", "backend": name, "threads": 1})),
                );
            }
            for b in backend::available() {
                if b.stage1_kernel().is_none() {
                    continue;
                }
                let e = Engine::new(
                    p.clone(),
                    Options { backend: Some(b), threads: 1, hash: HashAlg::None, ..Options::default() },
                )
                .unwrap();
                assert_eq!(e.cuts(data), expect, "{} {ps}", b.name());
                let t = time(a.reps, || {
                    black_box(e.cuts(black_box(data)));
                });
                speed(
                    "chunking",
                    &format!("chunk/native/sscdc/{}/{ps}/t1", b.name()),
                    n,
                    t,
                    ex(json!({"engine": "sscdc", "backend": b.name(), "threads": 1, "chunks": chunks})),
                );
            }
            for &th in &a.threads {
                let e =
                    Engine::new(p.clone(), Options { threads: th, hash: HashAlg::None, ..Options::default() }).unwrap();
                let t = time(a.reps, || {
                    black_box(e.cuts(black_box(data)));
                });
                speed(
                    "chunking",
                    &format!("chunk/native/sscdc-threads/{ps}/t{th}"),
                    n,
                    t,
                    ex(
                        json!({"engine": "sscdc-threads", "backend": e.kernel_name(), "threads": th, "chunks": chunks}),
                    ),
                );
                // gear: the skip-MIN engine forced on (the default engine uses it only where the
                // calibration measured it faster), with its speculative parts on several threads.
                if family == "gear" {
                    let e = e.with_skip_min(true).unwrap();
                    assert_eq!(e.cuts(data), expect, "skip-min {ps} t{th}");
                    let t = time(a.reps, || {
                        black_box(e.cuts(black_box(data)));
                    });
                    speed(
                        "chunking",
                        &format!("chunk/native/skip-min/{ps}/t{th}"),
                        n,
                        t,
                        ex(json!({"engine": "skip-min", "backend": "skip-min", "threads": th, "chunks": chunks})),
                    );
                }
                let seg = 1 << 20;
                let cuts = naive_parallel(&p, data, seg, th);
                let t = time(a.reps, || {
                    black_box(naive_parallel(&p, black_box(data), seg, th));
                });
                speed(
                    "chunking",
                    &format!("chunk/native/naive-1MiB/{ps}/t{th}"),
                    n,
                    t,
                    ex(json!({"engine": "naive", "segment": seg, "threads": th, "chunks": cuts.len()})),
                );
            }
        }
    }
}

fn peers(a: &Args, data: &[u8]) {
    let n = data.len();
    for avg in [8usize << 10, 16 << 10, 64 << 10] {
        let (mn, mx) = (avg / 4, avg * 8);
        let size = format!("{}:{}:{}", profile::fmt_size(mn), profile::fmt_size(avg), profile::fmt_size(mx));
        let c = fastcdc::v2020::FastCDC::new(data, mn, avg, mx).count();
        let t = time(a.reps, || {
            black_box(fastcdc::v2020::FastCDC::new(black_box(data), mn, avg, mx).count());
        });
        speed(
            "peers",
            &format!("peer/native/fastcdc-v2020/{size}"),
            n,
            t,
            json!({"peer": "fastcdc v2020", "version": "5.0.0", "avg": avg, "chunks": c}),
        );
        let c = fastcdc::v2016::FastCDC::new(data, mn, avg, mx).count();
        let t = time(a.reps, || {
            black_box(fastcdc::v2016::FastCDC::new(black_box(data), mn, avg, mx).count());
        });
        speed(
            "peers",
            &format!("peer/native/fastcdc-v2016/{size}"),
            n,
            t,
            json!({"peer": "fastcdc v2016", "version": "5.0.0", "avg": avg, "chunks": c}),
        );
    }
}

fn hashing(a: &Args, data: &[u8]) {
    let n = data.len().min(64 << 20);
    let data = &data[..n];
    for alg in [HashAlg::Blake3, HashAlg::Sha256] {
        for piece in [2usize << 10, 8 << 10, 16 << 10, 64 << 10] {
            let t = time(a.reps, || {
                for c in data.chunks(piece) {
                    black_box(alg.digest(black_box(c)));
                }
            });
            speed(
                "hash",
                &format!("hash/native/{}/{piece}", alg.name()),
                n,
                t,
                json!({"alg": alg.name(), "piece": piece, "impl": "core (blake3/sha2 crates)"}),
            );
        }
    }
}

/// Bytes / unique bytes over `files` in order, chunks named by BLAKE3; and the chunk count.
fn dedup_of(files: &[Vec<u8>], mut cuts: impl FnMut(&[u8]) -> Vec<usize>) -> (f64, usize) {
    let mut seen: HashSet<[u8; 32]> = HashSet::new();
    let (mut total, mut unique, mut count) = (0usize, 0usize, 0usize);
    for f in files {
        let mut s = 0;
        for e in cuts(f) {
            let h = *blake3::hash(&f[s..e]).as_bytes();
            if seen.insert(h) {
                unique += e - s;
            }
            count += 1;
            s = e;
        }
        total += f.len();
    }
    (total as f64 / unique.max(1) as f64, count)
}

fn dedup(a: &Args) {
    let threads = *a.threads.last().unwrap_or(&1);
    for (set, paths) in [("synthetic", &a.syn), ("real", &a.real)] {
        if paths.is_empty() {
            skipped("dedup", &format!("dedup/{set}"), "no dataset given (--syn/--real)");
            continue;
        }
        let files: Vec<Vec<u8>> =
            paths.iter().map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{p}: {e}"))).collect();
        let bytes: usize = files.iter().map(|f| f.len()).sum();
        let row = |name: String, what: &str, ratio: f64, chunks: usize, extra: Value| {
            let mut r = json!({"section": "dedup", "runtime": "native", "name": name, "dataset": set, "files": files.len(), "bytes": bytes,
                "what": what, "value": ratio, "unit": "ratio", "chunks": chunks});
            r.as_object_mut().unwrap().extend(extra.as_object().unwrap().clone());
            emit(r);
        };
        // Per profile: SS-CDC vs the fastcdc crate at the same sizes.
        for family in ["crc32", "rabin", "gear"] {
            for avg in [8usize << 10, 16 << 10, 64 << 10] {
                let p = profile_for(family, avg);
                let e = Engine::new(p.clone(), Options { threads, hash: HashAlg::None, ..Options::default() }).unwrap();
                let (r, c) = dedup_of(&files, |d| e.cuts(d));
                row(
                    format!("dedup/{set}/sscdc/{p}"),
                    "profile",
                    r,
                    c,
                    json!({"engine": "sscdc", "profile": p.to_string(), "family": family, "avg": avg}),
                );
            }
        }
        for avg in [8usize << 10, 16 << 10, 64 << 10] {
            let (mn, mx) = (avg / 4, avg * 8);
            let (r, c) = dedup_of(&files, |d| {
                let mut v: Vec<usize> = fastcdc3::v2020::FastCDC::new(d, mn as u32, avg as u32, mx as u32)
                    .map(|c| c.offset + c.length)
                    .collect();
                if d.is_empty() {
                    v.clear();
                }
                v
            });
            row(
                format!("dedup/{set}/fastcdc-v2020/{avg}"),
                "profile",
                r,
                c,
                json!({"engine": "fastcdc-v2020", "avg": avg, "family": "fastcdc-v2020"}),
            );
            let (r, c) = dedup_of(&files, |d| {
                fastcdc3::v2016::FastCDC::new(d, mn as u32, avg as u32, mx as u32).map(|c| c.offset + c.length).collect()
            });
            row(
                format!("dedup/{set}/fastcdc-v2016/{avg}"),
                "profile",
                r,
                c,
                json!({"engine": "fastcdc-v2016", "avg": avg, "family": "fastcdc-v2016"}),
            );
        }
        // SS-CDC (= sequential) vs naive segment-parallel (SS-CDC paper, Figures 8 and 9).
        let k = |s: usize| profile::fmt_size(s);
        let segs: &[usize] = &[512 << 10, 1 << 20, 2 << 20, 4 << 20];
        let base: Profile = "crc32:2k:16k:64k".parse().unwrap();
        let mut sweep: Vec<(String, Profile, usize)> = Vec::new();
        for &s in segs {
            sweep.push(("segment".into(), base.clone(), s));
        }
        for m in [1usize << 10, 2 << 10, 4 << 10, 8 << 10] {
            sweep.push(("min".into(), format!("crc32:{}:16k:64k", k(m)).parse().unwrap(), 1 << 20));
        }
        for v in [8usize << 10, 16 << 10, 32 << 10] {
            sweep.push(("avg".into(), format!("crc32:2k:{}:64k", k(v)).parse().unwrap(), 1 << 20));
        }
        for m in [32usize << 10, 64 << 10, 128 << 10, 256 << 10] {
            sweep.push(("max".into(), format!("crc32:2k:16k:{}", k(m)).parse().unwrap(), 1 << 20));
        }
        if a.quick {
            sweep.retain(|(w, _, s)| w == "segment" && (*s == 512 << 10 || *s == 4 << 20));
        }
        for (what, p, seg) in sweep {
            let e = Engine::new(p.clone(), Options { threads, hash: HashAlg::None, ..Options::default() }).unwrap();
            let (ss, sc) = dedup_of(&files, |d| e.cuts(d));
            let (nv, nc) = dedup_of(&files, |d| naive_parallel(&p, d, seg, threads));
            let reduction = (ss - nv) / ss * 100.0;
            let x = json!({"profile": p.to_string(), "segment": seg, "sweep": what, "sscdc": ss, "naive": nv, "reduction_pct": reduction, "sscdc_chunks": sc});
            row(format!("dedup/{set}/naive-vs-sscdc/{what}/{p}/seg{}", k(seg)), "naive", nv, nc, x);
        }
    }
}

fn main() {
    let a = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("bench_rows: {e}");
            std::process::exit(2);
        }
    };
    let data = std::fs::read(&a.input).unwrap_or_else(|e| {
        eprintln!("bench_rows: {}: {e}", a.input);
        std::process::exit(1)
    });
    let has = |s: &str| a.sections.iter().any(|x| x == s);
    let dispatch: serde_json::Map<String, Value> = ["crc32", "rabin", "gear"]
        .iter()
        .map(|f| {
            (f.to_string(), json!(backend::detect_for(profile_for(f, 8192).family).map(|b| b.name()).unwrap_or("?")))
        })
        .collect();
    let backends: Vec<&str> = backend::available().iter().map(|b| b.name()).collect();
    emit(
        json!({"section": "meta", "runtime": "native", "name": "meta/native", "backends": backends, "dispatch": dispatch,
        "threads": default_threads(), "input_bytes": data.len(), "reps": a.reps}),
    );
    if has("limits") {
        limits(&a, &data);
    }
    if has("chunking") {
        chunking(&a, &data);
    }
    if has("peers") {
        peers(&a, &data);
    }
    if has("hash") {
        hashing(&a, &data);
    }
    if has("dedup") {
        dedup(&a);
    }
}
