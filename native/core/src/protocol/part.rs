//! Recipe parts: bounded, content-addressed pieces of a file's recipe, so that no request
//! grows with the file (PROTOCOL.md 3.7).
//!
//! ```text
//! cutpoint-part 1
//! hash <blake3|sha256>
//! <64 hex> <size> <last byte|-> <r|h>    a chunk line, as in a recipe (1 or more)
//! end <chunk count> <total bytes>
//! ```
//!
//! A part's id is the namespace's fingerprint algorithm over exactly this text ([`Part::id`]);
//! only the canonical text parses ([`Part::parse`]), so a part has one id. A recipe may name a
//! part with a line `part <64 hex> <count> <bytes>` in place of that part's chunk lines
//! ([`PartRecipe`]). Clients cut a file's entries into parts with [`PartCutter`]: the
//! boundaries depend on the entries alone (content-defined), so a re-push of a slightly changed
//! file yields the same parts around the change.

use super::WireError;
use crate::fingerprint::{hex, Digest, HashAlg};
use crate::rapid::recipe::parse_hex;
use crate::rapid::{Recipe, RecipeEntry};
use std::fmt::Write as _;

/// The first line of a part.
pub const PART_MAGIC: &str = "cutpoint-part 1";
/// A part is closed at a boundary entry only once it has this many entries.
pub const MIN_PART_ENTRIES: usize = 1024;
/// A part is closed at this many entries in any case.
pub const MAX_PART_ENTRIES: usize = 16384;
/// A boundary entry: the first two bytes of its id (u16 little-endian) are 0 modulo this.
pub const PART_BOUNDARY_MODULUS: u16 = 4096;
/// A client commits in parts a file of more entries than this (or whose recipe text would pass
/// a quarter of the store's `max_recipe_bytes`, [`needs_parts`]).
pub const MAX_PLAIN_ENTRIES: u64 = 65536;

/// Whether a recipe of `entries` entries and `text_len` bytes of text is committed in parts
/// against a store whose `max_recipe_bytes` is `max_recipe`.
pub fn needs_parts(entries: u64, text_len: u64, max_recipe: u64) -> bool {
    entries > MAX_PLAIN_ENTRIES || text_len > max_recipe / 4
}

/// The longest part text a client writes for a store whose `max_recipe_bytes` is `max_recipe`.
pub fn part_text_limit(max_recipe: u64) -> u64 {
    max_recipe / 4
}

/// The longest a part of one entry can be: a store whose quarter `max_recipe_bytes` is below
/// this cannot take a part at all.
pub fn min_part_text(hash: HashAlg) -> u64 {
    text_len(hash, 1, u32::MAX as u64, 64 + 1 + 10 + 1 + 2 + 1 + 1 + 1)
}

/// The part id: the namespace's algorithm over the part's text.
pub fn part_id(alg: HashAlg, text: &[u8]) -> Option<Digest> {
    alg.digest(text)
}

fn header_len(hash: HashAlg) -> u64 {
    (PART_MAGIC.len() + 1 + "hash ".len() + hash.name().len() + 1) as u64
}

fn end_len(count: u64, bytes: u64) -> u64 {
    let digits = |v: u64| v.checked_ilog10().unwrap_or(0) as u64 + 1;
    4 + digits(count) + 1 + digits(bytes) + 1
}

/// The length of a part's text: its header, chunk lines of `lines` bytes in all, its `end`.
pub(crate) fn part_text_len(hash: HashAlg, count: u64, bytes: u64, lines: u64) -> u64 {
    text_len(hash, count, bytes, lines)
}

