//! `cutpoint stats --rapid CRITERION`: RapidCDC over the files in order (each deduplicated
//! against the ones before it, as in the paper's experiments), compared with regular CDC on the
//! same files; and `cutpoint chunk --rapid CRITERION`, the chunks of one file.

use super::common::{dedup_ratio, name, open, EngineArgs, Fail};
use clap::Args;
use cutpoint_core::rapid::{Criterion, DedupCounter, HintTable, Rapid, RapidOptions, RapidStats, Recipe};
use cutpoint_core::{Engine, Error, HashAlg, Options};
use serde::Serialize;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Args, Clone, Default)]
pub struct RapidArgs {
    /// Chunk with RapidCDC, accepting hinted boundaries by this criterion: ff, ff+mt, ff+rwt or
    /// ff+rwt+fpt (the last keeps regular CDC's boundaries).
    #[arg(long, value_name = "CRITERION")]
    pub rapid: Option<String>,
    /// RapidCDC: next-chunk sizes kept per fingerprint (the size-list length).
    #[arg(long, value_name = "N", default_value_t = 2, requires = "rapid")]
    pub hint_list: usize,
    /// RapidCDC: a hint cache file, read before the first file if it exists and written back
    /// (bounded by --hints-max) after the last. One made for another profile or fingerprint is
    /// refused.
    #[arg(long, value_name = "CACHE", requires = "rapid")]
    pub hints: Option<PathBuf>,
    /// RapidCDC: largest hint cache to write, e.g. 16m (the least recently used hints go first).
    #[arg(long, value_name = "SIZE", default_value = "64m", requires = "hints")]
    pub hints_max: String,
    /// RapidCDC: hints from a base file's recipe (see --save-recipe), read before the first file.
    #[arg(long, value_name = "RECIPE", requires = "rapid")]
    pub base: Option<PathBuf>,
    /// RapidCDC: write the recipe of the last file to this path (usable with --base later).
    #[arg(long, value_name = "RECIPE", requires = "rapid")]
    pub save_recipe: Option<PathBuf>,
    /// RapidCDC: skip the regular-CDC passes (no speedup or dedup comparison).
    #[arg(long, requires = "rapid")]
    pub no_compare: bool,
}

#[derive(Serialize)]
struct FileRow {
    file: String,
    bytes: u64,
    chunks: u64,
    hinted_chunks: u64,
    /// Positions whose rolling hash was computed, over bytes.
    rolled: f64,
    /// This file's bytes over its bytes not seen earlier in the run.
    dedup_ratio: Option<f64>,
    regular_dedup_ratio: Option<f64>,
    seconds: f64,
}

#[derive(Serialize)]
struct Comparison {
    /// Regular CDC (SS-CDC engine, same threads) chunking only, no fingerprints.
    regular_chunking_seconds: f64,
    /// Regular CDC with fingerprints.
    regular_seconds: f64,
    regular_dedup_ratio: f64,
    /// regular chunking time / RapidCDC chunking time (RapidCDC's total minus its fingerprinting).
    chunking_speedup: f64,
    /// With fingerprinting on both sides.
    total_speedup: f64,
    /// RapidCDC dedup ratio / regular dedup ratio.
    dedup_ratio_vs_regular: f64,
    /// Every boundary equals regular CDC's.
    same_boundaries: bool,
    /// Unique RapidCDC chunks that regular CDC also produced.
    chunk_overlap: f64,
}

#[derive(Serialize)]
struct Report {
    profile: String,
    criterion: &'static str,
    hint_list: usize,
    backend: &'static str,
    threads: usize,
    hash: &'static str,
    hints_loaded: usize,
    base_recipe_chunks: usize,
    files: Vec<FileRow>,
    bytes: u64,
    chunks: u64,
    seconds: f64,
    chunking_seconds: f64,
    dedup_ratio: f64,
    hit_ratio_by_position: Vec<Option<f64>>,
    stats: StatsOut,
    hints_saved: Option<usize>,
    comparison: Option<Comparison>,
}

