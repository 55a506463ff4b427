//! Differential fuzz cases: decode arbitrary bytes into (profile, backend, threads, segment
//! size, span, read sizes, data) and check every engine against `reference_cuts`.
//!
//! Shared by the cargo-fuzz target (`native/fuzz/fuzz_targets/engines.rs`, via `#[path]`) and the
//! seeded in-test loop (`tests/differential.rs`), so plain `cargo test` exercises the same
//! decoder and checks the fuzzer does. Self-contained: depends on `cutpoint_core` only.
#![allow(dead_code)]

use cutpoint_core::{backend, reference_cuts, Engine, HashAlg, Options, Profile};
use std::io::{self, Read};

/// A decoded case.
#[derive(Clone, Debug)]
pub struct FuzzCase {
    pub profile: Profile,
    pub backend: backend::Backend,
    pub threads: usize,
    pub lane_segment: Option<usize>,
    pub span: usize,
    pub read_sizes: Vec<usize>,
    pub hash: HashAlg,
    pub data: Vec<u8>,
}

struct Cursor<'a>(&'a [u8]);

impl Cursor<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
}

/// Longest input a case expands to (keeps one case fast).
pub const MAX_DATA: usize = 1 << 18;

/// Decodes a case. Every input decodes to a valid case (missing bytes read as zero), so the
/// fuzzer never wastes time on rejected inputs.
pub fn decode(input: &[u8]) -> FuzzCase {
    let mut c = Cursor(input);
    let fam = c.u8() % 3;
    let wb = c.u8();
    let (family, window) = match fam {
        0 => ("crc32", 1 + (wb as usize % 64)),
        1 => ("rabin", 1 + (wb as usize % 64)),
        _ => ("gear", 64),
    };
    let min = window + c.u16() as usize % 512;
    let avg_bits = (usize::BITS - (min - 1).leading_zeros()).max(1) + (c.u8() as u32 % 3);
    let avg = 1usize << avg_bits;
    let max = avg + (c.u16() as usize % (3 * avg + 1));
    let k = c.u8();
    let mut keys = Vec::new();
    if family != "gear" {
        keys.push(format!("window={window}"));
    }
    if family == "gear" {
        let nc = (k % 4) as u32;
        keys.push(format!("nc={}", nc.min(avg_bits - 1)));
        if k & 0x80 != 0 {
            keys.push(format!("seed={}", c.u32()));
        }
    } else if k & 1 != 0 {
        keys.push(format!("magic={}", c.u16() as usize % avg));
    }
    let text = format!("{family}:{min}:{avg}:{max}:{}", keys.join(","));
    let profile: Profile = text.parse().unwrap_or_else(|e| panic!("decoder made an invalid profile {text}: {e}"));
    let avail = backend::available();
    let backend = avail[c.u8() as usize % avail.len()];
    let threads = c.u8() as usize % 9; // 0 = auto
    let lane_segment = match c.u8() % 4 {
        0 => None,
        1 => Some(1 + c.u8() as usize % 8),
        2 => Some(1 + c.u16() as usize),
        _ => Some(1 << 30),
    };
    let span = c.u16() as usize % 5000; // 0 = default 1 MiB; below 64 means 64
    let n = c.u8() % 6;
    let read_sizes = (0..n)
        .map(|_| match c.u8() % 5 {
            0 => 0, // Interrupted
            1 => 1,
            2 => 1 + c.u8() as usize,
            3 => 1 + c.u16() as usize,
            _ => 64 << 20,
        })
        .collect::<Vec<usize>>();
    // Only interruptions would never make progress: read freely then.
    let read_sizes = if read_sizes.iter().all(|&s| s == 0) { Vec::new() } else { read_sizes };
    let hash = match c.u8() % 4 {
        0 => HashAlg::Blake3,
        1 => HashAlg::Sha256,
        _ => HashAlg::None,
    };
    // Data: raw, raw repeated, or expanded from a seed (long inputs from short fuzz inputs).
    let mode = c.u8() % 4;
    let rest = c.0;
    let data = match mode {
        0 | 1 if rest.is_empty() => Vec::new(),
        0 => rest.to_vec(),
        1 => {
            let reps = 1 + (rest[0] as usize) * 4;
            let mut d = Vec::with_capacity(rest.len() * reps);
            for _ in 0..reps {
                d.extend_from_slice(rest);
                if d.len() >= MAX_DATA {
                    break;
                }
            }
            d.truncate(MAX_DATA);
            d
        }
        m => {
            let mut c2 = Cursor(rest);
            let len = c2.u32() as usize % MAX_DATA;
            let mut s = c2.u32() as u64 | 1;
            let low = m == 3;
            (0..len)
                .map(|_| {
                    s ^= s >> 12;
                    s ^= s << 25;
                    s ^= s >> 27;
                    let v = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
                    if low {
                        (v >> 63) as u8
                    } else {
                        (v >> 56) as u8
                    }
                })
                .collect()
        }
    };
    FuzzCase { profile, backend, threads, lane_segment, span, read_sizes, hash, data }
}

