//! The stage-1 backend registry: chosen once, forceable, reported.

use crate::error::Error;
use crate::profile::Family;
use crate::stage1::{self, Stage1Fn};
use std::sync::OnceLock;

/// A stage-1 kernel family.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// One rolling chain (portable).
    Scalar,
    /// Eight segments' chains interleaved in one thread (portable).
    Interleaved,
    /// AVX2: eight segments per register, `vpgatherdd` / `vpgatherdq` table lookups.
    Avx2,
    /// AVX-512: sixteen segments per register (the SS-CDC paper's design).
    Avx512,
    /// WebAssembly simd128.
    Simd128,
}

/// Every backend, lowest tier first.
pub const ALL: [Backend; 5] = [Backend::Scalar, Backend::Interleaved, Backend::Avx2, Backend::Avx512, Backend::Simd128];

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Scalar => "scalar",
            Backend::Interleaved => "interleaved",
            Backend::Avx2 => "avx2",
            Backend::Avx512 => "avx512",
            Backend::Simd128 => "simd128",
        }
    }

    pub fn parse(name: &str) -> Result<Backend, Error> {
        let b = ALL
            .iter()
            .copied()
            .find(|b| b.name().eq_ignore_ascii_case(name.trim()))
            .ok_or_else(|| {
                Error::config(format!(
                    "unknown backend '{name}' (known: {})",
                    ALL.iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
                ))
            })?;
        if !b.is_supported() {
            return Err(Error::config(format!(
                "backend '{}' is not supported on this CPU (available: {})",
                b.name(),
                available().iter().map(|b| b.name()).collect::<Vec<_>>().join(", ")
            )));
        }
        Ok(b)
    }

    /// Whether this machine can run the backend.
    pub fn is_supported(self) -> bool {
        match self {
            Backend::Scalar | Backend::Interleaved => true,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => std::is_x86_feature_detected!("avx2"),
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => {
                std::is_x86_feature_detected!("avx512f") && std::is_x86_feature_detected!("avx512bw")
            }
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Backend::Simd128 => true,
            #[allow(unreachable_patterns)]
            _ => false,
        }
    }

    pub fn avx2() -> Option<Backend> {
        Backend::Avx2.is_supported().then_some(Backend::Avx2)
    }
    pub fn avx512() -> Option<Backend> {
        Backend::Avx512.is_supported().then_some(Backend::Avx512)
    }

    /// The stage-1 kernel, for benches and tests that call kernels directly; `None` when the
    /// CPU lacks the instruction set. Calling it is `unsafe` (see [`Stage1Fn`]).
    pub fn stage1_kernel(self) -> Option<Stage1Fn> {
        self.is_supported().then(|| self.kernel())
    }

    /// The kernel. Only hands out kernels the CPU supports.
    pub(crate) fn kernel(self) -> Stage1Fn {
        assert!(self.is_supported(), "backend {} not supported", self.name());
        match self {
            Backend::Scalar => stage1::scalar::stage1,
            Backend::Interleaved => stage1::interleaved::stage1,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx2 => stage1::avx2::stage1,
            #[cfg(target_arch = "x86_64")]
            Backend::Avx512 => stage1::avx512::stage1,
            #[cfg(all(target_arch = "wasm32", target_feature = "simd128"))]
            Backend::Simd128 => stage1::simd128::stage1,
            #[allow(unreachable_patterns)]
            _ => unreachable!(),
        }
    }

    /// Segments a kernel wants per call to fill its lanes.
    pub fn lanes(self) -> usize {
        match self {
            Backend::Scalar => 1,
            Backend::Interleaved => stage1::interleaved::LANES,
            Backend::Avx2 => 32,
            Backend::Avx512 => 64,
            Backend::Simd128 => 4,
        }
    }
}

impl std::fmt::Display for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Backends this machine supports, lowest tier first.
pub fn available() -> Vec<Backend> {
    ALL.iter().copied().filter(|b| b.is_supported()).collect()
}

