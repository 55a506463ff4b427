//! AVX2 stage-1 kernel: one segment per lane, `G` registers of lanes interleaved.
//!
//! * crc32: 8 × u32 lanes per register; `vpgatherdd` fetches the entering and leaving bytes
//!   four rolls at a time (one dword per lane) and does the `crcu` / `crct` table lookups
//!   (the SS-CDC paper's design, at half its width).
//! * rabin: 4 × u64 lanes; `vpgatherdq` for the data (eight rolls per gather) and both tables.
//! * gear: 4 × u64 lanes; `vpgatherdq` for the data and the gear table.
//!
//! Each chain warms up over the `W` bytes before its first position (rolling in from 0, no
//! leaving byte), runs in lockstep with the others over the common length, and each lane then
//! finishes its own piece with the scalar loop. Matches are rare: each roll computes one
//! lane mask and only a non-zero mask takes the (slow) path that sets bits.
//!
//! The work is first re-cut (see [`pieces`]) into exactly as many near-equal pieces as there
//! are lanes, so unequal or tiny segments never leave lanes idle; when the total is too small
//! for that, the interleaved scalar kernel runs instead.

// Lockstep loops index several per-register arrays by the same `g`; the kernels take the
// stage-1 arguments plus their own state.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]

use super::{finish, lane_offsets, mark, mark_lanes};
use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use std::arch::x86_64::*;
use std::ops::Range;

/// Registers of lanes advanced together, per family (more registers hide more of the
/// gathers' latency). Measured with `CUTPOINT_ONLY=avx2 cargo run --release --example speed`
/// (CPU-time medians, 16 MiB, Xeon Sapphire Rapids class), GB/s for G = 1 / 2 / 4:
/// crc32 0.84 / 0.73-1.15 / 1.05, rabin 0.45 / 0.64-0.83 / 1.06-1.12, gear 1.7 / 1.3-1.8 /
/// 1.85-1.98: 4 for every family.
const G_CRC: usize = 4;
const G_RABIN: usize = 4;
const G_GEAR: usize = 4;
/// Scalar gear chains beside the vector lanes (as in the AVX-512 kernel); see measurements there.
const S_GEAR: usize = 2;

/// # Safety
/// See [`super::Stage1Fn`]; the CPU must support AVX2.
#[target_feature(enable = "avx2")]
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    if t.magic & !t.mask_loose != 0 {
        return; // no hash can ever match
    }
    let w = t.window;
    let lanes = match t.family {
        Family::Crc32 => 8 * G_CRC,
        Family::Rabin => 4 * G_RABIN,
        Family::Gear => 4 * G_GEAR + S_GEAR,
    };
    let Some(plan) = pieces(segs, lanes, min_piece(w)) else {
        // SAFETY: the interleaved kernel needs no special instructions; same arguments.
        return unsafe { super::interleaved::stage1(t, data, segs, origin, strict, loose) };
    };
    for group in plan.chunks(lanes) {
        if group.len() < lanes || !offsets_fit(group, w) {
            // SAFETY: as above; the pieces lie inside the caller's segments.
            unsafe { super::interleaved::stage1(t, data, group, origin, strict, loose) };
            continue;
        }
        // SAFETY: this function has AVX2 enabled; `group` has `lanes` pieces each with
        // `W <= start`, `start + min_piece(W) <= end <= data.len()`, and offsets that fit i32.
        unsafe {
            match t.family {
                Family::Crc32 => crc::<G_CRC>(t, data, group, origin, strict, loose),
                Family::Rabin => rabin::<G_RABIN>(t, data, group, origin, strict, loose),
                Family::Gear => gear::<G_GEAR, S_GEAR>(t, data, group, origin, strict, loose),
            }
        }
    }
}

/// Shortest piece worth a vector lane: the warm-up (`W` rolls) should be a small share.
pub(super) fn min_piece(w: usize) -> usize {
    (4 * w).max(512)
}

