//! Part deltas (PROTOCOL.md 3.8): a recipe part written against a part the namespace already
//! has, so that a re-push of a big file whose edits touch every part sends a few runs and the
//! changed chunk lines per part instead of each part's ~74 bytes an entry.
//!
//! ```text
//! cutpoint-part-delta 1
//! hash <blake3|sha256>
//! base <64 hex>                          the base part's id
//! = <start> <count>                      base entries start..start+count, in order
//! <64 hex> <size> <last byte|-> <r|h>    a chunk line, as in a part
//! ...
//! end <chunk count> <total bytes>        of the expanded part
//! ```
//!
//! The store reads the head ([`part_delta_head`]) for the base's id, loads that part, and
//! [`expand_part_delta`] checks every bound before it builds anything; the result is then
//! treated exactly as an uploaded part (its id is the hash of its canonical text). One
//! implementation: the native store, and the edge through its wasm build, call these.

use super::delta::{write_ops, ExpandError};
use super::part::{part_id, part_text_len, Line, Part};
use super::WireError;
use crate::fingerprint::{hex, Digest, HashAlg};
use crate::rapid::recipe::{parse_hex, MIN_ENTRY_LINE};
use crate::rapid::RecipeEntry;
use std::collections::{HashMap, VecDeque};
use std::fmt::Write as _;

/// The first line of a part delta.
pub const PART_DELTA_MAGIC: &str = "cutpoint-part-delta 1";

/// Whether a `POST parts` body is a part delta (else it is a part).
pub fn is_part_delta(body: &[u8]) -> bool {
    body.starts_with(b"cutpoint-part-delta ")
}

/// A part delta's first lines: its fingerprint algorithm and its base part's id.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PartDeltaHead {
    pub hash: HashAlg,
    pub base: Digest,
}

fn bad(line: usize, m: &str) -> WireError {
    WireError::malformed(format!("part delta line {line}: {m}"))
}

/// Reads a part delta's three head lines (nothing else is read): the store loads the base
/// part named there before it calls [`expand_part_delta`].
pub fn part_delta_head(body: &[u8]) -> Result<PartDeltaHead, WireError> {
    // The head is short: only its bytes need be UTF-8 here (the rest is checked on expansion).
    let head = &body[..body.len().min(256)];
    let text = match std::str::from_utf8(head) {
        Ok(t) => t,
        Err(e) => std::str::from_utf8(&head[..e.valid_up_to()]).unwrap_or_default(),
    };
    let mut lines = text.split('\n').enumerate();
    let mut next = |what: &str| match lines.next() {
        Some((n, l)) if l.ends_with('\r') => Err(bad(n + 1, "ends with CR LF: lines end with LF only")),
        Some((_, l)) => Ok(l),
        None => Err(WireError::Truncated(format!("the part delta ends before {what}"))),
    };
    match next("its header")? {
        PART_DELTA_MAGIC => {}
        l if l.starts_with("cutpoint-part-delta ") => {
            return Err(bad(1, &format!("part delta format {}; this build reads 1", &l[20..])))
        }
        _ => return Err(bad(1, "not a cutpoint part delta (expected 'cutpoint-part-delta 1')")),
    }
    let l = next("its hash line")?;
    let hash = l
        .strip_prefix("hash ")
        .and_then(|h| HashAlg::parse(h).ok())
        .filter(|&h| h != HashAlg::None && h.name() == &l[5..])
        .ok_or_else(|| bad(2, "expected 'hash blake3' or 'hash sha256'"))?;
    let l = next("its base line")?;
    let base = l
        .strip_prefix("base ")
        .and_then(parse_hex)
        .filter(|d| l[5..] == hex(d))
        .ok_or_else(|| bad(3, "expected 'base <64 lower-case hex digits>'"))?;
    if lines.next().is_none() {
        return Err(WireError::Truncated("the part delta ends after its base line".into()));
    }
    Ok(PartDeltaHead { hash, base })
}

/// One line after the head.
enum OpLine {
    Run { start: usize, count: usize },
    Chunk(RecipeEntry),
    End { count: u64, bytes: u64 },
}

