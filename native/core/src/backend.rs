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
/// name is an error), else the fastest kernel measured for that family on this kind of CPU.
/// Chosen once per family and cached.
pub fn detect_for(family: Family) -> Result<Backend, Error> {
    static CHOICE: [OnceLock<Result<Backend, String>>; 3] = [OnceLock::new(), OnceLock::new(), OnceLock::new()];
    let slot = match family {
        Family::Crc32 => 0,
        Family::Rabin => 1,
        Family::Gear => 2,
    };
    CHOICE[slot]
        .get_or_init(|| match forced() {
            Some(r) => r,
            None => Ok(fastest(family)),
        })
        .clone()
        .map_err(Error::Config)
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

/// The first supported backend of the family's preference list.
pub fn fastest(family: Family) -> Backend {
    preference(family).iter().copied().find(|b| b.is_supported()).unwrap_or(Backend::Scalar)
}

/// Preference per family, fastest first, by measurement.
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
/// and VBMI (gathers otherwise) and gathers for gear, so it leads every family. For gear the
/// one-chain scalar loop beats the interleaved one (its step is a shift and an add; eight
/// chains only add bookkeeping), so scalar comes before interleaved there.
pub fn preference(family: Family) -> &'static [Backend] {
    match family {
        Family::Crc32 => &CRC32_PREFERENCE,
        Family::Rabin => &RABIN_PREFERENCE,
        Family::Gear => &GEAR_PREFERENCE,
    }
}

const CRC32_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
const RABIN_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
const GEAR_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Scalar, Backend::Interleaved];

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
            assert!(preference(f).iter().take_while(|b| **b != fastest(f)).all(|b| !b.is_supported()));
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
