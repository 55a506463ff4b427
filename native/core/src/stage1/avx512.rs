//! AVX-512 stage-1 kernel.
//!
//! Two designs, both measured (`cargo bench --bench chunking -- stage1/avx512`):
//!
//! * **Gathers** — the SS-CDC paper's design: one segment per lane, 16 × u32 lanes per register
//!   for crc32 (`_mm512_i32gather_epi32` into `crct` and `crcu`, the data fetched four rolls
//!   at a time as one dword per lane), 8 × u64 lanes for rabin and gear
//!   (`_mm512_i64gather_epi64` into the tables, one qword of data per lane per eight rolls).
//!   `G` registers advance together to hide the gathers' latency; for gear two scalar chains
//!   run beside them (the gathers leave the scalar ports idle).
//! * **Byte-sliced GF(2) affine** (crc32, needs GFNI and VBMI): CRC-32 is linear over GF(2),
//!   so each byte of `crct[x]` — and of the leaving byte's contribution — is an 8×8 bit matrix
//!   times `x`: one `vgf2p8affineqb`. The state of 64 segments is held as four byte planes
//!   (plane `p` = byte `p` of every lane's CRC), so one roll of 64 chains is 8 affine products
//!   and 4 XORs, with no memory lookups at all. The data is transposed 64 × 64 bytes at a time
//!   (qword transposes plus one `vpermb`) into a ring that also supplies the leaving bytes.
//!
//! Why gathers lose: a 16-lane `vpgatherdd` is 16 loads; each crc32 roll needs two of them,
//! and the `crct` one sits on the dependency chain with ~20+ cycles latency, whereas the
//! interleaved scalar kernel's chains issue plain loads. The affine form removes the table
//! loads entirely. Measured numbers are in `backend.rs` next to the preference table.
//!
//! Segments are re-cut into as many near-equal pieces as there are lanes (see
//! [`super::avx2::pieces`]); each lane warms up over the `W` bytes before its piece, the lanes
//! run in lockstep over the common length, and each finishes its remainder with the scalar
//! loop. Small inputs go to the interleaved kernel.

// Lockstep loops index several per-register arrays by the same `g`; the kernels take the
// stage-1 arguments plus their own state.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]

use super::avx2::{min_piece, offsets_fit, pieces};
use super::{finish, lane_offsets, mark, mark_lanes};
use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use std::arch::x86_64::*;
use std::ops::Range;
use std::sync::OnceLock;

/// Registers of lanes advanced together in the gather kernels, per family. Measured with
/// `CUTPOINT_ONLY=gather cargo run --release --example speed` (CPU-time medians, 16 MiB),
/// GB/s for G = 1 / 2 / 4: crc32 1.20 / 0.76-1.12 / 1.11, rabin 0.89 / 1.24-1.29 / 1.57-1.59
/// (two dependent gathers per roll: latency-bound, so more chains help), gear 2.3-2.4 /
/// 2.2-2.5 / 2.46-2.55 (throughput-bound on the gathers).
const G_CRC: usize = 1;
const G_RABIN: usize = 4;
const G_GEAR: usize = 2;
/// Scalar gear chains run beside the vector lanes in the same loop: the gathers leave the
/// scalar ports and some load bandwidth idle. Measured (`CUTPOINT_ONLY=avx512-gather/gear`,
/// CPU-time medians, GB/s) for S = 0 / 1 / 2 / 3 / 4: 2.23-2.42 / 2.61 / 2.64-2.73 / 2.55 / 2.1.
const S_GEAR: usize = 2;

/// Whether the byte-sliced crc32 kernel can run (GFNI + AVX512-VBMI on top of F/BW).
pub fn has_affine() -> bool {
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| {
        std::is_x86_feature_detected!("avx512f")
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vbmi")
            && std::is_x86_feature_detected!("gfni")
    })
}

/// The kernel: byte-sliced affine crc32 where the CPU has GFNI+VBMI, gathers otherwise.
///
/// # Safety
/// See [`super::Stage1Fn`]; the CPU must support AVX512F and AVX512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    if t.family != Family::Gear && has_affine() {
        // SAFETY: has_affine() verified avx512f+avx512bw+avx512vbmi+gfni.
        unsafe { stage1_affine(t, data, segs, origin, strict, loose) }
    } else {
        // SAFETY: the caller verified avx512f+avx512bw.
        unsafe { stage1_gather(t, data, segs, origin, strict, loose) }
    }
}

/// The gather design for every family (the paper's kernel).
///
/// # Safety
/// See [`super::Stage1Fn`]; the CPU must support AVX512F and AVX512BW.
#[target_feature(enable = "avx512f,avx512bw")]
pub unsafe fn stage1_gather(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    if t.magic & !t.mask_loose != 0 {
        return; // no hash can ever match
    }
    let w = t.window;
    let lanes = match t.family {
        Family::Crc32 => 16 * G_CRC,
        Family::Rabin => 8 * G_RABIN,
        Family::Gear => 8 * G_GEAR + S_GEAR,
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
        // SAFETY: avx512f+avx512bw enabled here; `group` has `lanes` pieces each with
        // `W <= start`, `start + min_piece(W) <= end <= data.len()`, offsets fitting i32.
        unsafe {
            match t.family {
                Family::Crc32 => crc_gather::<G_CRC>(t, data, group, origin, strict, loose),
                Family::Rabin => rabin_gather::<G_RABIN>(t, data, group, origin, strict, loose),
                Family::Gear => gear_gather::<G_GEAR, S_GEAR>(t, data, group, origin, strict, loose),
            }
        }
    }
}

