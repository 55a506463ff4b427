//! Delta commits: a file recipe written against a base version's recipe, so that a new version
//! that shares most chunks with the last one costs a few bytes per unchanged run instead of a
//! ~72-byte line per chunk. The server expands it against the base it has stored and commits the
//! full recipe, exactly as if the full recipe had been sent.
//!
//! ```text
//! cutpoint-delta 1
//! base <version>
//! profile <canonical profile>
//! hash <blake3|sha256>
//! digest <64 hex digits>                 (the file digest, `FileDigest`: required)
//! = <start> <count>                      base entries start..start+count, in order
//! <64 hex> <size> <last byte|-> <r|h>    a chunk line, as in a recipe
//! ...
//! end <chunk count> <total bytes>        of the expanded recipe
//! ```
//!
//! [`parse`] reads the text into a [`Delta`] (pure, no base needed); [`Delta::expand`] checks it
//! against the base recipe and yields the full recipe; [`encode`] writes the delta of a recipe
//! against a base.

use super::WireError;
use crate::fingerprint::{hex, HashAlg};
use crate::rapid::recipe::parse_hex;
use crate::rapid::{Recipe, RecipeEntry};
use std::collections::HashMap;
use std::fmt::Write as _;

pub const DELTA_VERSION: u32 = 1;
/// The most operations (runs + chunk lines) one delta may hold.
pub const MAX_OPS: usize = 1 << 24;

#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Base entries `start..start + count`.
    Copy { start: u64, count: u64 },
    /// A chunk written out.
    Entry(RecipeEntry),
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delta {
    pub base: u64,
    pub profile: String,
    pub hash: HashAlg,
    pub digest: crate::Digest,
    pub ops: Vec<Op>,
    /// From the `end` line: chunks and bytes of the expanded recipe.
    pub count: u64,
    pub bytes: u64,
}

fn bad(line: usize, m: &str) -> WireError {
    WireError::malformed(format!("delta line {line}: {m}"))
}

/// Parses a delta commit body.
pub fn parse(body: &[u8]) -> Result<Delta, WireError> {
    let text = std::str::from_utf8(body).map_err(|_| WireError::malformed("a delta is UTF-8 text; this body is not"))?;
    if let Some(n) = text.split('\n').position(|l| l.ends_with('\r')) {
        return Err(bad(n + 1, "ends with CR LF: delta lines end with LF only"));
    }
    let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
    let mut next = |what: &str| {
        lines
            .next()
            .ok_or_else(|| WireError::Truncated(format!("the delta ends before {what}")))
    };
    let (n, l) = next("its header")?;
    match l.strip_prefix("cutpoint-delta ") {
        Some(v) if v == DELTA_VERSION.to_string() => {}
        Some(v) => return Err(bad(n, &format!("delta format version {v}; this build reads {DELTA_VERSION}"))),
        None => return Err(bad(n, "not a cutpoint delta (expected 'cutpoint-delta 1')")),
    }
    let (n, l) = next("the base line")?;
    let base: u64 = l
        .strip_prefix("base ")
        .and_then(|v| v.parse().ok())
        .filter(|&v| v > 0)
        .ok_or_else(|| bad(n, "expected 'base <version>'"))?;
    let (n, l) = next("the profile")?;
    let profile: crate::Profile = l
        .strip_prefix("profile ")
        .ok_or_else(|| bad(n, "expected 'profile ...'"))?
        .parse()
        .map_err(|e: crate::Error| bad(n, &e.to_string()))?;
    let (n, l) = next("the hash")?;
    let hash = l
        .strip_prefix("hash ")
        .and_then(|h| HashAlg::parse(h).ok())
        .filter(|&h| h != HashAlg::None)
        .ok_or_else(|| bad(n, "expected 'hash blake3' or 'hash sha256'"))?;
    let (n, l) = next("the digest")?;
    let digest = l
        .strip_prefix("digest ")
        .and_then(parse_hex)
        .ok_or_else(|| bad(n, "expected 'digest <64 hex digits>'"))?;
    let mut ops = Vec::new();
    loop {
        let (n, l) = next("its 'end' line")?;
        let f: Vec<&str> = l.split(' ').collect();
        match f.as_slice() {
            ["end", c, b] => {
                let (Ok(count), Ok(bytes)) = (c.parse::<u64>(), b.parse::<u64>()) else {
                    return Err(bad(n, "expected 'end <chunk count> <total bytes>'"));
                };
                let rest: Vec<(usize, &str)> = lines.collect();
                if rest.len() > 1 || rest.first().is_some_and(|(_, l)| !l.is_empty()) {
                    return Err(bad(n + 1, "text after the 'end' line"));
                }
                if rest.is_empty() {
                    return Err(WireError::Truncated("the delta's last line has no newline".into()));
                }
                return Ok(Delta {
                    base,
                    profile: profile.to_string(),
                    hash,
                    digest,
                    ops,
                    count,
                    bytes,
                });
            }
            ["=", s, c] => {
                let (Ok(start), Ok(count)) = (s.parse::<u64>(), c.parse::<u64>()) else {
                    return Err(bad(n, "expected '= <start> <count>'"));
                };
                if count == 0 {
                    return Err(bad(n, "a run of 0 entries"));
                }
                ops.push(Op::Copy { start, count });
            }
            [fp, size, last, rh] => {
                let fp = parse_hex(fp).ok_or_else(|| bad(n, "bad fingerprint (64 hex digits)"))?;
                let size: u32 = size.parse().ok().filter(|&s| s > 0).ok_or_else(|| bad(n, "bad size"))?;
                let last = match *last {
                    "-" => None,
                    s if s.len() == 2 => Some(u8::from_str_radix(s, 16).map_err(|_| bad(n, "bad last byte"))?),
                    _ => return Err(bad(n, "bad last byte")),
                };
                let regular = match *rh {
                    "r" => true,
                    "h" => false,
                    _ => return Err(bad(n, "the fourth field must be r or h")),
                };
                ops.push(Op::Entry(RecipeEntry { fp, size, last, regular }));
            }
            _ => return Err(bad(n, "expected '= <start> <count>', a chunk line or 'end'")),
        }
        if ops.len() > MAX_OPS {
            return Err(bad(n, &format!("more than {MAX_OPS} operations")));
        }
    }
}

