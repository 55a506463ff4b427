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
//!   The index `j` (bits 45..52) is split into the nibbles {45, 46, 47, 52} and {48..51}
//!   instead of its low and high halves: each is one shift-and-mask of plane 5 or 6.
//!
//! That is 16 (crc32) or 28 (rabin) swizzles per step for 16 chains. The bytes the chains need
//! come from 16 different places: every 16 steps the kernel loads 16 bytes of every segment,
//! transposes the 16×16 block with four rounds of byte interleaves, and stores the 16 rows
//! (one per step, byte `l` = chain `l`'s byte) in a ring that holds the last `W + 16` rows, so
//! the leaving bytes are read back from the ring instead of being transposed a second time.
//!
//! Written for what V8's TurboFan makes of it (read with `node --print-wasm-code`): the
//! transposes are fully unrolled on locals (a loop over an array went through linear memory and
//! a `memory.copy` call per round); byte shifts are `i16x8` shifts and a mask (`i8x16.shr_u`
//! lowers to a shift, a mask rebuilt from an immediate, and an and); the constants come from
//! `black_box` so that LLVM keeps them in locals instead of re-materialising `v128.const`
//! inside the loop. In a build with relaxed-simd, lookups use `i8x16.relaxed_swizzle` (one
//! `pshufb` on x64, against `paddusb` + `pshufb`): the indices are always below 16, where
//! both instructions agree.
//!
//! gear's table is random (not linear) and its state is 64 bits with carries, so a swizzle
//! lookup would cost 16 swizzles per byte plane, and two-lane `i64x2` variants measured slower
//! than scalar code. gear runs four scalar chains written for V8 (see [`gear`]): no bounds
//! checks and no call inside the loop, a match test that is one compare and branch.
//!
//! Measured (`node bench/js/stage1.mjs`, Node 20, MB/s per CPU second, before → after this
//! design): crc32 728 → ~1800, rabin 654 → ~1060, gear 768 (interleaved) → ~1780; the
//! relaxed-simd build (`--experimental-wasm-relaxed-simd`) crc32 ~2440, rabin ~1450. Numbers
//! and the comparison with the native kernels: bench/js/RESULTS.md.

// Lockstep loops index several per-plane arrays by the same `j`; the kernels take the stage-1
// arguments plus their own state.
#![allow(clippy::needless_range_loop, clippy::too_many_arguments)]

use super::interleaved::split;
use super::mark;
use super::scalar::{scan_from, warm};
use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::Family;
#[cfg(target_arch = "wasm32")]
use core::arch::wasm32::*;
#[cfg(not(target_arch = "wasm32"))]
use emu::*;
use core::hint::black_box;
use std::ops::Range;

/// Chains per register.
pub const LANES: usize = 16;

/// How the match test reads the planes that hold mask bits: only the last one masked, or
/// every one masked.
const LAST_PART: u8 = 1;
const ALL_MASKED: u8 = 2;

/// # Safety
/// See [`super::Stage1Fn`]; needs simd128 (guaranteed: this module only exists when the
/// build enables it).
pub unsafe fn stage1(
    t: &Tables,
    data: &[u8],
    segs: &[Range<usize>],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
) {
    super::check_args(t, data, segs, origin, strict, loose);
    if t.family == Family::Gear {
        return gear::<GEAR_CHAINS>(t, data, segs, origin, strict, loose);
    }
    if t.magic & !t.mask_loose != 0 {
        return; // no hash can ever match
    }
    let m = t.mask_loose;
    let bits = m.count_ones() as usize;
    // crc32 and rabin masks are `AVG - 1`: the low `bits` bits (1 to 53), in the first
    // `ceil(bits / 8)` planes. Two instances per family (one or two planes: AVG up to 64 KiB)
    // keep the module small; larger averages test every plane.
    assert!(m == (1u64 << bits) - 1 && bits >= 1, "crc32/rabin mask is AVG - 1");
    macro_rules! go {
        ($n:literal, $rabin:literal, $k:expr) => {{
            let k = $k;
            match bits.div_ceil(8) {
                1 => run::<$n, 1, LAST_PART, $rabin>(t, &k, data, segs, origin, strict, loose),
                2 => run::<$n, 2, LAST_PART, $rabin>(t, &k, data, segs, origin, strict, loose),
                _ => run::<$n, $n, ALL_MASKED, $rabin>(t, &k, data, segs, origin, strict, loose),
            }
        }};
    }
    match t.family {
        Family::Crc32 => go!(4, false, Lin::<4>::crc(t)),
        _ => go!(7, true, Lin::<7>::rabin(t)),
    }
}

