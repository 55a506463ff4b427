//! `cutpoint` — the native command-line tool.
//!
//! Exit codes: 0 success; 1 an input could not be read or written (the message names the
//! file, or a store request failed); 2 bad usage or invalid options (profile, backend, sizes);
//! 3 restored data did not verify (`pull`).

use clap::{Args, Parser, Subcommand, ValueEnum};
use cutpoint_core::{backend, hex, Backend, Chunk, Engine, Error, HashAlg, Options, Profile};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, BufWriter, Read, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Instant;

mod check;
mod gc;
mod gen;
mod ls;
mod pull;
mod push;
mod rapid;
mod remote;
mod rm;
mod serve;
mod token;

#[derive(Parser)]
#[command(name = "cutpoint", version, about = "Content-defined chunking with SS-CDC: chunk, fingerprint and measure dedup")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Print the chunks of one file (offset, length, fingerprint).
    Chunk {
        /// Input file, or `-` for standard input.
        file: PathBuf,
        #[command(flatten)]
        engine: EngineArgs,
        /// Output format.
        #[arg(long, value_enum, default_value_t = Format::Text)]
        format: Format,
        /// RapidCDC options (as for `stats --rapid`; RapidCDC statistics go to standard error).
        #[command(flatten)]
        rapid: rapid::RapidArgs,
    },
    /// Chunk files in order and report chunks, sizes, dedup ratio across them, throughput.
    Stats {
        /// Input files (`-` for standard input), deduplicated in the order given.
        #[arg(required = true)]
        files: Vec<PathBuf>,
        #[command(flatten)]
        engine: EngineArgs,
        /// Print one JSON object instead of a table.
        #[arg(long)]
        json: bool,
        /// Chunk this many files at once (each gets threads / jobs threads); dedup stays in order.
        #[arg(long, default_value_t = 1)]
        jobs: usize,
        /// Chunk the naive way instead (P-Dedupe/SFSS): fixed segments of this size, each
        /// chunked independently. Boundaries then depend on the segment size; this exists to
        /// show the dedup loss that SS-CDC avoids.
        #[arg(long, value_name = "SEGMENT")]
        naive: Option<String>,
        #[command(flatten)]
        rapid: rapid::RapidArgs,
    },
    /// List the stage-1 backends this CPU supports and the one chosen by default.
    Backends,
    /// Generate a versioned dataset (a random base file and versions with small edits).
    Gen(gen::GenArgs),
    /// Run a chunk store (HTTP, protocol v1) over a directory.
    Serve(serve::ServeArgs),
    /// Push files to a store: only the chunks it lacks are sent.
    Push(push::PushArgs),
    /// Restore a stored file (verified chunk by chunk and whole).
    Pull(pull::PullArgs),
    /// List the names and versions in a namespace.
    Ls(ls::LsArgs),
    /// Delete a version, or every version, of a name.
    Rm(rm::RmArgs),
    /// Remove chunks no version references.
    Gc(gc::GcArgs),
    /// Verify a namespace in the store (packs, index, versions).
    Check(check::CheckArgs),
    /// Make a bearer token for a namespace.
    Token(token::TokenArgs),
}

#[derive(Args, Clone)]
struct EngineArgs {
    /// Chunking profile FAMILY:MIN:AVG:MAX[:key=value,...] (default: gear:2k:8k:64k).
    #[arg(long, short)]
    profile: Option<String>,
    /// Stage-1 backend (scalar, interleaved, avx2, avx512); default: the fastest on this CPU,
    /// or $CUTPOINT_BACKEND.
    #[arg(long, short)]
    backend: Option<String>,
    /// Threads for stage 1 and fingerprinting (default: all cores).
    #[arg(long, short, default_value_t = 0)]
    threads: usize,
    /// Stage-1 segment size, e.g. 64k (default: each thread's span split across the kernel's lanes).
    #[arg(long)]
    segment_size: Option<String>,
    /// Chunk fingerprint.
    #[arg(long, value_enum, default_value_t = HashArg::Blake3)]
    hash: HashArg,
}

#[derive(ValueEnum, Clone, Copy, PartialEq)]
enum Format {
    Text,
    Jsonl,
}

#[derive(ValueEnum, Clone, Copy, PartialEq)]
enum HashArg {
    Blake3,
    Sha256,
    None,
}

/// A failure with its exit code.
struct Fail {
    code: u8,
    msg: String,
}

