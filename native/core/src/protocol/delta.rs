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

/// Why a delta was refused: malformed, or well formed but its expansion over a limit (the
/// store answers 400 and 413).
#[derive(Debug)]
pub enum ExpandError {
    Malformed(WireError),
    /// The expanded recipe would be larger than the limit (the message says by how much).
    TooLarge(String),
}

impl std::fmt::Display for ExpandError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExpandError::Malformed(e) => write!(f, "{e}"),
            ExpandError::TooLarge(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for ExpandError {}

impl From<WireError> for ExpandError {
    fn from(e: WireError) -> ExpandError {
        ExpandError::Malformed(e)
    }
}

impl Delta {
    /// The full recipe: the runs taken from `base` (which must have this delta's profile and
    /// hash), checked against the `end` line and the digest, and refused if its text
    /// ([`Recipe::write`]) would be longer than `max_text` bytes.
    ///
    /// Nothing proportional to the expansion is allocated before every check has passed: the
    /// runs are checked against the base and the `end` line's count (O(operations)), the count
    /// against the shortest recipe of that many entries, then the entries are streamed
    /// ([`Delta::entries`]) for the exact text length, the byte total and the digest; only a
    /// delta that passes all of that is built into a recipe (at most `max_text / 70` entries).
    pub fn expand(&self, base: &Recipe, max_text: u64) -> Result<Recipe, ExpandError> {
        self.check_runs(base)?;
        let header = self.header_len();
        let too_large = |len: String| {
            ExpandError::TooLarge(format!(
                "the expanded recipe ({len}) is larger than the store's limit of {max_text} bytes"
            ))
        };
        let floor = self.count.saturating_mul(crate::rapid::recipe::MIN_ENTRY_LINE).saturating_add(header);
        if floor > max_text {
            return Err(too_large(format!("{} chunks, at least {floor} bytes", self.count)));
        }
        let mut text = header + end_line_len(self.count, self.bytes);
        let mut bytes = 0u64;
        let mut fd = super::FileDigest::new(self.hash);
        for e in self.entries(base) {
            text += e.line_len();
            bytes += e.size as u64;
            fd.add(&e.fp, e.size);
        }
        if text > max_text {
            return Err(too_large(format!("{text} bytes")));
        }
        if bytes != self.bytes {
            return Err(WireError::malformed(format!(
                "the expanded delta holds {} chunks and {bytes} bytes; its 'end' line says {} and {}",
                self.count, self.count, self.bytes
            ))
            .into());
        }
        if fd.finish() != Some(self.digest) {
            return Err(WireError::malformed(
                "the 'digest' line is not the digest of the expanded chunk list (see PROTOCOL.md, 'File digest')",
            )
            .into());
        }
        let mut entries = Vec::with_capacity(self.count as usize);
        entries.extend(self.entries(base).cloned());
        Ok(Recipe {
            profile: self.profile.clone(),
            hash: self.hash,
            digest: Some(self.digest),
            entries,
        })
    }

    /// Checks the profile and hash against the base, every run against the base's length,
    /// and that the runs and chunk lines add up to the `end` line's count.
    fn check_runs(&self, base: &Recipe) -> Result<(), WireError> {
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
        let mut n = 0u64;
        for op in &self.ops {
            let k = match op {
                Op::Copy { start, count } => {
                    start.checked_add(*count).filter(|&e| e <= base.entries.len() as u64).ok_or_else(|| {
                        WireError::malformed(format!(
                            "run {start}+{count} is past the end of base version {} ({} entries)",
                            self.base,
                            base.entries.len()
                        ))
                    })?;
                    *count
                }
                Op::Entry(_) => 1,
            };
            n = n.saturating_add(k);
            if n > self.count {
                return Err(WireError::malformed("the runs hold more chunks than the 'end' line says"));
            }
        }
        if n != self.count {
            return Err(WireError::malformed(format!(
                "the delta holds {n} chunks; its 'end' line says {}",
                self.count
            )));
        }
        Ok(())
    }

    /// The expanded recipe's entries, in order, without building it. The runs must lie within
    /// `base` (checked by [`Delta::expand`]; a run past its end is cut short here).
    pub fn entries<'a>(&'a self, base: &'a Recipe) -> impl Iterator<Item = &'a RecipeEntry> + 'a {
        self.ops.iter().flat_map(move |op| match op {
            Op::Copy { start, count } => {
                let len = base.entries.len();
                let a = (*start).min(len as u64) as usize;
                let b = start.saturating_add(*count).min(len as u64) as usize;
                base.entries[a..b].iter()
            }
            Op::Entry(e) => std::slice::from_ref(e).iter(),
        })
    }

    /// The length of the expanded recipe's header lines ([`Recipe::write`]).
    fn header_len(&self) -> u64 {
        let version = format!("cutpoint-recipe {}\n", crate::rapid::recipe::RECIPE_VERSION).len();
        let profile = "profile \n".len() + self.profile.len();
        let hash = "hash \n".len() + self.hash.name().len();
        let digest = "digest \n".len() + 64;
        (version + profile + hash + digest) as u64
    }
}