fn text_len(hash: HashAlg, count: u64, bytes: u64, lines: u64) -> u64 {
    header_len(hash) + lines + end_len(count, bytes)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Part {
    pub hash: HashAlg,
    pub entries: Vec<RecipeEntry>,
}

impl Part {
    /// The canonical text.
    pub fn text(&self) -> String {
        let mut s = String::with_capacity(self.entries.len() * 76 + 64);
        let _ = writeln!(s, "{PART_MAGIC}\nhash {}", self.hash.name());
        for e in &self.entries {
            e.write_line(&mut s);
        }
        let _ = writeln!(s, "end {} {}", self.entries.len(), self.bytes());
        s
    }

    /// The id of [`Part::text`].
    pub fn id(&self) -> Digest {
        part_id(self.hash, self.text().as_bytes()).unwrap_or_default()
    }

    pub fn bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size as u64).sum()
    }

    /// Parses a part. Only the canonical text parses (lower-case hex, LF, no extra text), so
    /// that a part's id names one text; an error names the line.
    pub fn parse(body: &[u8]) -> Result<Part, WireError> {
        let bad = |n: usize, m: &str| WireError::malformed(format!("part line {n}: {m}"));
        let text = std::str::from_utf8(body).map_err(|_| WireError::malformed("a part is UTF-8 text; this body is not"))?;
        let Some(text) = text.strip_suffix('\n') else {
            return Err(WireError::Truncated("the part's last line has no newline".into()));
        };
        let mut lines = text.split('\n').enumerate().map(|(i, l)| (i + 1, l));
        match lines.next() {
            Some((_, PART_MAGIC)) => {}
            _ => return Err(bad(1, "not a cutpoint part (expected 'cutpoint-part 1')")),
        }
        let hash = match lines.next() {
            Some((_, l)) => l
                .strip_prefix("hash ")
                .and_then(|h| HashAlg::parse(h).ok())
                .filter(|&h| h != HashAlg::None && h.name() == &l[5..])
                .ok_or_else(|| bad(2, "expected 'hash blake3' or 'hash sha256'"))?,
            None => return Err(WireError::Truncated("the part ends before its hash line".into())),
        };
        let mut entries = Vec::new();
        let mut total = 0u64;
        for (n, l) in lines {
            if let Some(end) = l.strip_prefix("end ") {
                if n != text.split('\n').count() {
                    return Err(bad(n + 1, "text after the 'end' line"));
                }
                if entries.is_empty() {
                    return Err(bad(n, "a part holds at least one chunk"));
                }
                if end != format!("{} {total}", entries.len()) {
                    return Err(bad(n, "the 'end' line does not match the chunks above it"));
                }
                // Every line was checked canonical as it was parsed, the head and the end line
                // are exact: the body is the part's canonical text (`Part::text`), without
                // writing that text again.
                return Ok(Part { hash, entries });
            }
            let e = RecipeEntry::parse_line(l).map_err(|m| bad(n, m))?;
            if !canonical_line(l.as_bytes()) {
                return Err(WireError::malformed(format!(
                    "part line {n}: the part is not in canonical form (lower-case hex, as PROTOCOL.md 3.7 writes it)"
                )));
            }
            total += e.size as u64;
            entries.push(e);
        }
        Err(WireError::Truncated("the part ends before its 'end' line".into()))
    }
}

/// Whether a chunk line that parses ([`RecipeEntry::parse_line`]) is exactly what
/// [`RecipeEntry::write_line`] writes for it: 64 lower-case hex digits, the size in decimal
/// without a sign or leading zero, `-` or two lower-case hex digits, `r` or `h`, one space
/// between each and nothing else.
fn canonical_line(l: &[u8]) -> bool {
    let lower_hex = |c: &u8| matches!(c, b'0'..=b'9' | b'a'..=b'f');
    if l.len() < 64 + 1 + 1 + 1 + 1 + 1 + 1 || !l[..64].iter().all(lower_hex) || l[64] != b' ' {
        return false;
    }
    let rest = &l[65..];
    let Some(sp) = rest.iter().position(|&c| c == b' ') else { return false };
    let size = &rest[..sp];
    if size.is_empty() || size[0] == b'0' || !size.iter().all(u8::is_ascii_digit) {
        return false;
    }
    match &rest[sp + 1..] {
        [b'-', b' ', b'r' | b'h'] => true,
        [a, b, b' ', b'r' | b'h'] => lower_hex(a) && lower_hex(b),
        _ => false,
    }
}

/// Cuts a file's recipe entries into parts, one entry at a time: a part is closed after an
/// entry whose id's first two bytes (u16 little-endian) are 0 modulo 4096 once it holds at
/// least 1,024 entries, at 16,384 entries, or before an entry that would make its text longer
/// than a quarter of the store's `max_recipe_bytes`. The boundaries depend only on the entries
/// (not on how they are fed), so native and wasm clients cut the same parts.
pub struct PartCutter {
    hash: HashAlg,
    limit: u64,
    entries: Vec<RecipeEntry>,
    lines: u64,
    bytes: u64,
}