#[derive(Serialize)]
struct StatsOut {
    rolled_positions: u64,
    skipped_positions: u64,
    window_tests: u64,
    window_bytes: u64,
    fpt_wasted: u64,
    fpt_wasted_bytes: u64,
    hits: Vec<u64>,
    misses: Vec<u64>,
    fallbacks: u64,
    fallback_blocks: u64,
}

fn core_fail(what: &str, e: Error) -> Fail {
    match e {
        Error::Io(e) => Fail::io(format!("{what}: {e}")),
        other => Fail::usage(other.to_string()),
    }
}

/// The hint table of a run: from `--base` and `--hints` (when the cache file exists); and the
/// files the run writes at its end (`--hints`, `--save-recipe`), already created.
struct Hints {
    table: HintTable,
    base_chunks: usize,
    hints_loaded: usize,
    hints_max: usize,
    save_hints: Option<Output>,
    save_recipe: Option<Output>,
}

/// Everything before the first input byte: every option checked (a bound too small for the
/// cache's header included), the output files created, then the hints read. Nothing is
/// chunked when any of it fails.
fn hints(engine: &Engine, ra: &RapidArgs) -> Result<Hints, Fail> {
    let hints_max = cutpoint_core::profile::parse_size(&ra.hints_max).map_err(|_| {
        Fail::usage(format!(
            "--hints-max '{}' is not a size (examples: 1m, 64m)",
            ra.hints_max
        ))
    })?;
    let mut table = HintTable::new(engine.profile(), engine.hash_alg(), ra.hint_list)
        .map_err(|e| Fail::usage(format!("--hint-list: {e}")))?;
    if ra.hints.is_some() && (hints_max as u64) < table.cache_min_bytes() {
        return Err(Fail::usage(format!(
            "--hints-max '{}' is below the smallest hint cache ({} bytes: the header for this profile and fingerprint); use e.g. 16m",
            ra.hints_max,
            table.cache_min_bytes()
        )));
    }
    let save_hints = ra.hints.as_deref().map(|p| Output::create("--hints", p)).transpose()?;
    let save_recipe = ra.save_recipe.as_deref().map(|p| Output::create("--save-recipe", p)).transpose()?;
    let mut base_chunks = 0;
    if let Some(b) = &ra.base {
        // The core's messages name the file already: `--base r: recipe line 3: ...`.
        let recipe = Recipe::read_file(b).map_err(|e| match e {
            Error::Io(e) => Fail::io(format!("--base {e}")),
            Error::Config(m) | Error::Profile(m) => Fail::usage(format!("--base {m}")),
        })?;
        table
            .add_recipe(&recipe)
            .map_err(|e| core_fail(&format!("--base {}", b.display()), e))?;
        base_chunks = recipe.entries.len();
    }
    let mut hints_loaded = 0;
    if let Some(h) = &ra.hints {
        if h.exists() {
            hints_loaded = table.load_cache_file(h).map_err(|e| core_fail("--hints", e))?;
        }
    }
    Ok(Hints {
        table,
        base_chunks,
        hints_loaded,
        hints_max,
        save_hints,
        save_recipe,
    })
}

/// A file written after the work but created before it, so that a path that cannot be written
/// fails before any input is read: `<path>.tmp` is created at once, filled at the end and renamed
/// over `path` (an old file stays whole until then). Dropped unfinished, the temporary goes.
struct Output {
    flag: &'static str,
    path: PathBuf,
    tmp: PathBuf,
    file: Option<File>,
}

impl Output {
    fn create(flag: &'static str, path: &Path) -> Result<Output, Fail> {
        let fail = |e: &dyn std::fmt::Display| Fail::io(format!("{flag} {}: {e}", path.display()));
        if path.is_dir() {
            return Err(fail(&"is a directory"));
        }
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let file = File::create(&tmp).map_err(|e| fail(&format!("cannot be written: {e}")))?;
        Ok(Output {
            flag,
            path: path.to_path_buf(),
            tmp,
            file: Some(file),
        })
    }