/// The lanes of `G` registers of 16 u32 each, widened, in a stack array (this runs at every
/// match, so it must not allocate: a `Vec` here cost about 2% of the gear kernel).
#[inline(always)]
unsafe fn store32<const G: usize>(v: &[__m512i; G]) -> [u64; 64] {
    debug_assert!(16 * G <= 64);
    let mut tmp = [0u32; 64];
    for g in 0..G {
        // SAFETY: `tmp` has room for 16 u32 per register (16 * G <= 64).
        unsafe { _mm512_storeu_si512(tmp.as_mut_ptr().add(16 * g) as *mut _, v[g]) };
    }
    let mut out = [0u64; 64];
    for (o, &x) in out.iter_mut().zip(&tmp[..16 * G]) {
        *o = x as u64;
    }
    out
}

/// The lanes of `G` registers of 8 u64 each, in a stack array (see [`store32`]).
#[inline(always)]
unsafe fn store64<const G: usize>(v: &[__m512i; G]) -> [u64; 64] {
    debug_assert!(8 * G <= 64);
    let mut out = [0u64; 64];
    for g in 0..G {
        // SAFETY: `out` has room for 8 u64 per register (8 * G <= 64).
        unsafe { _mm512_storeu_si512(out.as_mut_ptr().add(8 * g) as *mut _, v[g]) };
    }
    out
}

/// crc32 over `16 * G` pieces with gathers.
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn crc_gather<const G: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(group, w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    let p = unsafe { data.as_ptr().add(base) };
    let crct = t.crct.as_ptr() as *const u8;
    let crcu = t.crcu.as_ptr() as *const u8;
    let ff = _mm512_set1_epi32(0xff);
    let ml = _mm512_set1_epi32(t.mask_loose as u32 as i32);
    let mg = _mm512_set1_epi32(t.magic as u32 as i32);
    let mut off = [_mm512_setzero_si512(); G];
    let mut h = [_mm512_setzero_si512(); G];
    for g in 0..G {
        // SAFETY: `offs` has 16 * G entries.
        off[g] = unsafe { _mm512_loadu_si512(offs.as_ptr().add(16 * g) as *const _) };
    }
    // Warm-up: W rolls from 0 with no leaving byte; dword reads end before start + 3 < end.
    for r in 0..w {
        let rr = _mm512_set1_epi32(r as i32);
        for g in 0..G {
            // SAFETY: data[src_k + r .. src_k + r + 4] is in bounds for every lane.
            let c = unsafe { _mm512_i32gather_epi32::<1>(_mm512_add_epi32(off[g], rr), p as *const _) };
            let idx = _mm512_and_si512(_mm512_xor_si512(h[g], c), ff);
            // SAFETY: idx < 256.
            let tv = unsafe { _mm512_i32gather_epi32::<4>(idx, crct as *const _) };
            h[g] = _mm512_xor_si512(_mm512_srli_epi32::<8>(h[g]), tv);
        }
    }
    // Lockstep rolls r = W .. W + n4, four per data gather; check src + r before roll r.
    let n4 = (common - 1) / 4 * 4;
    let mut r = w;
    while r < w + n4 {
        let rr = _mm512_set1_epi32(r as i32);
        let rl = _mm512_set1_epi32((r - w) as i32);
        let mut ent = [_mm512_setzero_si512(); G];
        let mut lv = [_mm512_setzero_si512(); G];
        for g in 0..G {
            // SAFETY: dwords at src + r (ends <= start + common - 1 < end) and src + r - W.
            unsafe {
                ent[g] = _mm512_i32gather_epi32::<1>(_mm512_add_epi32(off[g], rr), p as *const _);
                lv[g] = _mm512_i32gather_epi32::<1>(_mm512_add_epi32(off[g], rl), p as *const _);
            }
        }
        for j in 0..4 {
            let mut any = 0u64;
            for g in 0..G {
                let m = _mm512_cmpeq_epi32_mask(_mm512_and_si512(h[g], ml), mg);
                any |= (m as u64) << (16 * g);
            }
            if any != 0 {
                let hs = unsafe { store32(&h) };
                mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
            }
            for g in 0..G {
                let l = _mm512_and_si512(lv[g], ff);
                let c = _mm512_and_si512(ent[g], ff);
                lv[g] = _mm512_srli_epi32::<8>(lv[g]);
                ent[g] = _mm512_srli_epi32::<8>(ent[g]);
                // SAFETY: l, idx < 256.
                let u = unsafe { _mm512_i32gather_epi32::<4>(l, crcu as *const _) };
                let hh = _mm512_xor_si512(h[g], u);
                let idx = _mm512_and_si512(_mm512_xor_si512(hh, c), ff);
                let tv = unsafe { _mm512_i32gather_epi32::<4>(idx, crct as *const _) };
                h[g] = _mm512_xor_si512(_mm512_srli_epi32::<8>(hh), tv);
            }
        }
        r += 4;
    }
    let hs = unsafe { store32(&h) };
    finish(t, data, group, n4, &hs, origin, strict, loose, |h, o, i| {
        crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
    });
}

