//! TTTD — Two Thresholds, Two Divisors (Eshghi & Tang, HP Labs TR 2005-30), the coarse chunker
//! of MT-FBC.
//!
//! The chunk that starts at `last` ends at the first position `p` with `p - last >= Tmin` whose
//! rolling hash satisfies the main divisor (`h mod D == D - 1`). While scanning, the last
//! position that satisfied the backup divisor (`h mod D' == D' - 1`, `D' < D`, so it is hit
//! about twice as often) is remembered. If `Tmax` is reached with no main-divisor hit, the chunk
//! ends at the remembered backup position, or at `Tmax` when there is none. The last chunk ends
//! at the end of the input.
//!
//! This follows Eshghi & Tang's pseudo-code literally: after a cut at a backup position the
//! scan resumes where it stopped (at `last + Tmax`), the bytes between the backup cut and that
//! point are not examined a second time.
//!
//! The hash at position `p` is the core's rolling hash ([`Tables::roll`]) of the `W` bytes
//! before `p` (zero-padded at the start of the input); it is never reset at a chunk start, so a
//! boundary depends only on the window of content before it (plus the TTTD state), as in the
//! rest of cutpoint.

use crate::error::Error;
use crate::rolling::Tables;
use crate::profile::{Family, Profile, DEFAULT_GEAR_SEED, MAX_CHUNK_LIMIT};

/// TTTD parameters. [`TttdParams::paper`] gives the MT-FBC report's values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TttdParams {
    /// Rolling-hash family: `rabin` (the report used Rabin fingerprints) or `crc32`. `gear` is
    /// rejected: its low bits depend on the last few bytes only, and the divisor test reads
    /// them.
    pub family: Family,
    /// Sliding window in bytes (`W`).
    pub window: usize,
    /// `Tmin`: the smallest chunk (except the last).
    pub min: usize,
    /// `Tmax`: the largest chunk.
    pub max: usize,
    /// `D`: the main divisor.
    pub main_divisor: u64,
    /// `D'`: the backup divisor, smaller than `D`.
    pub backup_divisor: u64,
}

impl TttdParams {
    /// The report's section 6.A: minimum 1 B, maximum 100 KB, main divisor 8 KB, secondary
    /// divisor 4 KB, sliding window 64 B (Rabin).
    pub fn paper() -> TttdParams {
        TttdParams {
            family: Family::Rabin,
            window: 64,
            min: 1,
            max: 100 * 1024,
            main_divisor: 8 * 1024,
            backup_divisor: 4 * 1024,
        }
    }

    /// Checks the parameters; every problem is an [`Error::Config`] with the reason.
    pub fn validate(&self) -> Result<(), Error> {
        let e = |m: String| Err(Error::config(format!("tttd: {m}")));
        if self.family == Family::Gear {
            return e("the gear hash is not usable for TTTD (its low bits depend on the last few bytes only); use rabin or crc32".into());
        }
        if self.window == 0 {
            return e("window must be at least 1 byte".into());
        }
        if self.window > 1 << 20 {
            return e(format!("window {} is too large (at most 1m)", self.window));
        }
        if self.min == 0 {
            return e("Tmin must be at least 1".into());
        }
        if self.max < self.min {
            return e(format!("Tmax ({}) is smaller than Tmin ({})", self.max, self.min));
        }
        if self.max > MAX_CHUNK_LIMIT {
            return e(format!("Tmax ({}) is larger than the limit 1g", self.max));
        }
        if self.main_divisor < 2 {
            return e(format!("main divisor D must be at least 2 (got {})", self.main_divisor));
        }
        if self.backup_divisor == 0 {
            return e("backup divisor D' must be at least 1".into());
        }
        if self.backup_divisor >= self.main_divisor {
            return e(format!(
                "backup divisor D' ({}) must be smaller than the main divisor D ({})",
                self.backup_divisor, self.main_divisor
            ));
        }
        let bits = if self.family == Family::Crc32 { 32 } else { 53 };
        if self.main_divisor > 1u64 << bits {
            return e(format!("main divisor {} exceeds the {}-bit {} hash", self.main_divisor, bits, self.family.name()));
        }
        Ok(())
    }
}

