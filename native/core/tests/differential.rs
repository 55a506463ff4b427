//! Seeded differential loop: the same decoder and checks as the cargo-fuzz target
//! (`native/fuzz/fuzz_targets/engines.rs`), fed by a deterministic generator, so every
//! `cargo test` run compares all engines with the reference on a few hundred random cases.
//! `CUTPOINT_DIFF_ITERS=N` runs more.

mod common;

use common::fuzz_case::{check, decode};
use common::vectors::XorShift64Star;

fn iterations() -> usize {
    std::env::var("CUTPOINT_DIFF_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(1000)
}

#[test]
fn random_cases_all_engines_equal_reference() {
    common::backends();
    let mut g = XorShift64Star::new(0x00C0_FFEE_D1FF);
    let mut seen = std::collections::HashSet::new();
    for i in 0..iterations() {
        // A fuzz-like input: a 40-byte header and 0..4 KiB of raw tail.
        let len = 40 + (g.next_u64() % 4096) as usize;
        let input: Vec<u8> = (0..len).map(|_| (g.next_u64() >> 56) as u8).collect();
        let case = decode(&input);
        seen.insert((case.profile.family, case.backend, case.threads.min(3), case.lane_segment.is_some()));
        if let Err(e) = check(&case) {
            panic!(
                "case {i} failed: {e}\n  profile {} backend {} threads {} segment {:?} span {} reads {:?} hash {} data {} bytes\n  input (hex) {}",
                case.profile,
                case.backend,
                case.threads,
                case.lane_segment,
                case.span,
                case.read_sizes,
                case.hash.name(),
                case.data.len(),
                input.iter().map(|b| format!("{b:02x}")).collect::<String>()
            );
        }
    }
    // The decoder must reach every family, backend and both kinds of segmenting.
    assert!(seen.len() >= 3 * cutpoint_core::backend::available().len() * 2, "too little variety: {}", seen.len());
}

/// The decoder is total: short and empty inputs decode to valid cases too.
#[test]
fn decoder_accepts_any_input() {
    for input in [&[][..], &[0][..], &[255; 3][..], &[7; 13][..]] {
        check(&decode(input)).unwrap();
    }
}
