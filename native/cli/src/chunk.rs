//! `cutpoint chunk`: the chunks of one file, as text or JSON lines (`--rapid`: see `rapid.rs`).

use super::common::{name, open, EngineArgs, Fail};
use super::rapid::{self, RapidArgs};
use clap::ValueEnum;
use cutpoint_core::hex;
use std::io::{self, BufWriter, Write};
use std::path::PathBuf;

#[derive(ValueEnum, Clone, Copy, PartialEq)]
pub enum Format {
    Text,
    Jsonl,
}

pub fn run(file: &PathBuf, args: &EngineArgs, format: Format, ra: &RapidArgs) -> Result<(), Fail> {
    if ra.rapid.is_some() {
        return rapid::chunk_cmd(file, args, format == Format::Jsonl, ra);
    }
    cmd_chunk(file, args, format)
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