/// rabin over `8 * G` pieces with gathers (u64 lanes).
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn rabin_gather<const G: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(group, w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    let p = unsafe { data.as_ptr().add(base) };
    let tt = t.rabin_t.as_ptr() as *const u8;
    let tu = t.rabin_u.as_ptr() as *const u8;
    let ff = _mm512_set1_epi64(0xff);
    let ml = _mm512_set1_epi64(t.mask_loose as i64);
    let mg = _mm512_set1_epi64(t.magic as i64);
    let mut off = [_mm256_setzero_si256(); G];
    let mut h = [_mm512_setzero_si512(); G];
    for g in 0..G {
        // SAFETY: `offs` has 8 * G entries.
        off[g] = unsafe { _mm256_loadu_si256(offs.as_ptr().add(8 * g) as *const __m256i) };
    }
    for r in 0..w {
        let rr = _mm256_set1_epi32(r as i32);
        for g in 0..G {
            // SAFETY: the qword at src + r ends before start + 7 < end.
            let c = _mm512_and_si512(unsafe { _mm512_i32gather_epi64::<1>(_mm256_add_epi32(off[g], rr), p as *const _) }, ff);
            // SAFETY: h < 2^53, so h >> 45 < 256.
            let tv = unsafe { _mm512_i64gather_epi64::<8>(_mm512_srli_epi64::<45>(h[g]), tt as *const _) };
            h[g] = _mm512_xor_si512(_mm512_or_si512(_mm512_slli_epi64::<8>(h[g]), c), tv);
        }
    }
    let n8 = (common - 1) / 8 * 8;
    let mut r = w;
    while r < w + n8 {
        let rr = _mm256_set1_epi32(r as i32);
        let rl = _mm256_set1_epi32((r - w) as i32);
        let mut ent = [_mm512_setzero_si512(); G];
        let mut lv = [_mm512_setzero_si512(); G];
        for g in 0..G {
            // SAFETY: qwords at src + r and src + r - W, ending before start + common - 1.
            unsafe {
                ent[g] = _mm512_i32gather_epi64::<1>(_mm256_add_epi32(off[g], rr), p as *const _);
                lv[g] = _mm512_i32gather_epi64::<1>(_mm256_add_epi32(off[g], rl), p as *const _);
            }
        }
        for j in 0..8 {
            let mut any = 0u64;
            for g in 0..G {
                let m = _mm512_cmpeq_epi64_mask(_mm512_and_si512(h[g], ml), mg);
                any |= (m as u64) << (8 * g);
            }
            if any != 0 {
                let hs = unsafe { store64(&h) };
                mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
            }
            for g in 0..G {
                let l = _mm512_and_si512(lv[g], ff);
                let c = _mm512_and_si512(ent[g], ff);
                lv[g] = _mm512_srli_epi64::<8>(lv[g]);
                ent[g] = _mm512_srli_epi64::<8>(ent[g]);
                // SAFETY: l < 256; hh < 2^53.
                let u = unsafe { _mm512_i64gather_epi64::<8>(l, tu as *const _) };
                let hh = _mm512_xor_si512(h[g], u);
                let tv = unsafe { _mm512_i64gather_epi64::<8>(_mm512_srli_epi64::<45>(hh), tt as *const _) };
                h[g] = _mm512_xor_si512(_mm512_or_si512(_mm512_slli_epi64::<8>(hh), c), tv);
            }
        }
        r += 8;
    }
    let hs = unsafe { store64(&h) };
    finish(t, data, group, n8, &hs, origin, strict, loose, |h, o, i| {
        rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
    });
}

/// gear over `8 * G + S` pieces: `G` registers of u64 lanes with gathers plus `S` scalar
/// chains in the same loop (W = 64, no leaving byte).
#[target_feature(enable = "avx512f,avx512bw")]
unsafe fn gear_gather<const G: usize, const S: usize>(t: &Tables, data: &[u8], group: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let (base, offs) = lane_offsets(&group[..8 * G], w);
    let srcs: Vec<usize> = group.iter().map(|s| s.start - w).collect();
    // Scalar chains: pieces 8G .. 8G + S.
    let mut sh = [0u64; S];
    let mut ssrc = [0usize; S];
    for k in 0..S {
        ssrc[k] = srcs[8 * G + k];
    }
    let ml64 = t.mask_loose;
    let magic = t.magic;
    let p = unsafe { data.as_ptr().add(base) };
    let gt = t.gear.as_ptr() as *const u8;
    let ff = _mm512_set1_epi64(0xff);
    let ml = _mm512_set1_epi64(t.mask_loose as i64);
    let mg = _mm512_set1_epi64(t.magic as i64);
    let zero_magic = t.magic == 0;
    let mut off = [_mm256_setzero_si256(); G];
    let mut h = [_mm512_setzero_si512(); G];
    for g in 0..G {
        // SAFETY: `offs` has 8 * G entries.
        off[g] = unsafe { _mm256_loadu_si256(offs.as_ptr().add(8 * g) as *const __m256i) };
    }
    let n8 = (common - 1) / 8 * 8;
    let mut r = 0;
    while r < w + n8 {
        let rr = _mm256_set1_epi32(r as i32);
        let mut ent = [_mm512_setzero_si512(); G];
        for g in 0..G {
            // SAFETY: the qword at src + r ends at or before start + n8 < end.
            ent[g] = unsafe { _mm512_i32gather_epi64::<1>(_mm256_add_epi32(off[g], rr), p as *const _) };
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
                    // gear's magic is 0 (validated): one `vptestnmq` per register.
                    let m = if zero_magic {
                        _mm512_testn_epi64_mask(h[g], ml)
                    } else {
                        _mm512_cmpeq_epi64_mask(_mm512_and_si512(h[g], ml), mg)
                    };
                    any |= (m as u64) << (8 * g);
                }
                if any != 0 {
                    let hs = unsafe { store64(&h) };
                    mark_lanes(t, any, &hs, &srcs, r + j, origin, strict, loose);
                }
            }
            for g in 0..G {
                let c = _mm512_and_si512(ent[g], ff);
                ent[g] = _mm512_srli_epi64::<8>(ent[g]);
                // SAFETY: c < 256.
                let gv = unsafe { _mm512_i64gather_epi64::<8>(c, gt as *const _) };
                h[g] = _mm512_add_epi64(_mm512_add_epi64(h[g], h[g]), gv);
            }
        }
        r += 8;
    }
    let mut hs = unsafe { store64(&h) };
    hs[8 * G..8 * G + S].copy_from_slice(&sh);
    finish(t, data, group, n8, &hs, origin, strict, loose, |h, _o, i| (h << 1).wrapping_add(t.gear[i as usize]));
}

