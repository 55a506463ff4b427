//! The skip-MIN engine for gear: one rolling chain that starts hashing at `s + MIN` after each
//! boundary `s` (warming up over the 64 bytes before it), the way sequential CDC (and the
//! `fastcdc` crate) does, instead of the two-stage scan that hashes every byte.
//!
//! Why it exists: stage 1 of SS-CDC hashes every position, but no position in `[s, s + MIN)`
//! can cut. At the default `gear:2k:8k:64k` (nc=2) the mean chunk is about 9.35 KiB, of which
//! the first 2 KiB are never candidates, so a scan that starts at `s + MIN - 64` touches about
//! 79% of the bytes. On one thread that is the whole difference between a byte-touching scan
//! and the peers that skip; with several threads [`Engine`](crate::Engine) runs it
//! speculatively (see [`SkipMin::cuts_from`]).
//!
//! Boundaries are exactly the boundary rule's (the same as [`crate::reference_cuts`] and the
//! two-stage engine): a chunk `[s, e)` ends at the first `e >= s + MIN` whose hash matches the
//! strict class while `e - s < AVG` and the loose class from `AVG` on, or at `s + MAX`.
//!
//! The hot loop ([`find`]) advances two bytes per step with the chain
//! `h(e + 2) = 4·h(e) + (2·G[x] + G[y])`: the table part is computed off the chain, so the
//! chain is one shift-add (one `lea`) per two bytes instead of two dependent shift-adds, and
//! the loop is bound by instructions per byte, not by the chain's latency. The odd position's
//! hash `2·h(e) + G[x]` is a side value that is only compared. gear's masks are top bits and
//! its magic is 0, so `h & mask == 0` is `h <= !mask`: one compare-and-branch per position.

use crate::rolling::Tables;
use crate::profile::{Family, Profile};

/// The skip-MIN chunker of one gear profile.
#[derive(Clone, Copy)]
pub struct SkipMin<'a> {
    g: &'a [u64; 256],
    /// `h <= lim_strict` ⇔ `h & mask_strict == 0`.
    lim_strict: u64,
    lim_loose: u64,
    min: usize,
    avg: usize,
    max: usize,
    two: bool,
}

