//! Optimized sequential CDC: the SS-CDC paper's baseline. One rolling chain that skips MIN
//! bytes after each boundary (warming the hash up over the W bytes before `s + MIN`), with
//! the per-family step specialised. Gives the same cuts as the reference; it exists to be
//! measured against.

use crate::rolling::{crc_add, rabin_add, Tables};
use crate::profile::{Family, Profile};

/// Chunk end offsets of `data`, sequentially.
pub fn sequential_cuts(profile: &Profile, data: &[u8]) -> Vec<usize> {
    let t = Tables::new(profile);
    let t = &*t;
    match t.family {
        Family::Crc32 => run(profile, t, data, |h, o, i| crc_add(&t.crct, h as u32 ^ t.crcu[o as usize], i) as u64),
        Family::Rabin => run(profile, t, data, |h, o, i| rabin_add(&t.rabin_t, h ^ t.rabin_u[o as usize], i)),
        Family::Gear => run(profile, t, data, |h, _o, i| (h << 1).wrapping_add(t.gear[i as usize])),
    }
}

#[inline(always)]
fn run<F: Fn(u64, u8, u8) -> u64>(p: &Profile, t: &Tables, data: &[u8], roll: F) -> Vec<usize> {
    let (w, n) = (p.window, data.len());
    let (ms, ml, magic) = (t.mask_strict, t.mask_loose, t.magic);
    let mut cuts = Vec::with_capacity(n / p.avg + 1);
    let mut s = 0;
    while s < n {
        let first = s + p.min;
        if first >= n {
            cuts.push(n);
            break;
        }
        let mut h = data[first - w..first].iter().fold(0u64, |h, &c| roll(h, 0, c));
        let mid = (s + p.avg).min(n);
        let end = (s + p.max).min(n);
        let mut e = first;
        // Strict class up to AVG, loose after; stop at MAX or the end of input.
        let cut = 'found: {
            while e < mid {
                if h & ms == magic {
                    break 'found e;
                }
                h = roll(h, data[e - w], data[e]);
                e += 1;
            }
            while e < end {
                if h & ml == magic {
                    break 'found e;
                }
                h = roll(h, data[e - w], data[e]);
                e += 1;
            }
            end
        };
        cuts.push(cut);
        s = cut;
    }
    cuts
}
