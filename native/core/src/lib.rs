//! cutpoint-core: content-defined chunking with SS-CDC.
//!
//! Layers, from simplest:
//! * [`reference_cuts`] — the readable sequential oracle;
//! * [`Engine::cuts`] / [`Engine::chunks`] — SS-CDC over a slice (stage 1 on all threads and
//!   SIMD lanes, stage 2 sequential), with fingerprints;
//! * [`Engine::stream`] — the same over any `Read`, with bounded memory.
//! * [`skipmin`] — for gear, the engine's other way to chunk: one chain that skips MIN after
//!   each boundary (used when the calibration measures it faster; same boundaries).
//! * [`rapid::Rapid`] — RapidCDC: hints from duplicate locality on top of the engine
//!   (FF+RWT+FPT keeps the reference's boundaries).
//!
//! Every engine yields the reference's boundaries for the same profile, whatever the backend,
//! threads, segment size or read sizes.
//!
//! Two modules are not part of the SS-CDC / RapidCDC product and say here why they are in it:
//! * [`mtfbc`] — TTTD and frequency-based chunking (MT-FBC), an alternative chunker measured
//!   against SS-CDC (`examples/mtfbc_bench.rs`, `tests/mtfbc.rs`). It runs on the core's
//!   rolling hashes ([`hash::Tables`]), profile limits and `parallel` feature (rayon), so that
//!   the comparison measures the chunking rule and not a different hash or thread pool. It
//!   uses only public items and nothing in the crate depends on it: it could move to a crate
//!   of its own, which would change the public path `cutpoint_core::mtfbc`, so it stays here.
//!   It takes no part in the boundary invariance above (its boundaries are its own).
//! * [`datagen`] — deterministic test data (random bytes, the RapidCDC paper's versioned
//!   datasets). Public because the CLI's `cutpoint gen`, the benchmarks and the tests of the
//!   core and the CLI generate the same inputs from one seed; pure functions of
//!   the seed and its parameters, with no dependency beyond `std` and [`Error`].

pub mod backend;
pub mod datagen;
pub mod engine;
pub mod error;
pub mod fingerprint;
pub mod hash;
pub mod mtfbc;
pub mod profile;
pub mod protocol;
pub mod rapid;
pub mod reference;
pub mod sequential;
pub mod skipmin;
pub mod stage1;
pub mod stage2;

pub use backend::Backend;
pub use engine::{default_threads, BlockSource, Chunk, Chunker, Direct, Engine, Options, Prefetch, StreamChunker};
pub use error::Error;
pub use fingerprint::{hex, Digest, HashAlg};
pub use profile::{Family, Profile};
pub use reference::{naive_cuts, reference_cuts};
pub use sequential::sequential_cuts;
pub use skipmin::skip_min_cuts;

/// Cut offsets of `data` under `profile` with the default engine (all cores, detected backend).
pub fn cut(profile: &Profile, data: &[u8]) -> Result<Vec<usize>, Error> {
    let e = Engine::new(profile.clone(), Options { hash: HashAlg::None, ..Options::default() })?;
    Ok(e.cuts(data))
}
