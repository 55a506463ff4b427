//! `cutpoint push`: sends files to a store, only the chunks it lacks (see
//! `cutpoint_store::client::push_file` for the pipeline).

use super::remote::{fail, human, with_progress, StoreArgs};
use super::{EngineArgs, Fail};
use clap::Args;
use cutpoint_core::rapid::Criterion;
use cutpoint_store::client::{push_file, push_files_cached, push_stream, Compression, Progress, PushOptions, PushReport};
use cutpoint_store::pushcache::{default_dir, PushCache};
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct PushArgs {
    /// Files to push, each as the next version of its name; a directory pushes every file
    /// under it, named by its path relative to the directory. Several files go as one pipeline
    /// (shared queries and packs, commits in batches). `-` pushes standard input (with
    /// --name), read once: its bytes are kept in temporary files only until their chunks are
    /// answered and sent.
    #[arg(required = true)]
    files: Vec<PathBuf>,
    #[command(flatten)]
    store: StoreArgs,
    /// The name to store one file under (default: the file's name); with a directory, a prefix
    /// of its files' names (NAME/relative/path).
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
    /// Compress novel chunks with zstd where the store takes it: auto (level 4, a chunk kept
    /// compressed only where that saves at least 1/16), off, or max (level 19, slow).
    #[arg(long, default_value = "auto", value_name = "auto|off|max")]
    compression: String,
    /// One JSON object per file on standard output (no progress bar).
    #[arg(long)]
    json: bool,
    /// The push cache's directory (default: $XDG_CACHE_HOME/cutpoint or ~/.cache/cutpoint).
    /// A push of several files or a directory remembers each file's size, times and inode and
    /// the version it was committed as; next time, to the same store and namespace, a file
    /// whose metadata did not change is not read: where its version is still the name's latest
    /// it is reported unchanged (no new version), else that version is committed again as is.
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Read every file (the push cache is neither read nor written).
    #[arg(long, conflicts_with = "cache")]
    no_cache: bool,
    /// Commit a new version of every file, also of a file the push cache finds unchanged whose
    /// version is still the name's latest (by default: reported unchanged, nothing committed).
    #[arg(long)]
    new_versions: bool,
    /// Commit the whole recipe even where the store takes recipe parts (as against a store
    /// without them; a recipe over the store's limit is then refused before anything is sent).
    #[arg(long, hide = true)]
    no_parts: bool,
}

/// The name a file is stored under by default: its file name.
fn default_name(p: &std::path::Path) -> Result<String, Fail> {
    p.file_name()
        .and_then(|n| n.to_str())
        .map(str::to_string)
        .ok_or_else(|| Fail::usage(format!("{}: no file name to store it under (use --name)", p.display())))
}