/// The default backend for `family`: `CUTPOINT_BACKEND` if set (an unknown or unsupported
/// name is an error), else the fastest kernel for that family measured on this CPU (see
/// [`calibration`]). Chosen once per family and cached.
pub fn detect_for(family: Family) -> Result<Backend, Error> {
    static CHOICE: [OnceLock<Result<Backend, String>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    CHOICE[slot(family)]
        .get_or_init(|| match forced() {
            Some(r) => r,
            None => Ok(fastest(family)),
        })
        .clone()
        .map_err(Error::Config)
}

fn slot(family: Family) -> usize {
    match family {
        Family::Crc32 => 0,
        Family::Rabin => 1,
        Family::Gear => 2,
    }
}

/// The default backend for the default profile's family (see [`detect_for`]).
pub fn detect() -> Result<Backend, Error> {
    detect_for(crate::profile::Profile::default_profile().family)
}

/// `CUTPOINT_BACKEND`, when set and not empty: the backend it names, or why it is invalid (an
/// unknown or unsupported name). The CLI's `backends` lists the backends even then.
pub fn env_override() -> Option<Result<Backend, Error>> {
    std::env::var("CUTPOINT_BACKEND").ok().and_then(|v| parse_override(&v))
}

/// The value of `CUTPOINT_BACKEND` parsed: `None` when empty; the error names the variable once
/// (`invalid option: CUTPOINT_BACKEND: unknown backend 'x' (known: ...)`).
pub fn parse_override(value: &str) -> Option<Result<Backend, Error>> {
    if value.trim().is_empty() {
        return None;
    }
    Some(Backend::parse(value).map_err(|e| match e {
        Error::Config(m) => Error::config(format!("CUTPOINT_BACKEND: {m}")),
        other => other,
    }))
}

fn forced() -> Option<Result<Backend, String>> {
    env_override().map(|r| {
        r.map_err(|e| match e {
            Error::Config(m) => m,
            other => other.to_string(),
        })
    })
}

/// The fastest supported backend for `family` on this CPU: the one with the highest
/// [`calibration`] figure (the first of [`preference`] where nothing can be timed, as on
/// wasm32, or on a tie).
pub fn fastest(family: Family) -> Backend {
    calibration(family).chosen
}

/// What a short measurement found for one family: each supported backend's stage-1
/// throughput and the one chosen.
#[derive(Clone, Debug)]
pub struct Calibration {
    pub family: Family,
    /// The profile timed (the family's usual one; the kernels' speed hardly depends on the
    /// sizes, only on the family and window).
    pub profile: &'static str,
    /// Bytes per run and runs per backend (the best run counts).
    pub bytes: usize,
    pub runs: usize,
    /// (backend, GB/s of the best run), in [`preference`] order; empty where nothing can be
    /// timed.
    pub figures: Vec<(Backend, f64)>,
    pub chosen: Backend,
    /// gear only: GB/s of the best run of the skip-MIN engine ([`crate::skipmin`]) chunking
    /// the same bytes (whole chunking, cuts included, against stage 1 alone for the kernels).
    pub skip_min: Option<f64>,
    /// Whether engines of this family chunk with the skip-MIN loop by default: it was measured
    /// more than 3% faster than the chosen kernel's stage 1 (see [`crate::Engine::skip_min`]).
    pub skip_min_chosen: bool,
}

/// Stage-1 throughput of every supported backend for `family`, measured once per process the
/// first time it is asked for (a few milliseconds: each kernel scans `CALIBRATION_BYTES` of
/// seeded bytes `CALIBRATION_RUNS` times after one warm-up run, and the best run counts, so a
/// time slice lost to another process does not decide). The fastest wins; a backend earlier
/// in [`preference`] keeps the place unless a later one is more than 3% faster, so that noise
/// does not flip between near-equal kernels.
///
/// CPUs differ in which kernel wins: gathers are fast on Intel cores and slow on AMD Zen 3,
/// where the interleaved scalar chains win for gear; so the choice is measured, not read from
/// the feature flags. For gear the skip-MIN engine is timed as well ([`Calibration::skip_min`]):
/// engines use it instead of stage 1 + stage 2 when it is more than 3% faster than the chosen
/// kernel's stage 1 alone.
pub fn calibration(family: Family) -> &'static Calibration {
    static CAL: [OnceLock<Calibration>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    CAL[slot(family)].get_or_init(|| calibrate(family))
}

/// Bytes each calibration run scans.
pub const CALIBRATION_BYTES: usize = 192 << 10;
/// Timed runs per backend.
pub const CALIBRATION_RUNS: usize = 5;

fn calibrate(family: Family) -> Calibration {
    let profile = match family {
        Family::Crc32 => "crc32:2k:16k:64k",
        Family::Rabin => "rabin:4k:8k:12k",
        Family::Gear => "gear:2k:8k:64k",
    };
    let supported: Vec<Backend> = preference(family).iter().copied().filter(|b| b.is_supported()).collect();
    let first = supported.first().copied().unwrap_or(Backend::Scalar);
    #[cfg_attr(target_arch = "wasm32", allow(unused_mut))] // filled in by the timing below
    let mut cal = Calibration {
        family,
        profile,
        bytes: CALIBRATION_BYTES,
        runs: CALIBRATION_RUNS,
        figures: Vec::new(),
        chosen: first,
        skip_min: None,
        skip_min_chosen: false,
    };
    #[cfg(not(target_arch = "wasm32"))]
    {
        let p: crate::profile::Profile = profile.parse().expect("calibration profile");
        let t = crate::rolling::Tables::new(&p);
        let data = crate::datagen::random_bytes(CALIBRATION_BYTES + p.window, 0xCA1B);
        let two = p.two_classes();
        let (mut s, mut l) = (Vec::new(), Vec::new());
        let mut best: Option<(Backend, f64)> = None;
        for b in supported {
            let k = b.kernel();
            let mut fastest = f64::INFINITY;
            for run in 0..=CALIBRATION_RUNS {
                let t0 = std::time::Instant::now();
                // SAFETY: `b` is supported (filtered above), so its kernel's instruction set
                // is present; scan_all builds valid segments and bitmaps.
                unsafe { stage1::scan_all(k, b.lanes(), &t, &data, &mut s, &mut l, two) };
                let dt = t0.elapsed().as_secs_f64();
                if run > 0 {
                    fastest = fastest.min(dt);
                }
            }
            let gbs = CALIBRATION_BYTES as f64 / fastest.max(1e-9) / 1e9;
            cal.figures.push((b, gbs));
            if best.is_none_or(|(_, g)| gbs > g * 1.03) {
                best = Some((b, gbs));
            }
        }
        if let Some((b, _)) = best {
            cal.chosen = b;
        }
        // gear: the skip-MIN loop chunking the same bytes, timed the same way.
        if let Some(sm) = crate::skipmin::SkipMin::new(&p, &t) {
            let mut cuts = Vec::new();
            let mut fastest = f64::INFINITY;
            for run in 0..=CALIBRATION_RUNS {
                cuts.clear();
                let t0 = std::time::Instant::now();
                std::hint::black_box(sm.cuts_in(&data, 0, 0, p.window, data.len(), &mut cuts));
                let dt = t0.elapsed().as_secs_f64();
                if run > 0 {
                    fastest = fastest.min(dt);
                }
            }
            let gbs = CALIBRATION_BYTES as f64 / fastest.max(1e-9) / 1e9;
            cal.skip_min = Some(gbs);
            cal.skip_min_chosen = best.is_some_and(|(_, g)| gbs > g * 1.03);
        }
    }
    cal
}

/// Preference per family: the order calibration tries backends in (an earlier one keeps the
/// place unless a later one is clearly faster) and the choice where nothing can be timed.
/// Fastest first as measured on Intel:
///
/// Stage-1 throughput on the development machine (2-core VM, Intel Xeon "Sapphire Rapids"
/// class, AVX-512 with VBMI and GFNI; `CUTPOINT_REPS=7 CUTPOINT_MIB=16 cargo run --release
/// --example speed`, process-CPU-time medians of 7 runs, several runs on a busy machine, the
/// range is shown), GB/s:
///
/// | kernel            | crc32 (W=256) | rabin (W=48) | gear      |
/// |-------------------|---------------|--------------|-----------|
/// | scalar            | 0.32–0.34     | 0.30–0.35    | 0.95–1.15 |
/// | interleaved       | 0.58–0.67     | 0.58–0.68    | 0.79–0.89 |
/// | avx2 (gathers)    | 0.93–1.24     | 0.85–1.12    | 2.2–2.3 ¹ |
/// | avx512 gathers    | 0.99–1.20     | 1.23–1.57    | 2.6–2.7 ¹ |
/// | avx512 affine     | 2.9–4.1       | 2.7–3.0      | —         |
///
/// ¹ with two scalar chains beside the gather lanes (1.74–1.98 and 2.2–2.55 without).
///
/// `avx512` runs the byte-sliced GF(2)-affine kernel for crc32 and rabin where the CPU has GFNI
/// and VBMI (gathers otherwise) and gathers for gear. (These Intel figures predate the
/// four-chain gear loop of the interleaved kernel.)
///
/// On AMD EPYC Zen 3 (family 25 model 1, AVX2, no AVX-512; 2 vCPUs shared with other
/// builds), the calibration measured (GB/s, best of 5 × 192 KiB, three runs of `cutpoint
/// backends` / `speed`): gear avx2 0.81–1.47, scalar 0.40–1.02, interleaved 1.24–2.34 →
/// interleaved; crc32 avx2 0.43–0.45, interleaved 0.32–0.34, scalar 0.31 → avx2; rabin avx2
/// 0.37–0.38, interleaved 0.32–0.34, scalar 0.31–0.37 → avx2. The AMD EPYC of issue #15
/// (AVX-512) measured gear avx512 1.37 and avx2 1.72: the order below would have picked avx512
/// there, which is why the order is only a tie-break now and the choice is measured.
pub fn preference(family: Family) -> &'static [Backend] {
    match family {
        Family::Crc32 => &CRC32_PREFERENCE,
        Family::Rabin => &RABIN_PREFERENCE,
        Family::Gear => &GEAR_PREFERENCE,
    }
}