// ---------------------------------------------------------------------------------------------
// Byte-sliced affine crc32 (64 lanes).

/// Largest window the ring of transposed data serves (ring = next_pow2(W + 64), for crc32 W + 128,
/// slots of 64 bytes).
pub const MAX_RING_WINDOW: usize = 4096;
const LANES: usize = 64;
/// How far ahead of the block being transposed each lane's bytes are prefetched.
const PREFETCH: usize = 256;

/// The 8×8 GF(2) matrix (as `vgf2p8affineqb` wants it) of a linear map on bytes.
/// `f` is evaluated at the 8 unit bytes only (it is a table lookup or more, and the matrices are
/// built at every stage-1 call, which RapidCDC's fallback makes many small ones of).
fn affine_matrix(f: impl Fn(u8) -> u8) -> u64 {
    let cols: [u8; 8] = std::array::from_fn(|b| f(1 << b));
    let mut m = 0u64;
    for j in 0..8 {
        let mut row = 0u8;
        for (b, c) in cols.iter().enumerate() {
            row |= ((c >> j) & 1) << b;
        }
        m |= (row as u64) << (8 * (7 - j));
    }
    m
}

/// Byte-sliced crc32 and rabin (falls back to gathers for gear, huge windows, or match masks
/// wider than 32 bits).
///
/// # Safety
/// See [`super::Stage1Fn`]; the CPU must support AVX512F, AVX512BW, AVX512VBMI and GFNI.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
pub unsafe fn stage1_affine(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let np = ((64 - t.mask_loose.leading_zeros()) as usize).div_ceil(8).max(1);
    if t.family == Family::Gear || t.window > MAX_RING_WINDOW || np > 4 {
        // SAFETY: avx512f+avx512bw are enabled here.
        return unsafe { stage1_gather(t, data, segs, origin, strict, loose) };
    }
    super::check_args(t, data, segs, origin, strict, loose);
    if t.magic & !t.mask_loose != 0 {
        return;
    }
    let w = t.window;
    let Some(plan) = pieces(segs, LANES, min_affine_piece(w)) else {
        // SAFETY: the interleaved kernel needs no special instructions; same arguments.
        return unsafe { super::interleaved::stage1(t, data, segs, origin, strict, loose) };
    };
    let crc = t.family == Family::Crc32;
    // Rows live at once: the window's and a block's; crc32 also writes the next block's.
    let mut ring = Ring::new(w + if crc { 128 } else { 64 });
    for group in plan.chunks(LANES) {
        if group.len() < LANES {
            // SAFETY: as above; the pieces lie inside the caller's segments.
            unsafe { super::interleaved::stage1(t, data, group, origin, strict, loose) };
            continue;
        }
        // SAFETY: the features are enabled here; `group` has 64 pieces each with
        // `W <= start` and `start + min_affine_piece(W) <= end <= data.len()`.
        unsafe {
            match (crc, np) {
                (true, 1) => crc_affine::<1>(t, data, group, origin, strict, loose, &mut ring),
                (true, 2) => crc_affine::<2>(t, data, group, origin, strict, loose, &mut ring),
                (true, 3) => crc_affine::<3>(t, data, group, origin, strict, loose, &mut ring),
                (true, _) => crc_affine::<4>(t, data, group, origin, strict, loose, &mut ring),
                (false, 1) => rabin_affine::<1>(t, data, group, origin, strict, loose, &mut ring),
                (false, 2) => rabin_affine::<2>(t, data, group, origin, strict, loose, &mut ring),
                (false, 3) => rabin_affine::<3>(t, data, group, origin, strict, loose, &mut ring),
                (false, _) => rabin_affine::<4>(t, data, group, origin, strict, loose, &mut ring),
            }
        }
    }
}

/// Shortest piece per lane for the affine kernel. At least 128 bytes, so that the lockstep
/// loop has a block of checks after the warm-up (`(W + 128 - 1) / 64 * 64 >= W + 64`), and 2W,
/// so that the warm-up stays at most a third of the rolls. Below this the interleaved kernel
/// runs, which is several times slower per position: measured (`Engine::resume` +
/// `scan_resumed`, one thread, CPU time) for rabin W = 48, 8 KiB blocks 2.2 -> 0.70 ns/position
/// with 128 instead of the former max(4W, 256); crc32 W = 256, 32 KiB blocks 2.7 -> 0.40.
fn min_affine_piece(w: usize) -> usize {
    (2 * w).max(128)
}

/// Rolls of the lockstep loop of an affine group whose shortest piece has `common` positions.
///
/// Lane `k` checks position `start_k + r - W` before roll `r` and reads `data[start_k - W + r]`
/// at roll `r`; blocks of 64 rolls transpose `data[start_k - W + r0 .. start_k - W + r0 + 64)`.
/// Checking every position of the shortest piece needs `W + common` rolls: the loop runs
/// exactly that many, its last block only the rolls it needs (it still transposes 64 bytes per
/// lane; the rolls past a lane's end are not run, so no hit past it is found). Where the last
/// block's 64 bytes would run past `data` (a piece at the end of the input), the loop stops at
/// the last whole block within the shortest piece instead and the scalar loop finishes each
/// lane (`finish`). Until 2026-11-22 the last block ran all 64 rolls and dropped the hits past
/// the pieces' ends: RapidCDC's 8 KiB fallback blocks (64 pieces of 128 positions, W = 48) took
/// 192 rolls for 176.
fn lockstep_rolls(group: &[Range<usize>], w: usize, common: usize, len: usize) -> usize {
    let exact = w + common;
    let whole = exact.div_ceil(64) * 64;
    if group.iter().any(|s| s.start - w + whole > len) {
        return (exact - 1) / 64 * 64;
    }
    exact
}