/// Whether every lane's bytes are within `i32` reach of the group's lowest address.
pub(super) fn offsets_fit(group: &[Range<usize>], w: usize) -> bool {
    let lo = group.iter().map(|s| s.start - w).min().unwrap_or(0);
    let hi = group.iter().map(|s| s.end).max().unwrap_or(0);
    hi - lo < (i32::MAX as usize) - 64
}

/// Re-cuts `segs` for `n` lanes: touching segments are joined, then each joined range is cut
/// into near-equal pieces of about `total / n` bytes (never across a gap). Sorted longest
/// first, so that a group of `n` has the least lockstep waste. `None` when the pieces would be
/// shorter than `min_piece`.
pub(super) fn pieces(segs: &[Range<usize>], n: usize, min_piece: usize) -> Option<Vec<Range<usize>>> {
    let mut joined: Vec<Range<usize>> = Vec::new();
    if !segs.is_empty() && segs.windows(2).all(|w| w[0].end == w[1].start) {
        // The usual case (the engine cuts a span into touching segments): one range.
        joined.push(segs[0].start..segs[segs.len() - 1].end);
    } else {
        let mut sorted: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
        sorted.sort_by_key(|s| s.start);
        for s in sorted {
            match joined.last_mut() {
                Some(l) if l.end == s.start => l.end = s.end,
                _ => joined.push(s),
            }
        }
    }
    let total: usize = joined.iter().map(|s| s.len()).sum();
    if total / n < min_piece {
        return None;
    }
    let target = total.div_ceil(n);
    let mut out = Vec::with_capacity(n + joined.len());
    let ranges = joined.len();
    for r in joined {
        let k = r.len().div_ceil(target).max(1);
        // Piece j ends at start + floor(len * (j + 1) / k), stepped without a division per
        // piece (this runs at every stage-1 call, and RapidCDC makes many small ones).
        let (q, rem) = (r.len() / k, r.len() % k);
        let (mut a, mut acc) = (r.start, 0);
        for _ in 0..k {
            acc += rem;
            let b = a + q + usize::from(acc >= k);
            if acc >= k {
                acc -= k;
            }
            if a < b {
                out.push(a..b);
            }
            a = b;
        }
    }
    if ranges > 1 {
        // (The pieces of one range differ in length by one at most.)
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
    }
    Some(out)
}

/// The lanes of `G` registers of 8 u32 each, widened, in a stack array (this runs at every
/// match, so it must not allocate).
#[inline(always)]
unsafe fn store32<const G: usize>(v: &[__m256i; G]) -> [u64; 64] {
    debug_assert!(8 * G <= 64);
    let mut tmp = [0u32; 64];
    for g in 0..G {
        // SAFETY: `tmp` has room for 8 u32 per register (8 * G <= 64).
        unsafe { _mm256_storeu_si256(tmp.as_mut_ptr().add(8 * g) as *mut __m256i, v[g]) };
    }
    let mut out = [0u64; 64];
    for (o, &x) in out.iter_mut().zip(&tmp[..8 * G]) {
        *o = x as u64;
    }
    out
}

/// The lanes of `G` registers of 4 u64 each, in a stack array (see [`store32`]).
#[inline(always)]
unsafe fn store64<const G: usize>(v: &[__m256i; G]) -> [u64; 64] {
    debug_assert!(4 * G <= 64);
    let mut out = [0u64; 64];
    for g in 0..G {
        // SAFETY: `out` has room for 4 u64 per register (4 * G <= 64).
        unsafe { _mm256_storeu_si256(out.as_mut_ptr().add(4 * g) as *mut __m256i, v[g]) };
    }
    out
}