impl<'a> SkipMin<'a> {
    /// The chunker for `p` with its tables `t`; `None` for families other than gear (whose
    /// hash does not depend on a fixed 64-byte window only, or whose matching is not a
    /// top-bits test).
    pub fn new(p: &Profile, t: &'a Tables) -> Option<SkipMin<'a>> {
        if p.family != Family::Gear || t.family != Family::Gear || t.magic != 0 {
            return None;
        }
        // Top-bit masks: !mask is all ones below the mask (validate() keeps 0 < bits < 64).
        let lim = |m: u64| (m != 0 && (!m).leading_zeros() == m.count_ones()).then_some(!m);
        Some(SkipMin {
            g: &t.gear,
            lim_strict: lim(t.mask_strict)?,
            lim_loose: lim(t.mask_loose)?,
            min: p.min,
            avg: p.avg,
            max: p.max,
            two: p.two_classes(),
        })
    }

    /// Cuts whose decision falls in positions `[p, q)` of a chunking whose current chunk starts
    /// at `start` (every position before `p` was decided earlier: no cut there), appended to
    /// `out`; returns the start of the chunk left open at `q`. Exactly what the stage-2
    /// [`Selector`](crate::stage2::Selector) decides over the same positions, so blocks may be
    /// cut anywhere: the only state carried between calls is the chunk start.
    ///
    /// `buf` holds the bytes `[base, base + buf.len())`, which must include `[p - 64, q - 1)`
    /// (`start + MIN` may lie before or beyond `p`).
    ///
    /// # Panics
    /// When `buf` does not hold those bytes (a caller's bug, never the input's).
    pub fn cuts_in(&self, buf: &[u8], base: usize, mut start: usize, p: usize, q: usize, out: &mut Vec<usize>) -> usize {
        if p >= q {
            return start;
        }
        assert!(p >= 64 && p - 64 >= base && q - 1 <= base + buf.len(), "skip-MIN: bytes [{}, {}) not in [{base}, {})", p.saturating_sub(64), q - 1, base + buf.len());
        // Offsets into `buf`: byte e of the input is d[e - base]; positions checked are
        // e in [p, q), reading bytes [e - 64, e) only, so below q - 1.
        let d = &buf[..q - 1 - base];
        loop {
            match self.next_cut(d, base, start, p, q) {
                Some(c) => {
                    out.push(c);
                    start = c;
                }
                None => return start,
            }
        }
    }

    /// The cut that ends the chunk starting at `s`, if positions `[p, q)` decide it (positions
    /// below `p` are known not to cut it); `None` when the chunk is still open at `q`. `buf`
    /// as for [`SkipMin::cuts_in`].
    pub fn next_cut_in(&self, buf: &[u8], base: usize, s: usize, p: usize, q: usize) -> Option<usize> {
        if p >= q {
            return None;
        }
        assert!(p >= 64 && p - 64 >= base && q - 1 <= base + buf.len(), "skip-MIN: bytes [{}, {}) not in [{base}, {})", p.saturating_sub(64), q - 1, base + buf.len());
        self.next_cut(&buf[..q - 1 - base], base, s, p, q)
    }

    /// [`SkipMin::next_cut_in`] with `d` holding bytes `[base, q - 1)`.
    #[inline]
    fn next_cut(&self, d: &[u8], base: usize, s: usize, p: usize, q: usize) -> Option<usize> {
        let lo = (s + self.min).max(p);
        let cap = s + self.max;
        // The strict region [lo, e1): before AVG (all of it below MAX for one class).
        let sa = if self.two { s + self.avg } else { usize::MAX };
        let e1 = sa.min(cap).min(q);
        let mut last = None; // hash at e1 - 1 when the strict region was scanned to its end
        if lo < e1 {
            let h = warm(self.g, d, lo - base);
            // SAFETY: positions [lo, e1) with lo - 64 >= base and e1 <= q: find reads bytes
            // [lo - 64, e1 - 1) ⊆ [base, q - 1) = d.
            match unsafe { find(self.g, d.as_ptr(), lo - base, e1 - base, h, self.lim_strict) } {
                Ok(e) => return Some(e + base),
                Err(h) => last = Some(h),
            }
        }
        // The loose region [max(lo, AVG), min(MAX, q)).
        if self.two {
            let (a, b) = (lo.max(sa), cap.min(q));
            if a < b {
                let h = match last {
                    // Continuing from the strict region: then a == e1 == sa < q, and byte
                    // e1 - 1 < q - 1 is in d.
                    Some(h) => (h << 1).wrapping_add(self.g[d[a - 1 - base] as usize]),
                    None => warm(self.g, d, a - base),
                };
                // SAFETY: as above, positions [a, b) with a >= lo, b <= q.
                if let Ok(e) = unsafe { find(self.g, d.as_ptr(), a - base, b - base, h, self.lim_loose) } {
                    return Some(e + base);
                }
            }
        }
        (cap <= q).then_some(cap)
    }
}

/// The hash at offset `a` of `d`: the 64 bytes before it rolled in from zero, two at a time.
#[inline(always)]
fn warm(g: &[u64; 256], d: &[u8], a: usize) -> u64 {
    let w = &d[a - 64..a];
    let mut h = 0u64;
    for pair in w.chunks_exact(2) {
        let x = (g[pair[0] as usize] << 1).wrapping_add(g[pair[1] as usize]);
        h = (h << 2).wrapping_add(opaque(x)); // one operation on the chain (see `opaque`)
    }
    h
}

/// The first offset `e` in `[e0, e1)` whose hash is `<= lim`, given `h`, the hash at `e0`
/// (`e0 < e1`); or, when none matches, `Err` with the hash at `e1 - 1`. Reads the bytes at
/// offsets `[e0, e1 - 1)` of `d` only.
///
/// # Safety
/// `d[e0..e1 - 1]` must be readable.
#[inline(always)]
unsafe fn find(g: &[u64; 256], d: *const u8, mut e: usize, e1: usize, mut h: u64, lim: u64) -> Result<usize, u64> {
    if h <= lim {
        return Ok(e);
    }
    // Invariant: h is the hash at e, e < e1, e checked.
    // SAFETY (all reads): offsets e + j for j < 8 with e < e1 - 8, i.e. below e1 - 1; a byte
    // indexes 256 entries.
    let byte = |i: usize| unsafe { *g.get_unchecked(*d.add(i) as usize) };
    let stop = e1.saturating_sub(8);
    while e < stop {
        // Four two-byte steps with one loop test: positions e+1 .. e+8.
        for j in [0usize, 2, 4, 6] {
            // `y` opaque too: then LLVM loads it with a `mov` and forms `2x + y` with one
            // `lea` (rather than `add x, x` + `add x, [mem]`), one ALU operation fewer a step;
            // measured 5-15% faster on Zen 3 in a stand-alone copy of the loop.
            let (x, y) = (byte(e + j), opaque(byte(e + j + 1)));
            let h1 = (h << 1).wrapping_add(x);
            if h1 <= lim {
                return Ok(e + j + 1);
            }
            h = (h << 2).wrapping_add(opaque((x << 1).wrapping_add(y)));
            if h <= lim {
                return Ok(e + j + 2);
            }
        }
        e += 8;
    }
    while e + 1 < e1 {
        h = (h << 1).wrapping_add(byte(e));
        e += 1;
        if h <= lim {
            return Ok(e);
        }
    }
    Err(h)
}

/// `v`, hidden from the optimiser: without it LLVM re-associates `4·h + (2·x + y)` into
/// `(4·h + 2·x) + y`, which puts three operations back on the chain (measured: 1.5 cycles a
/// byte, the latency of fastcdc's loop). An empty `asm!` costs no instruction.
#[inline(always)]
fn opaque(v: u64) -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        let mut v = v;
        // SAFETY: an empty template; it only claims to read and write `v`'s register.
        unsafe { std::arch::asm!("/* {0} */", inout(reg) v, options(pure, nomem, nostack, preserves_flags)) };
        v
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        v
    }
}

