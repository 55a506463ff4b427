//! A push's window on its base version's parts (PROTOCOL.md 5.1 step 5): when the name's
//! latest version was committed in parts, the client reads those parts (`GET parts/{id}`, each
//! checked against its id) near the current file offset only, so its memory stays flat at any
//! file size. The ids in the window are known present (not queried) and a new part that differs
//! from a base part is sent as a part delta against it ([`BaseWindow::delta_for`]).

use crate::client::Client;
use cutpoint_core::protocol::part::{Line, Part};
use cutpoint_core::protocol::part_delta::{encode_part_delta, expand_part_delta};
use cutpoint_core::{Digest, HashAlg};
use std::collections::{HashMap, VecDeque};

/// Base parts are kept while they lie within this many bytes of the open part's start (before)
/// or of the chunks being queried (after): edits that shift the file by less than this keep
/// each part's base in view.
pub const WINDOW_BYTES: u64 = 64 << 20;

/// One part line of the base recipe: its id and the file bytes it covers.
#[derive(Clone, Debug)]
pub struct BaseLine {
    pub id: Digest,
    pub start: u64,
    pub end: u64,
}

/// The base version's part lines, in file order (chunk lines only move the offset).
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

/// The base parts near the current offset, and every entry id in them.
pub struct BaseWindow {
    alg: HashAlg,
    lines: Vec<BaseLine>,
    /// The next line not yet loaded (or skipped).
    next: usize,
    /// Loaded parts: (line index, part).
    loaded: VecDeque<(usize, Part)>,
    /// Entry id → the line index of a loaded part holding it.
    ids: HashMap<Digest, usize>,
    /// Whether to encode part deltas (the store lists `part-delta`).
    deltas: bool,
    /// Bytes of base parts read, and parts that could not be read (skipped: their ids are
    /// queried as usual).
    pub read_bytes: u64,
    pub unreadable: u64,
}

impl BaseWindow {
    pub fn new(alg: HashAlg, lines: Vec<BaseLine>, deltas: bool) -> BaseWindow {
        BaseWindow {
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

    /// Entry ids held (for the push's `ids_held`).
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Keeps the base parts that overlap `lo..hi` (file offsets): drops those ending at or
    /// before `lo`, reads those starting before `hi` (a part that cannot be read is skipped).
    pub fn advance(&mut self, client: &Client, lo: u64, hi: u64) {
        while self.loaded.front().is_some_and(|(i, _)| self.lines[*i].end <= lo) {
            let (i, p) = self.loaded.pop_front().expect("a loaded part");
            for e in &p.entries {
                if self.ids.get(&e.fp) == Some(&i) {
                    self.ids.remove(&e.fp);
                }
            }
        }
        while self.next < self.lines.len() && self.lines[self.next].start < hi {
            let i = self.next;
            self.next += 1;
            if self.lines[i].end <= lo {
                continue;
            }
            match client.part(&self.lines[i].id, self.alg) {
                Ok(p) => {
                    self.read_bytes += p.text().len() as u64;
                    for e in &p.entries {
                        self.ids.insert(e.fp, i);
                    }
                    self.loaded.push_back((i, p));
                }
                Err(_) => self.unreadable += 1,
            }
        }
    }

    /// Whether `id` is in a base part in the window (so present in the store: a part is stored
    /// only once its chunks are, and the base version keeps them).
    pub fn contains(&self, id: &Digest) -> bool {
        self.ids.contains_key(id)
    }

    /// The part delta to send in place of `p`'s text: against the loaded base part holding the
    /// most of `p`'s entries, where that is not `p` itself and the delta is shorter than the
    /// text (`text_len`). Checked by expanding it here: a delta is sent only if it is `p`.
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
        let d = encode_part_delta(p, base);
        if d.len() as u64 >= text_len {
            return None;
        }
        match expand_part_delta(&d, base, text_len) {
            Ok(q) if q == *p => Some(d),
            _ => None,
        }
    }
}
