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

/// `CUTPOINT_BACKEND`, when set and not empty.
fn forced() -> Option<Result<Backend, String>> {
    match std::env::var("CUTPOINT_BACKEND") {
        Ok(name) if !name.trim().is_empty() => {
            Some(Backend::parse(&name).map_err(|e| format!("CUTPOINT_BACKEND: {e}")))
        }
        _ => None,
    }
}

/// The first supported backend of the family's preference list.
pub fn fastest(family: Family) -> Backend {
    preference(family).iter().copied().find(|b| b.is_supported()).unwrap_or(Backend::Scalar)
}

/// Preference per family, fastest first, from `cargo bench --bench chunking -- stage1/` and
/// `cargo run --release --example speed` (median of repeated runs, 64 MiB of seeded random
/// bytes, one thread; see README for the full table).
pub fn preference(family: Family) -> &'static [Backend] {
    match family {
        Family::Crc32 => &CRC32_PREFERENCE,
        Family::Rabin => &RABIN_PREFERENCE,
        Family::Gear => &GEAR_PREFERENCE,
    }
}

const CRC32_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
const RABIN_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
const GEAR_PREFERENCE: [Backend; 5] = [Backend::Avx512, Backend::Avx2, Backend::Simd128, Backend::Interleaved, Backend::Scalar];