fn end_line_len(count: u64, bytes: u64) -> u64 {
    format!("end {count} {bytes}\n").len() as u64
}

/// Two entries are the same chunk the same way; a `last` byte missing on the new side is taken
/// from the base (the same fingerprint has the same last byte).
fn same(new: &RecipeEntry, base: &RecipeEntry) -> bool {
    new.fp == base.fp && new.size == base.size && new.regular == base.regular && (new.last.is_none() || new.last == base.last)
}

/// The op lines of a delta (a recipe's, 3.4, or a part's, 3.8): `new`'s entries as runs
/// `= start count` of `base`'s entries found in the same order (each entry pair accepted by
/// `same`), the others as chunk lines.
pub(crate) fn write_ops(s: &mut String, new: &[RecipeEntry], base: &[RecipeEntry], same: impl Fn(&RecipeEntry, &RecipeEntry) -> bool) {
    let mut pos: HashMap<&crate::Digest, usize> = HashMap::with_capacity(base.len());
    for (i, e) in base.iter().enumerate() {
        pos.entry(&e.fp).or_insert(i);
    }
    let mut i = 0;
    while i < new.len() {
        let e = &new[i];
        if let Some(&j) = pos.get(&e.fp) {
            let k = new[i..].iter().zip(&base[j..]).take_while(|(x, y)| same(x, y)).count();
            if k > 0 {
                let _ = writeln!(s, "= {j} {k}");
                i += k;
                continue;
            }
        }
        e.write_line(s);
        i += 1;
    }
}