/// Transposed data: slot `r & mask` holds the bytes entering at roll `r` of all 64 lanes.
struct Ring {
    slots: Vec<__m512i>,
    mask: usize,
}

thread_local! {
    /// The ring's memory, kept between calls: RapidCDC's fallback makes many small stage-1
    /// calls, and each allocated and zeroed its ring.
    static RING_SLOTS: std::cell::Cell<Vec<__m512i>> = const { std::cell::Cell::new(Vec::new()) };
}

impl Ring {
    /// A ring whose slots hold `live` consecutive rows without overlap.
    fn new(live: usize) -> Ring {
        let n = live.next_power_of_two();
        let mut slots = RING_SLOTS.take();
        if slots.len() < n {
            // SAFETY: an all-zero __m512i is a valid value.
            slots = vec![unsafe { std::mem::zeroed() }; n];
        }
        Ring { slots, mask: n - 1 }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        RING_SLOTS.set(std::mem::take(&mut self.slots));
    }
}

/// 8×8 transpose of qwords: `out[j]` qword `i` = `r[i]` qword `j`.
#[target_feature(enable = "avx512f")]
#[inline]
fn transpose8x8_q(r: [__m512i; 8]) -> [__m512i; 8] {
    let a0 = _mm512_unpacklo_epi64(r[0], r[1]);
    let a1 = _mm512_unpackhi_epi64(r[0], r[1]);
    let a2 = _mm512_unpacklo_epi64(r[2], r[3]);
    let a3 = _mm512_unpackhi_epi64(r[2], r[3]);
    let a4 = _mm512_unpacklo_epi64(r[4], r[5]);
    let a5 = _mm512_unpackhi_epi64(r[4], r[5]);
    let a6 = _mm512_unpacklo_epi64(r[6], r[7]);
    let a7 = _mm512_unpackhi_epi64(r[6], r[7]);
    let lo = _mm512_set_epi64(13, 12, 5, 4, 9, 8, 1, 0);
    let hi = _mm512_set_epi64(15, 14, 7, 6, 11, 10, 3, 2);
    let b0 = _mm512_permutex2var_epi64(a0, lo, a2); // cols 0, 4 of rows 0-3
    let b2 = _mm512_permutex2var_epi64(a0, hi, a2); // cols 2, 6
    let b1 = _mm512_permutex2var_epi64(a1, lo, a3); // cols 1, 5
    let b3 = _mm512_permutex2var_epi64(a1, hi, a3); // cols 3, 7
    let b4 = _mm512_permutex2var_epi64(a4, lo, a6);
    let b6 = _mm512_permutex2var_epi64(a4, hi, a6);
    let b5 = _mm512_permutex2var_epi64(a5, lo, a7);
    let b7 = _mm512_permutex2var_epi64(a5, hi, a7);
    [
        _mm512_shuffle_i64x2::<0x44>(b0, b4),
        _mm512_shuffle_i64x2::<0x44>(b1, b5),
        _mm512_shuffle_i64x2::<0x44>(b2, b6),
        _mm512_shuffle_i64x2::<0x44>(b3, b7),
        _mm512_shuffle_i64x2::<0xEE>(b0, b4),
        _mm512_shuffle_i64x2::<0xEE>(b1, b5),
        _mm512_shuffle_i64x2::<0xEE>(b2, b6),
        _mm512_shuffle_i64x2::<0xEE>(b3, b7),
    ]
}

/// Byte (8 jl + kl) <- byte (8 kl + jl): an 8×8 byte transpose across a register.
const BYTE_TRANSPOSE: [u8; 64] = {
    let mut idx = [0u8; 64];
    let mut i = 0;
    while i < 64 {
        idx[i] = (8 * (i % 8) + i / 8) as u8;
        i += 1;
    }
    idx
};

/// Transposes the 64 bytes at `src[k] + r0` of the 64 lanes into ring slots `r0 .. r0 + 64`:
/// slot `r0 + j` byte `k` = `data[src[k] + r0 + j]`. In 16 steps ([`Transpose::step`]), so
/// that a kernel can run them between the rolls of the block before (crc32 does).
struct Transpose {
    /// [jh][kh], every element written (steps 0..8) before it is read (steps 8..16): not
    /// zeroed (a zeroed array was a 4 KiB memset per 64 rolls, measured at a few % of the
    /// kernel).
    mid: [std::mem::MaybeUninit<__m512i>; 64],
}

impl Transpose {
    fn new() -> Transpose {
        Transpose { mid: [std::mem::MaybeUninit::uninit(); 64] }
    }

    /// Step `u` of 16: steps 0..8 load and transpose lanes 8u..8u+8; steps 8..16 write ring
    /// slots r0 + 8(u - 8) .. + 8.
    ///
    /// # Safety
    /// The CPU supports AVX512F, AVX512BW and AVX512VBMI; 64 readable bytes at `p + src[k] + r0`
    /// for every `k`; steps in order. (No `target_feature` here, so that it can be inlined into
    /// the kernels, which have them: `#[inline(always)]` and `target_feature` do not combine.)
    #[inline(always)]
    unsafe fn step(&mut self, u: usize, p: *const u8, src: &[usize; LANES], r0: usize, ring: &mut Ring) {
        if u < 8 {
            let kh = u;
            // SAFETY: `BYTE_TRANSPOSE` is 64 bytes.
            let perm = unsafe { _mm512_loadu_si512(BYTE_TRANSPOSE.as_ptr() as *const _) };
            let mut r = [_mm512_setzero_si512(); 8];
            for kl in 0..8 {
                let a = p.wrapping_add(src[8 * kh + kl] + r0);
                // SAFETY: the caller guarantees 64 readable bytes at src[k] + r0.
                r[kl] = unsafe { _mm512_loadu_si512(a as *const _) };
                // 64 streams are more than the hardware prefetchers track: fetch ahead by
                // hand (a prefetch never faults, so running past the end is harmless).
                _mm_prefetch::<_MM_HINT_T0>(a.wrapping_add(PREFETCH) as *const i8);
            }
            let q = transpose8x8_q(r); // q[jh] qword kl = lane (8kh+kl) bytes 8jh..8jh+8
            for jh in 0..8 {
                self.mid[8 * jh + kh].write(_mm512_permutexvar_epi8(perm, q[jh])); // byte 8jl+kl
            }
        } else {
            let jh = u - 8;
            // SAFETY: steps 0..8 wrote all 64.
            let x: [__m512i; 8] = std::array::from_fn(|kh| unsafe { self.mid[8 * jh + kh].assume_init() });
            let y = transpose8x8_q(x); // y[jl] qword kh = lanes 8kh..8kh+8 at step 8jh+jl
            for jl in 0..8 {
                ring.slots[(r0 + 8 * jh + jl) & ring.mask] = y[jl];
            }
        }
    }