impl Fail {
    fn usage(msg: impl Into<String>) -> Fail {
        Fail { code: 2, msg: msg.into() }
    }
    fn io(msg: impl Into<String>) -> Fail {
        Fail { code: 1, msg: msg.into() }
    }
    fn from_core(file: &str, e: Error) -> Fail {
        match e {
            Error::Io(e) => Fail::io(format!("{file}: {e}")),
            other => Fail::usage(other.to_string()),
        }
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Chunk { file, engine, format, rapid } if rapid.rapid.is_some() => {
            rapid::chunk_cmd(&file, &engine, format == Format::Jsonl, &rapid)
        }
        Cmd::Chunk { file, engine, format, .. } => cmd_chunk(&file, &engine, format),
        Cmd::Stats { files, engine, json, jobs, naive, rapid } if rapid.rapid.is_some() => {
            rapid::cmd(&files, &engine, json, jobs, naive.is_some(), &rapid)
        }
        Cmd::Stats { files, engine, json, jobs, naive, .. } => cmd_stats(&files, &engine, json, jobs, naive.as_deref()),
        Cmd::Backends => cmd_backends(),
        Cmd::Gen(args) => gen::run(&args).map_err(|e| Fail { code: e.0, msg: e.1 }),
        Cmd::Serve(a) => serve::run(&a),
        Cmd::Push(a) => push::run(&a),
        Cmd::Pull(a) => pull::run(&a),
        Cmd::Ls(a) => ls::run(&a),
        Cmd::Rm(a) => rm::run(&a),
        Cmd::Gc(a) => gc::run(&a),
        Cmd::Check(a) => check::run(&a),
        Cmd::Token(a) => token::run(&a),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        // A closed pipe downstream (`cutpoint chunk big | head`) is not an error of ours.
        Err(f) if f.msg.starts_with("<stdout>:") && f.msg.contains("Broken pipe") => ExitCode::SUCCESS,
        Err(f) => {
            eprintln!("cutpoint: {}", f.msg);
            ExitCode::from(f.code)
        }
    }
}

impl EngineArgs {
    fn profile(&self) -> Result<Profile, Fail> {
        match &self.profile {
            Some(s) => s.parse().map_err(|e: Error| Fail::usage(e.to_string())),
            None => Ok(Profile::default_profile()),
        }
    }
    fn options(&self, threads_override: Option<usize>) -> Result<Options, Fail> {
        let backend = match &self.backend {
            Some(b) => Some(Backend::parse(b).map_err(|e| Fail::usage(e.to_string()))?),
            None => None,
        };
        let segment_size = match &self.segment_size {
            Some(s) => Some(
                cutpoint_core::profile::parse_size(s)
                    .map_err(|_| Fail::usage(format!("--segment-size '{s}' is not a size (examples: 4096, 64k, 1m)")))?,
            ),
            None => None,
        };
        let hash = match self.hash {
            HashArg::Blake3 => HashAlg::Blake3,
            HashArg::Sha256 => HashAlg::Sha256,
            HashArg::None => HashAlg::None,
        };
        Ok(Options { backend, threads: threads_override.unwrap_or(self.threads), segment_size, span: 0, hash })
    }
    fn engine(&self, threads_override: Option<usize>) -> Result<Engine, Fail> {
        let profile = self.profile()?;
        Engine::new(profile, self.options(threads_override)?).map_err(|e| Fail::usage(e.to_string()))
    }
}

fn open(path: &PathBuf) -> Result<(Box<dyn Read + Send>, Option<u64>), Fail> {
    if path.as_os_str() == "-" {
        return Ok((Box::new(io::stdin()), None));
    }
    let f = File::open(path).map_err(|e| Fail::io(format!("{}: {e}", path.display())))?;
    let meta = f.metadata().map_err(|e| Fail::io(format!("{}: {e}", path.display())))?;
    if meta.is_dir() {
        return Err(Fail::io(format!("{}: is a directory", path.display())));
    }
    Ok((Box::new(f), Some(meta.len())))
}

fn name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

fn cmd_chunk(file: &PathBuf, args: &EngineArgs, format: Format) -> Result<(), Fail> {
    let engine = args.engine(None)?;
    let (reader, _) = open(file)?;
    let stdout = io::stdout();
    let mut out = BufWriter::with_capacity(1 << 16, stdout.lock());
    let wr = |e: io::Error| Fail::io(format!("<stdout>: {e}"));
    for c in engine.stream_prefetch(reader) {
        let c = c.map_err(|e| Fail::from_core(&name(file), e))?;
        match (format, c.hash) {
            (Format::Text, Some(h)) => writeln!(out, "{}\t{}\t{}", c.offset, c.length, hex(&h)),
            (Format::Text, None) => writeln!(out, "{}\t{}", c.offset, c.length),
            (Format::Jsonl, Some(h)) => {
                writeln!(out, "{{\"offset\":{},\"length\":{},\"hash\":\"{}\"}}", c.offset, c.length, hex(&h))
            }
            (Format::Jsonl, None) => writeln!(out, "{{\"offset\":{},\"length\":{}}}", c.offset, c.length),
        }
        .map_err(wr)?;
    }
    out.flush().map_err(wr)?;
    Ok(())
}

