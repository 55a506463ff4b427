//! The readable reference chunker: the oracle every other engine is tested against.
//!
//! Sequential, no SIMD, no threads, no bitmaps. It follows the boundary rule word for word:
//! a chunk `[s, e)` ends at the first `e` with `e - s >= MIN` where the hash of the window
//! `[e - W, e)` matches (strict class while `e - s < AVG`, loose class after), or at
//! `e - s == MAX`, or at the end of the input.

use crate::rolling::Tables;
use crate::profile::Profile;

/// Chunk end offsets of `data` under `profile` (each chunk is `[previous end, end)`).
pub fn reference_cuts(profile: &Profile, data: &[u8]) -> Vec<usize> {
    let t = Tables::new(profile);
    let (w, n) = (profile.window, data.len());
    let mut cuts = Vec::new();
    let mut s = 0;
    while s < n {
        let mut e = s + profile.min;
        if e >= n {
            cuts.push(n);
            break;
        }
        // The hash at e depends on [e - W, e) only, so compute it fresh at the first position
        // that may cut, then roll.
        let mut h = t.hash_window(&data[e - w..e]);
        loop {
            let size = e - s;
            let matches = if size < profile.avg { t.is_strict(h) } else { t.is_loose(h) };
            if matches || size == profile.max || e == n {
                break;
            }
            h = t.roll(h, data[e - w], data[e]);
            e += 1;
        }
        cuts.push(e);
        s = e;
    }
    cuts
}

/// The naive segment-parallel chunking of P-Dedupe / SFSS: fixed segments, each chunked
/// independently from its own start. Boundaries depend on the segment size — this exists only
/// so the benchmark can show the dedup loss that SS-CDC avoids (SS-CDC paper, Figures 8–9).
pub fn naive_cuts(profile: &Profile, data: &[u8], naive_segment: usize) -> Vec<usize> {
    let seg = naive_segment.max(1);
    let mut cuts = Vec::new();
    let mut start = 0;
    while start < data.len() {
        let end = (start + seg).min(data.len());
        cuts.extend(reference_cuts(profile, &data[start..end]).into_iter().map(|c| c + start));
        start = end;
    }
    cuts
}