    /// All 16 steps.
    #[target_feature(enable = "avx512f,avx512bw,avx512vbmi")]
    unsafe fn block(&mut self, p: *const u8, src: &[usize; LANES], r0: usize, ring: &mut Ring) {
        for u in 0..16 {
            // SAFETY: per the contract.
            unsafe { self.step(u, p, src, r0, ring) };
        }
    }
}

/// One group of 64 pieces. `NP` = bytes of the match mask (1..=4).
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
unsafe fn crc_affine<const NP: usize>(
    t: &Tables,
    data: &[u8],
    group: &[Range<usize>],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    ring: &mut Ring,
) {
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let mut src = [0usize; LANES];
    for (k, s) in group.iter().enumerate() {
        src[k] = s.start - w;
    }
    // Matrices: T_p(x) = byte p of crct[x]; V_p(l) = byte p of crc_add(crcu[l], 0), the
    // leaving byte's whole contribution to one roll: crc_add(h ^ crcu[l], c) =
    // crc_add(h, c) ^ crc_add(crcu[l], 0), by linearity.
    let mut at = [_mm512_setzero_si512(); 4];
    let mut av = [_mm512_setzero_si512(); 4];
    for pl in 0..4 {
        let mt = affine_matrix(|x| (t.crct[x as usize] >> (8 * pl)) as u8);
        let mv = affine_matrix(|x| (crc_add(&t.crct, t.crcu[x as usize], 0) >> (8 * pl)) as u8);
        at[pl] = _mm512_set1_epi64(mt as i64);
        av[pl] = _mm512_set1_epi64(mv as i64);
    }
    let mut mb = [_mm512_setzero_si512(); 4];
    let mut gb = [_mm512_setzero_si512(); 4];
    for pl in 0..4 {
        mb[pl] = _mm512_set1_epi8((t.mask_loose >> (8 * pl)) as u8 as i8);
        gb[pl] = _mm512_set1_epi8((t.magic >> (8 * pl)) as u8 as i8);
    }
    let p = data.as_ptr();
    let mut h = [_mm512_setzero_si512(); 4];
    // Rolls 0 .. total in blocks of 64 (the last may run fewer); a block reads
    // data[src + r0 .. src + r0 + 64), inside `data` (see `lockstep_rolls`).
    let total = lockstep_rolls(group, w, common, data.len());
    debug_assert!(total >= w + 64);
    let mut r0 = 0;
    // The next block is transposed during this one's rolls, a sixteenth every 4 rolls: the
    // shuffles then overlap the affine products (`speed` example, CUTPOINT_MIB=32, medians of
    // alternated runs: 4.83 -> 5.06 GB/s over 5 with a switch in one build, 4.44 -> 5.09 over
    // 4 against the build before). Rabin's kernel has no registers to spare for it: its state
    // went to the stack and nothing was gained.
    let mut tr = Transpose::new();
    // SAFETY: bounds as above; features enabled.
    unsafe { tr.block(p, &src, 0, ring) };
    while r0 < total {
        let next = r0 + 64 < total;
        // Lane masks of matches, per roll of the block: written every roll (no call in the
        // loop, so the state stays in registers), read after the block.
        let mut hits = [0u64; 64];
        let mut any = 0u64;
        let n = (total - r0).min(64);
        for (j, hit) in hits[..n].iter_mut().enumerate() {
            if next && j % 4 == 0 {
                // SAFETY: the next block starts before `total`: bounds as above.
                unsafe { tr.step(j / 4, p, &src, r0 + 64, ring) };
            }
            let r = r0 + j;
            let c = ring.slots[r & ring.mask];
            let idx = _mm512_xor_si512(h[0], c);
            if r < w {
                // Warm-up: no leaving byte, no check.
                h[0] = _mm512_xor_si512(h[1], _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[0]));
                h[1] = _mm512_xor_si512(h[2], _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[1]));
                h[2] = _mm512_xor_si512(h[3], _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[2]));
                h[3] = _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[3]);
                continue;
            }
            // Check position src + r (the hash before roll r).
            let mut m: u64 = _mm512_testn_epi8_mask(_mm512_xor_si512(h[0], gb[0]), mb[0]);
            for pl in 1..NP {
                m = _mm512_mask_testn_epi8_mask(m, _mm512_xor_si512(h[pl], gb[pl]), mb[pl]);
            }
            *hit = m;
            any |= m;
            let l = ring.slots[(r - w) & ring.mask];
            h[0] = _mm512_ternarylogic_epi64::<0x96>(
                h[1],
                _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[0]),
                _mm512_gf2p8affine_epi64_epi8::<0>(l, av[0]),
            );
            h[1] = _mm512_ternarylogic_epi64::<0x96>(
                h[2],
                _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[1]),
                _mm512_gf2p8affine_epi64_epi8::<0>(l, av[1]),
            );
            h[2] = _mm512_ternarylogic_epi64::<0x96>(
                h[3],
                _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[2]),
                _mm512_gf2p8affine_epi64_epi8::<0>(l, av[2]),
            );
            h[3] = _mm512_xor_si512(
                _mm512_gf2p8affine_epi64_epi8::<0>(idx, at[3]),
                _mm512_gf2p8affine_epi64_epi8::<0>(l, av[3]),
            );
        }
        if any != 0 {
            mark_hits(t, &hits, &src, r0, origin, strict, loose);
        }
        r0 += 64;
    }
    let hs = planes_to_lanes(&h);
    finish(t, data, group, total - w, &hs, origin, strict, loose, |h, o, i| {
        crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
    });
}

