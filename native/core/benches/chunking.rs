//! Chunking benchmarks (criterion). `cargo bench --bench chunking` runs them all in a few
//! minutes on 2 cores; filter with e.g. `cargo bench --bench chunking -- stage1/avx512`.
//!
//! Inputs: `CUTPOINT_BENCH_MIB` (default 64) MiB of seeded random bytes (splitmix64, seed
//! 0x5EED), sliced at an odd offset so no kernel gets a conveniently aligned buffer.
//!
//! * `memcpy/<size>` — copy bandwidth of the same buffer: the ceiling for anything that reads it.
//! * `stage1/<kernel>/<family>/<size>` — each stage-1 kernel the CPU has, per family, driven
//!   the way one engine thread drives it (1 MiB spans cut into the kernel's lane count);
//!   `avx512-gather` and `avx512-affine` are the two AVX-512 designs. Unsupported kernels are
//!   skipped with a note.
//! * `sscdc/crc32:2k:16k:64k/1t` vs `sequential/crc32:2k:16k:64k` — the SS-CDC paper's setting:
//!   the whole engine (both stages, no fingerprints, one thread) against the optimised
//!   sequential CDC that skips MIN bytes after each cut.
//! * `sscdc/gear:2k:8k:64k/1t` vs `fastcdc-v2020/2k:8k:64k` — the default profile against the
//!   `fastcdc` crate at the same sizes, on the same bytes.
//! * `sscdc/gear:2k:8k:64k/2t` — two threads on one buffer.
//!
//! Ratios measured in one run (medians of repetitions) come from
//! `cargo run --release --example speed`.

use criterion::{black_box, criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use cutpoint_core::rolling::Tables;
use cutpoint_core::stage1::Stage1Fn;
use cutpoint_core::*;
use std::time::Duration;

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut v = Vec::with_capacity(n + 8);
    while v.len() < n {
        s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = s;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        v.extend_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    v.truncate(n);
    v
}

fn input() -> (Vec<u8>, usize, String) {
    let mib: usize = std::env::var("CUTPOINT_BENCH_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(64);
    let n = mib << 20;
    // Three extra bytes in front: the benchmarked slice starts at an odd address offset.
    (bytes(n + 3, 0x5EED), 3, format!("{mib}MiB"))
}

fn kernels() -> Vec<(String, Stage1Fn, usize)> {
    let mut out = Vec::new();
    for b in backend::ALL {
        match b.stage1_kernel() {
            Some(k) => out.push((b.name().to_string(), k, b.lanes())),
            None => eprintln!("note: skipping stage1/{} (not supported on this CPU)", b.name()),
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        use cutpoint_core::stage1::avx512;
        if Backend::avx512().is_some() {
            out.push(("avx512-gather".into(), avx512::stage1_gather as Stage1Fn, 64));
        }
        if avx512::has_affine() {
            out.push(("avx512-affine".into(), avx512::stage1_affine as Stage1Fn, 64));
        } else {
            eprintln!("note: skipping stage1/avx512-affine (needs AVX512-VBMI and GFNI)");
        }
    }
    out
}

fn bench(c: &mut Criterion) {
    let (buf, off, size) = input();
    let data = &buf[off..];
    let n = data.len() as u64;
    eprintln!(
        "cutpoint bench: {size} seeded random bytes; dispatch: crc32={} rabin={} gear={}",
        backend::detect_for(Family::Crc32).map(|b| b.name()).unwrap_or("?"),
        backend::detect_for(Family::Rabin).map(|b| b.name()).unwrap_or("?"),
        backend::detect_for(Family::Gear).map(|b| b.name()).unwrap_or("?"),
    );

    let mut g = c.benchmark_group("memcpy");
    g.throughput(Throughput::Bytes(n));
    let mut dst = vec![0u8; data.len()];
    dst.copy_from_slice(data);
    g.bench_function(&size, |b| b.iter(|| dst.copy_from_slice(black_box(data))));
    g.finish();

    let ks = kernels();
    let mut g = c.benchmark_group("stage1");
    g.throughput(Throughput::Bytes(n));
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k", "gear:2k:8k:64k"] {
        let p: Profile = prof.parse().unwrap();
        let t = Tables::new(&p);
        let two = p.two_classes();
        for (name, k, lanes) in &ks {
            if name == "avx512-affine" && p.family == Family::Gear {
                continue; // gear is not GF(2)-linear: that kernel hands gear to the gathers
            }
            let (mut s, mut l) = (Vec::new(), Vec::new());
            g.bench_function(BenchmarkId::new(format!("{name}/{}", p.family.name()), &size), |b| {
                // SAFETY: kernels() lists only kernels of backends this CPU supports.
                b.iter(|| unsafe { stage1::scan_all(*k, *lanes, &t, black_box(data), &mut s, &mut l, two) })
            });
        }
    }
    g.finish();

    let engine = |p: &Profile, threads: usize| {
        Engine::new(p.clone(), Options { threads, hash: HashAlg::None, ..Options::default() }).unwrap()
    };
    let paper: Profile = "crc32:2k:16k:64k".parse().unwrap();
    let def = Profile::default_profile();
    let (e_paper, e_def1, e_def2) = (engine(&paper, 1), engine(&def, 1), engine(&def, 2));

    let mut g = c.benchmark_group("sscdc");
    g.throughput(Throughput::Bytes(n));
    g.bench_function(BenchmarkId::new(format!("{paper}/1t/{}", e_paper.backend()), &size), |b| {
        b.iter(|| e_paper.cuts(black_box(data)))
    });
    g.bench_function(BenchmarkId::new(format!("{def}/1t/{}", e_def1.backend()), &size), |b| {
        b.iter(|| e_def1.cuts(black_box(data)))
    });
    g.bench_function(BenchmarkId::new(format!("{def}/2t/{}", e_def2.backend()), &size), |b| {
        b.iter(|| e_def2.cuts(black_box(data)))
    });
    g.finish();

    let mut g = c.benchmark_group("sequential");
    g.throughput(Throughput::Bytes(n));
    g.bench_function(BenchmarkId::new(paper.to_string(), &size), |b| b.iter(|| sequential_cuts(&paper, black_box(data))));
    g.finish();

    let mut g = c.benchmark_group("fastcdc-v2020");
    g.throughput(Throughput::Bytes(n));
    g.bench_function(BenchmarkId::new("2k:8k:64k", &size), |b| {
        b.iter(|| fastcdc::v2020::FastCDC::new(black_box(data), 2048, 8192, 65536).count())
    });
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2))
}

criterion_group! { name = benches; config = config(); targets = bench }
criterion_main!(benches);