#[derive(Serialize, Default, Clone)]
struct FileStats {
    file: String,
    bytes: u64,
    chunks: u64,
    avg_chunk: f64,
    /// Bytes of chunks not seen earlier in this run (this file's and earlier files').
    unique_bytes: Option<u64>,
    /// bytes / unique_bytes for this file given the files before it.
    dedup_ratio: Option<f64>,
    seconds: f64,
    mb_per_s: f64,
}

#[derive(Serialize)]
struct Report {
    profile: String,
    /// `ss-cdc`, or `naive:<segment size>`.
    mode: String,
    backend: &'static str,
    threads: usize,
    hash: &'static str,
    files: Vec<FileStats>,
    total: FileStats,
}

/// Chunks one file, handing each chunk to `on_chunk`; returns the seconds it took.
fn chunk_file(engine: &Engine, path: &PathBuf, bar: &ProgressBar, mut on_chunk: impl FnMut(&Chunk)) -> Result<f64, Fail> {
    let (reader, _) = open(path)?;
    let t0 = Instant::now();
    for c in engine.stream_prefetch(reader) {
        let c = c.map_err(|e| Fail::from_core(&name(path), e))?;
        bar.inc(c.length as u64);
        on_chunk(&c);
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// The naive segment-parallel chunking of one file: segments of `seg` bytes read one at a
/// time (bounded memory), each chunked from its own start, then fingerprinted.
fn chunk_file_naive(engine: &Engine, seg: usize, path: &PathBuf, bar: &ProgressBar, mut on_chunk: impl FnMut(&Chunk)) -> Result<f64, Fail> {
    let (mut reader, _) = open(path)?;
    let t0 = Instant::now();
    let mut buf = vec![0u8; seg];
    let mut offset = 0u64;
    loop {
        let mut n = 0;
        while n < seg {
            match reader.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Fail::io(format!("{}: {e}", name(path)))),
            }
        }
        if n == 0 {
            break;
        }
        let mut prev = 0;
        for cut in cutpoint_core::naive_cuts(engine.profile(), &buf[..n], seg) {
            let bytes = &buf[prev..cut];
            on_chunk(&Chunk { offset: offset + prev as u64, length: cut - prev, hash: engine.hash_alg().digest(bytes) });
            prev = cut;
        }
        bar.inc(n as u64);
        offset += n as u64;
        if n < seg {
            break;
        }
    }
    Ok(t0.elapsed().as_secs_f64())
}

/// Dedup accounting in file order: a chunk is unique the first time its fingerprint is seen.
struct Dedup {
    enabled: bool,
    seen: HashSet<[u8; 32]>,
}

impl Dedup {
    fn stats(&mut self, file: String, chunks: impl Iterator<Item = (usize, Option<[u8; 32]>)>, secs: f64) -> FileStats {
        let (mut bytes, mut n, mut unique) = (0u64, 0u64, 0u64);
        for (len, h) in chunks {
            bytes += len as u64;
            n += 1;
            if let (true, Some(h)) = (self.enabled, h) {
                if self.seen.insert(h) {
                    unique += len as u64;
                }
            }
        }
        file_stats(file, bytes, n, self.enabled.then_some(unique), secs)
    }
}

fn file_stats(file: String, bytes: u64, chunks: u64, unique: Option<u64>, secs: f64) -> FileStats {
    FileStats {
        file,
        bytes,
        chunks,
        avg_chunk: if chunks == 0 { 0.0 } else { bytes as f64 / chunks as f64 },
        unique_bytes: unique,
        dedup_ratio: unique.filter(|&u| u > 0).map(|u| bytes as f64 / u as f64),
        seconds: secs,
        mb_per_s: if secs > 0.0 { bytes as f64 / secs / 1e6 } else { 0.0 },
    }
}

/// Smallest `stats --naive` segment: below it the per-segment work dominates (measured on 16 MiB,
/// one thread: 1.1 s of CPU per MiB at 1 byte, 0.12 s at 16, 0.03 s at 256, and from 4k on the
/// time of SS-CDC; README, "Using the CLI").
const NAIVE_MIN: usize = 4 << 10;

