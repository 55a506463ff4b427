//! Interleaved scalar stage-1 kernel: `LANES` segments' rolling chains advance together in
//! one thread. Each chain's step depends on its previous value (a table load on the critical
//! path for crc32 and rabin), so one chain leaves most of the core idle; independent chains
//! fill it. The two-stage split is what makes this legal: stage 1 has no MIN skip, so every
//! segment's work is known up front.
//!
//! gear has its own loop ([`gear`]): its step is a shift and an add with the table load off
//! the chain, so one chain is latency-bound (2 cycles a byte) and several chains are bound by
//! instructions per byte. `GEAR_CHAINS` chains advance two bytes per step with unchecked reads
//! of the two bytes and the table; the check is one compare+branch per position; the hot loop
//! ([`gear_steps`]) is a function of its own with no calls in it, so the chains stay in
//! registers, and it returns at a match, which the caller marks. Measured on AMD EPYC (Zen 3,
//! family 25 model 1, 2 vCPUs shared with other tenants' builds):
//! * a stand-alone copy of the loop (CPU time, 32 MiB, 5 runs, GB/s), chains 1 / 2 / 3 / 4 /
//!   6 / 8: 1.4 / 2.35 / 2.6 / 2.85 / 2.37 / 2.2; the four-chain copy runs 5.4 instructions a
//!   byte (callgrind) at about 1.0 cycle a byte (at ~2.9 GHz), IPC about 5;
//! * this kernel: 5.9 instructions a byte in the hot loop and 6.2 for the whole stage 1
//!   (callgrind, 16 MiB; 46 instructions per 8 bytes in objdump, of which four materialise
//!   the chain number for the early return); `speed` stage1/interleaved/gear 1.4–2.3 GB/s CPU
//!   time depending on the neighbours, against 0.5–1.1 for avx2 (gathers) and 0.4–1.0 for
//!   scalar in the same runs; the generic eight-chain loop gave 0.49.

use super::mark;
use super::scalar::{scan_from, warm};
use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use std::ops::Range;

/// Chains per group. Measured on Zen 5 (bench `stage1/interleaved`): 8 beats 4 and 16.
pub const LANES: usize = 8;

/// # Safety
/// See [`super::Stage1Fn`]; this kernel needs no special instructions.
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    match t.family {
        // gear's masks are top bits and its magic 0: `h & mask == 0` is `h <= !mask`, a compare
        // that leaves `h` in place (the `and` form costs a register copy per check).
        Family::Gear if t.magic == 0 && (!t.mask_loose).leading_zeros() + (!t.mask_loose).count_ones() == 64 => {
            let lim = !t.mask_loose;
            gear(t, data, segs, origin, strict, loose, move |h| h <= lim)
        }
        Family::Gear => gear(t, data, segs, origin, strict, loose, |h| h & t.mask_loose == t.magic),
        Family::Crc32 => run(t, data, segs, origin, strict, loose, |h, o, i| {
            crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
        }),
        Family::Rabin => run(t, data, segs, origin, strict, loose, |h, o, i| {
            rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
        }),
    }
}