impl Delta {
    /// The full recipe: the runs taken from `base` (which must have this delta's profile and
    /// hash), checked against the `end` line.
    pub fn expand(&self, base: &Recipe) -> Result<Recipe, WireError> {
        if base.profile != self.profile || base.hash != self.hash {
            return Err(WireError::malformed(format!(
                "the delta is for {} / {}; base version {} is {} / {}",
                self.profile,
                self.hash.name(),
                self.base,
                base.profile,
                base.hash.name()
            )));
        }
        let mut entries = Vec::new();
        for op in &self.ops {
            match op {
                Op::Copy { start, count } => {
                    let end = start.checked_add(*count).filter(|&e| e <= base.entries.len() as u64).ok_or_else(|| {
                        WireError::malformed(format!(
                            "run {start}+{count} is past the end of base version {} ({} entries)",
                            self.base,
                            base.entries.len()
                        ))
                    })?;
                    if entries.len() as u64 + count > self.count {
                        return Err(WireError::malformed("the runs hold more chunks than the 'end' line says"));
                    }
                    entries.extend_from_slice(&base.entries[*start as usize..end as usize]);
                }
                Op::Entry(e) => entries.push(e.clone()),
            }
        }
        let r = Recipe {
            profile: self.profile.clone(),
            hash: self.hash,
            digest: Some(self.digest),
            entries,
        };
        if r.entries.len() as u64 != self.count || r.total_bytes() != self.bytes {
            return Err(WireError::malformed(format!(
                "the expanded delta holds {} chunks and {} bytes; its 'end' line says {} and {}",
                r.entries.len(),
                r.total_bytes(),
                self.count,
                self.bytes
            )));
        }
        Ok(r)
    }
}

/// Two entries are the same chunk the same way; a `last` byte missing on the new side is taken
/// from the base (the same fingerprint has the same last byte).
fn same(new: &RecipeEntry, base: &RecipeEntry) -> bool {
    new.fp == base.fp && new.size == base.size && new.regular == base.regular && (new.last.is_none() || new.last == base.last)
}