/// Nibble tables of a linear family, one per byte plane, and the constants of the loop.
struct Lin<const N: usize> {
    /// Add table on the two index nibbles (crc32: low, high; rabin: see the module doc).
    ta: [v128; N],
    tb: [v128; N],
    /// Remove table on the leaving byte's low and high nibble.
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
    fn new(t: &Tables, ta: impl Fn(usize) -> u64, tb: impl Fn(usize) -> u64, rem: impl Fn(usize) -> u64) -> Self {
        Lin {
            ta: planes(ta),
            tb: planes(tb),
            ul: planes(&rem),
            uh: planes(|n| rem(n << 4)),
            mask: std::array::from_fn(|j| u8x16_splat((t.mask_loose >> (8 * j)) as u8)),
            magic: std::array::from_fn(|j| u8x16_splat((t.magic >> (8 * j)) as u8)),
        }
    }
}
impl Lin<4> {
    fn crc(t: &Tables) -> Self {
        Lin::new(t, |n| t.crct[n] as u64, |n| t.crct[n << 4] as u64, |n| t.crcu[n] as u64)
    }
}
impl Lin<7> {
    /// Index nibbles: `a` = bits {45, 46, 47, 52} of the state (`j` bits 0, 1, 2, 7),
    /// `b` = bits 48..51 (`j` bits 3..6).
    fn rabin(t: &Tables) -> Self {
        Lin::new(t, |a| t.rabin_t[(a & 7) | ((a >> 3) << 7)], |b| t.rabin_t[b << 3], |n| t.rabin_u[n])
    }
}

/// A lookup whose indices are all below 16.
#[inline(always)]
fn swz(table: v128, idx: v128) -> v128 {
    #[cfg(target_feature = "relaxed-simd")]
    {
        i8x16_relaxed_swizzle(table, idx)
    }
    #[cfg(not(target_feature = "relaxed-simd"))]
    {
        i8x16_swizzle(table, idx)
    }
}

/// Constants of the loop, opaque to LLVM (see the module doc).
#[derive(Clone, Copy)]
struct K {
    nib: v128,
    k7: v128,
    k8: v128,
}

/// One rolling step of 16 chains. `RABIN` picks the shift direction.
#[inline(always)]
fn roll<const N: usize, const RABIN: bool>(k: &Lin<N>, c: K, p: &mut [v128; N], leaving: v128, entering: v128) {
    let lo = v128_and(leaving, c.nib);
    let hi = v128_and(u16x8_shr(leaving, 4), c.nib);
    for j in 0..N {
        p[j] = v128_xor(p[j], v128_xor(swz(k.ul[j], lo), swz(k.uh[j], hi)));
    }
    if RABIN {
        let a = v128_or(v128_and(u16x8_shr(p[5], 5), c.k7), v128_and(u16x8_shr(p[6], 1), c.k8));
        let b = v128_and(p[6], c.nib);
        for j in (1..N).rev() {
            p[j] = v128_xor(p[j - 1], v128_xor(swz(k.ta[j], a), swz(k.tb[j], b)));
        }
        p[0] = v128_xor(entering, v128_xor(swz(k.ta[0], a), swz(k.tb[0], b)));
    } else {
        let x = v128_xor(p[0], entering);
        let (a, b) = (v128_and(x, c.nib), v128_and(u16x8_shr(x, 4), c.nib));
        for j in 0..N - 1 {
            p[j] = v128_xor(p[j + 1], v128_xor(swz(k.ta[j], a), swz(k.tb[j], b)));
        }
        p[N - 1] = v128_xor(swz(k.ta[N - 1], a), swz(k.tb[N - 1], b));
    }
}