#[inline(always)]
fn run<F: Fn(u64, u8, u8) -> u64 + Copy>(
    t: &Tables,
    data: &[u8],
    segs: &[Range<usize>],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    roll: F,
) {
    let w = t.window;
    let (ml, magic) = (t.mask_loose, t.magic);
    let segs: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
    for group in segs.chunks(LANES) {
        if group.len() < LANES {
            // Too few segments to fill the lanes: split the group's work into LANES
            // equal sub-segments when that is worth it, otherwise run them one by one.
            let total: usize = group.iter().map(|s| s.len()).sum();
            if total >= LANES * 4 * w.max(64) {
                let subs = split(group, LANES);
                if subs.len() == LANES {
                    run(t, data, &subs, origin, strict, loose, roll);
                    continue;
                }
            }
            for s in group {
                let h = warm(data, s.start, w, &roll);
                scan_from(t, data, s.clone(), origin, strict, loose, h, &roll);
            }
            continue;
        }
        let mut h = [0u64; LANES];
        let mut a = [0usize; LANES];
        for k in 0..LANES {
            a[k] = group[k].start;
            h[k] = warm(data, a[k], w, &roll);
        }
        let common = group.iter().map(|s| s.len()).min().unwrap();
        // Lockstep over `common - 1` steps: check position a+i, roll to a+i+1.
        for i in 0..common - 1 {
            for k in 0..LANES {
                let e = a[k] + i;
                if h[k] & ml == magic {
                    mark(t, h[k], e - origin, strict, loose);
                }
                // e < a[k] + common - 1 < seg end <= data.len()
                h[k] = roll(h[k], data[e - w], data[e]);
            }
        }
        // Each chain finishes its own segment from position a + common - 1.
        for k in 0..LANES {
            let s = a[k] + common - 1..group[k].end;
            scan_from(t, data, s, origin, strict, loose, h[k], &roll);
        }
    }
}

/// Chains of the gear loop (see the module comment for the measurements).
pub const GEAR_CHAINS: usize = 4;

/// gear over groups of `GEAR_CHAINS` segments; `hit(h)` is the loose-class test.
#[inline(always)]
fn gear<M: Fn(u64) -> bool + Copy>(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64], hit: M) {
    const K: usize = GEAR_CHAINS;
    let w = t.window;
    let roll = |h: u64, _o: u8, i: u8| (h << 1).wrapping_add(t.gear[i as usize]);
    let segs: Vec<Range<usize>> = segs.iter().filter(|s| !s.is_empty()).cloned().collect();
    let total: usize = segs.iter().map(|s| s.len()).sum();
    // Fewer segments than chains (or unequal ones): re-cut into K equal pieces when there is
    // enough work, so every chain has some.
    let segs = if segs.len() % K != 0 && total >= K * 4 * w.max(64) { split(&segs, K) } else { segs };
    for group in segs.chunks(K) {
        if group.len() < K {
            for s in group {
                let h = warm(data, s.start, w, &roll);
                scan_from(t, data, s.clone(), origin, strict, loose, h, &roll);
            }
            continue;
        }
        let mut h = [0u64; K];
        let mut a = [0usize; K];
        for k in 0..K {
            a[k] = group[k].start;
            h[k] = warm(data, a[k], w, &roll);
        }
        let common = group.iter().map(|s| s.len()).min().unwrap();
        // Lockstep, two bytes per step: from the hash at a+i (already checked), roll in
        // data[a+i] and check a+i+1, roll in data[a+i+1] and check a+i+2. Reads stay below
        // a + 2 * steps <= a + common - 1 < end <= data.len(). The hot loop returns at a match
        // (rare); the rest of that step is done here with the marks.
        let steps = (common - 1) / 2;
        let end = 2 * steps;
        for k in 0..K {
            if hit(h[k]) {
                mark(t, h[k], a[k] - origin, strict, loose);
            }
        }
        let ptr: [*const u8; K] = std::array::from_fn(|k| data[a[k]..].as_ptr());
        let step = |k: usize, i: usize, from_second: bool, h: &mut [u64; K], strict: &mut [u64], loose: &mut [u64]| {
            if !from_second {
                h[k] = (h[k] << 1).wrapping_add(t.gear[data[a[k] + i] as usize]);
                if hit(h[k]) {
                    mark(t, h[k], a[k] + i + 1 - origin, strict, loose);
                }
            }
            h[k] = (h[k] << 1).wrapping_add(t.gear[data[a[k] + i + 1] as usize]);
            if hit(h[k]) {
                mark(t, h[k], a[k] + i + 2 - origin, strict, loose);
            }
        };
        let mut i = 0;
        loop {
            // SAFETY: chain k reads ptr[k] + i + {0, 1} for i + 1 < end <= common - 1, i.e.
            // data[a[k] + i + {0, 1}] inside group[k], inside `data`.
            let (at, k, second) = unsafe { gear_steps(&t.gear, &ptr, &mut h, i, end, hit) };
            if at >= end {
                break;
            }
            if second {
                // Chain k is at a+at+2, which matched.
                mark(t, h[k], a[k] + at + 2 - origin, strict, loose);
            } else {
                // Chain k is at a+at+1, which matched; it still has data[a+at+1] to roll in.
                mark(t, h[k], a[k] + at + 1 - origin, strict, loose);
                step(k, at, true, &mut h, strict, loose);
            }
            for kk in k + 1..K {
                step(kk, at, false, &mut h, strict, loose);
            }
            i = at + 2;
        }
        // Each chain finishes its own segment from position a + 2 * steps.
        for k in 0..K {
            let s = a[k] + 2 * steps..group[k].end;
            scan_from(t, data, s, origin, strict, loose, h[k], &roll);
        }
    }
}

