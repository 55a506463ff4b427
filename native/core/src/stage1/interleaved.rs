//! Interleaved scalar stage-1 kernel: `LANES` segments' rolling chains advance together in
//! one thread. Each chain's step depends on its previous value (a table load on the critical
//! path for crc32 and rabin), so one chain leaves most of the core idle; independent chains
//! fill it. The two-stage split is what makes this legal: stage 1 has no MIN skip, so every
//! segment's work is known up front.

use super::mark;
use super::scalar::{scan_from, warm};
use crate::hash::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use std::ops::Range;

/// Chains per group. Measured on Zen 5 (bench `stage1/interleaved`): 8 beats 4 and 16.
pub const LANES: usize = 8;

/// # Safety
/// See [`super::Stage1Fn`]; this kernel needs no special instructions.
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    match t.family {
        Family::Crc32 => run(t, data, segs, origin, strict, loose, |h, o, i| {
            crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
        }),
        Family::Rabin => run(t, data, segs, origin, strict, loose, |h, o, i| {
            rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
        }),
        Family::Gear => run(t, data, segs, origin, strict, loose, |h, _o, i| {
            (h << 1).wrapping_add(t.gear[i as usize])
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
