//! The options of a RapidCDC run: the acceptance criterion, the hint list, the fallback blocks.

use crate::error::Error;
use crate::profile::Profile;

/// The boundary acceptance criterion (paper, section 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Criterion {
    /// Fast-forwarding only: accept the hinted boundary.
    Ff,
    /// Marker test: the candidate's last byte equals the hint's marker.
    FfMt,
    /// Rolling-window test at the candidate end.
    FfRwt,
    /// Window test, then the candidate's fingerprint must be a known regular chunk. Boundaries
    /// equal regular CDC's.
    FfRwtFpt,
}

impl Criterion {
    pub const ALL: [Criterion; 4] = [Criterion::Ff, Criterion::FfMt, Criterion::FfRwt, Criterion::FfRwtFpt];

    pub fn name(self) -> &'static str {
        match self {
            Criterion::Ff => "ff",
            Criterion::FfMt => "ff+mt",
            Criterion::FfRwt => "ff+rwt",
            Criterion::FfRwtFpt => "ff+rwt+fpt",
        }
    }

    pub fn parse(s: &str) -> Result<Criterion, Error> {
        match s.trim().to_ascii_lowercase().as_str() {
            "ff" => Ok(Criterion::Ff),
            "ff+mt" | "mt" => Ok(Criterion::FfMt),
            "ff+rwt" | "rwt" => Ok(Criterion::FfRwt),
            "ff+rwt+fpt" | "fpt" => Ok(Criterion::FfRwtFpt),
            other => Err(Error::config(format!(
                "unknown RapidCDC criterion '{other}' (known: ff, ff+mt, ff+rwt, ff+rwt+fpt)"
            ))),
        }
    }
}

/// RapidCDC options.
#[derive(Clone, Debug)]
pub struct RapidOptions {
    pub criterion: Criterion,
    /// The paper's worst-case experiment (Figure 12): every hint is tested under the criterion
    /// and then rejected, so every chunk comes from the fallback.
    pub worst_case: bool,
    /// First fallback block in positions; 0 = [`default_first_block`]. While the region stays
    /// novel the next block is as large once more, then blocks double, up to `max_block`.
    pub first_block: usize,
    /// Largest fallback block in positions; 0 = the engine's block size
    /// ([`Engine::block_size`](crate::Engine::block_size)). The boundaries of ff, ff+mt and ff+rwt depend on the block
    /// schedule, so runs that must agree (native and wasm) use the same value.
    pub max_block: usize,
}

impl Default for RapidOptions {
    fn default() -> Self {
        RapidOptions {
            criterion: Criterion::FfRwt,
            worst_case: false,
            first_block: 0,
            max_block: 0,
        }
    }
}

impl RapidOptions {
    pub fn new(criterion: Criterion) -> RapidOptions {
        RapidOptions {
            criterion,
            ..RapidOptions::default()
        }
    }
}

/// Default first fallback block, in positions: `MAX - MIN` (a block from `s + MIN` that long
/// always holds the next boundary), at most `2 × (AVG - MIN)` (twice the expected distance to it
/// for profiles whose MAX is far out) and at least [`MIN_FIRST_BLOCK`].
///
/// History, measured with `examples/rapid_bench` (rabin:4k:8k:12k, 10 files of 16 MiB, ff):
/// 64 Ki → 2.51× / 1.27× chunking speedup at 1000 / 5000 modifications, 16 Ki → 3.09× / 1.32×.
/// A fixed 8 Ki was the default for a while and was put back to 16 Ki when the worst case
/// (Figure 12 analog) measured 18–25% slower with it against 2–16%; that measurement
/// subtracted a separately timed hashing pass from a full run, which moves such figures by
/// 10–20 points. With the fingerprint tape (chunking timed alone), see the bench results.
pub fn default_first_block(p: &Profile) -> usize {
    (p.max - p.min).min(2 * (p.avg - p.min)).max(MIN_FIRST_BLOCK)
}

/// Smallest default first fallback block: 4 Ki positions.
pub const MIN_FIRST_BLOCK: usize = 4 << 10;