impl Default for TttdParams {
    fn default() -> Self {
        TttdParams::paper()
    }
}

/// `h mod d == d - 1`, with a mask when `d` is a power of two.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Divisor {
    d: u64,
    pow2: bool,
}

impl Divisor {
    pub(crate) fn new(d: u64) -> Divisor {
        Divisor { d, pow2: d.is_power_of_two() }
    }
    #[inline(always)]
    pub(crate) fn hit(self, h: u64) -> bool {
        if self.pow2 {
            h & (self.d - 1) == self.d - 1
        } else {
            h % self.d == self.d - 1
        }
    }
}

/// The core's rolling-hash tables for `family` over a `window`-byte window (the masks, which
/// depend on the profile's sizes, are not used here).
pub(crate) fn rolling_tables(family: Family, window: usize) -> Result<Box<Tables>, Error> {
    let avg = window.max(2).next_power_of_two();
    let p = Profile { family, min: window, avg, max: avg, window, magic: 0, nc: 0, seed: DEFAULT_GEAR_SEED };
    p.validate().map_err(|e| Error::config(format!("rolling hash: {e}")))?;
    Ok(Tables::new(&p))
}

/// A configured TTTD chunker. Cheap to share (`&Tttd` is `Sync`).
#[derive(Clone)]
pub struct Tttd {
    params: TttdParams,
    tables: Box<Tables>,
    main: Divisor,
    backup: Divisor,
}

impl Tttd {
    pub fn new(params: TttdParams) -> Result<Tttd, Error> {
        params.validate()?;
        let tables = rolling_tables(params.family, params.window)?;
        Ok(Tttd { main: Divisor::new(params.main_divisor), backup: Divisor::new(params.backup_divisor), params, tables })
    }

    pub fn params(&self) -> &TttdParams {
        &self.params
    }

    /// The rolling-hash tables (for oracles and tests).
    pub fn tables(&self) -> &Tables {
        &self.tables
    }

    /// Chunk end offsets of `data` (the last one is `data.len()`; none for empty input).
    pub fn cuts(&self, data: &[u8]) -> Vec<usize> {
        self.iter(data).collect()
    }

    /// The chunk end offsets of `data`, one at a time.
    pub fn iter<'a>(&'a self, data: &'a [u8]) -> TttdCuts<'a> {
        TttdCuts { t: self, data, pos: 0, h: 0, last: 0, backup: None }
    }
}

/// Iterator over TTTD chunk end offsets (see [`Tttd::iter`]).
pub struct TttdCuts<'a> {
    t: &'a Tttd,
    data: &'a [u8],
    /// Bytes rolled into `h` so far.
    pos: usize,
    h: u64,
    last: usize,
    backup: Option<usize>,
}

impl Iterator for TttdCuts<'_> {
    type Item = usize;

    fn next(&mut self) -> Option<usize> {
        let n = self.data.len();
        if self.last >= n {
            return None;
        }
        let t = self.t;
        let w = t.params.window;
        let (min, max) = (t.params.min, t.params.max);
        let (main, backup) = (t.main, t.backup);
        let tables = &*t.tables;
        let data = self.data;
        let mut h = self.h;
        let mut pos = self.pos;
        while pos < n {
            let leaving = if pos >= w { data[pos - w] } else { 0 };
            h = tables.roll(h, leaving, data[pos]);
            pos += 1;
            let len = pos - self.last;
            if len < min {
                continue;
            }
            if backup.hit(h) {
                self.backup = Some(pos);
            }
            if main.hit(h) {
                self.backup = None;
                return Some(self.emit(pos, h, pos));
            }
            if len < max {
                continue;
            }
            let cut = self.backup.take().unwrap_or(pos);
            return Some(self.emit(cut, h, pos));
        }
        self.h = h;
        self.pos = pos;
        self.backup = None;
        self.last = n;
        Some(n)
    }
}

impl TttdCuts<'_> {
    #[inline]
    fn emit(&mut self, cut: usize, h: u64, pos: usize) -> usize {
        self.h = h;
        self.pos = pos;
        self.last = cut;
        cut
    }
}