/// Rabin, byte-sliced over 64 lanes: planes 0..=6 hold bits 0..53 of each lane's fingerprint
/// (plane 6 only its low 5 bits). Rabin is linear over GF(2) like CRC: one roll
/// `h' = h ^ U[l]; h = ((h' << 8) | c) ^ T[h' >> 45]` becomes, per plane,
/// `n0 = c ^ T0(i)`, `nq = p'(q-1) ^ Tq(i)`, `n6 = (p'5 & 0x1f) ^ T6(i)` with `p' = p ^ U(l)`,
/// `i = (p'5 >> 5) | (p'6 << 3)` and `Tq` the bytes of `T` without its `j << 53` part (which
/// only cancels the bits that the `& 0x1f` drops). Sixteen affine products per roll.
#[target_feature(enable = "avx512f,avx512bw,avx512vbmi,gfni")]
unsafe fn rabin_affine<const NP: usize>(
    t: &Tables,
    data: &[u8],
    group: &[Range<usize>],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    ring: &mut Ring,
) {
    const LOW53: u64 = (1 << 53) - 1;
    let w = t.window;
    let common = group.iter().map(|s| s.len()).min().unwrap();
    let mut src = [0usize; LANES];
    for (k, s) in group.iter().enumerate() {
        src[k] = s.start - w;
    }
    let mut at = [_mm512_setzero_si512(); 7];
    let mut au = [_mm512_setzero_si512(); 6];
    for pl in 0..7 {
        let mt = affine_matrix(|x| ((t.rabin_t[x as usize] & LOW53) >> (8 * pl)) as u8);
        at[pl] = _mm512_set1_epi64(mt as i64);
        if pl < 6 {
            let mu = affine_matrix(|x| (t.rabin_u[x as usize] >> (8 * pl)) as u8);
            au[pl] = _mm512_set1_epi64(mu as i64);
        }
    }
    // i = (p'5 >> 5) | (p'6 << 3), with p'6 = p6 ^ U6(l): the U6 part folds into one matrix.
    let a5 = _mm512_set1_epi64(affine_matrix(|x| x >> 5) as i64);
    let a6 = _mm512_set1_epi64(affine_matrix(|x| x << 3) as i64);
    let au6 = _mm512_set1_epi64(affine_matrix(|x| ((t.rabin_u[x as usize] >> 48) as u8) << 3) as i64);
    let low5 = _mm512_set1_epi8(0x1f);
    let mut mb = [_mm512_setzero_si512(); 4];
    let mut gb = [_mm512_setzero_si512(); 4];
    for pl in 0..4 {
        mb[pl] = _mm512_set1_epi8((t.mask_loose >> (8 * pl)) as u8 as i8);
        gb[pl] = _mm512_set1_epi8((t.magic >> (8 * pl)) as u8 as i8);
    }
    let p = data.as_ptr();
    let mut h = [_mm512_setzero_si512(); 7];
    // Blocks of 64 rolls (the last may run fewer) read data[src + r0 .. src + r0 + 64),
    // inside `data` (see `lockstep_rolls`).
    let total = lockstep_rolls(group, w, common, data.len());
    let mut r0 = 0;
    let mut tr = Transpose::new();
    while r0 < total {
        // SAFETY: bounds as above; features enabled.
        unsafe { tr.block(p, &src, r0, ring) };
        let mut hits = [0u64; 64];
        let mut any = 0u64;
        let n = (total - r0).min(64);
        for (j, hit) in hits[..n].iter_mut().enumerate() {
            let r = r0 + j;
            let c = ring.slots[r & ring.mask];
            if r < w {
                // Warm-up: no leaving byte, no check.
                let i = _mm512_xor_si512(
                    _mm512_gf2p8affine_epi64_epi8::<0>(h[5], a5),
                    _mm512_gf2p8affine_epi64_epi8::<0>(h[6], a6),
                );
                h[6] = _mm512_ternarylogic_epi64::<0x78>(_mm512_gf2p8affine_epi64_epi8::<0>(i, at[6]), h[5], low5);
                h[5] = _mm512_xor_si512(h[4], _mm512_gf2p8affine_epi64_epi8::<0>(i, at[5]));
                h[4] = _mm512_xor_si512(h[3], _mm512_gf2p8affine_epi64_epi8::<0>(i, at[4]));
                h[3] = _mm512_xor_si512(h[2], _mm512_gf2p8affine_epi64_epi8::<0>(i, at[3]));
                h[2] = _mm512_xor_si512(h[1], _mm512_gf2p8affine_epi64_epi8::<0>(i, at[2]));
                h[1] = _mm512_xor_si512(h[0], _mm512_gf2p8affine_epi64_epi8::<0>(i, at[1]));
                h[0] = _mm512_xor_si512(c, _mm512_gf2p8affine_epi64_epi8::<0>(i, at[0]));
                continue;
            }
            let mut m: u64 = _mm512_testn_epi8_mask(_mm512_xor_si512(h[0], gb[0]), mb[0]);
            for pl in 1..NP {
                m = _mm512_mask_testn_epi8_mask(m, _mm512_xor_si512(h[pl], gb[pl]), mb[pl]);
            }
            *hit = m;
            any |= m;
            let l = ring.slots[(r - w) & ring.mask];
            let p5 = _mm512_xor_si512(h[5], _mm512_gf2p8affine_epi64_epi8::<0>(l, au[5]));
            let i = _mm512_ternarylogic_epi64::<0x96>(
                _mm512_gf2p8affine_epi64_epi8::<0>(p5, a5),
                _mm512_gf2p8affine_epi64_epi8::<0>(h[6], a6),
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au6),
            );
            h[6] = _mm512_ternarylogic_epi64::<0x78>(_mm512_gf2p8affine_epi64_epi8::<0>(i, at[6]), p5, low5);
            h[5] = _mm512_ternarylogic_epi64::<0x96>(
                h[4],
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au[4]),
                _mm512_gf2p8affine_epi64_epi8::<0>(i, at[5]),
            );
            h[4] = _mm512_ternarylogic_epi64::<0x96>(
                h[3],
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au[3]),
                _mm512_gf2p8affine_epi64_epi8::<0>(i, at[4]),
            );
            h[3] = _mm512_ternarylogic_epi64::<0x96>(
                h[2],
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au[2]),
                _mm512_gf2p8affine_epi64_epi8::<0>(i, at[3]),
            );
            h[2] = _mm512_ternarylogic_epi64::<0x96>(
                h[1],
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au[1]),
                _mm512_gf2p8affine_epi64_epi8::<0>(i, at[2]),
            );
            h[1] = _mm512_ternarylogic_epi64::<0x96>(
                h[0],
                _mm512_gf2p8affine_epi64_epi8::<0>(l, au[0]),
                _mm512_gf2p8affine_epi64_epi8::<0>(i, at[1]),
            );
            h[0] = _mm512_xor_si512(c, _mm512_gf2p8affine_epi64_epi8::<0>(i, at[0]));
        }
        if any != 0 {
            mark_hits(t, &hits, &src, r0, origin, strict, loose);
        }
        r0 += 64;
    }
    let mut b = [[0u8; 64]; 7];
    for pl in 0..7 {
        // SAFETY: 64-byte destination.
        unsafe { _mm512_storeu_si512(b[pl].as_mut_ptr() as *mut _, h[pl]) };
    }
    let hs: Vec<u64> = (0..LANES)
        .map(|k| (0..7).fold(0u64, |acc, pl| acc | (b[pl][k] as u64) << (8 * pl)))
        .collect();
    finish(t, data, group, total - w, &hs, origin, strict, loose, |h, o, i| {
        rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
    });
}