    /// Writes the contents with `write`, syncs, and renames the file into place.
    fn finish<T>(mut self, write: impl FnOnce(&File) -> Result<T, Error>) -> Result<T, Fail> {
        let fail = |e: &dyn std::fmt::Display| Fail::io(format!("{} {}: {e}", self.flag, self.path.display()));
        let file = self.file.take().expect("an output is finished once");
        let r = write(&file).map_err(|e| match e {
            Error::Io(e) => fail(&e),
            other => Fail::usage(format!("{} {}: {other}", self.flag, self.path.display())),
        });
        let r = r.and_then(|v| file.sync_all().map(|_| v).map_err(|e| fail(&e)));
        drop(file);
        let r = r.and_then(|v| std::fs::rename(&self.tmp, &self.path).map(|_| v).map_err(|e| fail(&e)));
        if r.is_err() {
            let _ = std::fs::remove_file(&self.tmp);
        }
        r
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if self.file.take().is_some() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

/// `cutpoint chunk FILE --rapid CRITERION`: the RapidCDC chunks of one file, hints from
/// `--base` and `--hints` (written back afterwards), in the `chunk` output formats, plus the
/// statistics on standard error. `--save-recipe` writes the file's recipe.
pub fn chunk_cmd(file: &PathBuf, args: &EngineArgs, jsonl: bool, ra: &RapidArgs) -> Result<(), Fail> {
    let crit_s = ra.rapid.as_deref().unwrap_or_default();
    let criterion = Criterion::parse(crit_s).map_err(|e| Fail::usage(format!("--rapid: {e}")))?;
    let engine = args.engine(None)?;
    if engine.hash_alg() == HashAlg::None {
        return Err(Fail::usage(
            "--rapid needs chunk fingerprints: use --hash blake3 or sha256",
        ));
    }
    let Hints {
        table,
        base_chunks,
        hints_loaded,
        hints_max,
        save_hints,
        save_recipe,
    } = hints(&engine, ra)?;
    let mut rapid = Rapid::new(&engine, table, RapidOptions::new(criterion)).map_err(|e| Fail::usage(e.to_string()))?;
    let (reader, _) = open(file)?;
    let stdout = io::stdout();
    let mut out = io::BufWriter::with_capacity(1 << 16, stdout.lock());
    let wr = |e: io::Error| Fail::io(format!("<stdout>: {e}"));
    let mut recipe = Vec::new();
    for c in rapid.stream(reader) {
        let c = c.map_err(|e| core_fail(&name(file), e))?;
        let hx = cutpoint_core::hex(&c.hash);
        if jsonl {
            writeln!(out, "{{\"offset\":{},\"length\":{},\"hash\":\"{hx}\"}}", c.offset, c.length)
        } else {
            writeln!(out, "{}\t{}\t{hx}", c.offset, c.length)
        }
        .map_err(wr)?;
        if ra.save_recipe.is_some() {
            recipe.push(c);
        }
    }
    out.flush().map_err(wr)?;
    if let Some(o) = save_hints {
        o.finish(|f| rapid.table().write_cache(f, Some(hints_max as u64)))?;
    }
    if let Some(o) = save_recipe {
        o.finish(|f| Recipe::from_chunks(engine.profile(), engine.hash_alg(), &recipe).write(f))?;
    }
    let st = rapid.stats();
    eprintln!(
        "rapid {}: {} chunks ({} hinted), {} positions rolled, {} skipped; hits {:?}, misses {:?}, fallbacks {}; hints: {} from the cache, {} chunks from the base recipe",
        criterion.name(),
        st.chunks,
        st.hinted_chunks,
        st.scanned_positions,
        st.skipped_positions(),
        st.hits,
        st.misses,
        st.fallbacks,
        hints_loaded,
        base_chunks
    );
    Ok(())
}

/// Regular CDC over the same files, for the comparison: with fingerprints, then chunking only.
struct Regular {
    /// Seconds with fingerprints.
    full: f64,
    /// Seconds of chunking only.
    cut: f64,
    dedup_ratio: f64,
    /// Each file's dedup ratio given the files before it.
    file_ratio: Vec<Option<f64>>,
    /// Every chunk fingerprint.
    set: HashSet<[u8; 32]>,
    /// Each file's chunk ends.
    ends: Vec<Vec<u64>>,
}

fn regular_pass(files: &[PathBuf], args: &EngineArgs, engine: &Engine) -> Result<Regular, Fail> {
    let mut dedup = DedupCounter::new();
    let mut file_ratio = Vec::new();
    let mut set = HashSet::new();
    let mut ends = Vec::new();
    let t = Instant::now();
    for f in files {
        let (reader, _) = open(f)?;
        let (b0, u0) = (dedup.bytes, dedup.unique_bytes);
        let mut fe = Vec::new();
        for c in engine.stream(reader) {
            let c = c.map_err(|e| core_fail(&name(f), e))?;
            let h = c.hash.unwrap_or_default();
            dedup.add(&h, c.length);
            set.insert(h);
            fe.push(c.offset + c.length as u64);
        }
        ends.push(fe);
        let (b, u) = (dedup.bytes - b0, dedup.unique_bytes - u0);
        file_ratio.push(dedup_ratio(b, u));
    }
    let full = t.elapsed().as_secs_f64();
    let opts = Options {
        hash: HashAlg::None,
        ..args.options(None)?
    };
    let cut_engine = Engine::new(engine.profile().clone(), opts).map_err(|e| Fail::usage(e.to_string()))?;
    let t = Instant::now();
    for f in files {
        let (reader, _) = open(f)?;
        for c in cut_engine.stream(reader) {
            c.map_err(|e| core_fail(&name(f), e))?;
        }
    }
    let cut = t.elapsed().as_secs_f64();
    Ok(Regular { full, cut, dedup_ratio: dedup.ratio(), file_ratio, set, ends })
}

/// RapidCDC's run against regular CDC's on the same files.
fn compare(regular: Regular, rapid_set: &HashSet<[u8; 32]>, same: bool, seconds: f64, chunking_seconds: f64, dedup_ratio: f64) -> Comparison {
    let Regular { full, cut, dedup_ratio: rdedup, set, .. } = regular;
    let overlap = if rapid_set.is_empty() {
        1.0
    } else {
        rapid_set.iter().filter(|h| set.contains(*h)).count() as f64 / rapid_set.len() as f64
    };
    Comparison {
        regular_chunking_seconds: cut,
        regular_seconds: full,
        regular_dedup_ratio: rdedup,
        chunking_speedup: if chunking_seconds > 0.0 {
            cut / chunking_seconds
        } else {
            f64::INFINITY
        },
        total_speedup: if seconds > 0.0 { full / seconds } else { f64::INFINITY },
        dedup_ratio_vs_regular: dedup_ratio / rdedup,
        same_boundaries: same,
        chunk_overlap: overlap,
    }
}

impl From<&RapidStats> for StatsOut {
    fn from(st: &RapidStats) -> StatsOut {
        StatsOut {
            rolled_positions: st.scanned_positions,
            skipped_positions: st.skipped_positions(),
            window_tests: st.window_tests,
            window_bytes: st.window_bytes,
            fpt_wasted: st.fpt_wasted,
            fpt_wasted_bytes: st.fpt_wasted_bytes,
            hits: st.hits.clone(),
            misses: st.misses.clone(),
            fallbacks: st.fallbacks,
            fallback_blocks: st.blocks,
        }
    }
}

pub fn cmd(
    files: &[PathBuf],
    args: &EngineArgs,
    json: bool,
    jobs: usize,
    naive: bool,
    ra: &RapidArgs,
) -> Result<(), Fail> {
    let crit_s = ra.rapid.as_deref().unwrap_or_default();
    let criterion = Criterion::parse(crit_s).map_err(|e| Fail::usage(format!("--rapid: {e}")))?;
    if jobs != 1 {
        return Err(Fail::usage(
            "--rapid chunks files in order (each against the ones before it): use --jobs 1",
        ));
    }
    if naive {
        return Err(Fail::usage("--rapid and --naive do not combine"));
    }
    let engine = args.engine(None)?;
    if engine.hash_alg() == HashAlg::None {
        return Err(Fail::usage(
            "--rapid needs chunk fingerprints: use --hash blake3 or sha256",
        ));
    }
    let Hints {
        table,
        base_chunks,
        hints_loaded,
        hints_max,
        save_hints,
        save_recipe,
    } = hints(&engine, ra)?;

    // Regular CDC on the same files: with fingerprints (dedup, chunk set), then chunking only.
    let regular = if ra.no_compare { None } else { Some(regular_pass(files, args, &engine)?) };

    let mut rapid = Rapid::new(&engine, table, RapidOptions::new(criterion)).map_err(|e| Fail::usage(e.to_string()))?;
    let mut dedup = DedupCounter::new();
    let mut rows = Vec::new();
    let mut last_recipe = Vec::new();
    let mut rapid_set = HashSet::new();
    let mut same = true;
    let t_all = Instant::now();
    for (i, f) in files.iter().enumerate() {
        let (reader, _) = open(f)?;
        let before: RapidStats = rapid.stats().clone();
        let (b0, u0) = (dedup.bytes, dedup.unique_bytes);
        let t = Instant::now();
        let mut k = 0usize;
        last_recipe.clear();
        for c in rapid.stream(reader) {
            let c = c.map_err(|e| core_fail(&name(f), e))?;
            dedup.add(&c.hash, c.length);
            if let Some(Regular { ends, .. }) = &regular {
                same &= ends[i].get(k) == Some(&(c.offset + c.length as u64));
                rapid_set.insert(c.hash);
            }
            k += 1;
            if ra.save_recipe.is_some() {
                last_recipe.push(c);
            }
        }
        let secs = t.elapsed().as_secs_f64();
        if let Some(Regular { ends, .. }) = &regular {
            same &= ends[i].len() == k;
        }
        let st = rapid.stats();
        let (b, u) = (dedup.bytes - b0, dedup.unique_bytes - u0);
        let bytes = st.bytes - before.bytes;
        rows.push(FileRow {
            file: name(f),
            bytes,
            chunks: st.chunks - before.chunks,
            hinted_chunks: st.hinted_chunks - before.hinted_chunks,
            rolled: if bytes == 0 {
                0.0
            } else {
                (st.scanned_positions - before.scanned_positions) as f64 / bytes as f64
            },
            dedup_ratio: dedup_ratio(b, u),
            regular_dedup_ratio: regular.as_ref().and_then(|r| r.file_ratio[i]),
            seconds: secs,
        });
    }
    let seconds = t_all.elapsed().as_secs_f64();
    let chunking_seconds = (seconds - rapid.fingerprint_time().as_secs_f64()).max(0.0);
    let st = rapid.stats().clone();

    let mut hints_saved = None;
    if let Some(o) = save_hints {
        hints_saved = Some(o.finish(|f| rapid.table().write_cache(f, Some(hints_max as u64)))?);
    }
    if let Some(o) = save_recipe {
        o.finish(|f| Recipe::from_chunks(engine.profile(), engine.hash_alg(), &last_recipe).write(f))?;
    }

    let comparison = regular.map(|r| compare(r, &rapid_set, same, seconds, chunking_seconds, dedup.ratio()));
    let report = Report {
        profile: engine.profile().to_string(),
        criterion: criterion.name(),
        hint_list: ra.hint_list,
        backend: engine.kernel_name(),
        threads: engine.threads(),
        hash: engine.hash_alg().name(),
        hints_loaded,
        base_recipe_chunks: base_chunks,
        bytes: st.bytes,
        chunks: st.chunks,
        files: rows,
        seconds,
        chunking_seconds,
        dedup_ratio: dedup.ratio(),
        hit_ratio_by_position: (0..ra.hint_list).map(|k| st.hit_ratio(k)).collect(),
        stats: StatsOut::from(&st),
        hints_saved,
        comparison,
    };
    print(&report, json)
}

fn print(r: &Report, json: bool) -> Result<(), Fail> {
    let stdout = io::stdout();
    let mut out = stdout.lock();
    let wr = |e: io::Error| Fail::io(format!("<stdout>: {e}"));
    if json {
        serde_json::to_writer_pretty(&mut out, r).map_err(|e| Fail::io(format!("<stdout>: {e}")))?;
        writeln!(out).map_err(wr)?;
        return Ok(());
    }
    writeln!(
        out,
        "profile {}  backend {}  threads {}  hash {}  RapidCDC {}  hint list {}",
        r.profile, r.backend, r.threads, r.hash, r.criterion, r.hint_list
    )
    .map_err(wr)?;
    if r.hints_loaded > 0 || r.base_recipe_chunks > 0 {
        writeln!(
            out,
            "hints: {} from the cache, {} chunks from the base recipe",
            r.hints_loaded, r.base_recipe_chunks
        )
        .map_err(wr)?;
    }
    writeln!(
        out,
        "{:<40} {:>14} {:>9} {:>8} {:>8} {:>8} {:>8} {:>9}",
        "file", "bytes", "chunks", "hinted", "rolled", "dedup", "regular", "MB/s"
    )
    .map_err(wr)?;
    let ratio = |d: Option<f64>| d.map(|d| format!("{d:.3}")).unwrap_or_else(|| "-".into());
    for f in &r.files {
        let n = if f.file.chars().count() > 40 {
            let tail: String = f
                .file
                .chars()
                .rev()
                .take(39)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .collect();
            format!("…{tail}")
        } else {
            f.file.clone()
        };
        writeln!(
            out,
            "{:<40} {:>14} {:>9} {:>7.1}% {:>7.1}% {:>8} {:>8} {:>9.0}",
            n,
            f.bytes,
            f.chunks,
            if f.chunks == 0 {
                0.0
            } else {
                f.hinted_chunks as f64 / f.chunks as f64 * 100.0
            },
            f.rolled * 100.0,
            ratio(f.dedup_ratio),
            ratio(f.regular_dedup_ratio),
            if f.seconds > 0.0 {
                f.bytes as f64 / f.seconds / 1e6
            } else {
                0.0
            }
        )
        .map_err(wr)?;
    }
    let s = &r.stats;
    writeln!(
        out,
        "total: {} bytes, {} chunks, dedup ratio {:.3}, {:.3} s ({:.3} s chunking, the rest fingerprinting)",
        r.bytes, r.chunks, r.dedup_ratio, r.seconds, r.chunking_seconds
    )
    .map_err(wr)?;
    let pct = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 * 100.0 };
    writeln!(
        out,
        "rolling hash: {} positions computed, {} skipped ({:.1}%); {} window tests ({} bytes); {} FPT fingerprints wasted",
        s.rolled_positions,
        s.skipped_positions,
        pct(s.skipped_positions, r.bytes),
        s.window_tests,
        s.window_bytes,
        s.fpt_wasted
    )
    .map_err(wr)?;
    let pos: Vec<String> = r
        .hit_ratio_by_position
        .iter()
        .enumerate()
        .map(|(k, h)| match h {
            Some(x) => format!(
                "#{}: {:.2}% ({}/{})",
                k + 1,
                x * 100.0,
                s.hits[k],
                s.hits[k] + s.misses[k]
            ),
            None => format!("#{}: -", k + 1),
        })
        .collect();
    writeln!(
        out,
        "hit ratio by list position: {}; fallbacks {}",
        pos.join(", "),
        s.fallbacks
    )
    .map_err(wr)?;
    if let Some(c) = &r.comparison {
        writeln!(
            out,
            "vs regular CDC: chunking speedup {:.2}x ({:.3} s -> {:.3} s), with fingerprinting {:.2}x; dedup ratio {:.3} vs {:.3} ({:+.3}%); boundaries {}; chunk overlap {:.2}%",
            c.chunking_speedup,
            c.regular_chunking_seconds,
            r.chunking_seconds,
            c.total_speedup,
            r.dedup_ratio,
            c.regular_dedup_ratio,
            (c.dedup_ratio_vs_regular - 1.0) * 100.0,
            if c.same_boundaries { "identical" } else { "differ" },
            c.chunk_overlap * 100.0
        )
        .map_err(wr)?;
    }
    if let Some(n) = r.hints_saved {
        writeln!(out, "hint cache: {n} fingerprints saved").map_err(wr)?;
    }
    Ok(())
}
