//! WebAssembly simd128 stage-1 kernel: sixteen segments' chains in one register, no gathers.
//!
//! simd128 has no gather, so the table lookups of crc32 and rabin are done in registers with
//! `i8x16.swizzle`. Both families are linear over GF(2): the add table `T` and the remove table
//! `U` satisfy `T[a ^ b] = T[a] ^ T[b]`, so `T[x] = TL[x & 15] ^ TH[x >> 4]` with two 16-entry
//! tables. The 16 chains' states are kept as byte planes (plane `j` holds byte `j` of every
//! lane's state), so one lookup of one byte plane is one swizzle of a 16-byte table, and the
//! shift by 8 of a rolling step is a renaming of planes:
//!
//! * crc32 (4 planes): `h ^= U[leaving]; h = (h >> 8) ^ T[(h ^ entering) & 0xff]`;
//! * rabin (7 planes, 53 bits): `h ^= U[leaving]; j = h >> 45; h = ((h << 8) | entering) ^ T[j]`.
//!
//! That is 16 (crc32) or 28 (rabin) swizzles per step for 16 chains. The bytes the chains need
//! come from 16 different places; each 16 steps the kernel loads 16 bytes of every segment and
//! transposes the 16×16 block with four rounds of byte interleaves.
//!
//! gear's table is random (not linear) and its state is 64 bits with carries, so a swizzle
//! lookup would cost 16 swizzles per byte plane; gear runs the interleaved scalar kernel, which
//! measured faster than two-lane `i64x2` variants.

use super::interleaved::split;
use super::mark;
use super::scalar::{scan_from, warm};
use crate::hash::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use core::arch::wasm32::*;
use std::ops::Range;

/// Chains per register.
pub const LANES: usize = 16;

/// # Safety
/// See [`super::Stage1Fn`]; needs simd128 (guaranteed: this module only exists when the
/// build enables it).
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    let bits = (t.mask_loose.count_ones() as usize).max(1);
    match t.family {
        Family::Crc32 => {
            let k = Lin::<4>::crc(t);
            match bits.div_ceil(8) {
                1 | 2 => run::<4, 2, false>(t, &k, data, segs, origin, strict, loose),
                3 => run::<4, 3, false>(t, &k, data, segs, origin, strict, loose),
                _ => run::<4, 4, false>(t, &k, data, segs, origin, strict, loose),
            }
        }
        Family::Rabin => {
            let k = Lin::<7>::rabin(t);
            match bits.div_ceil(8) {
                1 | 2 => run::<7, 2, true>(t, &k, data, segs, origin, strict, loose),
                3 => run::<7, 3, true>(t, &k, data, segs, origin, strict, loose),
                4 => run::<7, 4, true>(t, &k, data, segs, origin, strict, loose),
                5 => run::<7, 5, true>(t, &k, data, segs, origin, strict, loose),
                6 => run::<7, 6, true>(t, &k, data, segs, origin, strict, loose),
                _ => run::<7, 7, true>(t, &k, data, segs, origin, strict, loose),
            }
        }
        // SAFETY: the interleaved kernel needs no special instructions.
        Family::Gear => super::interleaved::stage1(t, data, segs, origin, strict, loose),
    }
}

/// Nibble tables of a linear family, one per byte plane.
struct Lin<const N: usize> {
    tl: [v128; N],
    th: [v128; N],
    ul: [v128; N],
    uh: [v128; N],
    mask: [v128; N],
    magic: [v128; N],
}

fn planes<const N: usize>(f: impl Fn(usize) -> u64) -> [v128; N] {
    std::array::from_fn(|j| {
        let b: [u8; 16] = std::array::from_fn(|n| (f(n) >> (8 * j)) as u8);
        // SAFETY: reads 16 bytes from a 16-byte array.
        unsafe { v128_load(b.as_ptr() as *const v128) }
    })
}

impl<const N: usize> Lin<N> {
    fn new(t: &Tables, tab: impl Fn(usize) -> u64, rem: impl Fn(usize) -> u64) -> Self {
        Lin {
            tl: planes(|n| tab(n)),
            th: planes(|n| tab(n << 4)),
            ul: planes(|n| rem(n)),
            uh: planes(|n| rem(n << 4)),
            mask: std::array::from_fn(|j| u8x16_splat((t.mask_loose >> (8 * j)) as u8)),
            magic: std::array::from_fn(|j| u8x16_splat((t.magic >> (8 * j)) as u8)),
        }
    }
}
impl Lin<4> {
    fn crc(t: &Tables) -> Self {
        Lin::new(t, |n| t.crct[n] as u64, |n| t.crcu[n] as u64)
    }
}
impl Lin<7> {
    fn rabin(t: &Tables) -> Self {
        Lin::new(t, |n| t.rabin_t[n], |n| t.rabin_u[n])
    }
}

#[inline(always)]
fn lookup(lo_t: v128, hi_t: v128, lo: v128, hi: v128) -> v128 {
    v128_xor(i8x16_swizzle(lo_t, lo), i8x16_swizzle(hi_t, hi))
}