/// Per lane: zero where the hash matches. Only the first `C` planes carry mask bits.
#[inline(always)]
fn miss<const N: usize, const C: usize, const MODE: u8>(k: &Lin<N>, p: &[v128; N]) -> v128 {
    let mut d = u8x16_splat(0);
    for j in 0..C {
        let x = v128_xor(p[j], k.magic[j]);
        let masked = MODE == ALL_MASKED || (MODE == LAST_PART && j == C - 1);
        d = v128_or(d, if masked { v128_and(x, k.mask[j]) } else { x });
    }
    d
}

/// Runs the 16 steps of a block again from `p` (the planes at step `i`), marking the lanes
/// that match at each (cold: the block loop only knows that some position matched).
#[cold]
#[inline(never)]
unsafe fn block_hits<const N: usize, const C: usize, const MODE: u8, const RABIN: bool>(
    t: &Tables,
    k: &Lin<N>,
    c: K,
    mut p: [v128; N],
    rp: *const v128,
    rm: usize,
    i: usize,
    a: &[usize; LANES],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
) {
    let w = t.window;
    // An opaque bound: this cold loop stays a loop (the module stays small).
    for j in 0..black_box(16) {
        let d = miss::<N, C, MODE>(k, &p);
        let m = i8x16_bitmask(i8x16_eq(d, u8x16_splat(0)));
        if m != 0 {
            let h = from_planes(&p);
            for l in 0..LANES {
                if m & (1 << l) != 0 {
                    mark(t, h[l], a[l] + i + j - origin, strict, loose);
                }
            }
        }
        // SAFETY: the rows of this block are still in the ring (see `run`).
        let (out, inn) = unsafe { (*rp.add((i + j) & rm), *rp.add((i + w + j) & rm)) };
        roll::<N, RABIN>(k, c, &mut p, out, inn);
    }
}

#[inline(always)]
fn lo8(a: v128, b: v128) -> v128 {
    u8x16_shuffle::<0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23>(a, b)
}
#[inline(always)]
fn hi8(a: v128, b: v128) -> v128 {
    u8x16_shuffle::<8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31>(a, b)
}

/// One round of the 16×16 byte transpose: interleaves rows `i` and `i + 8`. Each round rotates
/// the 8-bit index (row, column) left by one bit; four rounds swap them.
#[inline(always)]
fn round(r: [v128; 16]) -> [v128; 16] {
    [
        lo8(r[0], r[8]),
        hi8(r[0], r[8]),
        lo8(r[1], r[9]),
        hi8(r[1], r[9]),
        lo8(r[2], r[10]),
        hi8(r[2], r[10]),
        lo8(r[3], r[11]),
        hi8(r[3], r[11]),
        lo8(r[4], r[12]),
        hi8(r[4], r[12]),
        lo8(r[5], r[13]),
        hi8(r[5], r[13]),
        lo8(r[6], r[14]),
        hi8(r[6], r[14]),
        lo8(r[7], r[15]),
        hi8(r[7], r[15]),
    ]
}