/// The delta of `recipe` (which must carry its digest) against `base`, stored as version
/// `base_version`. Runs of entries found in the same order in the base become `= start count`.
pub fn encode(recipe: &Recipe, base: &Recipe, base_version: u64) -> Result<Vec<u8>, WireError> {
    let digest = recipe.digest.ok_or_else(|| WireError::malformed("a delta needs the file's digest"))?;
    let mut pos: HashMap<&crate::Digest, usize> = HashMap::with_capacity(base.entries.len());
    for (i, e) in base.entries.iter().enumerate() {
        pos.entry(&e.fp).or_insert(i);
    }
    let mut s = String::new();
    let _ = writeln!(s, "cutpoint-delta {DELTA_VERSION}\nbase {base_version}\nprofile {}", recipe.profile);
    let _ = writeln!(s, "hash {}\ndigest {}", recipe.hash.name(), hex(&digest));
    let mut i = 0;
    let n = recipe.entries.len();
    while i < n {
        let e = &recipe.entries[i];
        if let Some(&j) = pos.get(&e.fp) {
            let mut k = 0;
            while i + k < n && j + k < base.entries.len() && same(&recipe.entries[i + k], &base.entries[j + k]) {
                k += 1;
            }
            if k > 0 {
                let _ = writeln!(s, "= {j} {k}");
                i += k;
                continue;
            }
        }
        let last = e.last.map(|b| format!("{b:02x}")).unwrap_or_else(|| "-".into());
        let _ = writeln!(s, "{} {} {last} {}", hex(&e.fp), e.size, if e.regular { 'r' } else { 'h' });
        i += 1;
    }
    let _ = writeln!(s, "end {n} {}", recipe.total_bytes());
    Ok(s.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(i: u8, size: u32) -> RecipeEntry {
        RecipeEntry {
            fp: HashAlg::Blake3.digest(&[i]).unwrap(),
            size,
            last: Some(i),
            regular: true,
        }
    }

    fn recipe(entries: Vec<RecipeEntry>) -> Recipe {
        Recipe {
            profile: "gear:2k:8k:64k".parse::<crate::Profile>().unwrap().to_string(),
            hash: HashAlg::Blake3,
            digest: Some([9; 32]),
            entries,
        }
    }

    #[test]
    fn round_trip_and_size() {
        let base = recipe((0..100).map(|i| entry(i, 8000 + i as u32)).collect());
        // Insert a new chunk at 10, drop 50..52, change 70's last byte marker to none.
        let mut e = base.entries.clone();
        e.insert(10, entry(200, 123));
        e.drain(51..53);
        e[70].last = None;
        let new = recipe(e);
        let d = encode(&new, &base, 3).unwrap();
        let parsed = parse(&d).unwrap();
        assert_eq!(parsed.base, 3);
        let mut want = new.clone();
        want.entries[70].last = base.entries.iter().find(|b| b.fp == new.entries[70].fp).unwrap().last; // from the base
        assert_eq!(parsed.expand(&base).unwrap(), want);
        // Three runs and one chunk line, not 99 lines.
        assert!(d.len() < 400, "{}", String::from_utf8_lossy(&d));
        // Nothing in common: every line written out.
        let other = recipe((0..5).map(|i| entry(100 + i, 10)).collect());
        let d = encode(&other, &base, 1).unwrap();
        assert_eq!(parse(&d).unwrap().expand(&base).unwrap(), other);
    }

    #[test]
    fn bad_deltas_are_named() {
        let base = recipe((0..10).map(|i| entry(i, 100)).collect());
        let good = String::from_utf8(encode(&recipe(base.entries[2..5].to_vec()), &base, 1).unwrap()).unwrap();
        let err = |s: &str| parse(s.as_bytes()).and_then(|d| d.expand(&base)).unwrap_err().to_string();
        assert!(err(&good.replace("= 2 3", "= 8 3")).contains("past the end"));
        assert!(err(&good.replace("= 2 3", "= 2 0")).contains("run of 0"));
        let crlf = err(&good.replace('\n', "\r\n"));
        assert!(crlf.contains("line 1") && crlf.contains("LF only"), "{crlf}");
        assert!(err(&good.replace("end 3 300", "end 3 301")).contains("'end' line says"));
        assert!(err(&good.replace("cutpoint-delta 1", "cutpoint-delta 2")).contains("version 2"));
        assert!(err(&good.replace("base 1", "base 0")).contains("base <version>"));
        assert!(err(&format!("{good}x\n")).contains("after the 'end'"));
        assert!(err(good.trim_end()).contains("no newline"));
        assert!(err(&good.replace("gear:", "nope:")).contains("delta line 3"));
        assert!(parse(&[0xff, 0xfe]).unwrap_err().to_string().contains("UTF-8"));
        for cut in 0..good.len() {
            assert!(parse(&good.as_bytes()[..cut]).is_err(), "cut at {cut}");
        }
        let mut other = base.clone();
        other.hash = HashAlg::Sha256;
        assert!(parse(good.as_bytes()).unwrap().expand(&other).unwrap_err().to_string().contains("sha256"));
    }
}