struct Pieces<'a> {
    data: &'a [u8],
    sizes: &'a [usize],
    i: usize,
}

impl Read for Pieces<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let want = if self.sizes.is_empty() { usize::MAX } else { self.sizes[self.i % self.sizes.len()] };
        self.i += 1;
        if want == 0 {
            return Err(io::Error::new(io::ErrorKind::Interrupted, "fuzz: interrupted"));
        }
        let k = want.min(buf.len()).min(self.data.len());
        buf[..k].copy_from_slice(&self.data[..k]);
        self.data = &self.data[k..];
        Ok(k)
    }
}

/// Checks every engine view of the case against the reference. Also: the profile's canonical
/// form parses back to itself, and the reference satisfies the chunking invariants.
pub fn check(case: &FuzzCase) -> Result<(), String> {
    let p = &case.profile;
    let again: Profile = p.to_string().parse().map_err(|e| format!("canonical form {p} does not parse: {e}"))?;
    if &again != p {
        return Err(format!("canonical form {p} parses to a different profile"));
    }
    let want = reference_cuts(p, &case.data);
    let n = case.data.len();
    let mut s = 0;
    for (i, &e) in want.iter().enumerate() {
        if e <= s || e - s > p.max || (e - s < p.min && i + 1 != want.len()) {
            return Err(format!("reference chunk {i} [{s},{e}) breaks the rules"));
        }
        s = e;
    }
    if s != n {
        return Err(format!("reference covers {s} of {n} bytes"));
    }
    let seq = cutpoint_core::sequential_cuts(p, &case.data);
    if seq != want {
        return Err("sequential_cuts differs from reference".into());
    }
    let e = Engine::new(
        p.clone(),
        Options {
            backend: Some(case.backend),
            threads: case.threads,
            lane_segment: case.lane_segment,
            span: case.span,
            hash: case.hash,
        },
    )
    .map_err(|e| format!("Engine::new: {e}"))?;
    if e.cuts(&case.data) != want {
        return Err("cuts() differs from reference".into());
    }
    let mut at = 0usize;
    let mut got = Vec::new();
    for c in e.chunks(&case.data) {
        if c.offset as usize != at || c.hash != case.hash.digest(&case.data[at..at + c.length]) {
            return Err(format!("chunks(): bad chunk {c:?} (expected offset {at})"));
        }
        at += c.length;
        got.push(at);
    }
    if got != want {
        return Err("chunks() differs from reference".into());
    }
    got.clear();
    at = 0;
    let r = Pieces { data: &case.data, sizes: &case.read_sizes, i: 0 };
    for c in e.stream(r) {
        let c = c.map_err(|e| format!("stream error {e}"))?;
        if c.offset as usize != at || c.hash != case.hash.digest(&case.data[at..at + c.length]) {
            return Err(format!("stream(): bad chunk {c:?} (expected offset {at})"));
        }
        at += c.length;
        got.push(at);
    }
    if got != want {
        return Err("stream() differs from reference".into());
    }
    Ok(())
}
