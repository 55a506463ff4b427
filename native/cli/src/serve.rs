//! `cutpoint serve`: the chunk store over HTTP (protocol v1, `native/store/PROTOCOL.md`).

use super::Fail;
use clap::Args;
use cutpoint_store::routes::{serve, Data, ServeConfig};
use cutpoint_store::Limits;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args)]
pub struct ServeArgs {
    /// The store's directory (packs, recipes, the index; created if missing), or an
    /// S3-compatible bucket `s3://BUCKET/PREFIX` (credentials, region and endpoint from the
    /// usual AWS_* variables; several nodes may serve one bucket).
    #[arg(long, value_name = "DIR|s3://BUCKET/PREFIX")]
    data: String,
    /// The S3 endpoint URL (e.g. http://127.0.0.1:7070 for a local MinIO or versitygw; plain
    /// http is allowed for loopback). Default: AWS_ENDPOINT_URL, else AWS S3.
    #[arg(long, value_name = "URL")]
    s3_endpoint: Option<String>,
    /// With an s3:// store: the directory of this node's index cache (rebuilt from the bucket
    /// when missing or stale). Default: $XDG_CACHE_HOME/cutpoint (or ~/.cache/cutpoint) /
    /// s3-BUCKET-PREFIX. One node per cache directory.
    #[arg(long, value_name = "DIR")]
    cache: Option<PathBuf>,
    /// Address to listen on (port 0: a free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:7373")]
    listen: String,
    /// Tokens file (lines from `cutpoint token`). Without it the store is open to anyone who can
    /// connect, and listens on loopback only.
    #[arg(long, value_name = "FILE")]
    tokens: Option<PathBuf>,
    /// A web page origin allowed to call the store, e.g. http://localhost:5173 (repeatable).
    /// Default: none on an open store (no web page can call it); any origin on a store with
    /// --tokens (each request needs a token). '*' (any origin) needs --tokens.
    #[arg(long = "cors-origin", value_name = "ORIGIN")]
    cors_origins: Vec<String>,
    /// A host name the store answers to besides loopback addresses and localhost, e.g. the name
    /// a reverse proxy forwards (repeatable). Other Host headers get 403 (against DNS
    /// rebinding). Default with --tokens and no --allowed-host: any Host.
    #[arg(long = "allowed-host", value_name = "NAME")]
    allowed_hosts: Vec<String>,
    /// Largest pack upload, e.g. 64m (413 above it).
    #[arg(long, default_value = "256m")]
    max_pack: String,
    /// Largest commit body (recipe), e.g. 128m.
    #[arg(long, default_value = "128m")]
    max_recipe: String,
    /// Most chunks in one pack upload (413 above it; clients cut their packs at this count).
    #[arg(long, default_value_t = cutpoint_store::store::DEFAULT_MAX_PACK_CHUNKS, value_name = "N")]
    max_pack_chunks: u64,
    /// Most entries (chunks) a commit may expand to, counting the entries its part lines stand
    /// for (413 `too_many_entries` above it; the default is 256 GiB at 8 KiB chunks).
    #[arg(long, default_value_t = cutpoint_store::store::DEFAULT_MAX_COMMIT_ENTRIES, value_name = "N")]
    max_commit_entries: u64,
    /// Pack uploads and commits taken at once, overall (503 with Retry-After above it).
    #[arg(long, default_value_t = 64, value_name = "N")]
    max_uploads: usize,
    /// Pack uploads and commits taken at once per token (per Authorization header).
    #[arg(long, default_value_t = 16, value_name = "N")]
    max_uploads_per_token: usize,
    /// Bytes a second a request body must average, once --body-timeout has passed since it
    /// started (slower ones are cut: 400, nothing stored); 0: no floor.
    #[arg(long, default_value_t = 4096, value_name = "BYTES")]
    min_rate: u64,
    /// Seconds a client may read nothing of a response (a restore) before its connection is cut.
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    send_timeout: f64,
    /// Rebuild the index from the packs and recipes, then serve as usual (the server keeps
    /// running: stop it with Ctrl-C; give --listen to use another address).
    #[arg(long)]
    reindex: bool,
    /// With an s3:// store: seconds a gc waits, holding the namespace's lock object, before it
    /// reads the recipes (commits on other nodes that passed their lock check finish meanwhile).
    #[arg(long, default_value_t = 5.0, value_name = "SECS")]
    gc_settle: f64,
    /// With an s3:// store: seconds after which a gc lock object that its gc stopped renewing
    /// (a node killed during a gc) is ignored by commits and taken over by the next gc. A
    /// running gc renews its lock every third of this.
    #[arg(long, default_value_t = 120.0, value_name = "SECS")]
    gc_lease: f64,
    /// Seconds a client has to send a request's head (slow clients are cut).
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    header_timeout: f64,
    /// Seconds a request body may send nothing before it is cut (400, nothing stored).
    #[arg(long, default_value_t = 30.0, value_name = "SECS")]
    body_timeout: f64,
    /// Take packs whose chunks are compressed in groups (codec 2, `zstd-group`: fewer bytes
    /// sent and stored). Default: on for a directory; off for an s3:// bucket, which the edge
    /// store may share and which refuses groups this revision.
    #[arg(long, value_name = "on|off", value_parser = ["on", "off"])]
    groups: Option<String>,
}