/// One rolling step of 16 chains. `RABIN` picks the shift direction.
#[inline(always)]
fn roll<const N: usize, const RABIN: bool>(k: &Lin<N>, p: &mut [v128; N], leaving: v128, entering: v128) {
    let nib = u8x16_splat(15);
    let (lo, hi) = (v128_and(leaving, nib), u8x16_shr(leaving, 4));
    for j in 0..N {
        p[j] = v128_xor(p[j], lookup(k.ul[j], k.uh[j], lo, hi));
    }
    if RABIN {
        // j = bits 45..52 = (plane 5 >> 5) | (plane 6 << 3); then shift left by one plane.
        let idx = v128_or(u8x16_shr(p[5], 5), i8x16_shl(p[6], 3));
        let (lo, hi) = (v128_and(idx, nib), u8x16_shr(idx, 4));
        for j in (1..N).rev() {
            p[j] = v128_xor(p[j - 1], lookup(k.tl[j], k.th[j], lo, hi));
        }
        p[0] = v128_xor(entering, lookup(k.tl[0], k.th[0], lo, hi));
    } else {
        let idx = v128_xor(p[0], entering);
        let (lo, hi) = (v128_and(idx, nib), u8x16_shr(idx, 4));
        for j in 0..N - 1 {
            p[j] = v128_xor(p[j + 1], lookup(k.tl[j], k.th[j], lo, hi));
        }
        p[N - 1] = lookup(k.tl[N - 1], k.th[N - 1], lo, hi);
    }
}

/// Lanes whose hash matches the (loose) mask, as a 16-bit mask. Only the first `C` planes
/// carry mask bits.
#[inline(always)]
fn matches<const N: usize, const C: usize>(k: &Lin<N>, p: &[v128; N]) -> u16 {
    let mut m = i8x16_eq(v128_and(p[0], k.mask[0]), k.magic[0]);
    for j in 1..C {
        m = v128_and(m, i8x16_eq(v128_and(p[j], k.mask[j]), k.magic[j]));
    }
    if v128_any_true(m) {
        i8x16_bitmask(m)
    } else {
        0
    }
}

/// Transposes a 16×16 byte block: four rounds of byte interleaves of rows `i` and `i + 8`.
/// Each round rotates the 8-bit index (row, column) left by one bit; four rounds swap them.
#[inline(always)]
fn transpose(r: &mut [v128; 16]) {
    for _ in 0..4 {
        let o: [v128; 16] = std::array::from_fn(|x| {
            let (i, hi) = (x / 2, x % 2 == 1);
            if hi {
                u8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(r[i], r[i + 8])
            } else {
                u8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(r[i], r[i + 8])
            }
        });
        *r = o;
    }
}

fn to_planes<const N: usize>(h: &[u64; LANES]) -> [v128; N] {
    planes(|n| h[n])
}

fn from_planes<const N: usize>(p: &[v128; N]) -> [u64; LANES] {
    let mut h = [0u64; LANES];
    for (j, v) in p.iter().enumerate() {
        let mut b = [0u8; 16];
        // SAFETY: writes 16 bytes into a 16-byte array.
        unsafe { v128_store(b.as_mut_ptr() as *mut v128, *v) };
        for k in 0..LANES {
            h[k] |= (b[k] as u64) << (8 * j);
        }
    }
    h
}

#[allow(clippy::too_many_arguments)]
unsafe fn run<const N: usize, const C: usize, const RABIN: bool>(
    t: &Tables,
    k: &Lin<N>,
    data: &[u8],
    segs: &[Range<usize>],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
) {
    let roll1 = |h: u64, o: u8, i: u8| -> u64 {
        if RABIN {
            rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
        } else {
            crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
        }
    };
    let w = t.window;
    let segs: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
    for group in segs.chunks(LANES) {
        if group.len() < LANES {
            let total: usize = group.iter().map(|s| s.len()).sum();
            if total >= LANES * 64 * w.max(64) {
                let subs = split(group, LANES);
                if subs.len() == LANES {
                    run::<N, C, RABIN>(t, k, data, &subs, origin, strict, loose);
                    continue;
                }
            }
            for s in group {
                let h = warm(data, s.start, w, &roll1);
                scan_from(t, data, s.clone(), origin, strict, loose, h, &roll1);
            }
            continue;
        }
        let a: [usize; LANES] = std::array::from_fn(|l| group[l].start);
        let h0: [u64; LANES] = std::array::from_fn(|l| warm(data, a[l], w, &roll1));
        let common = group.iter().map(|s| s.len()).min().unwrap();
        // Lockstep over `steps` steps (a multiple of 16, at most common - 1): check a + i,
        // roll to a + i + 1. Loads stay below a + steps <= a + common - 1 < end <= data.len().
        let steps = (common - 1) / 16 * 16;
        let mut p: [v128; N] = to_planes(&h0);
        let base = data.as_ptr();
        let mut i = 0;
        while i < steps {
            let mut ein: [v128; 16] = std::array::from_fn(|l| v128_load(base.add(a[l] + i) as *const v128));
            let mut eout: [v128; 16] = std::array::from_fn(|l| v128_load(base.add(a[l] + i - w) as *const v128));
            transpose(&mut ein);
            transpose(&mut eout);
            for j in 0..16 {
                let m = matches::<N, C>(k, &p);
                if m != 0 {
                    let h = from_planes(&p);
                    for l in 0..LANES {
                        if m & (1 << l) != 0 {
                            mark(t, h[l], a[l] + i + j - origin, strict, loose);
                        }
                    }
                }
                roll::<N, RABIN>(k, &mut p, eout[j], ein[j]);
            }
            i += 16;
        }
        let h = from_planes(&p);
        for l in 0..LANES {
            scan_from(t, data, a[l] + steps..group[l].end, origin, strict, loose, h[l], &roll1);
        }
    }
}
