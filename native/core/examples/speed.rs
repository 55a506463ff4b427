//! Speed table: every number measured in this run, median of `REPS` repetitions (env
//! `CUTPOINT_REPS`, default 7) over `MIB` MiB (env `CUTPOINT_MIB`, default 64) of seeded
//! random bytes.
//!
//! `cargo run --release --example speed` prints stage-1 throughput per kernel and family, the
//! kernel dispatch picks, and the ratios the issue asks for: SS-CDC / sequential CDC
//! (`crc32:2k:16k:64k`, one thread), default profile / fastcdc v2020 (the newest `fastcdc`
//! crate, 5.x; 3.x as an extra row), each versus memcpy, and two-thread efficiency. The first
//! lines name the CPU (model and vendor from /proc/cpuinfo) and what dispatch measured.

use cutpoint_core::rolling::Tables;
use cutpoint_core::stage1::{self, Stage1Fn};
use cutpoint_core::*;
use std::hint::black_box;
use std::time::Instant;

fn env(name: &str, default: usize) -> usize {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn bytes(n: usize, seed: u64) -> Vec<u8> {
    let mut s = seed;
    let mut v = Vec::with_capacity(n);
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

#[path = "common/cpu.rs"]
mod cpu;
use cpu::cpu_now;

/// Medians of `reps` runs of `f`: (wall seconds, process CPU seconds).
fn median<F: FnMut()>(reps: usize, mut f: F) -> (f64, f64) {
    f(); // warm
    let mut wall = Vec::with_capacity(reps);
    let mut cpu = Vec::with_capacity(reps);
    for _ in 0..reps {
        let (s, c) = (Instant::now(), cpu_now());
        f();
        cpu.push(cpu_now() - c);
        wall.push(s.elapsed().as_secs_f64());
    }
    wall.sort_by(|a, b| a.partial_cmp(b).unwrap());
    cpu.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (wall[reps / 2], cpu[reps / 2])
}

/// "model name (vendor, family f model m)" from /proc/cpuinfo, or what is known elsewhere.
fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let field = |k: &str| {
        info.lines()
            .find(|l| l.split(':').next().is_some_and(|n| n.trim() == k))
            .and_then(|l| l.split_once(':'))
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_else(|| "?".into())
    };
    let cpus = info.lines().filter(|l| l.starts_with("processor")).count();
    format!(
        "{} ({}, family {} model {}, {cpus} logical CPUs, {})",
        field("model name"),
        field("vendor_id"),
        field("cpu family"),
        field("model"),
        std::env::consts::ARCH
    )
}

/// The core clock in GHz, from a chain of dependent 64-bit adds (one cycle each on every
/// x86-64 core): median of 3 runs of 0.8 G adds. `None` elsewhere.
fn clock_ghz() -> Option<f64> {
    #[cfg(target_arch = "x86_64")]
    {
        let mut runs: Vec<f64> = (0..3)
            .map(|_| {
                let n = 50_000_000u64;
                let mut x = 1u64;
                let t = Instant::now();
                for _ in 0..n {
                    // SAFETY: register arithmetic only.
                    unsafe {
                        std::arch::asm!(
                            "add {0}, {0}", "add {0}, {0}", "add {0}, {0}", "add {0}, {0}",
                            "add {0}, {0}", "add {0}, {0}", "add {0}, {0}", "add {0}, {0}",
                            "add {0}, {0}", "add {0}, {0}", "add {0}, {0}", "add {0}, {0}",
                            "add {0}, {0}", "add {0}, {0}", "add {0}, {0}", "add {0}, {0}",
                            inout(reg) x, options(nomem, nostack)
                        )
                    };
                }
                black_box(x);
                16.0 * n as f64 / t.elapsed().as_secs_f64() / 1e9
            })
            .collect();
        runs.sort_by(|a, b| a.partial_cmp(b).unwrap());
        Some(runs[1])
    }
    #[cfg(not(target_arch = "x86_64"))]
    None
}

fn main() {
    let reps = env("CUTPOINT_REPS", 7);
    // CUTPOINT_ONLY=substring: run only the stage-1 rows whose name contains it (for profiling);
    // CUTPOINT_ONLY=engine: only the engine rows and ratios.
    let only = std::env::var("CUTPOINT_ONLY").ok();
    let n = env("CUTPOINT_MIB", 64) << 20;
    let data = bytes(n, 0x5EED);
    let gbs = |s: f64| n as f64 / s / 1e9;
    let row = |name: &str, (w, c): (f64, f64), note: &str| {
        println!("{name:<34} {:>8.2} {:>8.2}  {note}", gbs(w), gbs(c));
    };
    println!("cutpoint speed: {} MiB seeded random bytes, median of {reps} runs", n >> 20);
    println!("cpu: {}", cpu_model());
    for f in [Family::Crc32, Family::Rabin, Family::Gear] {
        let c = backend::calibration(f);
        let figs: Vec<String> = c.figures.iter().map(|(b, g)| format!("{} {g:.2}", b.name())).collect();
        let skip = match c.skip_min {
            Some(g) => format!("; skip-min {g:.2}{}", if c.skip_min_chosen { " -> engines use skip-min" } else { "" }),
            None => String::new(),
        };
        println!("dispatch calibration {:<5} (GB/s, best of {} x {} KiB): {} -> {}{skip}", f.name(), c.runs, c.bytes >> 10, figs.join(", "), c.chosen.name());
    }
    println!("{:<34} {:>8} {:>8}", "", "wall", "cpu");
    println!("{:<34} {:>8} {:>8}", "", "GB/s", "GB/s");
    let mut dst = vec![0u8; n];
    let mcp = median(reps, || {
        dst.copy_from_slice(black_box(&data));
        black_box(&dst);
    });
    row("memcpy", mcp, "");

    let mut kernels: Vec<(String, Stage1Fn, usize)> = Vec::new();
    for b in backend::available() {
        if let Some(k) = b.stage1_kernel() {
            kernels.push((b.name().to_string(), k, b.lanes()));
        }
    }
    #[cfg(target_arch = "x86_64")]
    {
        if Backend::avx512().is_some() {
            kernels.push(("avx512-gather".into(), stage1::avx512::stage1_gather, 64));
        }
        if stage1::avx512::has_affine() {
            kernels.push(("avx512-affine".into(), stage1::avx512::stage1_affine, 64));
        }
    }
    for prof in ["crc32:2k:16k:64k", "rabin:4k:8k:12k", "gear:2k:8k:64k"] {
        let p: Profile = prof.parse().unwrap();
        let t = Tables::new(&p);
        for (name, k, lanes) in &kernels {
            if name == "avx512-affine" && p.family == Family::Gear {
                continue; // gear is not GF(2)-linear: that kernel hands gear to the gathers
            }
            let label = format!("stage1/{name}/{}", p.family.name());
            if only.as_deref().is_some_and(|o| !label.contains(o)) {
                continue;
            }
            let mut s = Vec::new();
            let mut l = if p.two_classes() { Vec::with_capacity(1) } else { Vec::new() };
            let two = p.two_classes();
            // SAFETY: only kernels of available backends (or the avx512 variants after their
            // features were checked) are listed.
            let m = median(reps, || unsafe { stage1::scan_all(*k, *lanes, &t, &data, &mut s, &mut l, two) });
            row(&label, m, "");
        }
        println!(
            "{:<34} {}",
            format!("dispatch picks for {}", p.family.name()),
            backend::detect_for(p.family).map(|b| b.name().to_string()).unwrap_or_else(|e| e.to_string())
        );
    }

    if only.as_deref().is_some_and(|o| o != "engine") {
        return;
    }
    let one = |p: &Profile, threads: usize| {
        Engine::new(p.clone(), Options { threads, hash: HashAlg::None, ..Options::default() }).unwrap()
    };
    let paper: Profile = "crc32:2k:16k:64k".parse().unwrap();
    let e1 = one(&paper, 1);
    assert_eq!(e1.cuts(&data), sequential_cuts(&paper, &data));
    let ss = median(reps, || {
        black_box(e1.cuts(black_box(&data)));
    });
    let seq = median(reps, || {
        black_box(sequential_cuts(&paper, black_box(&data)));
    });
    row("sscdc/crc32:2k:16k:64k/1t", ss, e1.backend().name());
    row("sequential/crc32:2k:16k:64k", seq, "");

    let def = Profile::default_profile();
    let d1 = one(&def, 1);
    let d2 = one(&def, 2);
    let dss = median(reps, || {
        black_box(d1.cuts(black_box(&data)));
    });
    let fc = median(reps, || {
        black_box(fastcdc::v2020::FastCDC::new(black_box(&data), 2048, 8192, 65536).count());
    });
    let fc3 = median(reps, || {
        black_box(fastcdc3::v2020::FastCDC::new(black_box(&data), 2048, 8192, 65536).count());
    });
    let d2s = median(reps, || {
        black_box(d2.cuts(black_box(&data)));
    });
    // Both ways of chunking, whatever dispatch chose: the skip-MIN engine and the two stages.
    let mode = |threads: usize, on: bool| one(&def, threads).with_skip_min(on).unwrap();
    let (s1, s2, t1, t2) = (mode(1, true), mode(2, true), mode(1, false), mode(2, false));
    let want = d1.cuts(&data);
    for e in [&s1, &s2, &t1, &t2] {
        assert_eq!(e.cuts(&data), want, "{} threads {}", e.kernel_name(), e.threads());
    }
    assert_eq!(skip_min_cuts(&def, &data).unwrap(), want);
    let time = |e: &Engine| {
        median(reps, || {
            black_box(e.cuts(black_box(&data)));
        })
    };
    let (s1m, s2m, t1m, t2m) = (time(&s1), time(&s2), time(&t1), time(&t2));
    row(&format!("sscdc/{def}/1t"), dss, &format!("{} (what dispatch chose)", d1.kernel_name()));
    row("fastcdc-v2020/2k:8k:64k", fc, "fastcdc 5.x (newest)");
    row("fastcdc3-v2020/2k:8k:64k", fc3, "fastcdc 3.x");
    row(&format!("sscdc/{def}/2t"), d2s, &format!("{} (cpu column = both threads' CPU time)", d2.kernel_name()));
    row(&format!("skip-min/{def}/1t"), s1m, "skip-MIN engine, forced on");
    row(&format!("skip-min/{def}/2t"), s2m, "skip-MIN, speculative parts");
    row(&format!("two-stage/{def}/1t"), t1m, &format!("stage 1 ({}) + stage 2, forced", t1.backend().name()));
    row(&format!("two-stage/{def}/2t"), t2m, "");

    // Cycles per byte: the clock measured right after the rows, and the bytes each loop hashes
    // (skip-MIN: from 64 bytes before s + MIN to the cut; fastcdc: from s + MIN to the cut).
    if let Some(ghz) = clock_ghz() {
        let (min, max) = (2048usize, 65536usize);
        let hashed_ours: usize = {
            let mut s = 0;
            want.iter().map(|&e| { let l = e - s; s = e; if l > min { l - min + 64 } else { 0 } }).sum()
        };
        let hashed_fc: usize = fastcdc::v2020::FastCDC::new(&data, min as _, 8192, max as _).map(|c| c.length.saturating_sub(min)).sum();
        let cyc = |secs: f64, hashed: usize| (secs * ghz * 1e9 / n as f64, secs * ghz * 1e9 / hashed as f64, hashed as f64 / n as f64);
        let (a, b, f) = cyc(s1m.0, hashed_ours);
        println!("\ncycles per byte (core clock {ghz:.2} GHz from dependent adds, measured after the rows):");
        println!("  skip-MIN engine, 1 thread: {a:.2} per input byte, {b:.2} per hashed byte ({:.0}% of the bytes hashed)", f * 100.0);
        let (a, b, f) = cyc(fc.0, hashed_fc);
        println!("  fastcdc 5 v2020:           {a:.2} per input byte, {b:.2} per hashed byte ({:.0}% of the bytes hashed)", f * 100.0);
    }

    println!("\nratios (same run, medians; wall / cpu-time based):");
    println!("  SS-CDC / sequential (crc32:2k:16k:64k, 1 thread): {:.2}x / {:.2}x", seq.0 / ss.0, seq.1 / ss.1);
    println!("  default profile / fastcdc 5 v2020 (1 thread):     {:.2}x / {:.2}x", fc.0 / dss.0, fc.1 / dss.1);
    println!("  default profile / fastcdc 3 v2020 (1 thread):     {:.2}x / {:.2}x", fc3.0 / dss.0, fc3.1 / dss.1);
    println!("  skip-MIN engine / fastcdc 5 v2020 (1 thread):     {:.2}x / {:.2}x", fc.0 / s1m.0, fc.1 / s1m.1);
    println!("  two-stage engine / fastcdc 5 v2020 (1 thread):    {:.2}x / {:.2}x", fc.0 / t1m.0, fc.1 / t1m.1);
    println!("  skip-MIN 2 threads / 1 thread (wall):             {:.2}x", s1m.0 / s2m.0);
    println!("  two-stage 2 threads / 1 thread (wall):            {:.2}x", t1m.0 / t2m.0);
    println!("  default profile 1 thread vs memcpy:               {:.2} / {:.2}", mcp.0 / dss.0, mcp.1 / dss.1);
    println!("  fastcdc 5 v2020 vs memcpy:                           {:.2} / {:.2}", mcp.0 / fc.0, mcp.1 / fc.1);
    println!("  2-thread parallel efficiency (default, wall):      {:.2}", dss.0 / d2s.0 / 2.0);

    // The same ratios from interleaved pairs (A then B, `reps` times; the ratio of each pair,
    // then the median): slow drifts in what the machine's neighbours take hit both sides of a
    // pair alike. Each side times itself and returns seconds.
    let pairs = reps.max(3);
    let paired = |f: &mut dyn FnMut() -> f64, g: &mut dyn FnMut() -> f64| -> (f64, f64, f64) {
        f();
        g();
        let mut r: Vec<f64> = (0..pairs).map(|_| f() / g()).collect();
        r.sort_by(|a, b| a.partial_cmp(b).unwrap());
        (r[r.len() / 2], r[0], r[r.len() - 1])
    };
    let timed = |e: &Engine| {
        let t = Instant::now();
        black_box(e.cuts(black_box(&data)));
        t.elapsed().as_secs_f64()
    };
    let (m, lo, hi) = paired(
        &mut || {
            let t = Instant::now();
            black_box(fastcdc::v2020::FastCDC::new(black_box(&data), 2048, 8192, 65536).count());
            t.elapsed().as_secs_f64()
        },
        &mut || timed(&d1),
    );
    println!("\npaired ratios (median of {pairs} interleaved pairs [min..max]; the default engine is {}):", d1.kernel_name());
    println!("  default profile / fastcdc 5 v2020 (1 thread):     {m:.2}x [{lo:.2}..{hi:.2}]");
    // Right after the one-thread run the second core has been idle for its whole length (a
    // virtual machine's idle vCPU is halted and takes a while to wake)...
    let (m, lo, hi) = paired(&mut || timed(&d1), &mut || timed(&d2));
    println!("  2-thread efficiency, second core idle before:      {:.2} [{:.2}..{:.2}]", m / 2.0, lo / 2.0, hi / 2.0);
    // ...and with the two-thread side timed on its second run in a row (both cores awake, as
    // all through a long input).
    let (m, lo, hi) = paired(&mut || timed(&d1), &mut || {
        timed(&d2);
        timed(&d2)
    });
    println!("  2-thread efficiency, both cores awake:             {:.2} [{:.2}..{:.2}]", m / 2.0, lo / 2.0, hi / 2.0);
}
