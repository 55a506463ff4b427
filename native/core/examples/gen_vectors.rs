//! Rewrites the shared test vectors `tests/vectors/*.json` (repository root).
//!
//! ```text
//! cd native && cargo run --release -p cutpoint-core --example gen_vectors -- ../tests/vectors
//! ```
//!
//! The inputs, profiles, cases and the exact file text are defined once, in
//! `tests/common/vectors.rs`; `cargo test --test vectors` checks the checked-in files equal
//! this program's output byte for byte.

#[path = "../tests/common/vectors.rs"]
mod vectors;

use std::path::PathBuf;

fn main() {
    let dir = match std::env::args_os().nth(1) {
        Some(d) => PathBuf::from(d),
        None => {
            eprintln!("usage: gen_vectors DIR   (e.g. ../tests/vectors from native/)");
            std::process::exit(2);
        }
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("gen_vectors: cannot create {}: {e}", dir.display());
        std::process::exit(1);
    }
    for (stem, profile) in vectors::PROFILES {
        let path = dir.join(format!("{stem}.json"));
        let text = vectors::render(profile);
        if let Err(e) = std::fs::write(&path, &text) {
            eprintln!("gen_vectors: cannot write {}: {e}", path.display());
            std::process::exit(1);
        }
        println!("{} ({} bytes)", path.display(), text.len());
    }
}
