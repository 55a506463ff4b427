//! What the subcommands share: the failure type and its exit codes, the engine options
//! (`EngineArgs`), opening an input (a file or `-`) and per-file statistics.

use clap::{Args, ValueEnum};
use cutpoint_core::{Backend, Engine, Error, HashAlg, Options, Profile};
use serde::Serialize;
use std::collections::HashSet;
use std::fs::File;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

/// A failure with its exit code.
pub(crate) struct Fail {
    pub(crate) code: u8,
    pub(crate) msg: String,
}

impl Fail {
    pub(crate) fn usage(msg: impl Into<String>) -> Fail {
        Fail { code: 2, msg: msg.into() }
    }
    pub(crate) fn io(msg: impl Into<String>) -> Fail {
        Fail { code: 1, msg: msg.into() }
    }
    pub(crate) fn from_core(file: &str, e: Error) -> Fail {
        match e {
            Error::Io(e) => Fail::io(format!("{file}: {e}")),
            other => Fail::usage(other.to_string()),
        }
    }
}

#[derive(Args, Clone)]
pub(crate) struct EngineArgs {
    /// Chunking profile FAMILY:MIN:AVG:MAX[:key=value,...] (default: gear:2k:8k:64k).
    #[arg(long, short)]
    pub(crate) profile: Option<String>,
    /// Stage-1 backend (scalar, interleaved, avx2, avx512); default: the fastest on this CPU,
    /// or $CUTPOINT_BACKEND.
    #[arg(long, short)]
    pub(crate) backend: Option<String>,
    /// Threads for stage 1 and fingerprinting (default: all cores).
    #[arg(long, short, default_value_t = 0)]
    pub(crate) threads: usize,
    /// Lane segment: bytes one SIMD lane of the stage-1 kernel scans in one go, e.g. 64k
    /// (default: each thread's span split across the kernel's lanes). `--segment-size` is its
    /// old name, still accepted.
    #[arg(long, alias = "segment-size")]
    pub(crate) lane_segment: Option<String>,
    /// Chunk fingerprint.
    #[arg(long, value_enum, default_value_t = HashArg::Blake3)]
    pub(crate) hash: HashArg,
}

#[derive(ValueEnum, Clone, Copy, PartialEq)]
pub(crate) enum HashArg {
    Blake3,
    Sha256,
    None,
}

impl EngineArgs {
    pub(crate) fn profile(&self) -> Result<Profile, Fail> {
        match &self.profile {
            Some(s) => s.parse().map_err(|e: Error| Fail::usage(e.to_string())),
            None => Ok(Profile::default_profile()),
        }
    }
    pub(crate) fn options(&self, threads_override: Option<usize>) -> Result<Options, Fail> {
        let backend = match &self.backend {
            Some(b) => Some(Backend::parse(b).map_err(|e| Fail::usage(e.to_string()))?),
            None => None,
        };
        let lane_segment = match &self.lane_segment {
            Some(s) => Some(
                cutpoint_core::profile::parse_size(s)
                    .map_err(|_| Fail::usage(format!("--lane-segment '{s}' is not a size (examples: 4096, 64k, 1m)")))?,
            ),
            None => None,
        };
        let hash = match self.hash {
            HashArg::Blake3 => HashAlg::Blake3,
            HashArg::Sha256 => HashAlg::Sha256,
            HashArg::None => HashAlg::None,
        };
        Ok(Options { backend, threads: threads_override.unwrap_or(self.threads), lane_segment, span: 0, hash })
    }
    pub(crate) fn engine(&self, threads_override: Option<usize>) -> Result<Engine, Fail> {
        let profile = self.profile()?;
        Engine::new(profile, self.options(threads_override)?).map_err(|e| Fail::usage(e.to_string()))
    }
}

pub(crate) fn open(path: &PathBuf) -> Result<(Box<dyn Read + Send>, Option<u64>), Fail> {
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

pub(crate) fn name(path: &Path) -> String {
    if path.as_os_str() == "-" {
        "<stdin>".into()
    } else {
        path.display().to_string()
    }
}

#[derive(Serialize, Default, Clone)]
pub(crate) struct FileStats {
    pub(crate) file: String,
    pub(crate) bytes: u64,
    pub(crate) chunks: u64,
    pub(crate) avg_chunk: f64,
    /// Bytes of chunks not seen earlier in this run (this file's and earlier files').
    pub(crate) unique_bytes: Option<u64>,
    /// bytes / unique_bytes for this file given the files before it.
    pub(crate) dedup_ratio: Option<f64>,
    pub(crate) seconds: f64,
    pub(crate) mb_per_s: f64,
}

/// Dedup accounting in file order: a chunk is unique the first time its fingerprint is seen.
pub(crate) struct Dedup {
    pub(crate) enabled: bool,
    pub(crate) seen: HashSet<[u8; 32]>,
}

impl Dedup {
    pub(crate) fn stats(&mut self, file: String, chunks: impl Iterator<Item = (usize, Option<[u8; 32]>)>, secs: f64) -> FileStats {
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

pub(crate) fn file_stats(file: String, bytes: u64, chunks: u64, unique: Option<u64>, secs: f64) -> FileStats {
    FileStats {
        file,
        bytes,
        chunks,
        avg_chunk: if chunks == 0 { 0.0 } else { bytes as f64 / chunks as f64 },
        unique_bytes: unique,
        dedup_ratio: dedup_ratio(bytes, unique.unwrap_or(0)),
        seconds: secs,
        mb_per_s: if secs > 0.0 { bytes as f64 / secs / 1e6 } else { 0.0 },
    }
}

/// A file's dedup ratio: its bytes over its bytes not seen before it (none when all were seen).
pub(crate) fn dedup_ratio(bytes: u64, unique: u64) -> Option<f64> {
    (unique > 0).then(|| bytes as f64 / unique as f64)
}