/// crc32 over `8 * G` pieces (`G` registers).
#[target_feature(enable = "avx2")]
unsafe fn crc<const G: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(group, w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    let p = unsafe { data.as_ptr().add(base) } as *const i32;
    let crct = t.crct.as_ptr() as *const i32;
    let crcu = t.crcu.as_ptr() as *const i32;
    let ff = _mm256_set1_epi32(0xff);
    let ml = _mm256_set1_epi32(t.mask_loose as u32 as i32);
    let mg = _mm256_set1_epi32(t.magic as u32 as i32);
    let mut off = [_mm256_setzero_si256(); G];
    let mut h = [_mm256_setzero_si256(); G];
    for g in 0..G {
        // SAFETY: `offs` has 8 * G entries.
        off[g] = unsafe { _mm256_loadu_si256(offs.as_ptr().add(8 * g) as *const __m256i) };
    }
    // Warm-up: W rolls from 0, no leaving byte. Reads the dword at src + r, r < W, which ends
    // before start + 3 < end (pieces are at least min_piece long).
    for r in 0..w {
        let rr = _mm256_set1_epi32(r as i32);
        for g in 0..G {
            // SAFETY: every lane's address is data[src_k + r .. src_k + r + 4], in bounds.
            let c = unsafe { _mm256_i32gather_epi32::<1>(p, _mm256_add_epi32(off[g], rr)) };
            let idx = _mm256_and_si256(_mm256_xor_si256(h[g], c), ff);
            // SAFETY: idx < 256 indexes the 256-entry table.
            let tv = unsafe { _mm256_i32gather_epi32::<4>(crct, idx) };
            h[g] = _mm256_xor_si256(_mm256_srli_epi32::<8>(h[g]), tv);
        }
    }
    // Lockstep: rolls r = W .. W + n4, four at a time; before roll r, position src + r is
    // checked. The last dword read ends at src + W + n4 <= start + common - 1 < end.
    let n4 = (common - 1) / 4 * 4;
    let mut r = w;
    while r < w + n4 {
        let rr = _mm256_set1_epi32(r as i32);
        let rl = _mm256_set1_epi32((r - w) as i32);
        let mut ent = [_mm256_setzero_si256(); G];
        let mut lv = [_mm256_setzero_si256(); G];
        for g in 0..G {
            // SAFETY: dwords at src + r and src + r - W (>= src - W + W >= 0), in bounds.
            unsafe {
                ent[g] = _mm256_i32gather_epi32::<1>(p, _mm256_add_epi32(off[g], rr));
                lv[g] = _mm256_i32gather_epi32::<1>(p, _mm256_add_epi32(off[g], rl));
            }
        }
        for j in 0..4 {
            let mut any = 0u64;
            for g in 0..G {
                let eq = _mm256_cmpeq_epi32(_mm256_and_si256(h[g], ml), mg);
                any |= (_mm256_movemask_ps(_mm256_castsi256_ps(eq)) as u32 as u64) << (8 * g);
            }
            if any != 0 {
                let hs = unsafe { store32(&h) };
                mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
            }
            for g in 0..G {
                let l = _mm256_and_si256(lv[g], ff);
                let c = _mm256_and_si256(ent[g], ff);
                lv[g] = _mm256_srli_epi32::<8>(lv[g]);
                ent[g] = _mm256_srli_epi32::<8>(ent[g]);
                // SAFETY: l, idx < 256.
                let u = unsafe { _mm256_i32gather_epi32::<4>(crcu, l) };
                let hh = _mm256_xor_si256(h[g], u);
                let idx = _mm256_and_si256(_mm256_xor_si256(hh, c), ff);
                let tv = unsafe { _mm256_i32gather_epi32::<4>(crct, idx) };
                h[g] = _mm256_xor_si256(_mm256_srli_epi32::<8>(hh), tv);
            }
        }
        r += 4;
    }
    let hs = unsafe { store32(&h) };
    finish(t, data, group, n4, &hs, origin, strict, loose, |h, o, i| {
        crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
    });
}

