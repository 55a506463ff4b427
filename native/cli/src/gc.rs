//! `cutpoint gc`: removes the chunks no committed version references (packs dropped or
//! rewritten), sparing packs younger than the grace period (they may hold a push in flight).

use super::remote::{fail, human, StoreArgs};
use super::Fail;
use clap::Args;

#[derive(Args)]
pub struct GcArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Leave packs younger than this many seconds alone.
    #[arg(long, default_value_t = 3600)]
    grace: u64,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &GcArgs) -> Result<(), Fail> {
    let r = a.store.client()?.gc(a.grace).map_err(fail)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| Fail::io(e.to_string()))?);
    } else {
        println!(
            "gc {}: {} chunks referenced; {} packs deleted, {} rewritten, {} chunks removed, {} freed; {} packs in their grace period; {} unnamed parts deleted, {} in their grace period",
            a.store.ns,
            r.referenced_chunks,
            r.packs_deleted,
            r.packs_rewritten,
            r.chunks_removed,
            human(r.bytes_freed),
            r.packs_in_grace,
            r.parts_deleted,
            r.parts_in_grace
        );
    }
    for w in &r.warnings {
        eprintln!("cutpoint gc: warning: {w}");
    }
    Ok(())
}
