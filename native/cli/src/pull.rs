//! `cutpoint pull`: restores a version from a store, verifying every chunk and the whole file.
//! The output appears only when it verified (written to a temporary file beside it, then
//! renamed); to standard output (`-o -`) the bytes flow as they verify, and a failure exits 3.

use super::remote::{fail, human, with_progress, StoreArgs};
use super::Fail;
use clap::Args;
use cutpoint_store::client::{pull, Progress, PullReport};
use std::io::BufWriter;
use std::path::{Path, PathBuf};

#[derive(Args)]
pub struct PullArgs {
    /// The stored name.
    name: String,
    #[command(flatten)]
    store: StoreArgs,
    /// Where to write it (`-`: standard output). Default: the name's last part, in the current
    /// directory, which must not exist yet (or --force).
    #[arg(long, short)]
    output: Option<PathBuf>,
    /// The version (default: the latest).
    #[arg(long)]
    version: Option<u64>,
    /// Overwrite the default output file if it exists.
    #[arg(long)]
    force: bool,
    /// Print a JSON object instead of a line.
    #[arg(long)]
    json: bool,
}

pub fn run(a: &PullArgs) -> Result<(), Fail> {
    cutpoint_core::protocol::name::validate_name(&a.name).map_err(|e| Fail::usage(e.to_string()))?;
    if a.version == Some(0) {
        return Err(Fail::usage("versions start at 1"));
    }
    let out_path = match &a.output {
        Some(p) => p.clone(),
        None => {
            let leaf = a.name.rsplit('/').next().unwrap_or(&a.name);
            let p = PathBuf::from(leaf);
            if p.exists() && !a.force {
                return Err(Fail::usage(format!("{} exists: use -o FILE or --force", p.display())));
            }
            p
        }
    };
    let client = a.store.client()?;
    let progress = Progress::default();
    let to_stdout = out_path.as_os_str() == "-";
    let rep = if to_stdout {
        let stdout = std::io::stdout();
        let mut w = BufWriter::with_capacity(1 << 20, stdout.lock());
        with_progress(!a.json, &a.name, &progress, || pull(&client, &a.name, a.version, &mut w, &progress)).map_err(fail)?
    } else {
        pull_to_file(&client, a, &out_path, &progress)?
    };
    let line = if a.json {
        serde_json::to_string(&rep).map_err(|e| Fail::io(e.to_string()))?
    } else {
        format!(
            "{} version {} -> {}: {} in {} chunks, verified ({}), {:.0} MB/s",
            rep.name,
            rep.version,
            if to_stdout { "<stdout>".into() } else { out_path.display().to_string() },
            human(rep.bytes),
            rep.chunks,
            rep.digest,
            if rep.seconds > 0.0 { rep.bytes as f64 / rep.seconds / 1e6 } else { 0.0 }
        )
    };
    if to_stdout {
        eprintln!("{line}");
    } else {
        println!("{line}");
    }
    Ok(())
}

fn pull_to_file(client: &cutpoint_store::client::Client, a: &PullArgs, out: &Path, progress: &Progress) -> Result<PullReport, Fail> {
    let dir = match out.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let leaf = out.file_name().and_then(|n| n.to_str()).unwrap_or("out");
    let tmp = dir.join(format!(".{leaf}.cutpoint-partial-{}", std::process::id()));
    let f = std::fs::File::create(&tmp).map_err(|e| Fail::io(format!("{}: {e}", tmp.display())))?;
    let mut w = BufWriter::with_capacity(1 << 20, f);
    let r = with_progress(!a.json, &a.name, progress, || pull(client, &a.name, a.version, &mut w, progress)).map_err(fail);
    let r = r.and_then(|rep| {
        let f = w.into_inner().map_err(|e| Fail::io(format!("{}: {}", tmp.display(), e.error())))?;
        f.sync_all().map_err(|e| Fail::io(format!("{}: {e}", tmp.display())))?;
        std::fs::rename(&tmp, out).map_err(|e| Fail::io(format!("{}: {e}", out.display())))?;
        Ok(rep)
    });
    if r.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    r
}
