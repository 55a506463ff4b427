//! One chunker, run `CUTPOINT_REPS` times (default 10) over `CUTPOINT_MIB` MiB (default 64) of
//! seeded random bytes, for `perf stat -e instructions,cycles` per byte:
//!
//! `perf stat -e instructions,cycles target/release/examples/perbyte MODE`, MODE one of
//! `none` (only the data generation: subtract it), `skipmin` (skip_min_cuts), `engine1t` /
//! `engine2t` (the default engine, 1 / 2 threads), `interleaved` (stage 1 alone, the
//! interleaved kernel), `fastcdc` (fastcdc 5 v2020), all at the default profile gear:2k:8k:64k;
//! `touched` prints the fraction of the bytes each skip-MIN scan hashes.
//! Prints the bytes processed so that per-byte figures can be computed, and the best repetition's
//! throughput in process CPU time (for engine2t that is both threads' CPU time).

use cutpoint_core::rolling::Tables;
use cutpoint_core::stage1;
use cutpoint_core::*;
use std::hint::black_box;

#[path = "common/cpu.rs"]
mod cpu;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn main() {
    let mode = std::env::args().nth(1).unwrap_or_else(|| "none".into());
    let reps = env("CUTPOINT_REPS", 10);
    let n = env("CUTPOINT_MIB", 64) << 20;
    let data = datagen::random_bytes(n, 0x5EED);
    let p = Profile::default_profile();
    let t = Tables::new(&p);
    let engine = |threads: usize| Engine::new(p.clone(), Options { threads, hash: HashAlg::None, ..Options::default() }).unwrap();
    let (e1, e2) = (engine(1), engine(2));
    let (mut s, mut l) = (Vec::new(), Vec::new());
    let k = Backend::Interleaved.stage1_kernel().unwrap();
    if mode == "touched" {
        // The fraction of the input's bytes each skip-MIN scan hashes: cutpoint from s + MIN - 64
        // (the warm-up) to the cut, fastcdc from s + MIN to the cut.
        let ours = skip_min_cuts(&p, &data).unwrap().len();
        let theirs = fastcdc::v2020::FastCDC::new(&data, 2048, 8192, 65536).count();
        let frac = |chunks: usize, skipped: usize| 1.0 - (chunks * skipped) as f64 / n as f64;
        println!("cutpoint {p}: {ours} chunks, mean {:.0} B, hashes {:.3} of the bytes", n as f64 / ours as f64, frac(ours, p.min - 64));
        println!("fastcdc 5 v2020 2k:8k:64k: {theirs} chunks, mean {:.0} B, hashes {:.3} of the bytes", n as f64 / theirs as f64, frac(theirs, 2048));
        return;
    }
    let t0 = std::time::Instant::now();
    let mut best = f64::INFINITY;
    for _ in 0..reps {
        let c0 = cpu::cpu_now();
        match mode.as_str() {
            "none" => {}
            "skipmin" => drop(black_box(skip_min_cuts(&p, black_box(&data)))),
            "engine1t" => drop(black_box(e1.cuts(black_box(&data)))),
            "engine2t" => drop(black_box(e2.cuts(black_box(&data)))),
            // SAFETY: the interleaved kernel needs no special instructions.
            "interleaved" => unsafe { stage1::scan_all(k, Backend::Interleaved.lanes(), &t, black_box(&data), &mut s, &mut l, true) },
            "fastcdc" => drop(black_box(fastcdc::v2020::FastCDC::new(black_box(&data), 2048, 8192, 65536).count())),
            other => panic!("unknown mode {other}"),
        }
        best = best.min(cpu::cpu_now() - c0);
    }
    let dt = t0.elapsed().as_secs_f64();
    println!(
        "{mode}: {} bytes processed ({reps} x {} MiB), {:.2} GB/s wall overall, best rep {:.2} GB/s process CPU time",
        reps * n,
        n >> 20,
        (reps * n) as f64 / dt / 1e9,
        n as f64 / best / 1e9
    );
}
