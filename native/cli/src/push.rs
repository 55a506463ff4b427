//! `cutpoint push`: sends files to a store, only the chunks it lacks (see
//! `cutpoint_store::client::push_file` for the pipeline).

use super::remote::{fail, human, with_progress, StoreArgs};
use super::{EngineArgs, Fail};
use clap::Args;
use cutpoint_core::rapid::Criterion;
use cutpoint_store::client::{push_file, Compression, Progress, PushOptions, PushReport};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct PushArgs {
    /// Files to push, each as the next version of its name.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// The name to store one file under (default: the file's name).
    #[arg(long)]
    name: Option<String>,
    /// Chunk with RapidCDC, the latest version of the same name giving the hints: ff, ff+mt,
    /// ff+rwt or ff+rwt+fpt (the last keeps regular CDC's boundaries).
    #[arg(long, value_name = "CRITERION")]
    rapid: Option<String>,
    #[command(flatten)]
    engine: EngineArgs,
    /// Pack size to aim at, e.g. 8m (kept within the store's --max-pack).
    #[arg(long, default_value = "8m")]
    pack_size: String,
    /// Pack uploads in flight at once.
    #[arg(long, default_value_t = 2)]
    uploads: usize,
    /// Compress novel chunks with zstd where the store takes it: auto (level 3, a chunk kept
    /// compressed only where that saves at least 1/16), off, or max (level 19, slow).
    #[arg(long, default_value = "auto", value_name = "auto|off|max")]
    compression: String,
    /// One JSON object per file on standard output (no progress bar).
    #[arg(long)]
    json: bool,
}

/// The name a file is stored under by default: its file name.
fn default_name(p: &std::path::Path) -> Result<String, Fail> {
    p.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| Fail::usage(format!("{}: no file name to store it under (use --name)", p.display())))
}

pub fn run(a: &PushArgs) -> Result<(), Fail> {
    // Every option is checked before any file is read or the store is asked.
    if a.name.is_some() && a.files.len() > 1 {
        return Err(Fail::usage("--name works with one file; several files are stored under their own names"));
    }
    let rapid = match &a.rapid {
        Some(c) => Some(Criterion::parse(c).map_err(|e| Fail::usage(e.to_string()))?),
        None => None,
    };
    let pack_bytes = cutpoint_core::profile::parse_size(&a.pack_size)
        .ok()
        .filter(|&n| (64 << 10..=256 << 20).contains(&n))
        .ok_or_else(|| Fail::usage(format!("--pack-size '{}' is not a size from 64k to 256m", a.pack_size)))?;
    let compression = Compression::parse(&a.compression)
        .ok_or_else(|| Fail::usage(format!("--compression '{}' is not auto, off or max", a.compression)))?;
    if a.uploads == 0 || a.uploads > 64 {
        return Err(Fail::usage("--uploads must be 1 to 64"));
    }
    let engine = a.engine.engine(None)?; // validates profile, backend, sizes
    if engine.hash_alg() == cutpoint_core::HashAlg::None {
        return Err(Fail::usage("a push needs chunk fingerprints: --hash blake3 or sha256"));
    }
    let mut names = Vec::new();
    for f in &a.files {
        let name = match &a.name {
            Some(n) => n.clone(),
            None => default_name(f)?,
        };
        cutpoint_core::protocol::name::validate_name(&name).map_err(|e| Fail::usage(e.to_string()))?;
        let meta = std::fs::metadata(f).map_err(|e| Fail::io(format!("{}: {e}", f.display())))?;
        if !meta.is_file() {
            return Err(Fail::io(format!("{}: not a regular file", f.display())));
        }
        names.push(name);
    }
    let client = a.store.client()?;
    let mut opts = PushOptions::new(engine.profile().clone());
    opts.engine = a.engine.options(None)?;
    opts.rapid = rapid;
    opts.pack_bytes = pack_bytes;
    opts.uploaders = a.uploads;
    opts.compression = compression;
    let mut out = std::io::stdout().lock();
    let wr = |e: std::io::Error| Fail::io(format!("<stdout>: {e}"));
    for (f, name) in a.files.iter().zip(&names) {
        let progress = Progress::default();
        let rep = with_progress(!a.json, name, &progress, || push_file(&client, f, name, &opts, &progress)).map_err(fail)?;
        if a.json {
            serde_json::to_writer(&mut out, &rep).map_err(|e| Fail::io(format!("<stdout>: {e}")))?;
            writeln!(out).map_err(wr)?;
        } else {
            writeln!(out, "{}", summary(&rep)).map_err(wr)?;
        }
        out.flush().map_err(wr)?;
    }
    Ok(())
}

/// One line a person can read.
pub fn summary(r: &PushReport) -> String {
    let dedup = if r.novel_bytes == 0 { "all known".to_string() } else { format!("{:.1}x", r.dedup_ratio) };
    format!(
        "{} -> version {}: {} processed, {} chunks, {} novel ({}), {} compressed, {} sent, dedup {dedup}, {:.0} MB/s{}",
        r.name,
        r.version,
        human(r.bytes),
        r.chunks,
        r.novel_chunks,
        human(r.novel_bytes),
        human(r.compressed_bytes),
        human(r.sent_bytes),
        if r.seconds > 0.0 { r.bytes as f64 / r.seconds / 1e6 } else { 0.0 },
        if r.hinted_chunks > 0 { format!(", {} chunks cut at RapidCDC hints", r.hinted_chunks) } else { String::new() }
    )
}
