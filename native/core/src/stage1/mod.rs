//! Stage 1: boundary candidates over segments, in parallel.
//!
//! Every kernel has the same signature ([`Stage1Fn`]): given the buffer `data`, a list of
//! segments (ranges of cut positions `e`, each with `W <= e <= data.len()`), and bitmaps whose
//! bit `i` stands for position `origin + i`, it sets the bit of every position whose window
//! hash matches. `loose` is empty when the profile has one class; otherwise a position sets its
//! `loose` bit when it matches the loose mask and its `strict` bit too when it matches the
//! strict one. Kernels only set bits (callers zero the bitmaps), so segments may share words.
//!
//! The hash at `e` depends only on `data[e - W..e]`, so each segment warms its chain up over
//! the `W` bytes before its first position: segments are independent and any split gives the
//! same bits.

use crate::rolling::Tables;
use std::ops::Range;

pub mod interleaved;
pub mod scalar;
#[cfg(target_arch = "x86_64")]
pub mod avx2;
#[cfg(target_arch = "x86_64")]
pub mod avx512;
// Natively only in tests, with its instructions emulated (see the module).
#[cfg(any(all(target_arch = "wasm32", target_feature = "simd128"), test))]
pub mod simd128;

/// The one kernel signature.
///
/// # Safety
/// The caller guarantees that the CPU supports the kernel's instruction set, that every
/// segment satisfies `W <= start <= end <= data.len()`, and that the bitmaps cover every
/// position of every segment (`(e - origin) / 64 < strict.len()`, same for `loose` when
/// non-empty).
pub type Stage1Fn = unsafe fn(&Tables, &[u8], &[Range<usize>], usize, &mut [u64], &mut [u64]);

/// Stage 1 alone over all of `data` the way one engine thread runs it: 1 MiB spans, each cut
/// into `lanes` segments, bitmaps zeroed per span (`loose` used when `two`). For benchmarks
/// that time a kernel by itself (`examples/speed`, `examples/bench_rows`, `benches/chunking`).
///
/// # Safety
/// The CPU must support `kernel`'s instruction set (a kernel from
/// [`crate::backend::Backend::stage1_kernel`] of an available backend does).
pub unsafe fn scan_all(kernel: Stage1Fn, lanes: usize, t: &Tables, data: &[u8], strict: &mut Vec<u64>, loose: &mut Vec<u64>, two: bool) {
    let span = 1 << 20;
    let mut p = t.window;
    while p < data.len() {
        let q = (p + span).min(data.len());
        let words = (q - p).div_ceil(64);
        strict.clear();
        strict.resize(words, 0);
        if two {
            loose.clear();
            loose.resize(words, 0);
        }
        let seg = (q - p).div_ceil(lanes.max(1));
        let segs: Vec<Range<usize>> = (0..lanes.max(1)).map(|i| (p + i * seg).min(q)..(p + (i + 1) * seg).min(q)).collect();
        // SAFETY: the caller vouches for the instruction set; segments lie in [W, len]; the
        // bitmaps cover [p, q).
        unsafe { kernel(t, data, &segs, p, strict, loose) };
        p = q;
    }
}

/// Sets the bit(s) for a matching position (`h` already matched the loose mask).
#[inline(always)]
pub(crate) fn mark(t: &Tables, h: u64, bit: usize, strict: &mut [u64], loose: &mut [u64]) {
    if loose.is_empty() {
        strict[bit >> 6] |= 1u64 << (bit & 63);
    } else {
        loose[bit >> 6] |= 1u64 << (bit & 63);
        if t.is_strict(h) {
            strict[bit >> 6] |= 1u64 << (bit & 63);
        }
    }
}

/// Checks the safety contract (cheap; once per call).
pub(crate) fn check_args(t: &Tables, data: &[u8], segs: &[Range<usize>], origin: usize, strict: &[u64], loose: &[u64]) {
    for s in segs {
        assert!(s.start >= t.window && s.start <= s.end && s.end <= data.len() && s.start >= origin);
        if s.end > s.start {
            assert!((s.end - 1 - origin) / 64 < strict.len());
            assert!(loose.is_empty() || (s.end - 1 - origin) / 64 < loose.len());
        }
    }
}

// Shared by the SIMD kernels (avx2, avx512): lane bookkeeping around the vector loops.

/// Lane offsets (as i32) of `group[k].start - w - base`, in registers of `L` lanes.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(crate) fn lane_offsets(group: &[Range<usize>], w: usize) -> (usize, Vec<i32>) {
    let base = group.iter().map(|s| s.start - w).min().unwrap();
    (base, group.iter().map(|s| (s.start - w - base) as i32).collect())
}

/// Sets the bits of the lanes in `m` (hash values in `hs`, positions `pos[k] + i`).
#[inline(never)]
#[cold]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[allow(clippy::too_many_arguments)] // the stage-1 arguments plus a lane's state
pub(crate) fn mark_lanes(t: &Tables, m: u64, hs: &[u64], srcs: &[usize], i: usize, origin: usize, strict: &mut [u64], loose: &mut [u64]) {
    let mut m = m;
    while m != 0 {
        let k = m.trailing_zeros() as usize;
        m &= m - 1;
        let h = hs[k];
        if h & t.mask_loose == t.magic {
            mark(t, h, srcs[k] + i - origin, strict, loose);
        }
    }
}

/// Finishes each lane with the scalar loop from position `start + done` with hash `hs[k]`.
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
#[allow(clippy::too_many_arguments)] // the stage-1 arguments plus a lane's state
pub(crate) fn finish<F: Fn(u64, u8, u8) -> u64>(
    t: &Tables,
    data: &[u8],
    group: &[Range<usize>],
    done: usize,
    hs: &[u64],
    origin: usize,
    strict: &mut [u64],
    loose: &mut [u64],
    roll: F,
) {
    for (k, s) in group.iter().enumerate() {
        let p = s.start + done;
        if p < s.end {
            scalar::scan_from(t, data, p..s.end, origin, strict, loose, hs[k], &roll);
        }
    }
}