impl PartCutter {
    pub fn new(hash: HashAlg, max_recipe: u64) -> PartCutter {
        PartCutter {
            hash,
            limit: part_text_limit(max_recipe),
            entries: Vec::new(),
            lines: 0,
            bytes: 0,
        }
    }

    fn take(&mut self) -> Part {
        self.lines = 0;
        self.bytes = 0;
        Part {
            hash: self.hash,
            entries: std::mem::take(&mut self.entries),
        }
    }

    /// Adds the next entry; returns the part this closed, if any.
    pub fn push(&mut self, e: RecipeEntry) -> Option<Part> {
        let n = self.entries.len() as u64;
        let line = e.line_len();
        let mut out = None;
        if n > 0 && text_len(self.hash, n + 1, self.bytes + e.size as u64, self.lines + line) > self.limit {
            out = Some(self.take());
        }
        let boundary = u16::from_le_bytes([e.fp[0], e.fp[1]]) % PART_BOUNDARY_MODULUS == 0;
        self.lines += line;
        self.bytes += e.size as u64;
        self.entries.push(e);
        let n = self.entries.len();
        if out.is_none() && (n >= MAX_PART_ENTRIES || (n >= MIN_PART_ENTRIES && boundary)) {
            out = Some(self.take());
        }
        out
    }

    /// Adds entries; returns the parts they closed, in order.
    pub fn push_all(&mut self, entries: impl IntoIterator<Item = RecipeEntry>) -> Vec<Part> {
        entries.into_iter().filter_map(|e| self.push(e)).collect()
    }

    /// The last, open part (`None` if it is empty).
    pub fn finish(&mut self) -> Option<Part> {
        (!self.entries.is_empty()).then(|| self.take())
    }

    /// Entries in the open part.
    pub fn pending(&self) -> usize {
        self.entries.len()
    }

    /// Bytes of the open part's entries.
    pub fn pending_bytes(&self) -> u64 {
        self.bytes
    }
}

/// A line of a recipe that may name parts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Line {
    Chunk(RecipeEntry),
    /// `part <id> <count> <bytes>`: the part's `count` entries, `bytes` bytes.
    Part { id: Digest, count: u64, bytes: u64 },
}

/// A recipe whose lines may name parts (PROTOCOL.md 3.3): the expanded entries are the chunk
/// lines and the parts' entries, in order; `count` and `bytes` (its `end` line) are the
/// expanded totals and `digest` the file digest of the expanded list.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PartRecipe {
    pub profile: String,
    pub hash: HashAlg,
    pub digest: Option<Digest>,
    pub lines: Vec<Line>,
    pub count: u64,
    pub bytes: u64,
}

/// Whether a recipe's text has part lines (then [`PartRecipe::parse`] reads it; otherwise
/// [`Recipe::read`]).
pub fn has_part_lines(body: &[u8]) -> bool {
    body.starts_with(b"cutpoint-recipe ") && body.windows(6).any(|w| w == b"\npart ")
}

