//! Stage 2: sequential boundary selection over the candidate bitmaps.
//!
//! From the last boundary `s`, the next cut is the first candidate at `e >= s + MIN` (strict
//! class while `e - s < AVG`, loose class after), or `s + MAX`. Between candidates the bitmaps
//! are almost all zero words; the search skips eight words (512 bits) at a time, as the SS-CDC
//! paper's AVX-512 second stage does, with a single OR-reduction the compiler vectorises.
//!
//! The selector is incremental: it is fed the bitmaps of consecutive position ranges
//! `[p, q)` and keeps only the current chunk start between calls, so streaming carries no bits.

/// The bitmap of `n` positions whose set bits are `offsets` (candidates found elsewhere, e.g.
/// by stage 1 in another worker, as offsets from the first position), into `bits` (reused).
/// An offset outside `[0, n)` is returned as the error.
pub fn bits_from_offsets(bits: &mut Vec<u64>, n: usize, offsets: &[u32]) -> Result<(), usize> {
    bits.clear();
    bits.resize(n.div_ceil(64), 0);
    for &o in offsets {
        let o = o as usize;
        if o >= n {
            return Err(o);
        }
        bits[o >> 6] |= 1u64 << (o & 63);
    }
    Ok(())
}

/// A candidate bitmap view: bit `i` of `words` is position `origin + i`.
#[derive(Clone, Copy)]
pub struct Bits<'a> {
    pub words: &'a [u64],
    pub origin: usize,
}

impl Bits<'_> {
    /// First set bit at a position in `[lo, hi)`.
    #[inline]
    pub fn first_in(&self, lo: usize, hi: usize) -> Option<usize> {
        if lo >= hi {
            return None;
        }
        let (lo_r, hi_r) = (lo - self.origin, hi - self.origin);
        let mut wi = lo_r >> 6;
        let last_wi = (hi_r - 1) >> 6;
        let mut word = self.words[wi] & (!0u64 << (lo_r & 63));
        loop {
            if word != 0 {
                let pos = (wi << 6) + word.trailing_zeros() as usize;
                return if pos < hi_r { Some(pos + self.origin) } else { None };
            }
            wi += 1;
            if wi > last_wi {
                return None;
            }
            // 512-bit skip: eight zero words at a time.
            while wi + 8 <= last_wi + 1 && or8(&self.words[wi..wi + 8]) == 0 {
                wi += 8;
            }
            if wi > last_wi {
                return None;
            }
            word = self.words[wi];
        }
    }
}

#[inline(always)]
fn or8(w: &[u64]) -> u64 {
    (w[0] | w[1]) | (w[2] | w[3]) | (w[4] | w[5]) | (w[6] | w[7])
}

/// The stage-2 state machine.
#[derive(Clone, Debug)]
pub struct Selector {
    min: usize,
    avg: usize,
    max: usize,
    two: bool,
    /// Start of the current (not yet cut) chunk, absolute.
    start: usize,
}

impl Selector {
    pub fn new(min: usize, avg: usize, max: usize, two_classes: bool) -> Selector {
        Selector { min, avg, max, two: two_classes, start: 0 }
    }

    pub fn start(&self) -> usize {
        self.start
    }

    /// Whether the loose class is used (normalized chunking).
    pub fn two_classes(&self) -> bool {
        self.two
    }

    /// Makes `start` the start of the current chunk (resuming at a known boundary).
    pub fn restart(&mut self, start: usize) {
        self.start = start;
    }

    /// Consumes the candidates of positions `[p, q)` (every position before `p` was consumed
    /// earlier) and appends the cuts they decide to `out`. `loose` is ignored for one class.
    pub fn select(&mut self, strict: Bits, loose: Bits, p: usize, q: usize, out: &mut Vec<usize>) {
        loop {
            let s = self.start;
            let lo = (s + self.min).max(p);
            let cap = s + self.max;
            let found = if self.two {
                let sa = s + self.avg;
                strict.first_in(lo, sa.min(cap).min(q)).or_else(|| {
                    if sa <= q {
                        loose.first_in(lo.max(sa), cap.min(q))
                    } else {
                        None
                    }
                })
            } else {
                strict.first_in(lo, cap.min(q))
            };
            let cut = match found {
                Some(e) => e,
                None if cap <= q => cap,
                None => return,
            };
            out.push(cut);
            self.start = cut;
        }
    }

    /// End of input at `n`: the last chunk, if any, ends there.
    pub fn finish(&mut self, n: usize, out: &mut Vec<usize>) {
        if self.start < n {
            out.push(n);
            self.start = n;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_in_finds_bits_across_skips() {
        let mut words = vec![0u64; 100];
        words[3] = 1 << 5;
        words[40] = 1 << 63;
        words[99] = 1;
        let b = Bits { words: &words, origin: 1000 };
        assert_eq!(b.first_in(1000, 1000 + 6400), Some(1000 + 3 * 64 + 5));
        assert_eq!(b.first_in(1000 + 3 * 64 + 6, 1000 + 6400), Some(1000 + 40 * 64 + 63));
        assert_eq!(b.first_in(1000 + 3 * 64 + 6, 1000 + 40 * 64 + 63), None);
        assert_eq!(b.first_in(1000 + 40 * 64 + 64, 1000 + 6400), Some(1000 + 99 * 64));
        assert_eq!(b.first_in(1000 + 99 * 64 + 1, 1000 + 6400), None);
        assert_eq!(b.first_in(1005, 1005), None);
    }
}