fn parse_op(n: usize, l: &str) -> Result<OpLine, WireError> {
    if let Some(r) = l.strip_prefix("= ") {
        let f: Vec<&str> = r.split(' ').collect();
        let [s, c] = f.as_slice() else {
            return Err(bad(n, "expected '= <start> <count>'"));
        };
        let (Ok(start), Ok(count)) = (s.parse::<usize>(), c.parse::<usize>()) else {
            return Err(bad(n, "expected '= <start> <count>'"));
        };
        if count == 0 {
            return Err(bad(n, "a run of 0 entries"));
        }
        return Ok(OpLine::Run { start, count });
    }
    if let Some(r) = l.strip_prefix("end ") {
        let f: Vec<&str> = r.split(' ').collect();
        let [c, b] = f.as_slice() else {
            return Err(bad(n, "expected 'end <chunk count> <total bytes>'"));
        };
        let (Ok(count), Ok(bytes)) = (c.parse::<u64>(), b.parse::<u64>()) else {
            return Err(bad(n, "expected 'end <chunk count> <total bytes>'"));
        };
        return Ok(OpLine::End { count, bytes });
    }
    RecipeEntry::parse_line(l).map(OpLine::Chunk).map_err(|m| bad(n, m))
}

/// What the first pass learnt: the expanded part's entries, bytes and text length.
struct Totals {
    count: u64,
    bytes: u64,
}

/// The op lines of a part delta (after its head), numbered from 4, without the final newline;
/// the `end` line must be the last.
fn op_lines(body: &[u8]) -> Result<impl Iterator<Item = (usize, &str)>, WireError> {
    let text = std::str::from_utf8(body).map_err(|_| WireError::malformed("a part delta is UTF-8 text; this body is not"))?;
    let Some(text) = text.strip_suffix('\n') else {
        return Err(WireError::Truncated("the part delta's last line has no newline".into()));
    };
    if let Some(n) = text.split('\n').position(|l| l.ends_with('\r')) {
        return Err(bad(n + 1, "ends with CR LF: lines end with LF only"));
    }
    Ok(text.split('\n').enumerate().skip(3).map(|(i, l)| (i + 1, l)))
}

/// The first pass: every run inside the base, the entry count (checked against the limit as
/// it grows, so a delta of many long runs is refused after at most `limit / 70` entries are
/// looked at), the exact text length and byte total, the `end` line last and agreeing.
/// Nothing proportional to the expansion is allocated.
fn check(body: &[u8], base: &Part, limit: u64) -> Result<Totals, ExpandError> {
    let most = limit / MIN_ENTRY_LINE;
    let too_large = |what: String| ExpandError::TooLarge(format!("the expanded part ({what}) is larger than the limit of {limit} bytes"));
    let (mut count, mut bytes, mut lines) = (0u64, 0u64, 0u64);
    let mut end = None;
    for (n, l) in op_lines(body)? {
        if end.is_some() {
            return Err(bad(n, "text after the 'end' line").into());
        }
        match parse_op(n, l)? {
            OpLine::Run { start, count: k } => {
                let run = start
                    .checked_add(k)
                    .and_then(|e| base.entries.get(start..e))
                    .ok_or_else(|| bad(n, &format!("run {start}+{k} is past the end of the base part ({} entries)", base.entries.len())))?;
                count += k as u64;
                if count > most {
                    return Err(too_large(format!("more than {count} entries")));
                }
                for e in run {
                    lines += e.line_len();
                    bytes += e.size as u64;
                }
            }
            OpLine::Chunk(e) => {
                count += 1;
                if count > most {
                    return Err(too_large(format!("more than {count} entries")));
                }
                lines += e.line_len();
                bytes += e.size as u64;
            }
            OpLine::End { count: c, bytes: b } => end = Some((n, c, b)),
        }
    }
    let Some((n, c, b)) = end else {
        return Err(WireError::Truncated("the part delta ends before its 'end' line".into()).into());
    };
    if count == 0 {
        return Err(bad(n, "a part holds at least one chunk").into());
    }
    if (c, b) != (count, bytes) {
        return Err(bad(n, &format!("the delta expands to {count} chunks and {bytes} bytes; its 'end' line says {c} and {b}")).into());
    }
    let text = part_text_len(base.hash, count, bytes, lines);
    if text > limit {
        return Err(too_large(format!("{text} bytes")));
    }
    Ok(Totals { count, bytes })
}