impl PartRecipe {
    /// Parses a recipe with part lines (or without). The error names the line.
    pub fn parse(body: &[u8]) -> Result<PartRecipe, WireError> {
        let bad = |n: usize, m: &str| WireError::malformed(format!("recipe line {n}: {m}"));
        let text = std::str::from_utf8(body).map_err(|_| WireError::malformed("a recipe is UTF-8 text; this body is not"))?;
        let Some(text) = text.strip_suffix('\n') else {
            return Err(WireError::Truncated("the recipe's last line has no newline".into()));
        };
        if let Some(n) = text.split('\n').position(|l| l.ends_with('\r')) {
            return Err(bad(n + 1, "ends with CR LF: recipe lines end with LF only"));
        }
        let all: Vec<&str> = text.split('\n').collect();
        let mut it = all.iter().enumerate().map(|(i, l)| (i + 1, *l));
        let mut next = |what: &str| it.next().ok_or_else(|| WireError::Truncated(format!("the recipe ends before {what}")));
        let (n, l) = next("its header")?;
        if l != "cutpoint-recipe 1" {
            return Err(bad(n, "not a cutpoint recipe (expected 'cutpoint-recipe 1')"));
        }
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
        let mut digest = None;
        let mut lines = Vec::new();
        let (mut count, mut bytes) = (0u64, 0u64);
        let mut first = true;
        loop {
            let (n, l) = next("its 'end' line")?;
            if first {
                first = false;
                if let Some(d) = l.strip_prefix("digest ") {
                    digest = Some(parse_hex(d).ok_or_else(|| bad(n, "bad digest (64 hex digits)"))?);
                    continue;
                }
            }
            if let Some(end) = l.strip_prefix("end ") {
                if n != all.len() {
                    return Err(bad(n + 1, "text after the 'end' line"));
                }
                if end != format!("{count} {bytes}") {
                    return Err(bad(n, "the 'end' line does not match the chunks and parts above it"));
                }
                return Ok(PartRecipe {
                    profile: profile.to_string(),
                    hash,
                    digest,
                    lines,
                    count,
                    bytes,
                });
            }
            let line = if let Some(p) = l.strip_prefix("part ") {
                let f: Vec<&str> = p.split(' ').collect();
                let [id, c, b] = f.as_slice() else {
                    return Err(bad(n, "expected 'part <64 hex digits> <count> <bytes>'"));
                };
                let id = parse_hex(id).ok_or_else(|| bad(n, "bad part id (64 hex digits)"))?;
                let c: u64 = c.parse().ok().filter(|&c| c > 0).ok_or_else(|| bad(n, "bad part count"))?;
                let b: u64 = b.parse().ok().filter(|&b| b >= c).ok_or_else(|| bad(n, "bad part bytes"))?;
                Line::Part { id, count: c, bytes: b }
            } else {
                Line::Chunk(RecipeEntry::parse_line(l).map_err(|m| bad(n, m))?)
            };
            let (c, b) = match &line {
                Line::Chunk(e) => (1, e.size as u64),
                Line::Part { count, bytes, .. } => (*count, *bytes),
            };
            count = count.checked_add(c).ok_or_else(|| bad(n, "too many entries"))?;
            bytes = bytes.checked_add(b).ok_or_else(|| bad(n, "too many bytes"))?;
            lines.push(line);
        }
    }

    /// The recipe's text.
    pub fn text(&self) -> String {
        let mut s = String::new();
        let _ = writeln!(s, "cutpoint-recipe 1\nprofile {}\nhash {}", self.profile, self.hash.name());
        if let Some(d) = &self.digest {
            let _ = writeln!(s, "digest {}", hex(d));
        }
        for l in &self.lines {
            match l {
                Line::Chunk(e) => e.write_line(&mut s),
                Line::Part { id, count, bytes } => {
                    let _ = writeln!(s, "part {} {count} {bytes}", hex(id));
                }
            }
        }
        let _ = writeln!(s, "end {} {}", self.count, self.bytes);
        s
    }

    pub fn has_parts(&self) -> bool {
        self.lines.iter().any(|l| matches!(l, Line::Part { .. }))
    }

    /// The recipe in parts of the file of `entries`, cut into `parts` (a part line each; the
    /// totals and the file digest over `entries`).
    pub fn of_parts(profile: &str, hash: HashAlg, entries: &[RecipeEntry], parts: &[Part]) -> PartRecipe {
        let mut d = super::FileDigest::new(hash);
        for e in entries {
            d.add(&e.fp, e.size);
        }
        PartRecipe {
            profile: profile.into(),
            hash,
            digest: d.finish(),
            lines: parts.iter().map(|p| Line::Part { id: p.id(), count: p.entries.len() as u64, bytes: p.bytes() }).collect(),
            count: entries.len() as u64,
            bytes: entries.iter().map(|e| e.size as u64).sum(),
        }
    }

