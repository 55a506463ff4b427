//! `cutpoint rm`: deletes a version (or every version) of a name. Its chunks stay until
//! `cutpoint gc` finds them unreferenced.

use super::remote::{fail, StoreArgs};
use super::Fail;
use clap::Args;

#[derive(Args)]
pub struct RmArgs {
    /// The name whose version(s) to delete (their chunks stay until `cutpoint gc`).
    name: String,
    #[command(flatten)]
    store: StoreArgs,
    /// Only this version (default: every version of the name).
    #[arg(long)]
    version: Option<u64>,
}

pub fn run(a: &RmArgs) -> Result<(), Fail> {
    cutpoint_core::protocol::name::validate_name(&a.name).map_err(|e| Fail::usage(e.to_string()))?;
    let n = a.store.client()?.delete(&a.name, a.version).map_err(fail)?;
    println!("{}: {n} version(s) deleted", a.name);
    Ok(())
}