const CRC32_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
const RABIN_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
/// Interleaved before scalar for gear: the four-chain gear loop is about twice the one chain in
/// wasm, where this order is the choice since nothing is timed. Measured with the web package
/// in Node 20, `chunkAll(64 MiB of random bytes, { workers: 0, wasm: 'plain', backend, hash:
/// 'none' })`, three runs each on the (busy) AMD EPYC Zen 3 VM: interleaved 0.27–0.50 GB/s,
/// scalar 0.16–0.24.
const GEAR_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferences_rank_every_backend_once() {
        for f in [Family::Crc32, Family::Rabin, Family::Gear] {
            let mut p: Vec<&str> = preference(f).iter().map(|b| b.name()).collect();
            p.sort();
            let mut all: Vec<&str> = ALL.iter().map(|b| b.name()).collect();
            all.sort();
            assert_eq!(p, all, "{f:?}");
            assert!(fastest(f).is_supported());
        }
    }

    /// The choice is the measured best (within the 3% that keeps an earlier one), every
    /// supported backend was measured, and nothing unsupported was.
    #[test]
    fn calibration_picks_the_measured_fastest() {
        for f in [Family::Crc32, Family::Rabin, Family::Gear] {
            let c = calibration(f);
            assert!(c.chosen.is_supported());
            let measured: Vec<Backend> = c.figures.iter().map(|x| x.0).collect();
            let want: Vec<Backend> = preference(f).iter().copied().filter(|b| b.is_supported()).collect();
            assert_eq!(measured, want, "{f:?}");
            let top = c.figures.iter().map(|x| x.1).fold(0.0, f64::max);
            let got = c.figures.iter().find(|x| x.0 == c.chosen).unwrap().1;
            assert!(got.is_finite() && got > 0.0 && got * 1.03 >= top, "{f:?}: {:?}", c.figures);
            assert_eq!(fastest(f), c.chosen);
            // skip-MIN: timed for gear only (where anything is timed), chosen only when faster.
            assert_eq!(c.skip_min.is_some(), f == Family::Gear && !c.figures.is_empty(), "{f:?}");
            if c.skip_min_chosen {
                assert!(c.skip_min.unwrap() > got * 1.03, "{f:?}: {:?} vs {got}", c.skip_min);
            }
        }
    }

    #[test]
    fn a_bad_override_names_the_variable_once() {
        // Issue #19: the message read "invalid option: CUTPOINT_BACKEND: invalid option: ...".
        let e = parse_override("nosuch").unwrap().unwrap_err().to_string();
        assert_eq!(
            e,
            "invalid option: CUTPOINT_BACKEND: unknown backend 'nosuch' (known: scalar, interleaved, avx2, avx512, simd128)"
        );
        assert_eq!(e.matches("invalid option").count(), 1, "{e}");
        assert!(parse_override("  ").is_none());
        assert_eq!(parse_override("Scalar").unwrap().unwrap(), Backend::Scalar);
    }

    #[test]
    fn every_supported_backend_hands_out_its_kernel() {
        for b in ALL {
            assert_eq!(b.stage1_kernel().is_some(), b.is_supported(), "{b}");
        }
    }
}