/// glibc gives a thread that meets contention an arena of its own (up to 8 per core), and the
/// store's uploads run on blocking threads: memory freed in one arena is not reused by another,
/// so the peak grew with the push. Two arenas: 113 → 96 MiB peak RSS over a 4 GiB push (issue
/// #32, docs/big-files.md). `MALLOC_ARENA_MAX` in the environment wins. Called before the
/// server's threads start.
fn limit_malloc_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        // SAFETY: a glibc tunable set while this process has one thread; a failure (0) leaves
        // the default.
        unsafe { libc::mallopt(libc::M_ARENA_MAX, 2) };
    }
}

pub fn run(a: &ServeArgs) -> Result<(), Fail> {
    limit_malloc_arenas();
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
        max_pack_chunks: a.max_pack_chunks.max(1),
        max_commit_entries: a.max_commit_entries.max(1),
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
    let data = match a.data.strip_prefix("s3://") {
        Some(rest) => {
            let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
            if bucket.is_empty() {
                return Err(Fail::usage(format!("--data '{}': no bucket (s3://BUCKET/PREFIX)", a.data)));
            }
            let prefix = prefix.trim_matches('/').to_string();
            let cache = match &a.cache {
                Some(c) => c.clone(),
                None => {
                    let base = std::env::var_os("XDG_CACHE_HOME")
                        .map(PathBuf::from)
                        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))
                        .ok_or_else(|| Fail::usage("no --cache, and neither XDG_CACHE_HOME nor HOME is set".to_string()))?;
                    let tail: String = format!("s3-{bucket}-{prefix}")
                        .chars()
                        .map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '.' { c } else { '_' })
                        .collect();
                    base.join("cutpoint").join(tail)
                }
            };
            Data::S3 {
                bucket: bucket.to_string(),
                prefix,
                endpoint: a.s3_endpoint.clone(),
                cache,
            }
        }
        None => {
            if a.s3_endpoint.is_some() || a.cache.is_some() {
                return Err(Fail::usage("--s3-endpoint and --cache go with --data s3://BUCKET/PREFIX".to_string()));
            }
            Data::Dir(PathBuf::from(&a.data))
        }
    };
    let where_ = match &data {
        Data::Dir(d) => {
            let d = d.display();
            format!("data {d} (packs and recipes in {d}/objects, index {d}/index.sqlite)")
        }
        Data::S3 { cache, endpoint, .. } => format!(
            "data {} (packs and recipes in the bucket{}, index cache {}/index.sqlite)",
            a.data,
            endpoint.as_deref().map(|e| format!(" at {e}")).unwrap_or_default(),
            cache.display()
        ),
    };
    let secs = |flag: &str, s: f64| {
        std::time::Duration::try_from_secs_f64(s)
            .ok()
            .filter(|d| !d.is_zero() || flag == "gc-settle")
            .ok_or_else(|| Fail::usage(format!("--{flag} {s}: not a positive number of seconds")))
    };
    let cfg = ServeConfig {
        data,
        listen,
        tokens: a.tokens.clone(),
        cors_origins: a.cors_origins.clone(),
        allowed_hosts: a.allowed_hosts.clone(),
        limits,
        reindex: a.reindex,
        gc_settle: secs("gc-settle", a.gc_settle)?,
        gc_lease: secs("gc-lease", a.gc_lease)?,
        header_timeout: secs("header-timeout", a.header_timeout)?,
        body_idle: secs("body-timeout", a.body_timeout)?,
        min_rate: a.min_rate,
        send_timeout: secs("send-timeout", a.send_timeout)?,
        max_uploads: a.max_uploads.max(1),
        max_uploads_per_token: a.max_uploads_per_token.max(1),
        groups: a.groups.as_deref().map(|g| g == "on"),
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| Fail::io(format!("cannot start the server's runtime: {e}")))?;
    rt.block_on(serve(cfg, |addr, rep, st, access| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "cutpoint serve: listening on http://{addr}");
        let _ = writeln!(out, "  {where_}");
        match &st.tokens {
            Some(t) => {
                let _ = writeln!(out, "  auth: {} token grants", t.len());
            }
            None => {
                let _ = writeln!(out, "  auth: none (no --tokens): open to every local program; loopback only");
            }
        }
        let _ = writeln!(out, "  {}", access.describe());
        let bad = rep.bad_packs.len() + rep.bad_recipes.len();
        if rep.packs_indexed + rep.versions_indexed + rep.packs_dropped + rep.versions_dropped > 0 || bad > 0 {
            let _ = writeln!(
                out,
                "  index reconciled with the objects: {} packs and {} versions indexed, {} packs and {} versions dropped, {} bad packs, {} damaged recipes",
                rep.packs_indexed,
                rep.versions_indexed,
                rep.packs_dropped,
                rep.versions_dropped,
                rep.bad_packs.len(),
                rep.bad_recipes.len()
            );
            for b in &rep.bad_packs {
                let _ = writeln!(out, "  bad pack (left in place, not indexed): {b}");
            }
            for b in &rep.bad_recipes {
                let _ = writeln!(out, "  damaged recipe (left in place, not indexed; gc keeps its readable chunks): {b}");
            }
        }
        // The same warnings on stderr, where an operator's log looks for them.
        for b in rep.bad_packs.iter().chain(&rep.bad_recipes) {
            eprintln!("cutpoint serve: warning: damaged object left in place: {b}");
        }
        let _ = out.flush();
    }))
    .map_err(|e| match e.status() {
        400 => Fail::usage(e.to_string()),
        _ => Fail::io(e.to_string()),
    })
}
