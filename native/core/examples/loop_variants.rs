//! Two shapes of the skip-MIN loop (`src/skipmin.rs`) that were tried for #15 and lost, kept so
//! that the measurement behind the loop's shape can be repeated:
//!
//! `cargo run --release --example loop_variants -p cutpoint-core` (`CUTPOINT_MIB`, `CUTPOINT_REPS`)
//!
//! * **pair table**: one 16-bit load and one lookup in a 65,536-entry table of `2·G[x] + G[y]`
//!   per two bytes, one operation fewer than the library's loop — but the 512 KiB table lives in
//!   L2 at best, and its misses cost more than the operation saved.
//! * **four bytes a step**: `h(e+4) = 16·h(e) + (8a + 4b + 2c + d)`, one shift-add on the chain per
//!   four bytes and three side values — if the library's loop were bound by its chain's latency,
//!   this would win; it has more operations per byte, and loses, so the loop is bound by
//!   throughput (operations per byte), not latency.
//!
//! Both give the library's chunks (checked before timing). Not part of the library: the loops
//! here are experiments, the one the engine runs is `skipmin::find`.
use cutpoint_core::rolling::Tables;
use cutpoint_core::*;
use std::hint::black_box;
use std::time::Instant;

#[inline(always)]
fn opaque(v: u64) -> u64 {
    let mut v = v;
    unsafe { std::arch::asm!("/* {0} */", inout(reg) v, options(pure, nomem, nostack, preserves_flags)) };
    v
}

// pair: one u16 load, the pair table, the first byte's table entry
#[inline(never)]
unsafe fn find_pair(g: &[u64; 256], pt: &[u64], d: *const u8, mut e: usize, e1: usize, mut h: u64, lim: u64) -> Result<usize, u64> {
    if h <= lim { return Ok(e); }
    let stop = e1.saturating_sub(16);
    while e < stop {
        for j in [0usize, 2, 4, 6, 8, 10, 12, 14] {
            let w = (d.add(e + j) as *const u16).read_unaligned() as usize;
            let x = *g.get_unchecked(w & 0xff);
            let t = *pt.get_unchecked(w);
            let h1 = (h << 1).wrapping_add(x);
            if h1 <= lim { return Ok(e + j + 1); }
            h = (h << 2).wrapping_add(t);
            if h <= lim { return Ok(e + j + 2); }
        }
        e += 16;
    }
    while e + 1 < e1 { h = (h << 1).wrapping_add(*g.get_unchecked(*d.add(e) as usize)); e += 1; if h <= lim { return Ok(e); } }
    Err(h)
}

// four bytes a chain step: h(e+4) = 16h + (8a+4b+2c+d), side values for e+1..e+3
#[inline(never)]
unsafe fn find4(g: &[u64; 256], d: *const u8, mut e: usize, e1: usize, mut h: u64, lim: u64) -> Result<usize, u64> {
    if h <= lim { return Ok(e); }
    let byte = |i: usize| unsafe { *g.get_unchecked(*d.add(i) as usize) };
    let stop = e1.saturating_sub(16);
    while e < stop {
        for j in [0usize, 4, 8, 12] {
            let (a, b, c, dd) = (byte(e + j), opaque(byte(e + j + 1)), opaque(byte(e + j + 2)), opaque(byte(e + j + 3)));
            let t2 = opaque((a << 1).wrapping_add(b));
            let t3 = opaque((t2 << 1).wrapping_add(c));
            let t4 = opaque((t3 << 1).wrapping_add(dd));
            if (h << 1).wrapping_add(a) <= lim { return Ok(e + j + 1); }
            if (h << 2).wrapping_add(t2) <= lim { return Ok(e + j + 2); }
            if (h << 3).wrapping_add(t3) <= lim { return Ok(e + j + 3); }
            h = (h << 4).wrapping_add(t4);
            if h <= lim { return Ok(e + j + 4); }
        }
        e += 16;
    }
    while e + 1 < e1 { h = (h << 1).wrapping_add(byte(e)); e += 1; if h <= lim { return Ok(e); } }
    Err(h)
}

/// Cuts while a whole MAX fits before the end (the tail is the library's business).
fn chunk(mode: u8, g: &[u64; 256], pt: &[u64], data: &[u8], min: usize, avg: usize, max: usize, ls: u64, ll: u64) -> Vec<usize> {
    let n = data.len();
    let mut s = 0;
    let mut cuts = Vec::with_capacity(data.len() / avg + 1);
    let warm = |a: usize| { let mut h = 0u64; for i in a - 64..a { h = (h << 1).wrapping_add(g[data[i] as usize]); } h };
    let f = |e0: usize, e1: usize, h: u64, lim: u64| unsafe {
        if mode == 1 { find_pair(g, pt, data.as_ptr(), e0, e1, h, lim) } else { find4(g, data.as_ptr(), e0, e1, h, lim) }
    };
    while s + max < n {
        let lo = s + min;
        let e = match f(lo, s + avg, warm(lo), ls) {
            Ok(e) => e,
            Err(h) => {
                let a = s + avg;
                let h = (h << 1).wrapping_add(g[data[a - 1] as usize]);
                match f(a, s + max, h, ll) { Ok(e) => e, Err(_) => s + max }
            }
        };
        cuts.push(e);
        s = e;
    }
    cuts
}

fn main() {
    let n = std::env::var("CUTPOINT_MIB").ok().and_then(|v| v.parse().ok()).unwrap_or(256usize) << 20;
    let reps = std::env::var("CUTPOINT_REPS").ok().and_then(|v| v.parse().ok()).unwrap_or(7usize);
    let data = datagen::random_bytes(n, 0x5EED);
    let p = Profile::default_profile();
    let t = Tables::new(&p);
    let g = &t.gear;
    let mut pt = vec![0u64; 65536];
    for w in 0..65536usize {
        pt[w] = (g[w & 0xff] << 1).wrapping_add(g[w >> 8]);
    }
    let (ls, ll) = (!t.mask_strict, !t.mask_loose);
    // The same chunks as the library's skip-MIN loop (whose last, open chunk these loops leave out).
    let want = skip_min_cuts(&p, &data).unwrap();
    for m in [1u8, 4] {
        let got = chunk(m, g, &pt, &data, p.min, p.avg, p.max, ls, ll);
        assert!(got.len() + 8 > want.len() && got[..] == want[..got.len()], "variant {m}: other cuts");
    }
    let names = ["skip-MIN (the library's loop)", "pair table", "four bytes a step", "fastcdc 5 v2020"];
    let mut best = [f64::MAX; 4];
    for _ in 0..reps {
        for (k, best) in best.iter_mut().enumerate() {
            let t0 = Instant::now();
            match k {
                0 => drop(black_box(skip_min_cuts(&p, black_box(&data)))),
                1 => drop(black_box(chunk(1, g, &pt, black_box(&data), p.min, p.avg, p.max, ls, ll))),
                2 => drop(black_box(chunk(4, g, &pt, black_box(&data), p.min, p.avg, p.max, ls, ll))),
                _ => drop(black_box(fastcdc::v2020::FastCDC::new(black_box(&data), 2048, 8192, 65536).count())),
            }
            *best = best.min(t0.elapsed().as_secs_f64());
        }
    }
    println!("gear:2k:8k:64k, {} MiB of seeded random bytes, one thread, best of {reps} alternated runs:", n >> 20);
    for (k, name) in names.iter().enumerate() {
        println!("  {name:<32} {:.2} GB/s  {:.2}x fastcdc 5", n as f64 / best[k] / 1e9, best[3] / best[k]);
    }
}