/// Expands a part delta against its base part: the part it stands for, refused (before any of
/// it is built) when a run passes the base's end, the entries or bytes differ from the `end`
/// line, the base is not the part the head names or has another algorithm, or the expanded
/// part's canonical text would be longer than `limit` bytes ([`ExpandError::TooLarge`]; the
/// store passes its `max_recipe_bytes`, the largest part body it takes).
///
/// The result's id is [`Part::id`] (the hash of its canonical text): a caller stores it
/// exactly as an uploaded part, with the same checks of its chunks.
pub fn expand_part_delta(body: &[u8], base: &Part, limit: u64) -> Result<Part, ExpandError> {
    expand_part_delta_lines(body, base, limit).map(|(p, _)| p)
}

/// [`expand_part_delta`], with the entries the delta writes out as chunk lines (in order):
/// those not copied from the base part by its `=` runs. A store that knows the base part's
/// chunks are still all present (PROTOCOL.md 3.8) checks only these.
pub fn expand_part_delta_lines(body: &[u8], base: &Part, limit: u64) -> Result<(Part, Vec<RecipeEntry>), ExpandError> {
    expand_on(body, base, &base.id(), limit)
}

/// [`expand_part_delta`] where the caller has checked that `base_id` is `base`'s id (a
/// [`PartWindow`] hashed the text of each part it holds): the base's text is not written again
/// to hash it.
pub fn expand_part_delta_on(body: &[u8], base: &Part, base_id: &Digest, limit: u64) -> Result<Part, ExpandError> {
    expand_on(body, base, base_id, limit).map(|(p, _)| p)
}

fn expand_on(body: &[u8], base: &Part, base_id: &Digest, limit: u64) -> Result<(Part, Vec<RecipeEntry>), ExpandError> {
    let head = part_delta_head(body)?;
    if head.hash != base.hash {
        return Err(WireError::malformed(format!(
            "the part delta is for {}; its base part is {}",
            head.hash.name(),
            base.hash.name()
        ))
        .into());
    }
    if *base_id != head.base {
        return Err(WireError::malformed(format!("the base part given is not {}, the one the delta names", hex(&head.base))).into());
    }
    let t = check(body, base, limit)?;
    let mut entries = Vec::with_capacity(t.count as usize);
    let mut written = Vec::new();
    for (n, l) in op_lines(body)? {
        match parse_op(n, l)? {
            OpLine::Run { start, count } => entries.extend_from_slice(&base.entries[start..start + count]),
            OpLine::Chunk(e) => {
                written.push(e.clone());
                entries.push(e);
            }
            OpLine::End { .. } => break,
        }
    }
    let part = Part { hash: base.hash, entries };
    debug_assert_eq!(part.bytes(), t.bytes);
    Ok((part, written))
}

/// The delta of part `new` against part `base` (same algorithm): runs of entries found, equal
/// in every field, in the same order in `base` become `= start count`; the others are written
/// out. [`expand_part_delta`] of it against `base` is `new`. A client sends it in place of
/// `new`'s text where it is shorter.
pub fn encode_part_delta(new: &Part, base: &Part) -> Vec<u8> {
    encode_part_delta_on(new, base, &base.id())
}

/// [`encode_part_delta`] where the caller knows `base`'s id (its text is not written again to
/// hash it).
pub fn encode_part_delta_on(new: &Part, base: &Part, base_id: &Digest) -> Vec<u8> {
    let mut s = String::new();
    let _ = writeln!(s, "{PART_DELTA_MAGIC}\nhash {}\nbase {}", new.hash.name(), hex(base_id));
    write_ops(&mut s, &new.entries, &base.entries, |x, y| x == y);
    let n = new.entries.len();
    let _ = writeln!(s, "end {n} {}", new.bytes());
    s.into_bytes()
}

