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
//! threads, lane segment, span or read sizes.
//!
//! Words, one per concept, the same in Rust, wasm, TypeScript, the CLI and the docs:
//! * **span** — the positions of one stage-1 job: the piece a thread (natively) or a worker
//!   (wasm) takes at a time (`Options::span`; TypeScript `span`, formerly `segmentSize`).
//! * **lane segment** — the positions one SIMD lane of a stage-1 kernel scans inside a span
//!   (`Options::lane_segment`; CLI `--lane-segment`, formerly `--segment-size`; TypeScript
//!   `laneSegment`; the wasm `Stage1::scan(…, lane_segment)`).
//! * **rolling hash** — gear, Rabin or CRC-32 over the window, which marks candidates
//!   ([`rolling`]); **fingerprint** — the chunk's id, BLAKE3 or SHA-256 ([`fingerprint`],
//!   chosen by `HashAlg` / `--hash`).
//! * **naive segment** — only in [`reference::naive_cuts`], the non-invariant baseline that
//!   chunks fixed pieces independently.
//!
//! Two modules are not part of the SS-CDC / RapidCDC product and say here why they are in it:
//! * [`mtfbc`] — TTTD and frequency-based chunking (MT-FBC), an alternative chunker measured
//!   against SS-CDC (`examples/mtfbc_bench.rs`, `tests/mtfbc.rs`). It runs on the core's
//!   rolling hashes ([`rolling::Tables`]), profile limits and `parallel` feature (rayon), so that
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
pub mod mtfbc;
pub mod profile;
pub mod protocol;
pub mod rapid;
pub mod reference;
pub mod rolling;
pub mod sequential;
pub mod skipmin;
pub mod stage1;
pub mod stage2;
/// The old path of [`rolling`] (rolling hashes: gear, Rabin, CRC-32), kept so that code written
/// against `cutpoint_core::rolling::Tables` still builds. "Hash" alone is ambiguous here: chunk
/// *fingerprints* (BLAKE3, SHA-256) are in [`fingerprint`].
#[doc(hidden)]
pub use rolling as hash;

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