/// The delta of `recipe` (which must carry its digest) against `base`, stored as version
/// `base_version`. Runs of entries found in the same order in the base become `= start count`.
pub fn encode(recipe: &Recipe, base: &Recipe, base_version: u64) -> Result<Vec<u8>, WireError> {
    let digest = recipe.digest.ok_or_else(|| WireError::malformed("a delta needs the file's digest"))?;
    let mut s = String::new();
    let _ = writeln!(s, "cutpoint-delta {DELTA_VERSION}\nbase {base_version}\nprofile {}", recipe.profile);
    let _ = writeln!(s, "hash {}\ndigest {}", recipe.hash.name(), hex(&digest));
    write_ops(&mut s, &recipe.entries, &base.entries, same);
    let n = recipe.entries.len();
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
        let mut r = Recipe {
            profile: "gear:2k:8k:64k".parse::<crate::Profile>().unwrap().to_string(),
            hash: HashAlg::Blake3,
            digest: None,
            entries,
        };
        r.digest = crate::protocol::FileDigest::of(&r);
        r
    }

    const NO_LIMIT: u64 = u64::MAX;

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
        assert_eq!(parsed.expand(&base, NO_LIMIT).unwrap(), want);
        // Three runs and one chunk line, not 99 lines.
        assert!(d.len() < 400, "{}", String::from_utf8_lossy(&d));
        // Nothing in common: every line written out.
        let other = recipe((0..5).map(|i| entry(100 + i, 10)).collect());
        let d = encode(&other, &base, 1).unwrap();
        assert_eq!(parse(&d).unwrap().expand(&base, NO_LIMIT).unwrap(), other);
    }

    #[test]
    fn bad_deltas_are_named() {
        let base = recipe((0..10).map(|i| entry(i, 100)).collect());
        let good = String::from_utf8(encode(&recipe(base.entries[2..5].to_vec()), &base, 1).unwrap()).unwrap();
        let err = |s: &str| parse(s.as_bytes()).map_err(ExpandError::from).and_then(|d| d.expand(&base, NO_LIMIT)).unwrap_err().to_string();
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
        assert!(parse(good.as_bytes()).unwrap().expand(&other, NO_LIMIT).unwrap_err().to_string().contains("sha256"));
    }

    /// A delta of `runs` copies of `= 0 <base len>` and an `end` line for `count` chunks.
    fn bomb(base: &Recipe, runs: usize, count: u64, bytes: u64, digest: &str) -> Vec<u8> {
        let mut s = format!(
            "cutpoint-delta 1\nbase 1\nprofile {}\nhash blake3\ndigest {digest}\n",
            base.profile
        );
        for _ in 0..runs {
            s += &format!("= 0 {}\n", base.entries.len());
        }
        s += &format!("end {count} {bytes}\n");
        s.into_bytes()
    }

    #[test]
    fn a_delta_bomb_is_refused_before_it_is_built() {
        // The issue's bomb: 100 runs of a 100,000-entry base (a 10^7-entry, ~740 MB recipe).
        let base = recipe((0..100_000u32).map(|i| entry((i % 251) as u8, 1000 + i)).collect());
        let per_base = base.total_bytes();
        // The digest of the real expansion (streamed: the test does not build it either).
        let mut fd = crate::protocol::FileDigest::new(HashAlg::Blake3);
        for _ in 0..100 {
            for e in &base.entries {
                fd.add(&e.fp, e.size);
            }
        }
        let digest = hex(&fd.finish().unwrap());
        let d = parse(&bomb(&base, 100, 10_000_000, per_base * 100, &digest)).unwrap();
        for limit in [128u64 << 20, 16 << 20] {
            match d.expand(&base, limit) {
                Err(ExpandError::TooLarge(m)) => assert!(m.contains(&format!("limit of {limit} bytes")), "{m}"),
                other => panic!("limit {limit}: {other:?}"),
            }
        }
        // A wrong digest and 10^8 entries: refused by the count alone, nothing expanded.
        let d = parse(&bomb(&base, 1000, 100_000_000, per_base * 1000, &"ab".repeat(32))).unwrap();
        assert!(matches!(d.expand(&base, 128 << 20), Err(ExpandError::TooLarge(_))));
        // An 'end' line that undercounts the runs: malformed, named.
        let d = parse(&bomb(&base, 100, 10, 10, &digest)).unwrap();
        let e = d.expand(&base, u64::MAX).unwrap_err().to_string();
        assert!(e.contains("more chunks than the 'end' line says"), "{e}");
        // Within a limit that fits it, the same delta expands (small enough for a test: 3 runs).
        let small = {
            let mut r = base.clone();
            r.entries.extend_from_slice(&base.entries);
            r.entries.extend_from_slice(&base.entries);
            r.digest = crate::protocol::FileDigest::of(&r);
            r
        };
        let dg = hex(&small.digest.unwrap());
        let d = parse(&bomb(&base, 3, 300_000, per_base * 3, &dg)).unwrap();
        let mut text = Vec::new();
        small.write(&mut text).unwrap();
        assert!(d.expand(&base, text.len() as u64).unwrap() == small, "the expansion differs");
        assert!(matches!(d.expand(&base, text.len() as u64 - 1), Err(ExpandError::TooLarge(_))));
    }

    #[test]
    fn a_wrong_digest_is_refused() {
        let base = recipe((0..10).map(|i| entry(i, 100)).collect());
        let good = String::from_utf8(encode(&recipe(base.entries[2..5].to_vec()), &base, 1).unwrap()).unwrap();
        let d = parse(good.as_bytes()).unwrap();
        let wrong = good.replace(&hex(&d.digest), &"00".repeat(32));
        let e = parse(wrong.as_bytes()).unwrap().expand(&base, NO_LIMIT).unwrap_err().to_string();
        assert!(e.contains("'digest' line"), "{e}");
    }

    /// xorshift64*: a seeded sequence for the property test (no dependency).
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n.max(1)
        }
    }

    /// Property: for random bases and new recipes made of runs of the base and new chunks,
    /// the delta expands back to the recipe exactly when the limit is at least the recipe's
    /// text length (and is refused as too large one byte below it); and for random edits of
    /// the delta's text (runs moved, lengthened, repeated; end lines changed), whatever
    /// expands holds what its end line says, matches its digest and fits the limit.
    #[test]
    fn expansion_matches_the_recipe_and_respects_the_limit() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for round in 0..300 {
            let n = 1 + rng.below(60) as usize;
            let base = recipe(
                (0..n)
                    .map(|i| {
                        let mut e = entry((i % 200) as u8, 1 + rng.below(70_000) as u32);
                        e.fp[1] = (i / 200) as u8;
                        e.fp[2] = round as u8;
                        if rng.below(4) == 0 {
                            e.last = None;
                        }
                        e
                    })
                    .collect(),
            );
            let mut entries = Vec::new();
            for _ in 0..rng.below(8) {
                if rng.below(3) == 0 {
                    let mut e = entry(250, 1 + rng.below(1 << 20) as u32);
                    e.fp[3] = rng.next() as u8;
                    entries.push(e);
                } else {
                    let a = rng.below(n as u64) as usize;
                    let b = a + 1 + rng.below((n - a) as u64) as usize;
                    entries.extend_from_slice(&base.entries[a..b]);
                }
            }
            let new = recipe(entries);
            let d = encode(&new, &base, 1).unwrap();
            let mut text = Vec::new();
            new.write(&mut text).unwrap();
            let parsed = parse(&d).unwrap();
            let got = parsed.expand(&base, text.len() as u64).unwrap();
            assert_eq!(got.entries.len(), new.entries.len());
            assert_eq!(crate::protocol::FileDigest::of(&got), new.digest);
            let mut again = Vec::new();
            got.write(&mut again).unwrap();
            assert_eq!(again.len(), text.len(), "round {round}: the text length is exact");
            assert!(matches!(parsed.expand(&base, text.len() as u64 - 1), Err(ExpandError::TooLarge(_))));
            // Random edits of the delta's lines.
            let lines: Vec<String> = String::from_utf8(d).unwrap().lines().map(String::from).collect();
            for _ in 0..20 {
                let mut l = lines.clone();
                let i = 5 + rng.below((l.len() - 5) as u64) as usize;
                match rng.below(4) {
                    0 => l[i] = format!("= {} {}", rng.below(n as u64 + 2), 1 + rng.below(n as u64 + 2)),
                    1 => {
                        let x = l[i].clone();
                        for _ in 0..rng.below(50) {
                            l.insert(i, x.clone());
                        }
                    }
                    2 => {
                        let last = l.len() - 1;
                        l[last] = format!("end {} {}", rng.below(4000), rng.below(1 << 30));
                    }
                    _ => {
                        l.remove(i);
                    }
                }
                let body = l.join("\n") + "\n";
                let limit = rng.below(64 << 10);
                if let Ok(r) = parse(body.as_bytes()).map_err(ExpandError::from).and_then(|d| d.expand(&base, limit)) {
                    let d = parse(body.as_bytes()).unwrap();
                    let mut t = Vec::new();
                    r.write(&mut t).unwrap();
                    assert!(t.len() as u64 <= limit, "expanded past the limit");
                    assert_eq!((r.entries.len() as u64, r.total_bytes()), (d.count, d.bytes));
                    assert_eq!(crate::protocol::FileDigest::of(&r), Some(d.digest));
                }
            }
        }
    }
}