/// Base parts are kept while they lie within this many bytes of the open part's start (before)
/// or of the chunks being queried (after): edits that shift the file by less than this keep
/// each part's base in view.
pub const PART_WINDOW_BYTES: u64 = 64 << 20;

/// One part line of a base recipe: its id and the file bytes it covers.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BaseLine {
    pub id: Digest,
    pub start: u64,
    pub end: u64,
}

/// A base recipe's part lines, in file order (its chunk lines only move the offset).
pub fn base_lines(lines: &[Line]) -> Vec<BaseLine> {
    let mut out = Vec::new();
    let mut at = 0u64;
    for l in lines {
        match l {
            Line::Part { id, bytes, .. } => {
                out.push(BaseLine { id: *id, start: at, end: at + bytes });
                at += bytes;
            }
            Line::Chunk(e) => at += e.size as u64,
        }
    }
    out
}

/// A push's window on its base version's parts (PROTOCOL.md 5.1 step 5), without the reading:
/// the caller asks [`PartWindow::advance`] which parts to read, reads each from the store and
/// gives it to [`PartWindow::load`] (checked against its id here). The entry ids of the loaded
/// parts are known present (not queried), and a new part is sent as a part delta against the
/// loaded part holding most of its entries ([`PartWindow::delta_for`]). The library's pushes
/// (through wasm) use it; the parts kept are those near the file offset being chunked, so the
/// memory stays flat at any file size.
pub struct PartWindow {
    alg: HashAlg,
    lines: Vec<BaseLine>,
    /// The next line not yet handed out by `advance` (or skipped).
    next: usize,
    /// Loaded parts, in line order: (line index, part).
    loaded: VecDeque<(usize, Part)>,
    /// Entry id -> the line index of a loaded part holding it.
    ids: HashMap<Digest, usize>,
    /// Whether to encode part deltas (the store lists `part-delta`).
    deltas: bool,
    /// Bytes of base parts loaded, and parts that could not be read or did not match their id
    /// (skipped: their ids are queried as usual).
    pub read_bytes: u64,
    pub unreadable: u64,
}

impl PartWindow {
    pub fn new(alg: HashAlg, lines: Vec<BaseLine>, deltas: bool) -> PartWindow {
        PartWindow {
            alg,
            lines,
            next: 0,
            loaded: VecDeque::new(),
            ids: HashMap::new(),
            deltas,
            read_bytes: 0,
            unreadable: 0,
        }
    }

    /// The base's part lines.
    pub fn lines(&self) -> &[BaseLine] {
        &self.lines
    }

    /// Entry ids held.
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Parts loaded now.
    pub fn loaded(&self) -> usize {
        self.loaded.len()
    }

    /// Keeps the base parts that overlap `lo..hi` (file offsets): drops those ending at or
    /// before `lo`, and returns the line indices, in order, of those starting before `hi` not
    /// yet handed out: the caller reads each and gives it to [`PartWindow::load`] (or
    /// [`PartWindow::skip`]s it), in this order.
    pub fn advance(&mut self, lo: u64, hi: u64) -> Vec<usize> {
        while self.loaded.front().is_some_and(|(i, _)| self.lines[*i].end <= lo) {
            let (i, p) = self.loaded.pop_front().expect("a loaded part");
            for e in &p.entries {
                if self.ids.get(&e.fp) == Some(&i) {
                    self.ids.remove(&e.fp);
                }
            }
        }
        let mut want = Vec::new();
        while self.next < self.lines.len() && self.lines[self.next].start < hi {
            let i = self.next;
            self.next += 1;
            if self.lines[i].end > lo {
                want.push(i);
            }
        }
        want
    }