/// Chunk end offsets of all of `data` with the skip-MIN engine (`None` for families other
/// than gear). For benchmarks and tests; the engine uses [`SkipMin::cuts_in`] block by block.
pub fn skip_min_cuts(profile: &Profile, data: &[u8]) -> Option<Vec<usize>> {
    let t = Tables::new(profile);
    let sm = SkipMin::new(profile, &t)?;
    let mut out = Vec::with_capacity(data.len() / profile.avg + 1);
    let n = data.len();
    let mut start = 0;
    if n > 64 {
        start = sm.cuts_in(data, 0, 0, 64, n, &mut out);
    }
    if start < n {
        out.push(n);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reference_cuts;

    fn bytes(n: usize, seed: u64) -> Vec<u8> {
        crate::datagen::random_bytes(n, seed)
    }

    #[test]
    fn equals_reference_and_only_gear() {
        let data = bytes(300_000, 5);
        for prof in ["gear:2k:8k:64k", "gear:64:128:256", "gear:64:64:64", "gear:100:256:300:nc=0", "gear:1k:4k:8k:nc=3,seed=9"] {
            let p: Profile = prof.parse().unwrap();
            for n in [0, 1, 63, 64, 65, 130, 1000, 9999, data.len()] {
                assert_eq!(skip_min_cuts(&p, &data[..n]).unwrap(), reference_cuts(&p, &data[..n]), "{prof} n={n}");
            }
        }
        let p: Profile = "crc32:2k:16k:64k".parse().unwrap();
        assert!(skip_min_cuts(&p, &data).is_none());
    }
}
