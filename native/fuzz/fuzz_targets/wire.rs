//! Fuzz target: every parser of the store's wire format (packs, deltas, query bodies, recipes,
//! Range headers, names and namespaces, the Authorization header and the tokens file). The first byte picks the parser; the checks live in
//! `native/store/tests/common/wire_case.rs`, shared with the seeded loop `cargo test` runs
//! (`native/store/tests/parsers.rs`). Run: `cd native/fuzz && cargo fuzz run wire`.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[path = "../../store/tests/common/wire_case.rs"]
mod wire_case;

fuzz_target!(|input: &[u8]| {
    if let Err(e) = wire_case::check(input) {
        panic!("{e}");
    }
});
