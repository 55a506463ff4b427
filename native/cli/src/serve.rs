//! `cutpoint serve`: the chunk store over HTTP (protocol v1, `native/store/PROTOCOL.md`).

use super::Fail;
use clap::Args;
use cutpoint_store::routes::{serve, ServeConfig};
use cutpoint_store::Limits;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    /// The store's directory (packs, recipes, the index); created if missing.
    #[arg(long, value_name = "DIR")]
    data: PathBuf,
    /// Address to listen on (port 0: a free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:7373")]
    listen: String,
    /// Tokens file (lines from `cutpoint token`). Without it the store is open to anyone who can
    /// connect, and listens on loopback only.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// An origin allowed to call the store from a web page (repeatable; default: any origin).
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// Largest pack upload, e.g. 64m (413 above it).
    #[arg(long, default_value = "256m")]
    max_pack: String,
    /// Largest commit body (recipe), e.g. 128m.
    #[arg(long, default_value = "128m")]
    max_recipe: String,
    /// Rebuild the index from the packs and recipes before serving.
    #[arg(long)]
    reindex: bool,
}

pub fn run(a: &ServeArgs) -> Result<(), Fail> {
    let size = |flag: &str, s: &str| {
        cutpoint_core::profile::parse_size(s)
            .ok()
            .filter(|&n| n >= 1024)
            .map(|n| n as u64)
            .ok_or_else(|| Fail::usage(format!("--{flag} '{s}' is not a size of at least 1k (examples: 64m, 1g)")))
    };
    let limits = Limits {
        max_pack: size("max-pack", &a.max_pack)?,
        max_recipe: size("max-recipe", &a.max_recipe)?,
    };
    let listen = a
        .listen
        .parse()
        .map_err(|_| Fail::usage(format!("--listen '{}' is not an address like 127.0.0.1:7373", a.listen)))?;
    if let Some(t) = &a.tokens {
        if !t.is_file() {
            return Err(Fail::io(format!("{}: no such tokens file (make one with `cutpoint token`)", t.display())));
        }
    }
    let cfg = ServeConfig {
        data: a.data.clone(),
        listen,
        tokens: a.tokens.clone(),
        cors_origins: a.cors_origins.clone(),
        limits,
        reindex: a.reindex,
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail::io(format!("cannot start the server's runtime: {e}")))?;
    let data = a.data.display().to_string();
    rt.block_on(serve(cfg, |addr, rep, st| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "cutpoint serve: listening on http://{addr}");
        let _ = writeln!(out, "  data {data} (packs and recipes in {data}/objects, index {data}/index.sqlite)");
        match &st.tokens {
            Some(t) => {
                let _ = writeln!(out, "  auth: {} token grants", t.len());
            }
            None => {
                let _ = writeln!(out, "  auth: none (no --tokens): open to every local user; loopback only");
            }
        }
        if rep.packs_indexed + rep.versions_indexed + rep.packs_dropped + rep.versions_dropped > 0 || !rep.bad_packs.is_empty() {
            let _ = writeln!(
                out,
                "  index reconciled with the objects: {} packs and {} versions indexed, {} packs and {} versions dropped, {} bad packs",
                rep.packs_indexed,
                rep.versions_indexed,
                rep.packs_dropped,
                rep.versions_dropped,
                rep.bad_packs.len()
            );
            for b in &rep.bad_packs {
                let _ = writeln!(out, "  bad pack (left in place, not indexed): {b}");
            }
        }
        let _ = out.flush();
    }))
    .map_err(|e| match e.status() {
        400 => Fail::usage(e.to_string()),
        _ => Fail::io(e.to_string()),
    })
}