    /// Line `i`'s part as the store sent it: kept if it is that part (its text hashes to the
    /// line's id and parses), else skipped (counted in `unreadable`) and the reason returned.
    pub fn load(&mut self, i: usize, text: &[u8]) -> Result<(), String> {
        let Some(line) = self.lines.get(i) else {
            self.unreadable += 1;
            return Err(format!("no base part line {i}"));
        };
        let id = line.id;
        if part_id(self.alg, text) != Some(id) {
            self.unreadable += 1;
            return Err(format!("the store's part {} does not match its id", hex(&id)));
        }
        match Part::parse(text) {
            Ok(p) => {
                self.read_bytes += text.len() as u64;
                self.insert(i, p);
                Ok(())
            }
            Err(e) => {
                self.unreadable += 1;
                Err(format!("the store's part {}: {e}", hex(&id)))
            }
        }
    }

    /// Line `i`'s part could not be read: its ids are queried as usual.
    pub fn skip(&mut self) {
        self.unreadable += 1;
    }

    fn insert(&mut self, i: usize, p: Part) {
        if self.loaded.back().is_some_and(|(j, _)| *j >= i) {
            return; // out of order or twice: not kept (its ids are queried)
        }
        for e in &p.entries {
            self.ids.insert(e.fp, i);
        }
        self.loaded.push_back((i, p));
    }

    /// Whether `id` is in a loaded base part (so present in the store: a part is stored only
    /// once its chunks are, and the base version keeps them).
    pub fn contains(&self, id: &Digest) -> bool {
        self.ids.contains_key(id)
    }

