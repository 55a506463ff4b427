//! Fuzz target: decode the input into (profile parameters, backend, threads, segment size,
//! span, read sizes, hash, data) and require that `cuts()`, `chunks()` and `stream()` of that
//! engine — and `sequential_cuts` — equal `reference_cuts`, with correct fingerprints.
//!
//! The decoder and the checks live in `native/core/tests/common/fuzz_case.rs`, shared with the
//! seeded loop that plain `cargo test` runs (`native/core/tests/differential.rs`).
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../core/tests/common/fuzz_case.rs"]
mod fuzz_case;

fuzz_target!(|input: &[u8]| {
    let case = fuzz_case::decode(input);
    if let Err(e) = fuzz_case::check(&case) {
        panic!(
            "{e}\n  profile {} backend {} threads {} segment {:?} span {} reads {:?} hash {} data {} bytes",
            case.profile,
            case.backend,
            case.threads,
            case.lane_segment,
            case.span,
            case.read_sizes,
            case.hash.name(),
            case.data.len()
        );
    }
});
