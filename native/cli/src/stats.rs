//! `cutpoint stats`: chunk files in order and report chunks, sizes, dedup across them and
//! throughput; `--naive` the segment-parallel chunking for comparison; `--rapid` RapidCDC
//! (see `rapid.rs`).

use super::common::{file_stats, name, open, Dedup, EngineArgs, Fail, FileStats};
use super::rapid::{self, RapidArgs};
use cutpoint_core::{Chunk, Engine, HashAlg};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde::Serialize;
use std::collections::HashSet;
use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::time::Instant;

pub fn run(files: &[PathBuf], args: &EngineArgs, json: bool, jobs: usize, naive: Option<&str>, ra: &RapidArgs) -> Result<(), Fail> {
    if ra.rapid.is_some() {
        return rapid::cmd(files, args, json, jobs, naive.is_some(), ra);
    }
    cmd_stats(files, args, json, jobs, naive)
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

/// Smallest `stats --naive` segment: below it the per-segment work dominates (measured on 16 MiB,
/// one thread: 1.1 s of CPU per MiB at 1 byte, 0.12 s at 16, 0.03 s at 256, and from 4k on the
/// time of SS-CDC; docs/cli.md).
const NAIVE_MIN: usize = 4 << 10;

/// The `--naive` segment size, checked.
fn naive_segment(naive: Option<&str>) -> Result<Option<usize>, Fail> {
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
    Ok(naive)
}

/// A progress bar on a terminal for large or unknown inputs; a hidden one otherwise.
fn progress(files: &[PathBuf]) -> Result<ProgressBar, Fail> {
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
    Ok(if io::IsTerminal::is_terminal(&io::stderr()) && (!known || sizes > 256 << 20) {
        let b = if known { ProgressBar::new(sizes) } else { ProgressBar::no_length() };
        b.set_style(
            ProgressStyle::with_template("{spinner} {bytes}/{total_bytes} {binary_bytes_per_sec} {wide_bar} {eta}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    } else {
        ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden())
    })
}

fn cmd_stats(files: &[PathBuf], args: &EngineArgs, json: bool, jobs: usize, naive: Option<&str>) -> Result<(), Fail> {
    if jobs == 0 {
        return Err(Fail::usage("--jobs must be at least 1"));
    }
    let naive = naive_segment(naive)?;
    let probe = args.engine(Some(1))?; // validates options once, before any file is opened
    let total_threads = if args.threads == 0 { cutpoint_core::default_threads() } else { args.threads };
    let jobs = jobs.min(files.len());
    let per_file_threads = (total_threads / jobs).max(1);
    let bar = progress(files)?;

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
        backend: probe.kernel_name(),
        threads: total_threads,
        hash: probe.hash_alg().name(),
        files: per,
        total,
    };
    print(&report, json, naive)
}

/// The report as a table, or as JSON.
fn print(report: &Report, json: bool, naive: Option<usize>) -> Result<(), Fail> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let wr = |e: io::Error| Fail::io(format!("<stdout>: {e}"));
    if json {
        serde_json::to_writer_pretty(&mut out, report).map_err(|e| Fail::io(format!("<stdout>: {e}")))?;
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