/// The gear hot loop over offsets `i, i + 2, .. < end` of `K` chains (chain k's bytes at
/// `ptr[k]`), two bytes per step, with no marks and no calls (so the chains stay in
/// registers): `h[k]`, the hash at offset `i`, rolls in the byte at `i` and is checked (offset
/// `i + 1`), rolls in the byte at `i + 1` and is checked (offset `i + 2`). At the first match
/// it returns `(i, k, second)`: chains before `k` have done step `i`, chain `k` stopped at the
/// matching offset (`i + 2` if `second`, else `i + 1`), the others have not started it; or
/// `(end, 0, false)` when nothing matched.
///
/// Not inlined: a function of its own gets the registers to itself (inlined into the kernel,
/// the chains' pointers and the limit were spilled to the stack); it is called once per
/// match. Updating each chain in place (rather than returning before a matching step) keeps
/// it at nine instructions per chain per step.
///
/// # Safety
/// `ptr[k] + end` must stay inside the chain's bytes for every `k < K`.
#[inline(never)]
unsafe fn gear_steps<const K: usize, M: Fn(u64) -> bool>(
    g: &[u64; 256],
    ptr: &[*const u8; K],
    h: &mut [u64; K],
    mut i: usize,
    end: usize,
    hit: M,
) -> (usize, usize, bool) {
    let p = *ptr;
    let mut hh = *h;
    while i < end {
        for k in 0..K {
            // SAFETY: i + 1 < end (caller's contract); a byte indexes 256 entries.
            let (x, y) = unsafe { (*g.get_unchecked(*p[k].add(i) as usize), *g.get_unchecked(*p[k].add(i + 1) as usize)) };
            hh[k] = (hh[k] << 1).wrapping_add(x);
            if hit(hh[k]) {
                *h = hh;
                return (i, k, false);
            }
            hh[k] = (hh[k] << 1).wrapping_add(y);
            if hit(hh[k]) {
                *h = hh;
                return (i, k, true);
            }
        }
        i += 2;
    }
    *h = hh;
    (end, 0, false)
}

/// Splits the union of `group` (disjoint ranges) into up to `n` pieces of near-equal length.
/// Also used by the simd128 kernel.
pub(crate) fn split(group: &[Range<usize>], n: usize) -> Vec<Range<usize>> {
    let mut out = Vec::new();
    let total: usize = group.iter().map(|s| s.len()).sum();
    let piece = total.div_ceil(n);
    for s in group {
        let mut a = s.start;
        while a < s.end {
            let b = (a + piece).min(s.end);
            out.push(a..b);
            a = b;
        }
    }
    out
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    /// The interleaved kernel (the generic chains and the gear loop) against the scalar one,
    /// over the shared kernel-test profiles and segment layouts; needs no special ISA.
    #[test]
    fn interleaved_equals_scalar() {
        super::super::avx2::tests::compare("interleaved", super::stage1);
    }
}
