//! Scalar stage-1 kernel: one rolling chain at a time.

use super::mark;
use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::Family;
use std::ops::Range;

/// # Safety
/// See [`super::Stage1Fn`]; this kernel needs no special instructions.
pub unsafe fn stage1(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    super::check_args(t, data, segs, origin, strict, loose);
    for seg in segs {
        match t.family {
            Family::Crc32 => scan(t, data, seg.clone(), origin, strict, loose, |h, o, i| {
                crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64
            }),
            Family::Rabin => scan(t, data, seg.clone(), origin, strict, loose, |h, o, i| {
                rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)
            }),
            Family::Gear => scan(t, data, seg.clone(), origin, strict, loose, |h, _o, i| {
                (h << 1).wrapping_add(t.gear[i as usize])
            }),
        }
    }
}

/// Warm-up plus the rolling loop for one segment; `roll(h, leaving, entering)`.
#[inline(always)]
pub(crate) fn scan<F: Fn(u64, u8, u8) -> u64>(
    t: &Tables,
    data: &[u8],
    seg: Range<usize>,
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    roll: F,
) {
    if seg.is_empty() {
        return;
    }
    let w = t.window;
    let mut h = warm(data, seg.start, w, &roll);
    scan_from(t, data, seg, origin, strict, loose, h, &roll);
    let _ = &mut h;
}

/// Hash of `data[a - w..a]`, rolled in from zero.
#[inline(always)]
pub(crate) fn warm<F: Fn(u64, u8, u8) -> u64>(data: &[u8], a: usize, w: usize, roll: &F) -> u64 {
    data[a - w..a].iter().fold(0u64, |h, &c| roll(h, 0, c))
}

/// The rolling loop from a known hash `h` at `seg.start`.
#[inline(always)]
#[allow(clippy::too_many_arguments)] // the stage-1 arguments plus a lane's state
pub(crate) fn scan_from<F: Fn(u64, u8, u8) -> u64>(
    t: &Tables,
    data: &[u8],
    seg: Range<usize>,
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    mut h: u64,
    roll: &F,
) {
    let w = t.window;
    let (ml, magic) = (t.mask_loose, t.magic);
    let last = seg.end - 1;
    // Bounds: e - w >= 0 and e < last < data.len().
    let d = &data[seg.start - w..last];
    let base = seg.start - w;
    for e in seg.start..last {
        if h & ml == magic {
            mark(t, h, e - origin, strict, loose);
        }
        // SAFETY-free: indices are in `d` by construction (e - w >= base, e < last).
        h = roll(h, d[e - w - base], d[e - base]);
    }
    if h & ml == magic {
        mark(t, h, last - origin, strict, loose);
    }
}