/// rabin over `4 * G` pieces (u64 lanes).
#[target_feature(enable = "avx2")]
unsafe fn rabin<const G: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(group, w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    let p = unsafe { data.as_ptr().add(base) } as *const i64;
    let tt = t.rabin_t.as_ptr() as *const i64;
    let tu = t.rabin_u.as_ptr() as *const i64;
    let ff = _mm256_set1_epi64x(0xff);
    let ml = _mm256_set1_epi64x(t.mask_loose as i64);
    let mg = _mm256_set1_epi64x(t.magic as i64);
    let mut off = [_mm_setzero_si128(); G];
    let mut h = [_mm256_setzero_si256(); G];
    for g in 0..G {
        // SAFETY: `offs` has 4 * G entries.
        off[g] = unsafe { _mm_loadu_si128(offs.as_ptr().add(4 * g) as *const __m128i) };
    }
    // Warm-up, one byte per roll (the qword at src + r ends before start + 7 < end).
    for r in 0..w {
        let rr = _mm_set1_epi32(r as i32);
        for g in 0..G {
            // SAFETY: in bounds as above.
            let c = _mm256_and_si256(unsafe { _mm256_i32gather_epi64::<1>(p, _mm_add_epi32(off[g], rr)) }, ff);
            let idx = _mm256_srli_epi64::<45>(h[g]);
            // SAFETY: h < 2^53, so idx < 256.
            let tv = unsafe { _mm256_i64gather_epi64::<8>(tt, idx) };
            h[g] = _mm256_xor_si256(_mm256_or_si256(_mm256_slli_epi64::<8>(h[g]), c), tv);
        }
    }
    let n8 = (common - 1) / 8 * 8;
    let mut r = w;
    while r < w + n8 {
        let rr = _mm_set1_epi32(r as i32);
        let rl = _mm_set1_epi32((r - w) as i32);
        let mut ent = [_mm256_setzero_si256(); G];
        let mut lv = [_mm256_setzero_si256(); G];
        for g in 0..G {
            // SAFETY: qwords at src + r and src + r - W, ending before start + common - 1.
            unsafe {
                ent[g] = _mm256_i32gather_epi64::<1>(p, _mm_add_epi32(off[g], rr));
                lv[g] = _mm256_i32gather_epi64::<1>(p, _mm_add_epi32(off[g], rl));
            }
        }
        for j in 0..8 {
            let mut any = 0u64;
            for g in 0..G {
                let eq = _mm256_cmpeq_epi64(_mm256_and_si256(h[g], ml), mg);
                any |= (_mm256_movemask_pd(_mm256_castsi256_pd(eq)) as u32 as u64) << (4 * g);
            }
            if any != 0 {
                let hs = unsafe { store64(&h) };
                mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
            }
            for g in 0..G {
                let l = _mm256_and_si256(lv[g], ff);
                let c = _mm256_and_si256(ent[g], ff);
                lv[g] = _mm256_srli_epi64::<8>(lv[g]);
                ent[g] = _mm256_srli_epi64::<8>(ent[g]);
                // SAFETY: l < 256; hh < 2^53 so hh >> 45 < 256.
                let u = unsafe { _mm256_i64gather_epi64::<8>(tu, l) };
                let hh = _mm256_xor_si256(h[g], u);
                let tv = unsafe { _mm256_i64gather_epi64::<8>(tt, _mm256_srli_epi64::<45>(hh)) };
                h[g] = _mm256_xor_si256(_mm256_or_si256(_mm256_slli_epi64::<8>(hh), c), tv);
            }
        }
        r += 8;
    }
    let hs = unsafe { store64(&h) };
    finish(t, data, group, n8, &hs, origin, strict, loose, |h, o, i| {
        rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
    });
}

