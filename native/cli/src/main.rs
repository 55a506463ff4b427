//! `cutpoint` — the native command-line tool.
//!
//! Exit codes: 0 success; 1 an input could not be read or written (the message names the
//! file, or a store request failed); 2 bad usage or invalid options (profile, backend, sizes);
//! 3 restored data did not verify (`pull`).

use clap::{Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

mod backends;
mod check;
mod chunk;
mod common;
mod gc;
mod gen;
mod ls;
mod pull;
mod push;
mod rapid;
mod remote;
mod rm;
mod serve;
mod stats;
mod token;

// The store subcommands' modules import these as `super::{EngineArgs, Fail}`.
use common::{EngineArgs, Fail};

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
        #[arg(long, value_enum, default_value_t = chunk::Format::Text)]
        format: chunk::Format,
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
    /// Reclaim space: drop packs no committed version references, rewrite packs less than half
    /// referenced (packs at least half referenced are kept whole; PROTOCOL.md §5).
    Gc(gc::GcArgs),
    /// Verify a namespace in the store (packs, index, versions).
    Check(check::CheckArgs),
    /// Make a bearer token for a namespace.
    Token(token::TokenArgs),
    /// Print a shell completion script (e.g. `cutpoint completions bash > ~/.local/share/bash-completion/completions/cutpoint`).
    Completions {
        /// The shell: bash, zsh, fish, elvish or powershell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.cmd {
        Cmd::Chunk { file, engine, format, rapid } => chunk::run(&file, &engine, format, &rapid),
        Cmd::Stats { files, engine, json, jobs, naive, rapid } => stats::run(&files, &engine, json, jobs, naive.as_deref(), &rapid),
        Cmd::Backends => backends::run(),
        Cmd::Gen(args) => gen::run(&args).map_err(|e| Fail { code: e.0, msg: e.1 }),
        Cmd::Serve(a) => serve::run(&a),
        Cmd::Push(a) => push::run(&a),
        Cmd::Pull(a) => pull::run(&a),
        Cmd::Ls(a) => ls::run(&a),
        Cmd::Rm(a) => rm::run(&a),
        Cmd::Gc(a) => gc::run(&a),
        Cmd::Check(a) => check::run(&a),
        Cmd::Token(a) => token::run(&a),
        Cmd::Completions { shell } => {
            clap_complete::generate(shell, &mut <Cli as clap::CommandFactory>::command(), "cutpoint", &mut std::io::stdout());
            Ok(())
        }
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
