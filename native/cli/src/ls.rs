//! `cutpoint ls`: the names and versions a namespace holds.

use super::remote::{fail, human, utc, StoreArgs};
use super::Fail;
use clap::Args;
use std::io::Write;

#[derive(Args)]
pub struct LsArgs {
    /// Only this name's versions.
    name: Option<String>,
    #[command(flatten)]
    store: StoreArgs,
    /// A JSON array instead of a table.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &LsArgs) -> Result<(), Fail> {
    let mut files = a.store.client()?.list().map_err(fail)?;
    if let Some(n) = &a.name {
        files.retain(|v| &v.name == n);
    }
    let mut out = std::io::stdout().lock();
    let wr = |e: std::io::Error| Fail::io(format!("<stdout>: {e}"));
    if a.json {
        serde_json::to_writer_pretty(&mut out, &files).map_err(|e| Fail::io(e.to_string()))?;
        return writeln!(out).map_err(wr);
    }
    writeln!(out, "{:<40} {:>7} {:>12} {:>8}  {:<19}  digest", "name", "version", "bytes", "chunks", "committed (UTC)").map_err(wr)?;
    for v in &files {
        writeln!(
            out,
            "{:<40} {:>7} {:>12} {:>8}  {}  {}",
            v.name,
            v.version,
            human(v.bytes),
            v.chunks,
            utc(v.created),
            &v.digest[..v.digest.len().min(16)]
        )
        .map_err(wr)?;
    }
    Ok(())
}