/// gear over `4 * G + S` pieces: `G` registers of u64 lanes plus `S` scalar chains (W = 64,
/// no leaving byte).
#[target_feature(enable = "avx2")]
unsafe fn gear<const G: usize, const S: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(&group[..4 * G], w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    // Scalar chains: pieces 4G .. 4G + S.
    let mut sh = [0u64; S];
    let mut ssrc = [0usize; S];
    for k in 0..S {
        ssrc[k] = srcs[4 * G + k];
    }
    let (ml64, magic) = (t.mask_loose, t.magic);
    let p = unsafe { data.as_ptr().add(base) } as *const i64;
    let gt = t.gear.as_ptr() as *const i64;
    let ff = _mm256_set1_epi64x(0xff);
    let ml = _mm256_set1_epi64x(t.mask_loose as i64);
    let mg = _mm256_set1_epi64x(t.magic as i64);
    let mut off = [_mm_setzero_si128(); G];
    let mut h = [_mm256_setzero_si256(); G];
    for g in 0..G {
        // SAFETY: `offs` has 4 * G entries.
        off[g] = unsafe { _mm_loadu_si128(offs.as_ptr().add(4 * g) as *const __m128i) };
    }
    // Rolls r = 0 .. W + n8, eight per data gather; positions are checked from r = W on
    // (W = 64 is a multiple of 8). The last qword read ends at src + W + n8 < end.
    let n8 = (common - 1) / 8 * 8;
    let mut r = 0;
    while r < w + n8 {
        let rr = _mm_set1_epi32(r as i32);
        let mut ent = [_mm256_setzero_si256(); G];
        for g in 0..G {
            // SAFETY: in bounds as above.
            ent[g] = unsafe { _mm256_i32gather_epi64::<1>(p, _mm_add_epi32(off[g], rr)) };
        }
        let mut sq = [0u64; S];
        for k in 0..S {
            // Bounds: the same qword as the vector lanes read, for this chain's piece.
            sq[k] = u64::from_le_bytes(data[ssrc[k] + r..ssrc[k] + r + 8].try_into().unwrap());
        }
        let check = r >= w;
        for j in 0..8 {
            for k in 0..S {
                if check && sh[k] & ml64 == magic {
                    mark(t, sh[k], ssrc[k] + r + j - origin, strict, loose);
                }
                sh[k] = (sh[k] << 1).wrapping_add(t.gear[(sq[k] & 0xff) as usize]);
                sq[k] >>= 8;
            }
            if check {
                let mut any = 0u64;
                for g in 0..G {
                    let eq = _mm256_cmpeq_epi64(_mm256_and_si256(h[g], ml), mg);
                    any |= (_mm256_movemask_pd(_mm256_castsi256_pd(eq)) as u32 as u64) << (4 * g);
                }
                if any != 0 {
                    let hs = unsafe { store64(&h) };
                    mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
                }
            }
            for g in 0..G {
                let c = _mm256_and_si256(ent[g], ff);
                ent[g] = _mm256_srli_epi64::<8>(ent[g]);
                // SAFETY: c < 256.
                let gv = unsafe { _mm256_i64gather_epi64::<8>(gt, c) };
                h[g] = _mm256_add_epi64(_mm256_add_epi64(h[g], h[g]), gv);
            }
        }
        r += 8;
    }
    let mut hs = unsafe { store64(&h) };
    hs[4 * G..4 * G + S].copy_from_slice(&sh);
    finish(t, data, group, n8, &hs, origin, strict, loose, |h, _o, i| (h << 1).wrapping_add(t.gear[i as usize]));
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::profile::Profile;

    pub(crate) fn bytes(n: usize, seed: u64) -> Vec<u8> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
                (s >> 33) as u8
            })
            .collect()
    }

    /// Profiles with many matches (small AVG) so the bit-setting paths run often.
    pub(crate) const PROFILES: &[&str] = &[
        "crc32:256:512:64k",               // W = 256 (paper's window), 9-bit mask
        "crc32:64:64:64k:window=31",       // W = 31, 6-bit mask
        "crc32:64:256:64k:window=48",      // W = 48
        "crc32:64:128:64k:window=64,magic=5",
        "crc32:300:1k:64k:window=257",     // W = 257
        "crc32:2k:16k:64k",                // the paper's profile (two mask bytes)
        "crc32:64k:1m:4m:window=64,magic=77", // three mask bytes
        "rabin:48:64:64k",                 // W = 48
        "rabin:64:128:64k:window=31",
        "rabin:300:512:64k:window=257",
        "rabin:64:64:64k:window=64,magic=9",
        "gear:64:64:64k:nc=0",
        "gear:64:256:64k:nc=1",
        "gear:64:256:64k:nc=2",
        "gear:64:512:64k:nc=3",
    ];

    /// Runs `kernel` and the scalar kernel on random data with odd segment layouts and checks
    /// the bitmaps are equal.
    pub(crate) fn compare(name: &str, kernel: super::super::Stage1Fn) {
        let data = bytes(300_000, 0xC0FFEE);
        let mut seed = 12345u64;
        let mut rnd = |m: usize| {
            seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            ((seed >> 33) as usize) % m
        };
        for prof in PROFILES {
            let p: Profile = prof.parse().unwrap();
            let t = Tables::new(&p);
            let w = p.window;
            let two = p.two_classes();
            // Layouts: one big segment at an odd start, many unequal segments, gaps, tiny ones.
            let mut layouts: Vec<Vec<Range<usize>>> = vec![
                vec![w + 3..data.len() - 5],
                vec![w..data.len()],
                vec![w + 1..w + 2, w + 7..w + 300, 5000..5001],
                // Small totals: lanes of a few hundred bytes (RapidCDC's fallback blocks).
                vec![w + 5..w + 5 + 16_400],
                // 64 lanes of about 128 bytes, the shortest affine pieces, and a gap after them.
                vec![w + 3..w + 3 + 8_250, w + 9_000..w + 9_100],
                vec![w..w + 20_000, w + 20_000..w + 41_111],
                vec![w + 9..w + 70_000],
            ];
            for _ in 0..4 {
                let mut segs = Vec::new();
                let mut a = w + rnd(1000);
                while a < data.len() {
                    let len = 1 + rnd(40_000);
                    let b = (a + len).min(data.len());
                    segs.push(a..b);
                    a = b + if rnd(3) == 0 { rnd(5000) } else { 0 };
                }
                layouts.push(segs);
            }
            for segs in layouts {
                let origin = segs.iter().map(|s| s.start).min().unwrap() - rnd(64).min(segs[0].start - w);
                let words = (data.len() - origin).div_ceil(64) + 1;
                let mut want = (vec![0u64; words], vec![0u64; if two { words } else { 0 }]);
                let mut got = want.clone();
                // SAFETY: segments within [W, len]; bitmaps cover every position; the caller
                // checked the ISA.
                unsafe {
                    super::super::scalar::stage1(&t, &data, &segs, origin, &mut want.0, &mut want.1);
                    kernel(&t, &data, &segs, origin, &mut got.0, &mut got.1);
                }
                assert!(want.0.iter().any(|&x| x != 0) || segs.iter().map(|s| s.len()).sum::<usize>() < 1000 || p.avg > 4096);
                assert!(want == got, "{name} {prof} segs {:?}..", &segs[..segs.len().min(4)]);
            }
        }
    }

    #[test]
    fn avx2_equals_scalar() {
        if !std::is_x86_feature_detected!("avx2") {
            eprintln!("skipped: CPU lacks AVX2");
            return;
        }
        compare("avx2", stage1);
    }

    #[test]
    fn pieces_cover_segments_exactly() {
        let segs = vec![10..20, 20..1000, 1500..1600, 1600..100_000];
        let p = pieces(&segs, 16, 100).unwrap();
        let mut all: Vec<usize> = p.iter().flat_map(|r| r.clone()).collect();
        all.sort();
        let want: Vec<usize> = segs.iter().flat_map(|r| r.clone()).collect();
        assert_eq!(all, want);
        assert!(pieces(&segs, 16, 100_000).is_none());
    }

    #[test]
    fn pieces_end_at_even_fractions() {
        for (len, n) in [(8192, 64), (8191, 64), (100_003, 7), (640, 64), (129, 2)] {
            let mut p = pieces(&[5..5 + len / 3, 5 + len / 3..5 + len], n, 1).unwrap();
            p.sort_by_key(|r| r.start);
            let k = p.len();
            assert_eq!(k, n.min(len));
            for (j, r) in p.iter().enumerate() {
                assert_eq!(r.end, 5 + len * (j + 1) / k, "len {len}, {n} lanes, piece {j}");
            }
        }
    }
}