    /// The plain recipe, when no line names a part.
    pub fn into_recipe(self) -> Option<Recipe> {
        let mut entries = Vec::with_capacity(self.lines.len());
        for l in self.lines {
            match l {
                Line::Chunk(e) => entries.push(e),
                Line::Part { .. } => return None,
            }
        }
        Some(Recipe {
            profile: self.profile,
            hash: self.hash,
            digest: self.digest,
            entries,
        })
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    /// A made-up entry (also used by part_delta's tests).
    pub(crate) fn entry(i: u64) -> RecipeEntry {
        RecipeEntry {
            fp: *blake3::hash(&i.to_le_bytes()).as_bytes(),
            size: 1000 + (i % 7000) as u32,
            last: if i % 5 == 0 { None } else { Some(i as u8) },
            regular: i % 3 != 0,
        }
    }

    #[test]
    fn part_text_round_trips_and_names_its_id() {
        let p = Part {
            hash: HashAlg::Blake3,
            entries: (0..5).map(entry).collect(),
        };
        let t = p.text();
        assert!(t.starts_with("cutpoint-part 1\nhash blake3\n"), "{t}");
        assert!(t.ends_with(&format!("end 5 {}\n", p.bytes())), "{t}");
        assert_eq!(Part::parse(t.as_bytes()).unwrap(), p);
        assert_eq!(p.id(), *blake3::hash(t.as_bytes()).as_bytes());
        // Not canonical, damaged, empty, trailing text: errors.
        for (bad, want) in [
            (t.to_uppercase(), "line 1"),
            (t.replacen(&hex(&p.entries[0].fp), &hex(&p.entries[0].fp).to_uppercase(), 1), "canonical"),
            (t.replace("end 5", "end 6"), "does not match"),
            (t.trim_end().to_string(), "newline"),
            ("cutpoint-part 1\nhash blake3\nend 0 0\n".to_string(), "at least one"),
            (format!("{t}x\n"), "after the 'end'"),
            (t.replace("hash blake3", "hash md5"), "line 2"),
        ] {
            let e = Part::parse(bad.as_bytes()).unwrap_err().to_string();
            assert!(e.contains(want), "{want}: {e}");
        }
    }

    /// Only the canonical text parses, line by line as it was when the whole text was written
    /// again and compared: edits of each kind, at each line, agree with that reference.
    #[test]
    fn only_the_canonical_text_parses_as_the_re_written_text_said() {
        let p = Part {
            hash: HashAlg::Blake3,
            entries: (0..4)
                .map(|i| RecipeEntry { last: if i == 1 { None } else { Some(0xa0 + i as u8) }, regular: i != 2, ..entry(i) })
                .collect(),
        };
        let t = p.text();
        // The text as it was checked before: parsed leniently, then written again and compared.
        let reference = |b: &str| -> bool {
            let Some(body) = b.strip_suffix('\n') else { return false };
            let lines: Vec<&str> = body.split('\n').collect();
            if lines.len() < 4 || lines[0] != PART_MAGIC || lines[1] != "hash blake3" {
                return false;
            }
            let Ok(es) = lines[2..lines.len() - 1].iter().map(|l| RecipeEntry::parse_line(l)).collect::<Result<Vec<_>, _>>() else { return false };
            Part { hash: HashAlg::Blake3, entries: es }.text() == b
        };
        let mut cases = vec![t.clone()];
        let lines: Vec<&str> = t.lines().collect();
        for k in 2..lines.len() - 1 {
            let l = lines[k];
            let (fp, rest) = l.split_at(64);
            let edits = [
                format!("{}{rest}", fp.to_uppercase()),
                format!("{}A{}", &fp[..10], &fp[11..]) + rest,
                format!("{fp} 0{}", &rest[1..]),
                format!("{fp} +{}", &rest[1..]),
                format!("{fp}  {}", &rest[1..]),
                format!("{l} "),
                format!("{l}\r"),
                format!(" {l}"),
                l.replace(" r", " R").replace(" h", " H"),
                l.replace(" a", " A"),
                l.replace(" - ", " 00 "),
                l.replace(" r", " x"),
                format!("{fp}{}", rest.replace(' ', "\t")),
            ];
            for e in edits {
                let mut ls = lines.clone();
                ls[k] = &e;
                cases.push(ls.join("\n") + "\n");
            }
        }
        for c in cases {
            assert_eq!(Part::parse(c.as_bytes()).is_ok(), reference(&c), "{c:?}");
        }
        assert!(Part::parse(t.as_bytes()).is_ok());
    }

    #[test]
    fn recipe_with_part_lines_round_trips() {
        let p = Part {
            hash: HashAlg::Sha256,
            entries: (0..3).map(entry).collect(),
        };
        let r = PartRecipe {
            profile: "gear:2k:8k:64k".parse::<crate::Profile>().unwrap().to_string(),
            hash: HashAlg::Sha256,
            digest: Some([7; 32]),
            lines: vec![
                Line::Chunk(entry(9)),
                Line::Part {
                    id: p.id(),
                    count: 3,
                    bytes: p.bytes(),
                },
                Line::Chunk(entry(10)),
            ],
            count: 5,
            bytes: p.bytes() + entry(9).size as u64 + entry(10).size as u64,
        };
        let t = r.text();
        assert!(has_part_lines(t.as_bytes()));
        assert!(t.contains(&format!("\npart {} 3 {}\n", hex(&p.id()), p.bytes())), "{t}");
        assert_eq!(PartRecipe::parse(t.as_bytes()).unwrap(), r);
        assert!(r.clone().into_recipe().is_none());
        let e = PartRecipe::parse(t.replace("end 5", "end 4").as_bytes()).unwrap_err().to_string();
        assert!(e.contains("does not match"), "{e}");
        let e = PartRecipe::parse(t.replace(" 3 ", " 0 ").as_bytes()).unwrap_err().to_string();
        assert!(e.contains("count"), "{e}");
        // A plain recipe reads the same as Recipe::read reads it.
        let mut plain = Recipe::new(&"gear:2k:8k:64k".parse().unwrap(), HashAlg::Blake3);
        plain.entries = (0..4).map(entry).collect();
        let mut buf = Vec::new();
        plain.write(&mut buf).unwrap();
        assert!(!has_part_lines(&buf));
        let pr = PartRecipe::parse(&buf).unwrap();
        assert_eq!(pr.text().as_bytes(), &buf[..]);
        assert_eq!(pr.into_recipe().unwrap(), plain);
    }

    #[test]
    fn cutter_bounds_parts_by_count_and_text() {
        let mut c = PartCutter::new(HashAlg::Blake3, 1 << 30);
        let parts = c.push_all((0..40_000).map(entry));
        assert!(parts.iter().all(|p| p.entries.len() <= MAX_PART_ENTRIES && p.entries.len() >= MIN_PART_ENTRIES));
        let limit = 4096u64;
        let mut c = PartCutter::new(HashAlg::Blake3, limit);
        let mut parts = c.push_all((0..500).map(entry));
        parts.extend(c.finish());
        assert!(parts.len() > 10);
        assert!(parts.iter().all(|p| p.text().len() as u64 <= limit / 4), "a part over its limit");
        let all: Vec<RecipeEntry> = parts.into_iter().flat_map(|p| p.entries).collect();
        assert_eq!(all, (0..500).map(entry).collect::<Vec<_>>());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(24))]
        /// The parts depend on the entries only: fed one at a time or in any batches, the
        /// same parts; together they are the entries; a change in one entry leaves the parts
        /// before it as they were.
        #[test]
        fn cutting_is_deterministic_and_independent_of_feeding(
            n in 1usize..6000,
            max in prop::sample::select(vec![2048u64, 16 << 10, 1 << 20, 128 << 20]),
            splits in prop::collection::vec(0usize..6000, 0..8),
            change in 0usize..6000,
        ) {
            let es: Vec<RecipeEntry> = (0..n as u64).map(entry).collect();
            let mut one = PartCutter::new(HashAlg::Blake3, max);
            let mut a: Vec<Part> = es.iter().filter_map(|e| one.push(e.clone())).collect();
            a.extend(one.finish());
            let mut cuts: Vec<usize> = splits.into_iter().map(|s| s % (n + 1)).collect();
            cuts.push(0);
            cuts.push(n);
            cuts.sort();
            let mut batched = PartCutter::new(HashAlg::Blake3, max);
            let mut b = Vec::new();
            for w in cuts.windows(2) {
                b.extend(batched.push_all(es[w[0]..w[1]].iter().cloned()));
            }
            b.extend(batched.finish());
            prop_assert_eq!(&a, &b);
            let flat: Vec<RecipeEntry> = a.iter().flat_map(|p| p.entries.clone()).collect();
            prop_assert_eq!(&flat, &es);
            let at = change % n;
            let mut es2 = es.clone();
            es2[at] = entry(1_000_000 + at as u64);
            let mut c2 = PartCutter::new(HashAlg::Blake3, max);
            let mut a2: Vec<Part> = c2.push_all(es2);
            a2.extend(c2.finish());
            let mut start = 0;
            for (p, q) in a.iter().zip(&a2) {
                // A part closed before an entry depends on that entry's line length too.
                if start + p.entries.len() >= at {
                    break;
                }
                prop_assert_eq!(p.id(), q.id());
                start += p.entries.len();
            }
        }
    }
}