/// Loads 16 bytes at `src[l] + u0` for every chain `l`, transposes them and stores row `j`
/// (byte `l` = chain `l`'s byte at `u0 + j`) at `ring[(u0 + j) & rm]`, and the first 16 rows
/// of the ring again after its end, so that 16 rows from any start are contiguous.
///
/// # Safety
/// `src[l] + u0 .. + 16` readable for every `l`; `ring` has `rm + 1 + 16` rows.
#[inline(always)]
unsafe fn fill(ring: *mut v128, rm: usize, src: &[*const u8; LANES], u0: usize) {
    // SAFETY: per the contract.
    let r: [v128; 16] = std::array::from_fn(|l| unsafe { v128_load(src[l].add(u0) as *const v128) });
    let r = round(round(round(round(r))));
    for (j, row) in r.into_iter().enumerate() {
        let at = (u0 + j) & rm;
        // SAFETY: the index is masked to the ring; the mirror has 16 rows.
        unsafe {
            ring.add(at).write(row);
            if at < 16 {
                ring.add(at + rm + 1).write(row);
            }
        }
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

unsafe fn run<const N: usize, const C: usize, const MODE: u8, const RABIN: bool>(
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
    // The ring of transposed rows: row u holds the bytes at `a[l] - W + u`; steps i..i+16
    // read rows i.. (leaving) and i+W.. (entering), written just before; W + 16 rows live,
    // plus a copy of the first 16 after the end.
    let rows = (w + 16).next_power_of_two();
    let rm = rows - 1;
    let mut ring = vec![u8x16_splat(0); rows + 16];
    let rp = ring.as_mut_ptr();
    let c = black_box(K { nib: u8x16_splat(15), k7: u8x16_splat(7), k8: u8x16_splat(8) });
    let k = black_box(k);
    let segs: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
    for group in segs.chunks(LANES) {
        if group.len() < LANES {
            let total: usize = group.iter().map(|s| s.len()).sum();
            if total >= LANES * 64 * w.max(64) {
                let subs = split(group, LANES);
                if subs.len() == LANES {
                    run::<N, C, MODE, RABIN>(t, k, data, &subs, origin, strict, loose);
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
        let base = data.as_ptr();
        let src: [*const u8; LANES] = std::array::from_fn(|l| base.add(a[l] - w));
        let mut p: [v128; N] = to_planes(&h0);
        if steps > 0 {
            // Rows 0..W: the window before each start. Reads end before a + 16 <= a + steps.
            let mut u0 = 0;
            while u0 < w {
                fill(rp, rm, &src, u0);
                u0 += 16;
            }
        }
        let mut i = 0;
        while i < steps {
            // Rows i + W .. i + W + 16: bytes a + i .. a + i + 16, below a + steps.
            fill(rp, rm, &src, i + w);
            let p0 = p;
            // This block's 16 leaving and 16 entering rows, contiguous (see `fill`). crc32 reads
            // them at constant offsets from these (+4% measured); rabin measured 4% slower so
            // (V8's register allocation of its longer loop), and masks each index instead.
            let (ob, ib) = (rp.add(i & rm) as *const v128, rp.add((i + w) & rm) as *const v128);
            // Lane-wise minimum of the block's `miss` values: zero where a position matched.
            let mut acc = u8x16_splat(0xff);
            for j in 0..16 {
                acc = u8x16_min(acc, miss::<N, C, MODE>(k, &p));
                let (out, inn) = if RABIN { (*rp.add((i + j) & rm), *rp.add((i + w + j) & rm)) } else { (*ob.add(j), *ib.add(j)) };
                roll::<N, RABIN>(k, c, &mut p, out, inn);
            }
            if !i8x16_all_true(acc) {
                block_hits::<N, C, MODE, RABIN>(t, k, c, p0, rp, rm, i, &a, origin, strict, loose);
            }
            i += 16;
        }
        let h = from_planes(&p);
        for l in 0..LANES {
            scan_from(t, data, a[l] + steps..group[l].end, origin, strict, loose, h[l], &roll1);
        }
    }
}

/// gear chains advanced together (see [`gear`]). Measured (MB/s per CPU second, Node 20)
/// for 1 / 2 / 3 / 4: ~1230 / ~1550 / ~1620 / ~1640.
const GEAR_CHAINS: usize = 4;
/// Positions per chain in one gear block (written out: the byte loads get constant offsets;
/// 16 measured ~8% faster than a loop, 32 slower than 16).
const GEAR_BLOCK: usize = 16;

/// Runs one gear block of `GEAR_BLOCK` positions from `h` at `pos`, marking the matches, and
/// returns the hash at `pos + GEAR_BLOCK` (cold: the block loop only knows that one of them
/// matched).
#[cold]
#[inline(never)]
fn gear_block(t: &Tables, data: &[u8], mut h: u64, pos: usize, origin: usize, strict: &mut [u64], loose: &mut [u64]) -> u64 {
    for e in pos..pos + GEAR_BLOCK {
        if t.is_loose(h) {
            mark(t, h, e - origin, strict, loose);
        }
        h = (h << 1).wrapping_add(t.gear[data[e] as usize]);
    }
    h
}

/// gear: `K` scalar chains over pieces of the segments in lockstep, blocks of `GEAR_BLOCK`
/// positions, byte loads and table loads with no bounds checks. The mask is the top bits and
/// `magic` is 0, so a position matches when `h <= !mask`: one compare and a branch that
/// leaves the block, which then runs again in [`gear_block`] (marking). Nothing is called
/// inside the block loop: a call there made V8 keep the hashes in stack slots (V8 has no
/// callee-saved registers). V8 makes a byte five to six instructions (byte load, table
/// address, table load, `lea h, [g + 2h]`, compare and branch); the interleaved kernel's
/// generic loop made about twenty.
fn gear<const K: usize>(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let ml = t.mask_loose;
    if t.magic != 0 || ml.leading_ones() != ml.count_ones() {
        // SAFETY: the interleaved kernel needs no special instructions.
        return unsafe { super::interleaved::stage1(t, data, segs, origin, strict, loose) };
    }
    let roll1 = |h: u64, _o: u8, i: u8| -> u64 { (h << 1).wrapping_add(t.gear[i as usize]) };
    let w = t.window;
    let thr = black_box(!ml);
    let g = t.gear.as_ptr();
    let segs: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
    for group in segs.chunks(K) {
        let group: Vec<Range<usize>> = if group.len() < K && group.iter().map(|s| s.len()).sum::<usize>() >= K * 4096 {
            split(group, K)
        } else {
            group.to_vec()
        };
        if group.len() != K {
            for s in &group {
                let h = warm(data, s.start, w, &roll1);
                scan_from(t, data, s.clone(), origin, strict, loose, h, &roll1);
            }
            continue;
        }
        let a: [usize; K] = std::array::from_fn(|l| group[l].start);
        let mut h: [u64; K] = std::array::from_fn(|l| warm(data, a[l], w, &roll1));
        let common = group.iter().map(|s| s.len()).min().unwrap();
        // GEAR_BLOCK positions per chain per iteration: reads a + i .. a + i + GEAR_BLOCK
        // <= a + common <= end <= data.len().
        let steps = common / GEAR_BLOCK * GEAR_BLOCK;
        let mut i = 0;
        'blocks: while i < steps {
            let h0 = h;
            'fast: {
                let p: [*const u8; K] = std::array::from_fn(|l| data.as_ptr().wrapping_add(a[l] + i));
                // Written out GEAR_BLOCK (16) times: the byte loads get constant offsets.
                macro_rules! step {
                    ($($b:literal)*) => {$(
                        for l in 0..K {
                            if h[l] <= thr {
                                break 'fast;
                            }
                            // SAFETY: a[l] + i + b < a[l] + common <= data.len(); the table
                            // has 256 entries.
                            let gv = unsafe { *g.add(*p[l].add($b) as usize) };
                            h[l] = (h[l] << 1).wrapping_add(gv);
                        }
                    )*};
                }
                step!(0 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15);
                i += GEAR_BLOCK;
                continue 'blocks;
            }
            // A chain matched in this block: run the block again, marking.
            for l in 0..K {
                h[l] = gear_block(t, data, h0[l], a[l] + i, origin, strict, loose);
            }
            i += GEAR_BLOCK;
        }
        for l in 0..K {
            if a[l] + steps < group[l].end {
                scan_from(t, data, a[l] + steps..group[l].end, origin, strict, loose, h[l], &roll1);
            }
        }
    }
}

/// The few simd128 operations the kernel uses, lane by lane, so that the native test suite runs
/// this kernel (`cargo test`) against the scalar one: same code, the instructions emulated.
#[cfg(not(target_arch = "wasm32"))]
#[allow(non_camel_case_types)]
mod emu {
    #[derive(Clone, Copy)]
    #[repr(C, align(16))]
    pub struct v128([u8; 16]);

    fn map(a: v128, b: v128, f: impl Fn(u8, u8) -> u8) -> v128 {
        v128(std::array::from_fn(|i| f(a.0[i], b.0[i])))
    }
    /// # Safety
    /// 16 readable bytes at `p`.
    pub unsafe fn v128_load(p: *const v128) -> v128 {
        // SAFETY: per the contract (unaligned as in wasm).
        unsafe { (p as *const [u8; 16]).read_unaligned() }.into()
    }
    /// # Safety
    /// 16 writable bytes at `p`.
    pub unsafe fn v128_store(p: *mut v128, v: v128) {
        // SAFETY: per the contract.
        unsafe { (p as *mut [u8; 16]).write_unaligned(v.0) }
    }
    impl From<[u8; 16]> for v128 {
        fn from(b: [u8; 16]) -> v128 {
            v128(b)
        }
    }
    pub fn u8x16_splat(x: u8) -> v128 {
        v128([x; 16])
    }
    pub fn v128_and(a: v128, b: v128) -> v128 {
        map(a, b, |x, y| x & y)
    }
    pub fn v128_or(a: v128, b: v128) -> v128 {
        map(a, b, |x, y| x | y)
    }
    pub fn v128_xor(a: v128, b: v128) -> v128 {
        map(a, b, |x, y| x ^ y)
    }
    pub fn u8x16_min(a: v128, b: v128) -> v128 {
        map(a, b, |x, y| x.min(y))
    }
    pub fn i8x16_eq(a: v128, b: v128) -> v128 {
        map(a, b, |x, y| if x == y { 0xff } else { 0 })
    }
    pub fn i8x16_swizzle(t: v128, i: v128) -> v128 {
        v128(std::array::from_fn(|k| if i.0[k] < 16 { t.0[i.0[k] as usize] } else { 0 }))
    }
    pub fn u16x8_shr(a: v128, n: u32) -> v128 {
        let mut o = [0u8; 16];
        for k in 0..8 {
            let x = u16::from_le_bytes([a.0[2 * k], a.0[2 * k + 1]]) >> (n % 16);
            o[2 * k..2 * k + 2].copy_from_slice(&x.to_le_bytes());
        }
        v128(o)
    }
    pub fn i8x16_all_true(a: v128) -> bool {
        a.0.iter().all(|&x| x != 0)
    }
    pub fn i8x16_bitmask(a: v128) -> u16 {
        a.0.iter().enumerate().fold(0, |m, (k, &x)| m | (((x >> 7) as u16) << k))
    }
    #[allow(clippy::too_many_arguments)]
    pub fn u8x16_shuffle<
        const I0: usize,
        const I1: usize,
        const I2: usize,
        const I3: usize,
        const I4: usize,
        const I5: usize,
        const I6: usize,
        const I7: usize,
        const I8: usize,
        const I9: usize,
        const I10: usize,
        const I11: usize,
        const I12: usize,
        const I13: usize,
        const I14: usize,
        const I15: usize,
    >(
        a: v128,
        b: v128,
    ) -> v128 {
        let idx = [I0, I1, I2, I3, I4, I5, I6, I7, I8, I9, I10, I11, I12, I13, I14, I15];
        v128(std::array::from_fn(|k| if idx[k] < 16 { a.0[idx[k]] } else { b.0[idx[k] - 16] }))
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The kernel with its instructions emulated (see `emu`) against the scalar kernel, on the
    /// AVX2 tests' profiles and segment layouts (one, two and three mask planes and the
    /// every-plane fallback; windows 31 to 257; magic; every gear level). The wasm builds
    /// themselves are checked against tests/vectors in Node, Deno and Chromium, and by
    /// bench/js/stage1.mjs against the other kernels on 64 MiB.
    #[test]
    fn simd128_emulated_equals_scalar() {
        crate::stage1::avx2::tests::compare("simd128 (emulated)", super::stage1);
    }
}
