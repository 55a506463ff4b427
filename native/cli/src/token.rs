//! `cutpoint token`: makes a bearer token for one namespace. The token is printed once; the
//! tokens file keeps only its hash.

use super::Fail;
use clap::Args;
use cutpoint_store::auth::{new_token, Scope};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct TokenArgs {
    /// The namespace the token grants.
    #[arg(long)]
    ns: String,
    /// Read only (list, restore, query); the default is read and write.
    #[arg(long)]
    read_only: bool,
    /// Append the grant to this tokens file (created if missing; `cutpoint serve --tokens`).
    /// Without it the grant line goes to standard error, to add by hand.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
}

pub fn run(a: &TokenArgs) -> Result<(), Fail> {
    let scope = if a.read_only { Scope::Read } else { Scope::Write };
    let (token, line) = new_token(&a.ns, scope).map_err(Fail::usage)?;
    match &a.tokens {
        Some(p) => {
            let mut o = std::fs::OpenOptions::new();
            o.create(true).append(true);
            #[cfg(unix)]
            std::os::unix::fs::OpenOptionsExt::mode(&mut o, 0o600);
            let mut f = o.open(p).map_err(|e| Fail::io(format!("{}: {e}", p.display())))?;
            writeln!(f, "{line}").map_err(|e| Fail::io(format!("{}: {e}", p.display())))?;
            eprintln!("cutpoint token: {} grant for namespace '{}' added to {}", scope.name(), a.ns, p.display());
        }
        None => eprintln!("cutpoint token: add this line to the store's tokens file:\n{line}"),
    }
    println!("{token}");
    Ok(())
}