#[target_feature(enable = "avx512f")]
fn planes_to_lanes(h: &[__m512i; 4]) -> Vec<u64> {
    let mut b = [[0u8; 64]; 4];
    for pl in 0..4 {
        // SAFETY: 64-byte destination.
        unsafe { _mm512_storeu_si512(b[pl].as_mut_ptr() as *mut _, h[pl]) };
    }
    (0..LANES)
        .map(|k| u32::from_le_bytes([b[0][k], b[1][k], b[2][k], b[3][k]]) as u64)
        .collect()
}

/// Sets the bits of the matches of one block (`hits[j]`: lanes matching before roll `r0 + j`).
/// crc32 has one class, so the lane mask is all that is needed.
#[inline(never)]
#[cold]
fn mark_hits(t: &Tables, hits: &[u64; 64], src: &[usize; LANES], r0: usize, origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    for (j, &m) in hits.iter().enumerate() {
        let mut m = m;
        while m != 0 {
            let k = m.trailing_zeros() as usize;
            m &= m - 1;
            // The stored mask already compared `h & mask == magic`; one class: `h` is unused
            // by `mark` beyond that, so pass `magic` (which matches).
            mark(t, t.magic, src[k] + r0 + j - origin, strict, loose);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::avx2::tests::compare;

    fn has512() -> bool {
        std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
    }

    #[test]
    fn avx512_equals_scalar() {
        if !has512() {
            eprintln!("skipped: CPU lacks AVX512F/BW");
            return;
        }
        compare("avx512", super::stage1);
    }

    #[test]
    fn avx512_gather_equals_scalar() {
        if !has512() {
            eprintln!("skipped: CPU lacks AVX512F/BW");
            return;
        }
        compare("avx512-gather", super::stage1_gather);
    }

    #[test]
    fn avx512_affine_equals_scalar() {
        if !super::has_affine() {
            eprintln!("skipped: CPU lacks AVX512VBMI/GFNI");
            return;
        }
        compare("avx512-affine", super::stage1_affine);
    }

    #[test]
    fn affine_matrix_applies_the_map() {
        if !super::has_affine() {
            eprintln!("skipped: CPU lacks GFNI");
            return;
        }
        let t = crate::rolling::crc_table();
        for pl in 0..4 {
            let m = super::affine_matrix(|x| (t[x as usize] >> (8 * pl)) as u8);
            for x in 0..=255u8 {
                // SAFETY: has_affine() checked GFNI and AVX-512.
                let got = unsafe { affine1(x, m) };
                assert_eq!(got, (t[x as usize] >> (8 * pl)) as u8);
            }
        }
    }

    #[target_feature(enable = "avx512f,avx512bw,gfni")]
    unsafe fn affine1(x: u8, m: u64) -> u8 {
        use std::arch::x86_64::*;
        let v = _mm512_gf2p8affine_epi64_epi8::<0>(_mm512_set1_epi8(x as i8), _mm512_set1_epi64(m as i64));
        _mm_cvtsi128_si32(_mm512_castsi512_si128(v)) as u8
    }
}
