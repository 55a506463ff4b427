//! `cutpoint check`: the store verifies a namespace (every pack re-hashed, the index against the
//! packs, every version's chunks indexed). Exit 1 if anything is wrong.

use super::remote::{fail, StoreArgs};
use super::Fail;
use clap::Args;

#[derive(Args)]
pub struct CheckArgs {
    #[command(flatten)]
    store: StoreArgs,
    /// Print the report as one JSON object.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &CheckArgs) -> Result<(), Fail> {
    let r = a.store.client()?.check_store().map_err(fail)?;
    if a.json {
        println!("{}", serde_json::to_string(&r).map_err(|e| Fail::io(e.to_string()))?);
    } else {
        println!("check {}: {} packs, {} chunks, {} versions, {} problems", a.store.ns, r.packs, r.chunks, r.versions, r.problems.len());
        for p in &r.problems {
            println!("  {p}");
        }
    }
    if r.problems.is_empty() {
        Ok(())
    } else {
        Err(Fail::io(format!("namespace '{}' has {} problems", a.store.ns, r.problems.len())))
    }
}