/// The files under `dir` (recursively, in name order), each with its path relative to `dir`
/// as its name ('/'-separated, under `prefix` if given). Links and other non-files are left out.
fn walk(dir: &std::path::Path, prefix: Option<&str>, out: &mut Vec<(PathBuf, String)>) -> Result<(), Fail> {
    let mut stack = vec![(dir.to_path_buf(), prefix.map(str::to_string))];
    while let Some((d, pre)) = stack.pop() {
        let mut ents: Vec<_> = std::fs::read_dir(&d)
            .map_err(|e| Fail::io(format!("{}: {e}", d.display())))?
            .collect::<Result<_, _>>()
            .map_err(|e| Fail::io(format!("{}: {e}", d.display())))?;
        ents.sort_by_key(|e| e.file_name());
        let mut subdirs = Vec::new();
        for e in ents {
            let fname = e.file_name();
            let Some(fname) = fname.to_str() else {
                return Err(Fail::usage(format!("{}: a file name that is not UTF-8", e.path().display())));
            };
            let name = match &pre {
                Some(p) => format!("{p}/{fname}"),
                None => fname.to_string(),
            };
            let ft = e.file_type().map_err(|err| Fail::io(format!("{}: {err}", e.path().display())))?;
            if ft.is_dir() {
                subdirs.push((e.path(), Some(name)));
            } else if ft.is_file() {
                out.push((e.path(), name));
            }
        }
        // Depth first, in name order.
        stack.extend(subdirs.into_iter().rev());
    }
    Ok(())
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
    let stdin = a.files.iter().any(|f| f.as_os_str() == "-");
    if stdin && a.files.len() > 1 {
        return Err(Fail::usage("'-' (standard input) is pushed alone, not with other files"));
    }
    let stdin_name = match (&a.name, stdin) {
        (None, true) => return Err(Fail::usage("'cutpoint push -' (standard input) needs --name NAME to store it under")),
        (Some(n), true) => Some(n.clone()),
        _ => None,
    };
    let mut inputs: Vec<(PathBuf, String)> = Vec::new();
    let mut dirs = false;
    for f in a.files.iter().filter(|_| !stdin) {
        let meta = std::fs::metadata(f).map_err(|e| Fail::io(format!("{}: {e}", f.display())))?;
        if meta.is_dir() {
            dirs = true;
            walk(f, a.name.as_deref(), &mut inputs)?;
            continue;
        }
        let name = match &a.name {
            Some(n) => n.clone(),
            None => default_name(f)?,
        };
        if !meta.is_file() {
            return Err(Fail::io(format!("{}: not a regular file", f.display())));
        }
        inputs.push((f.clone(), name));
    }
    for (_, name) in &inputs {
        cutpoint_core::protocol::name::validate_name(name).map_err(|e| Fail::usage(format!("{e} (use --name)")))?;
    }
    if let Some(n) = &stdin_name {
        cutpoint_core::protocol::name::validate_name(n).map_err(|e| Fail::usage(format!("{e} (use --name)")))?;
    } else if inputs.is_empty() {
        return Err(Fail::usage("no files to push (the directories are empty)"));
    }
    let client = a.store.client()?;
    let mut opts = PushOptions::new(engine.profile().clone());
    opts.engine = a.engine.options(None)?;
    opts.rapid = rapid;
    opts.pack_bytes = pack_bytes;
    opts.uploaders = a.uploads;
    opts.parts = !a.no_parts;
    opts.compression = compression;
    opts.new_versions = a.new_versions;
    let mut out = std::io::stdout().lock();
    let wr = |e: std::io::Error| Fail::io(format!("<stdout>: {e}"));
    let mut print = |rep: &PushReport| -> Result<(), Fail> {
        if a.json {
            serde_json::to_writer(&mut out, rep).map_err(|e| Fail::io(format!("<stdout>: {e}")))?;
            writeln!(out).map_err(wr)?;
        } else {
            writeln!(out, "{}", summary(rep)).map_err(wr)?;
        }
        out.flush().map_err(wr)
    };
    if let Some(name) = &stdin_name {
        let progress = Progress::default();
        let input = std::io::stdin();
        let rep = with_progress(!a.json, name, &progress, || push_stream(&client, input, name, &opts, &progress)).map_err(fail)?;
        return print(&rep);
    }
    // One file (or RapidCDC, whose hints come from each name's own base): a pipeline per file.
    if (inputs.len() == 1 && !dirs) || opts.rapid.is_some() {
        for (f, name) in &inputs {
            let progress = Progress::default();
            let rep = with_progress(!a.json, name, &progress, || push_file(&client, f, name, &opts, &progress)).map_err(fail)?;
            print(&rep)?;
        }
        return Ok(());
    }
    let progress = Progress::default();
    let label = format!("{} files", inputs.len());
    let mut cache = open_cache(a, client.base(), client.namespace());
    let reps = with_progress(!a.json, &label, &progress, || push_files_cached(&client, &inputs, &opts, &progress, cache.as_mut())).map_err(fail)?;
    if let Some(c) = &cache {
        if let Err(e) = c.save() {
            eprintln!("cutpoint: the push cache {}: {e} (the push is done; the next one reads every file)", c.file().display());
        }
    }
    let mut failed = None;
    for (rep, (_, name)) in reps.into_iter().zip(&inputs) {
        match rep {
            Ok(r) => print(&r)?,
            Err(e) => {
                let f = fail(e);
                eprintln!("cutpoint: {name}: {}", f.msg);
                failed.get_or_insert(f);
            }
        }
    }
    match failed {
        Some(f) => Err(Fail {
            code: f.code,
            msg: "some files were not committed (see above)".into(),
        }),
        None => Ok(()),
    }
}

/// The push cache of this store and namespace, unless `--no-cache` (or there is no cache
/// directory); a cache that cannot be read is left aside with a warning.
fn open_cache(a: &PushArgs, store: &str, ns: &str) -> Option<PushCache> {
    if a.no_cache {
        return None;
    }
    let dir = a.cache.clone().or_else(default_dir)?;
    match PushCache::open(&dir, store, ns) {
        Ok(c) => Some(c),
        Err(e) => {
            eprintln!("cutpoint: the push cache in {}: {e} (every file is read)", dir.display());
            None
        }
    }
}

/// One line a person can read.
pub fn summary(r: &PushReport) -> String {
    if r.unchanged {
        return format!("{} -> version {}: unchanged (not read), {}, {} chunks", r.name, r.version, human(r.bytes), r.chunks);
    }
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