    /// The part delta to send in place of `p`'s text (`text_len` bytes, id `id`): against the
    /// loaded base part holding the most of `p`'s entries, where that is not `p` itself and the
    /// delta is shorter than the text. Checked by expanding it here: a delta is sent only if it
    /// is `p`.
    pub fn delta_for(&self, p: &Part, id: &Digest, text_len: u64) -> Option<Vec<u8>> {
        if !self.deltas || self.loaded.is_empty() {
            return None;
        }
        let mut hits: HashMap<usize, usize> = HashMap::new();
        for e in &p.entries {
            if let Some(&i) = self.ids.get(&e.fp) {
                *hits.entry(i).or_default() += 1;
            }
        }
        let (&best, _) = hits.iter().max_by_key(|(i, n)| (**n, usize::MAX - **i))?;
        if self.lines[best].id == *id {
            return None;
        }
        let (_, base) = self.loaded.iter().find(|(i, _)| *i == best)?;
        // A loaded part hashed to its line's id (`load`).
        let d = encode_part_delta_on(p, base, &self.lines[best].id);
        if d.len() as u64 >= text_len {
            return None;
        }
        match expand_part_delta_on(&d, base, &self.lines[best].id, text_len) {
            Ok(q) if q == *p => Some(d),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    use crate::protocol::part::tests::entry;

    fn part(ids: impl IntoIterator<Item = u64>) -> Part {
        Part {
            hash: HashAlg::Blake3,
            entries: ids.into_iter().map(entry).collect(),
        }
    }

    const NO_LIMIT: u64 = u64::MAX;

    #[test]
    fn an_edited_part_round_trips_and_is_short() {
        let base = part(0..5000);
        let mut new = base.clone();
        new.entries.splice(100..104, (9000..9010).map(entry));
        new.entries.drain(3000..3003);
        new.entries[4000].regular = !new.entries[4000].regular;
        let d = encode_part_delta(&new, &base);
        let t = String::from_utf8(d.clone()).unwrap();
        assert!(t.starts_with(&format!("cutpoint-part-delta 1\nhash blake3\nbase {}\n= 0 100\n", hex(&base.id()))), "{t}");
        assert!(t.ends_with(&format!("end {} {}\n", new.entries.len(), new.bytes())), "{t}");
        assert_eq!(part_delta_head(&d).unwrap(), PartDeltaHead { hash: HashAlg::Blake3, base: base.id() });
        let got = expand_part_delta(&d, &base, NO_LIMIT).unwrap();
        assert_eq!(got, new);
        // The chunk lines written out: the 10 new entries and the one whose flag changed.
        let (_, written) = expand_part_delta_lines(&d, &base, NO_LIMIT).unwrap();
        let mut want: Vec<RecipeEntry> = (9000..9010).map(entry).collect();
        want.push(new.entries[4000].clone());
        assert_eq!(written, want);
        assert_eq!(got.id(), new.id());
        // 11 chunk lines and 4 runs: ~1 KB for a ~370 KB part.
        assert!(d.len() < 1200 && new.text().len() > 300_000, "{}", d.len());
        // Exactly at the limit it expands, a byte below it is too large.
        let len = new.text().len() as u64;
        assert_eq!(expand_part_delta(&d, &base, len).unwrap(), new);
        assert!(matches!(expand_part_delta(&d, &base, len - 1), Err(ExpandError::TooLarge(_))));
        // Nothing in common: every line written out, still the same part.
        let other = part(20_000..20_010);
        assert_eq!(expand_part_delta(&encode_part_delta(&other, &base), &base, NO_LIMIT).unwrap(), other);
    }

    #[test]
    fn bad_deltas_are_named_and_refused() {
        let base = part(0..10);
        let new = part([0, 1, 2, 3, 4, 77, 5, 6]);
        let good = String::from_utf8(encode_part_delta(&new, &base)).unwrap();
        assert!(good.contains("\n= 0 5\n") && good.contains("\n= 5 2\n"), "{good}");
        let err = |s: &str| expand_part_delta(s.as_bytes(), &base, NO_LIMIT).unwrap_err().to_string();
        assert!(err(&good.replace("= 5 2", "= 9 2")).contains("past the end"));
        assert!(err(&good.replace("= 5 2", "= 18446744073709551615 2")).contains("past the end"));
        assert!(err(&good.replace("= 5 2", "= 5 0")).contains("run of 0"));
        assert!(err(&good.replace("\nend 8 ", "\nend 9 ")).contains("'end' line says"));
        let b = new.bytes();
        assert!(err(&good.replace(&format!("end 8 {b}"), &format!("end 8 {}", b + 1))).contains("'end' line says"));
        assert!(err(&good.replace(&format!("end 8 {b}\n"), "")).contains("before its 'end'"));
        assert!(err(&format!("{good}= 0 1\n")).contains("after the 'end'"));
        assert!(err(good.trim_end()).contains("no newline"));
        assert!(err(&good.replace('\n', "\r\n")).contains("LF only"));
        assert!(err(&good.replace("cutpoint-part-delta 1", "cutpoint-part-delta 2")).contains("format 2"));
        assert!(err(&good.replace("cutpoint-part-delta 1", "cutpoint-part 1")).contains("line 1"));
        assert!(err(&good.replace("hash blake3", "hash sha256")).contains("sha256"));
        assert!(err(&good.replace("hash blake3", "hash md5")).contains("line 2"));
        assert!(err(&good.replacen(&hex(&base.id()), &hex(&base.id()).to_uppercase(), 1)).contains("line 3"));
        assert!(err(&good.replacen(&hex(&base.id()), &"ab".repeat(32), 1)).contains("the one the delta names"));
        let empty = format!("cutpoint-part-delta 1\nhash blake3\nbase {}\nend 0 0\n", hex(&base.id()));
        assert!(err(&empty).contains("at least one chunk"));
        let bad_line = good.replace("= 0 5", "= 0 5 1");
        assert!(err(&bad_line).contains("line 4"), "{}", err(&bad_line));
        assert!(expand_part_delta(&[0xff, 0xfe], &base, NO_LIMIT).is_err());
        for cut in 0..good.len() {
            assert!(expand_part_delta(&good.as_bytes()[..cut], &base, NO_LIMIT).is_err(), "cut at {cut}");
        }
    }

    #[test]
    fn a_delta_bomb_is_refused_before_it_is_built() {
        // 10,000 runs of a 5,000-entry base in a ~140 KB body: 5*10^7 entries (~3.7 GB of
        // text) asked for; refused as soon as the count passes limit / 70.
        let base = part(0..5000);
        let mut s = format!("cutpoint-part-delta 1\nhash blake3\nbase {}\n", hex(&base.id()));
        for _ in 0..10_000 {
            s += "= 0 5000\n";
        }
        s += &format!("end 50000000 {}\n", base.bytes() * 10_000);
        let t0 = std::time::Instant::now();
        for limit in [128u64 << 20, 1 << 20] {
            match expand_part_delta(s.as_bytes(), &base, limit) {
                Err(ExpandError::TooLarge(m)) => assert!(m.contains(&format!("limit of {limit} bytes")), "{m}"),
                other => panic!("limit {limit}: {other:?}"),
            }
        }
        // The work is bounded by the limit, not by what the delta asks for.
        assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    }

    #[test]
    fn a_window_loads_checked_parts_near_the_offset_and_drops_those_behind() {
        // Three base parts end to end; their lines as a recipe in parts names them.
        let parts = [part(0..100), part(100..200), part(200..300)];
        let recipe_lines: Vec<Line> = parts
            .iter()
            .map(|p| Line::Part { id: p.id(), count: p.entries.len() as u64, bytes: p.bytes() })
            .collect();
        let lines = base_lines(&recipe_lines);
        assert_eq!(lines[1].start, parts[0].bytes());
        assert_eq!(lines[2].end, parts.iter().map(Part::bytes).sum::<u64>());
        let mut w = PartWindow::new(HashAlg::Blake3, lines.clone(), true);
        // The first two parts overlap 0..(inside the second).
        assert_eq!(w.advance(0, lines[1].start + 1), vec![0, 1]);
        w.load(0, parts[0].text().as_bytes()).unwrap();
        // A text that is not the line's part is refused and its ids stay unknown.
        let e = w.load(1, parts[2].text().as_bytes()).unwrap_err();
        assert!(e.contains("does not match its id"), "{e}");
        assert_eq!((w.unreadable, w.loaded(), w.len()), (1, 1, 100));
        assert!(w.contains(&entry(5).fp) && !w.contains(&entry(150).fp));
        assert_eq!(w.read_bytes, parts[0].text().len() as u64);
        // Handed out once: the next advance gives the third only, and drops the first.
        assert_eq!(w.advance(lines[0].end, u64::MAX), vec![2]);
        w.load(2, parts[2].text().as_bytes()).unwrap();
        assert!(!w.contains(&entry(5).fp) && w.contains(&entry(250).fp));
        assert_eq!(w.loaded(), 1);

        // A part edited from the third: its delta against it, checked; the third itself: none.
        let mut new = parts[2].clone();
        new.entries[50] = entry(9000);
        let text = new.text().len() as u64;
        let d = w.delta_for(&new, &new.id(), text).expect("a delta");
        assert_eq!(expand_part_delta(&d, &parts[2], u64::MAX).unwrap(), new);
        assert!(w.delta_for(&parts[2], &parts[2].id(), parts[2].text().len() as u64).is_none());
        // Nothing in common with a loaded part, or deltas not taken: none.
        assert!(w.delta_for(&part(5000..5100), &part(5000..5100).id(), 1 << 20).is_none());
        let mut off = PartWindow::new(HashAlg::Blake3, lines, false);
        off.advance(0, u64::MAX);
        off.load(2, parts[2].text().as_bytes()).unwrap();
        assert!(off.delta_for(&new, &new.id(), text).is_none());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(48))]
        /// A part made of pieces of its base and new entries expands back exactly from its
        /// delta; any limit below its text length refuses it as too large.
        #[test]
        fn encode_then_expand_is_the_part(
            n in 1u64..400,
            pieces in prop::collection::vec((0u64..400, 1u64..60, any::<bool>()), 1..12),
        ) {
            let base = part(0..n);
            let mut new = Part { hash: HashAlg::Blake3, entries: Vec::new() };
            for (a, len, fresh) in pieces {
                if fresh {
                    new.entries.extend((0..len % 5 + 1).map(|i| entry(100_000 + a * 10 + i)));
                } else {
                    let a = a % n;
                    let b = (a + len).min(n);
                    new.entries.extend_from_slice(&base.entries[a as usize..b as usize]);
                }
            }
            let d = encode_part_delta(&new, &base);
            let len = new.text().len() as u64;
            prop_assert_eq!(expand_part_delta(&d, &base, len).unwrap(), new);
            prop_assert!(matches!(expand_part_delta(&d, &base, len - 1), Err(ExpandError::TooLarge(_))));
        }
    }
}
