//! `cutpoint gen`: deterministic test data (see `cutpoint_core::datagen`).

use clap::Args;
use cutpoint_core::{datagen, profile::parse_size, Error};
use std::io::Write;
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

pub fn run(a: &GenArgs) -> Result<(), (u8, String)> {
    let usage = |m: String| (2u8, m);
    let size = parse_size(&a.size).map_err(|e| usage(format!("--size: {e}")))? as u64;
    if a.stream {
        let stdout = std::io::stdout();
        let mut out = std::io::BufWriter::with_capacity(1 << 20, stdout.lock());
        return match datagen::write_random(&mut out, size, a.seed).and_then(|_| out.flush().map_err(Error::Io)) {
            Ok(()) => Ok(()),
            Err(Error::Io(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
            Err(e) => Err((1, format!("<stdout>: {e}"))),
        };
    }
    let dir = a.out.as_ref().ok_or_else(|| usage("--out DIR is required".into()))?;
    let paths = datagen::write_versions(dir, size, a.versions, a.mods, a.mod_size, a.region, a.seed).map_err(|e| match e {
        Error::Io(e) => (1, format!("{}: {e}", dir.display())),
        other => usage(other.to_string()),
    })?;
    for p in paths {
        let len = std::fs::metadata(&p).map(|m| m.len()).unwrap_or(0);
        println!("{}\t{len}", p.display());
    }
    Ok(())
}