fn cmd_stats(files: &[PathBuf], args: &EngineArgs, json: bool, jobs: usize, naive: Option<&str>) -> Result<(), Fail> {
    if jobs == 0 {
        return Err(Fail::usage("--jobs must be at least 1"));
    }
    let naive_arg = naive.unwrap_or_default();
    let naive = match naive {
        Some(s) => Some(
            cutpoint_core::profile::parse_size(s)
                .ok()
                .filter(|&n| n > 0)
                .ok_or_else(|| Fail::usage(format!("--naive '{s}' is not a segment size (examples: 512k, 1m)")))?,
        ),
        None => None,
    };
    // Each segment costs a chunk or more (each byte one at `--naive 1`: about 1 s per MiB).
    if naive.is_some_and(|n| n < NAIVE_MIN) {
        return Err(Fail::usage(format!("--naive '{naive_arg}' is below the smallest segment, 4k (examples: 512k, 1m)")));
    }
    let probe = args.engine(Some(1))?; // validates options once, before any file is opened
    let total_threads = if args.threads == 0 { cutpoint_core::default_threads() } else { args.threads };
    let jobs = jobs.min(files.len());
    let per_file_threads = (total_threads / jobs).max(1);
    let mut sizes = 0u64;
    let mut known = true;
    for f in files {
        if f.as_os_str() == "-" {
            known = false;
            continue;
        }
        let m = std::fs::metadata(f).map_err(|e| Fail::io(format!("{}: {e}", f.display())))?;
        sizes += m.len();
    }
    let bar = if io::IsTerminal::is_terminal(&io::stderr()) && (!known || sizes > 256 << 20) {
        let b = if known { ProgressBar::new(sizes) } else { ProgressBar::no_length() };
        b.set_style(
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())
    };

    let mut dedup = Dedup { enabled: probe.hash_alg() != HashAlg::None, seen: HashSet::new() };
    let t_all = Instant::now();
    let mut per = Vec::new();
    if naive.is_some() && jobs > 1 {
        return Err(Fail::usage("--naive works with --jobs 1"));
    }
    if jobs <= 1 {
        // One file at a time on all threads; dedup as the chunks stream by.
        let engine = args.engine(None)?;
        for f in files {
            let (mut bytes, mut n, mut unique) = (0u64, 0u64, 0u64);
            let on_chunk = |c: &Chunk| {
                bytes += c.length as u64;
                n += 1;
                if let (true, Some(h)) = (dedup.enabled, c.hash) {
                    if dedup.seen.insert(h) {
                        unique += c.length as u64;
                    }
                }
            };
            let secs = match naive {
                Some(seg) => chunk_file_naive(&engine, seg, f, &bar, on_chunk)?,
                None => chunk_file(&engine, f, &bar, on_chunk)?,
            };
            per.push(file_stats(name(f), bytes, n, dedup.enabled.then_some(unique), secs));
        }
    } else {
        // Several files at once, each on threads / jobs threads; their (length, fingerprint)
        // lists are deduplicated afterwards in the given order.
        type Slot = Option<Result<(Vec<(usize, Option<[u8; 32]>)>, f64), Fail>>;
        let next = std::sync::atomic::AtomicUsize::new(0);
        let slots: Vec<std::sync::Mutex<Slot>> = (0..files.len()).map(|_| std::sync::Mutex::new(None)).collect();
        let engines: Vec<Engine> = (0..jobs).map(|_| args.engine(Some(per_file_threads))).collect::<Result<_, _>>()?;
        std::thread::scope(|s| {
            for engine in &engines {
                let (next, slots, bar) = (&next, &slots, &bar);
                s.spawn(move || loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                    if i >= files.len() {
                        break;
                    }
                    let mut list = Vec::new();
                    let r = chunk_file(engine, &files[i], bar, |c| list.push((c.length, c.hash))).map(|secs| (list, secs));
                    *slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(r);
                });
            }
        });
        for (i, slot) in slots.into_iter().enumerate() {
            let r = slot.into_inner().unwrap_or_else(|p| p.into_inner());
            let (list, secs) = r.ok_or_else(|| Fail::io(format!("{}: not processed", files[i].display())))??;
            per.push(dedup.stats(name(&files[i]), list.into_iter(), secs));
        }
    }
    bar.finish_and_clear();
    let wall = t_all.elapsed().as_secs_f64();
    let (bytes, chunks) = per.iter().fold((0, 0), |(b, c), s| (b + s.bytes, c + s.chunks));
    let unique = dedup.enabled.then(|| per.iter().filter_map(|s| s.unique_bytes).sum());
    let total = file_stats("total".into(), bytes, chunks, unique, wall);

    let report = Report {
        profile: probe.profile().to_string(),
        mode: naive.map(|s| format!("naive:{}", cutpoint_core::profile::fmt_size(s))).unwrap_or_else(|| "ss-cdc".into()),
        backend: probe.backend().name(),
        threads: total_threads,
        hash: probe.hash_alg().name(),
        files: per,
        total,
    };
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let wr = |e: io::Error| Fail::io(format!("<stdout>: {e}"));
    if json {
        serde_json::to_writer_pretty(&mut out, &report).map_err(|e| Fail::io(format!("<stdout>: {e}")))?;
        writeln!(out).map_err(wr)?;
        return Ok(());
    }
    writeln!(
        out,
        "profile {}  backend {}  threads {}  hash {}{}",
        report.profile,
        report.backend,
        report.threads,
        report.hash,
        naive.map(|s| format!("  NAIVE segments of {}", cutpoint_core::profile::fmt_size(s))).unwrap_or_default()
    )
    .map_err(wr)?;
    writeln!(out, "{:<40} {:>14} {:>9} {:>9} {:>14} {:>7} {:>9}", "file", "bytes", "chunks", "avg", "unique", "dedup", "MB/s")
        .map_err(wr)?;
    for s in report.files.iter().chain(std::iter::once(&report.total)) {
        let f = if s.file.chars().count() > 40 {
            let tail: String = s.file.chars().rev().take(39).collect::<Vec<_>>().into_iter().rev().collect();
            format!("…{tail}")
        } else {
            s.file.clone()
        };
        writeln!(
            out,
            "{:<40} {:>14} {:>9} {:>9.0} {:>14} {:>7} {:>9.0}",
            f,
            s.bytes,
            s.chunks,
            s.avg_chunk,
            s.unique_bytes.map(|u| u.to_string()).unwrap_or_else(|| "-".into()),
            match (s.dedup_ratio, s.unique_bytes) {
                (Some(d), _) => format!("{d:.3}"),
                (None, Some(0)) if s.bytes > 0 => "inf".into(),
                _ => "-".into(),
            },
            s.mb_per_s
        )
        .map_err(wr)?;
    }
    Ok(())
}

