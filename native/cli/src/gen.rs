//! `cutpoint gen`: deterministic test data (see `cutpoint_core::datagen`).

use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct GenArgs {
    /// Output directory for a versioned dataset (v0.bin = base, v1.bin... = versions).
    #[arg(long, required_unless_present = "stream")]
    out: Option<PathBuf>,
    /// Size of the base file, e.g. 64m.
    #[arg(long, default_value = "64m")]
    size: String,
    /// Number of versions after the base.
    #[arg(long, default_value_t = 4)]
    versions: usize,
    /// Modifications per version (insert, delete or overwrite, chosen at random).
    #[arg(long, default_value_t = 1000)]
    mods: usize,
    /// Bytes per modification.
    #[arg(long, default_value_t = 100)]
    mod_size: usize,
    /// Spread the modifications over the first PERCENT of the file.
    #[arg(long, default_value_t = 100.0)]
    region: f64,
    /// Seed of the generator.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Instead of a dataset, write SIZE random bytes to standard output (e.g. for memory tests).
    #[arg(long)]
    stream: bool,
}

pub fn run(_a: &GenArgs) -> Result<(), (u8, String)> {
    Err((2, "gen: not wired yet".into()))
}