fn cmd_backends() -> Result<(), Fail> {
    // An invalid CUTPOINT_BACKEND does not stop the listing (it is how one finds a valid name);
    // it is reported after it, and the exit code is 2 as for any invalid option.
    let bad_env = match backend::env_override() {
        Some(Err(e)) => Some(e),
        _ => None,
    };
    let active = match &bad_env {
        Some(_) => backend::fastest(Profile::default_profile().family),
        None => backend::detect().map_err(|e| Fail::usage(e.to_string()))?,
    };
    for b in backend::ALL {
        let mark = if b == active { "*" } else { " " };
        let status = if b.is_supported() { "available" } else { "not supported on this CPU" };
        println!("{mark} {:<12} {status}", b.name());
    }
    if let Some(e) = bad_env {
        return Err(Fail::usage(format!(
            "{e}; every other command refuses to run until it is corrected or unset (* marks the default without it)"
        )));
    }
    // Per family: what dispatch uses and why (forced, or the figures it measured).
    let forced = std::env::var("CUTPOINT_BACKEND").ok().filter(|v| !v.trim().is_empty());
    println!("per family (stage-1 GB/s measured at first use, best of runs; * = chosen):");
    for f in [cutpoint_core::Family::Crc32, cutpoint_core::Family::Rabin, cutpoint_core::Family::Gear] {
        let used = backend::detect_for(f).map_err(|e| Fail::usage(e.to_string()))?;
        if let Some(v) = &forced {
            println!("  {:<6} {:<12} forced by CUTPOINT_BACKEND={v}", f.name(), used.name());
            continue;
        }
        let c = backend::calibration(f);
        let figs: Vec<String> = c
            .figures
            .iter()
            .map(|(b, g)| format!("{}{} {g:.2}", if *b == used { "*" } else { "" }, b.name()))
            .collect();
        let why = if figs.is_empty() { "preference order (nothing timed here)".to_string() } else { figs.join(", ") };
        println!("  {:<6} {:<12} {why}  [{}, {} KiB x {}]", f.name(), used.name(), c.profile, c.bytes >> 10, c.runs);
    }
    Ok(())
}
