//! The edge store's logic, from `cutpoint-core`, for the Worker (`edge/src/worker.ts`): the
//! Worker does the I/O (R2, the namespace's Durable Object, HTTP) and asks this module every
//! question about the protocol's bodies. Nothing here is written twice: each function is a thin
//! call into the core that `cutpoint serve` uses too.
//!
//! Errors are thrown as JavaScript `Error`s whose message starts with the HTTP status the store
//! answers and a space (`"400 pack: frame 3 at byte 1234: ..."`), and then the message body.
//!
//! Binary shapes (all little-endian), so that no object per chunk crosses the boundary:
//! * a frame list: 48 bytes a frame: id [32], offset u64, stored length u32 (bit 31: compressed),
//!   raw length u32;
//! * an entry list: 36 bytes an entry: id [32], size u32.

use cutpoint_core::protocol::ingest::{open_frame, IngestError, PackIngest};
use cutpoint_core::protocol::pack::{Frame, MAX_CHUNK};
use cutpoint_core::protocol::part::{has_part_lines, part_id, Line, Part, PartRecipe};
use cutpoint_core::protocol::part_delta::{expand_part_delta, is_part_delta, part_delta_head};
use cutpoint_core::protocol::{delta, name, query, range, FileDigest};
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::{Digest, HashAlg};
use wasm_bindgen::prelude::*;

fn fail(status: u16, m: impl std::fmt::Display) -> JsError {
    JsError::new(&format!("{status} {m}"))
}

fn alg_of(name: &str) -> Result<HashAlg, JsError> {
    match name {
        "blake3" => Ok(HashAlg::Blake3),
        "sha256" => Ok(HashAlg::Sha256),
        _ => Err(fail(500, format!("unknown algorithm {name}"))),
    }
}

fn frames_bytes(frames: &[Frame]) -> Vec<u8> {
    let mut out = Vec::with_capacity(frames.len() * 48);
    for f in frames {
        out.extend_from_slice(&f.id);
        out.extend_from_slice(&f.offset.to_le_bytes());
        out.extend_from_slice(&f.head_len().to_le_bytes());
        out.extend_from_slice(&f.raw.to_le_bytes());
    }
    out
}

fn entries_bytes<'a>(entries: impl Iterator<Item = &'a RecipeEntry>) -> Vec<u8> {
    let mut out = Vec::new();
    for e in entries {
        out.extend_from_slice(&e.fp);
        out.extend_from_slice(&e.size.to_le_bytes());
    }
    out
}

/// A pack upload read as it arrives: `push` each piece of the body, pass on what it returns
/// (the stored pack's bytes, always framed), then `finish`.
#[wasm_bindgen]
pub struct Ingest {
    g: PackIngest,
    /// Frames checked by `no_groups` so far.
    checked: usize,
}

#[wasm_bindgen]
impl Ingest {
    #[wasm_bindgen(constructor)]
    pub fn new(max_chunk: u32, max_chunks: u32) -> Ingest {
        Ingest {
            g: PackIngest::new((max_chunk as usize).min(MAX_CHUNK), max_chunks as u64),
            checked: 0,
        }
    }

    fn map(e: IngestError) -> JsError {
        match e {
            IngestError::Bad(m) => fail(400, m),
            e @ IngestError::TooManyChunks(_) => fail(413, e),
        }
    }

    /// Reads `piece`; returns the stored pack's bytes it completed (often empty).
    pub fn push(&mut self, piece: &[u8]) -> Result<Vec<u8>, JsError> {
        self.g.push(piece).map_err(Self::map)?;
        self.checked = no_groups(self.g.frames(), self.checked)?;
        Ok(self.g.take_output())
    }

    /// The body ended: its last stored bytes (the end frame).
    pub fn finish(&mut self) -> Result<Vec<u8>, JsError> {
        self.g.finish().map_err(Self::map)?;
        self.checked = no_groups(self.g.frames(), self.checked)?;
        Ok(self.g.take_output())
    }

    /// The header's algorithm (`blake3`, `sha256`), once read.
    pub fn alg(&self) -> Option<String> {
        self.g.alg().map(|a| a.name().to_string())
    }

    /// The stored pack's frames (48 bytes each).
    pub fn frames(&self) -> Vec<u8> {
        frames_bytes(self.g.frames())
    }

    #[wasm_bindgen(js_name = frameCount)]
    pub fn frame_count(&self) -> u32 {
        self.g.frames().len() as u32
    }

    /// The stored pack's id (its key), once finished.
    #[wasm_bindgen(js_name = packId)]
    pub fn pack_id(&self) -> Option<String> {
        self.g.pack_id()
    }
}

/// The edge store does not yet index, restore or rewrite a group of chunks (pack codec 2,
/// `zstd-group`, which it does not list): a pack holding one is refused (400) before anything
/// of it is indexed, an upload or a pack another node of the bucket wrote, rather than indexed
/// as if each member were its group's whole frame. (A codec-2 compressed frame without members
/// is codec 1's and is taken.)
/// Checks `frames[from..]`; returns how many are checked.
fn no_groups(frames: &[Frame], from: usize) -> Result<usize, JsError> {
    match frames[from.min(frames.len())..].iter().position(|f| f.member) {
        Some(i) => Err(fail(
            400,
            format!(
                "pack: frame {}: a member of a group of chunks (pack codec 2, feature zstd-group), which this store does not take; send codec 1 frames",
                from + i
            ),
        )),
        None => Ok(frames.len()),
    }
}

/// A stored frame's raw bytes, decompressed when `compressed` and checked against `id`
/// (a restore sends nothing it has not checked). A mismatch: `500 ...`.
#[wasm_bindgen(js_name = openFrame)]
pub fn open_frame_js(alg: &str, id: &[u8], stored: &[u8], compressed: bool) -> Result<Vec<u8>, JsError> {
    let id: Digest = id.try_into().map_err(|_| fail(500, "an id is 32 bytes"))?;
    open_frame(alg_of(alg)?, &id, stored, compressed, MAX_CHUNK).map_err(|m| fail(500, m))
}

/// An existence query's body checked: 413 over `max` ids, 400 not a multiple of 32 bytes.
#[wasm_bindgen(js_name = checkIds)]
pub fn check_ids(body: &[u8], max: u32) -> Result<u32, JsError> {
    if body.len() / 32 > max as usize {
        return Err(fail(413, format!("{} fingerprints in one request; the limit is {max}", body.len() / 32)));
    }
    query::decode_ids(body, max as usize).map(|v| v.len() as u32).map_err(|e| fail(400, e))
}

#[wasm_bindgen(js_name = validateNamespace)]
pub fn validate_namespace(ns: &str) -> Result<(), JsError> {
    name::validate_namespace(ns).map_err(|e| fail(400, e))
}

#[wasm_bindgen(js_name = validateName)]
pub fn validate_name(n: &str) -> Result<(), JsError> {
    name::validate_name(n).map_err(|e| fail(400, e))
}

/// The name's key in the object layout (PROTOCOL.md §7).
#[wasm_bindgen(js_name = nameKey)]
pub fn name_key(n: &str) -> String {
    name::name_key(n)
}

/// The name a key stands for (None: not a name key).
#[wasm_bindgen(js_name = nameFromKey)]
pub fn name_from_key(k: &str) -> Option<String> {
    name::name_from_key(k)
}

/// BLAKE3 of a bearer token, lower-case hex (the tokens file's first column).
#[wasm_bindgen(js_name = tokenHash)]
pub fn token_hash(token: &str) -> String {
    cutpoint_core::hex(&HashAlg::Blake3.digest(token.as_bytes()).expect("blake3"))
}

/// A commit's recipe, checked as `cutpoint serve` checks it before looking at the index.
#[wasm_bindgen]
pub struct Commit {
    alg: String,
    digest: String,
    bytes: u64,
    count: u64,
    text: Vec<u8>,
    entries: Vec<u8>,
    /// The distinct parts its lines name (32 bytes each), in order of first mention.
    parts: Vec<u8>,
    recipe: Option<PartRecipe>,
}

#[wasm_bindgen]
impl Commit {
    #[wasm_bindgen(getter)]
    pub fn alg(&self) -> String {
        self.alg.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn digest(&self) -> String {
        self.digest.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.bytes as f64
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> f64 {
        self.count as f64
    }
    /// The recipe as stored (lower-case hex; a delta expanded).
    pub fn text(&self) -> Vec<u8> {
        self.text.clone()
    }
    /// Its entries (36 bytes each): a recipe with part lines, its plain chunk lines only.
    pub fn entries(&self) -> Vec<u8> {
        self.entries.clone()
    }
    /// The distinct parts it names (32 bytes each; empty without part lines).
    pub fn parts(&self) -> Vec<u8> {
        self.parts.clone()
    }
    /// The walk that checks its digest over its parts (`undefined` without part lines).
    pub fn walk(&mut self) -> Option<PartWalk> {
        let r = self.recipe.take()?;
        Some(PartWalk {
            d: Some(FileDigest::new(r.hash)),
            r,
            at: 0,
            last: None,
        })
    }
}

fn checked(recipe: Recipe) -> Result<Commit, JsError> {
    let digest = recipe
        .digest
        .ok_or_else(|| fail(400, "recipe: a commit needs the file's 'digest' line"))?;
    if FileDigest::of(&recipe) != Some(digest) {
        return Err(fail(400, "recipe: its 'digest' line is not the digest of its chunk list (see PROTOCOL.md, 'File digest')"));
    }
    if let Some(e) = recipe.entries.iter().find(|e| e.size as usize > MAX_CHUNK) {
        return Err(fail(400, format!("recipe: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}", e.size)));
    }
    let mut text = Vec::new();
    recipe.write(&mut text).map_err(|e| fail(500, e))?;
    Ok(Commit {
        alg: recipe.hash.name().to_string(),
        digest: cutpoint_core::hex(&digest),
        bytes: recipe.total_bytes(),
        count: recipe.entries.len() as u64,
        entries: entries_bytes(recipe.entries.iter()),
        text,
        parts: Vec::new(),
        recipe: None,
    })
}

/// A full recipe commit body: parsed and checked (400 naming the line; the digest; chunk sizes).
/// A recipe with part lines (feature `parts`) is parsed by the core's `PartRecipe`: its plain
/// chunk lines are `entries`, its distinct parts `parts`, and its digest is checked by a
/// [`PartWalk`] over the stored parts (`walk`), as `cutpoint serve`'s `commit_parts` does.
#[wasm_bindgen(js_name = parseRecipe)]
pub fn parse_recipe(body: &[u8]) -> Result<Commit, JsError> {
    if has_part_lines(body) {
        return parse_part_recipe(body);
    }
    checked(Recipe::read(body).map_err(|e| fail(400, format!("recipe: {e}")))?)
}

fn parse_part_recipe(body: &[u8]) -> Result<Commit, JsError> {
    let r = PartRecipe::parse(body).map_err(|e| fail(400, format!("recipe: {e}")))?;
    let digest = r
        .digest
        .ok_or_else(|| fail(400, "recipe: a commit needs the file's 'digest' line"))?;
    let chunks: Vec<&RecipeEntry> = r
        .lines
        .iter()
        .filter_map(|l| match l {
            Line::Chunk(e) => Some(e),
            Line::Part { .. } => None,
        })
        .collect();
    if let Some(e) = chunks.iter().find(|e| e.size as usize > MAX_CHUNK) {
        return Err(fail(400, format!("recipe: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}", e.size)));
    }
    let entries = entries_bytes(chunks.into_iter());
    let mut seen = std::collections::HashSet::new();
    let mut parts = Vec::new();
    for l in &r.lines {
        if let Line::Part { id, .. } = l {
            if seen.insert(*id) {
                parts.extend_from_slice(id);
            }
        }
    }
    Ok(Commit {
        alg: r.hash.name().to_string(),
        digest: cutpoint_core::hex(&digest),
        bytes: r.bytes,
        count: r.count,
        text: r.text().into_bytes(),
        entries,
        parts,
        recipe: Some(r),
    })
}

/// Whether a stored recipe names parts (then it is no delta base).
#[wasm_bindgen(js_name = hasPartLines)]
pub fn has_part_lines_js(text: &[u8]) -> bool {
    has_part_lines(text)
}

/// A part upload's body (`POST parts`), parsed by the core (only the canonical text, 400 naming
/// the line): its id (the algorithm over the text), its chunks.
#[wasm_bindgen]
pub struct PartInfo {
    id: String,
    alg: String,
    count: u64,
    bytes: u64,
    entries: Vec<u8>,
    /// The canonical text of an expanded part delta (empty otherwise: the body is the text).
    text: Vec<u8>,
}

#[wasm_bindgen]
impl PartInfo {
    /// An expanded part delta's canonical text, to store (empty for a part parsed as sent).
    pub fn text(&self) -> Vec<u8> {
        self.text.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn id(&self) -> String {
        self.id.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn alg(&self) -> String {
        self.alg.clone()
    }
    #[wasm_bindgen(getter)]
    pub fn count(&self) -> f64 {
        self.count as f64
    }
    #[wasm_bindgen(getter)]
    pub fn bytes(&self) -> f64 {
        self.bytes as f64
    }
    /// Its chunks (36 bytes each: id, size).
    pub fn entries(&self) -> Vec<u8> {
        self.entries.clone()
    }
}

fn part_info(p: &Part, body: &[u8]) -> PartInfo {
    PartInfo {
        id: cutpoint_core::hex(&part_id(p.hash, body).unwrap_or_default()),
        alg: p.hash.name().to_string(),
        count: p.entries.len() as u64,
        bytes: p.bytes(),
        entries: entries_bytes(p.entries.iter()),
        text: Vec::new(),
    }
}

/// `POST parts`: the body parsed (400 `part: ...`); over `MAX_CHUNK` a chunk: 400.
#[wasm_bindgen(js_name = parsePart)]
pub fn parse_part(body: &[u8]) -> Result<PartInfo, JsError> {
    let p = Part::parse(body).map_err(|e| fail(400, format!("part: {e}")))?;
    if let Some(e) = p.entries.iter().find(|e| e.size as usize > MAX_CHUNK) {
        return Err(fail(400, format!("part: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}", e.size)));
    }
    Ok(part_info(&p, body))
}

/// Whether a `POST parts` body is a part delta (PROTOCOL.md 3.8) rather than a part.
#[wasm_bindgen(js_name = isPartDelta)]
pub fn is_part_delta_js(body: &[u8]) -> bool {
    is_part_delta(body)
}

/// A part delta's base part id (hex), from its head (400 `part delta: ...`): the Worker reads
/// that part from the namespace before it calls [`expand_part_delta_js`].
#[wasm_bindgen(js_name = partDeltaBase)]
pub fn part_delta_base(body: &[u8]) -> Result<String, JsError> {
    let head = part_delta_head(body).map_err(|e| fail(400, format!("part delta: {e}")))?;
    Ok(cutpoint_core::hex(&head.base))
}

/// A part delta's fingerprint algorithm, from its head (400 `part delta: ...`): checked against
/// the namespace's before its base part is looked for (PROTOCOL.md 3.8's order).
#[wasm_bindgen(js_name = partDeltaAlg)]
pub fn part_delta_alg(body: &[u8]) -> Result<String, JsError> {
    let head = part_delta_head(body).map_err(|e| fail(400, format!("part delta: {e}")))?;
    Ok(head.hash.name().to_string())
}

/// `POST parts` with a part delta: expanded by the core against the stored base part (`base`,
/// its text, read back: it must hash to `base_id`, else 500 damaged), every bound checked
/// before the part is built (400; 413 when the expanded text would pass `limit`, the store's
/// `max_recipe_bytes`). The result is then stored exactly as an uploaded part: its canonical
/// text (`text()`), its id the hash of that text, its chunks checked by the Durable Object.
#[wasm_bindgen(js_name = expandPartDelta)]
pub fn expand_part_delta_js(body: &[u8], base: &[u8], base_id: &str, limit: f64) -> Result<PartInfo, JsError> {
    let b = Part::parse(base).map_err(|e| fail(500, format!("the stored part {base_id} is damaged: {e}")))?;
    let stored = cutpoint_core::hex(&part_id(b.hash, base).unwrap_or_default());
    if stored != base_id {
        return Err(fail(500, format!("the stored part {base_id} is damaged: its text hashes to {stored}")));
    }
    let p = expand_part_delta(body, &b, limit as u64).map_err(|e| match e {
        delta::ExpandError::TooLarge(m) => fail(413, format!("part delta: {m}")),
        delta::ExpandError::Malformed(e) => fail(400, format!("part delta: {e}")),
    })?;
    if let Some(e) = p.entries.iter().find(|e| e.size as usize > MAX_CHUNK) {
        return Err(fail(400, format!("part delta: a chunk of {} bytes is over the store's limit of {MAX_CHUNK}", e.size)));
    }
    let text = p.text().into_bytes();
    let mut info = part_info(&p, &text);
    info.text = text;
    Ok(info)
}

/// A stored part, read back (restore, gc, check): it must parse and hash to `id` (hex); else
/// `500 ...` (damaged).
#[wasm_bindgen(js_name = storedPart)]
pub fn stored_part(body: &[u8], id: &str) -> Result<PartInfo, JsError> {
    let p = Part::parse(body).map_err(|e| fail(500, format!("the stored part {id} is damaged: {e}")))?;
    let info = part_info(&p, body);
    if info.id != id {
        return Err(fail(500, format!("the stored part {id} is damaged: its text hashes to {}", info.id)));
    }
    Ok(info)
}

/// A part's chunk lines (its text between the `hash` and the `end` line), for a recipe answered
/// expanded; a damaged part: `500 ...`.
#[wasm_bindgen(js_name = partChunkLines)]
pub fn part_chunk_lines(body: &[u8]) -> Result<String, JsError> {
    let p = Part::parse(body).map_err(|e| fail(500, format!("a stored part is damaged: {e}")))?;
    let mut s = String::new();
    for e in &p.entries {
        e.write_line(&mut s);
    }
    Ok(s)
}

/// The file digest of a recipe with part lines, over its expanded chunk list, the parts read one
/// at a time in recipe order (a part named on consecutive lines is read once): `next` names the
/// part to read (hex) or `undefined` at the end, `give` takes its text, `finish` checks the
/// digest (`cutpoint serve`'s `expanded_digest`). A part whose COUNT, BYTES or algorithm differ
/// from its line's: `400 ...`.
#[wasm_bindgen]
pub struct PartWalk {
    r: PartRecipe,
    at: usize,
    d: Option<FileDigest>,
    last: Option<(Digest, Part)>,
}

#[wasm_bindgen]
impl PartWalk {
    pub fn next(&mut self) -> Result<Option<String>, JsError> {
        let d = self.d.as_mut().ok_or_else(|| fail(500, "the walk is finished"))?;
        while let Some(l) = self.r.lines.get(self.at) {
            match l {
                Line::Chunk(e) => d.add(&e.fp, e.size),
                Line::Part { id, count, bytes } => {
                    let Some((_, p)) = self.last.as_ref().filter(|(l, _)| l == id) else {
                        return Ok(Some(cutpoint_core::hex(id)));
                    };
                    if p.hash != self.r.hash || p.entries.len() as u64 != *count || p.bytes() != *bytes {
                        return Err(fail(
                            400,
                            format!(
                                "recipe: part {} holds {} chunks of {} bytes, the recipe says {count} chunks of {bytes} bytes",
                                cutpoint_core::hex(id),
                                p.entries.len(),
                                p.bytes()
                            ),
                        ));
                    }
                    for e in &p.entries {
                        d.add(&e.fp, e.size);
                    }
                }
            }
            self.at += 1;
        }
        Ok(None)
    }

    /// The text of the part `next` named (a damaged one: `500 ...`).
    pub fn give(&mut self, text: &[u8]) -> Result<(), JsError> {
        let Some(Line::Part { id, .. }) = self.r.lines.get(self.at) else {
            return Err(fail(500, "no part was asked for"));
        };
        let p = Part::parse(text).map_err(|e| fail(500, format!("the stored part {} is damaged: {e}", cutpoint_core::hex(id))))?;
        self.last = Some((*id, p));
        Ok(())
    }

    /// After `next` answered `undefined`: 400 unless the digest is the recipe's.
    pub fn finish(&mut self) -> Result<(), JsError> {
        let d = self.d.take().ok_or_else(|| fail(500, "the walk is finished"))?;
        if d.finish() != self.r.digest {
            return Err(fail(400, "recipe: its 'digest' line is not the digest of its chunk list (see PROTOCOL.md, 'File digest')"));
        }
        Ok(())
    }
}

/// A stored recipe, plain or with part lines, as segments in file order: a run of chunk lines
/// (`entries`, 36 bytes each) or a part (`partId`, `count`, `bytes`). Unreadable: `500 ...`.
#[wasm_bindgen]
pub struct StoredRecipe {
    head: String,
    segs: Vec<Seg>,
    count: u64,
    bytes: u64,
}

enum Seg {
    Chunks(Vec<RecipeEntry>),
    Part { id: Digest, count: u64, bytes: u64 },
}

#[wasm_bindgen]
impl StoredRecipe {
    #[wasm_bindgen(constructor)]
    pub fn new(text: &[u8]) -> Result<StoredRecipe, JsError> {
        let r = PartRecipe::parse(text).map_err(|e| fail(500, format!("a stored recipe is unreadable: {e}")))?;
        let mut head = format!("cutpoint-recipe 1\nprofile {}\nhash {}\n", r.profile, r.hash.name());
        if let Some(d) = &r.digest {
            head.push_str(&format!("digest {}\n", cutpoint_core::hex(d)));
        }
        let mut segs: Vec<Seg> = Vec::new();
        for l in r.lines {
            match l {
                Line::Chunk(e) => match segs.last_mut() {
                    Some(Seg::Chunks(v)) => v.push(e),
                    _ => segs.push(Seg::Chunks(vec![e])),
                },
                Line::Part { id, count, bytes } => segs.push(Seg::Part { id, count, bytes }),
            }
        }
        Ok(StoredRecipe { head, segs, count: r.count, bytes: r.bytes })
    }

    /// Its header lines (with `digest`), as an expanded recipe starts.
    pub fn head(&self) -> String {
        self.head.clone()
    }
    /// Its `end` line.
    pub fn end(&self) -> String {
        format!("end {} {}\n", self.count, self.bytes)
    }
    pub fn segments(&self) -> u32 {
        self.segs.len() as u32
    }
    /// Segment `i`'s part id (hex), or `undefined` for a run of chunk lines.
    #[wasm_bindgen(js_name = partId)]
    pub fn part_id(&self, i: u32) -> Option<String> {
        match self.segs.get(i as usize) {
            Some(Seg::Part { id, .. }) => Some(cutpoint_core::hex(id)),
            _ => None,
        }
    }
    /// Segment `i`'s entry count.
    pub fn count(&self, i: u32) -> f64 {
        match self.segs.get(i as usize) {
            Some(Seg::Part { count, .. }) => *count as f64,
            Some(Seg::Chunks(v)) => v.len() as f64,
            None => 0.0,
        }
    }
    /// Segment `i`'s bytes of file.
    pub fn bytes(&self, i: u32) -> f64 {
        match self.segs.get(i as usize) {
            Some(Seg::Part { bytes, .. }) => *bytes as f64,
            Some(Seg::Chunks(v)) => v.iter().map(|e| e.size as u64).sum::<u64>() as f64,
            None => 0.0,
        }
    }
    /// Segment `i`'s entries (36 bytes each) when it is a run of chunk lines.
    pub fn entries(&self, i: u32) -> Vec<u8> {
        match self.segs.get(i as usize) {
            Some(Seg::Chunks(v)) => entries_bytes(v.iter()),
            _ => Vec::new(),
        }
    }
    /// Segment `i`'s chunk lines as text (a run of chunk lines).
    #[wasm_bindgen(js_name = chunkLines)]
    pub fn chunk_lines(&self, i: u32) -> String {
        let mut s = String::new();
        if let Some(Seg::Chunks(v)) = self.segs.get(i as usize) {
            for e in v {
                e.write_line(&mut s);
            }
        }
        s
    }
    /// The entries of a part segment `i`, from the part's stored `text`: it must be the part the
    /// line names (its id, COUNT and BYTES), else `500 ...`.
    #[wasm_bindgen(js_name = partEntries)]
    pub fn part_entries(&self, i: u32, alg: &str, text: &[u8]) -> Result<Vec<u8>, JsError> {
        let Some(Seg::Part { id, count, bytes }) = self.segs.get(i as usize) else {
            return Err(fail(500, "not a part segment"));
        };
        let info = stored_part_alg(text, id, alg_of(alg)?)?;
        if info.count != *count || info.bytes != *bytes {
            return Err(fail(500, format!("the stored part {} does not hold what the recipe says", info.id)));
        }
        Ok(info.entries)
    }
}

fn stored_part_alg(text: &[u8], id: &Digest, alg: HashAlg) -> Result<PartInfo, JsError> {
    let hid = cutpoint_core::hex(id);
    let p = Part::parse(text).map_err(|e| fail(500, format!("the stored part {hid} is damaged: {e}")))?;
    if p.hash != alg {
        return Err(fail(500, format!("the stored part {hid} is damaged: another algorithm")));
    }
    let info = part_info(&p, text);
    if info.id != hid {
        return Err(fail(500, format!("the stored part {hid} is damaged: its text hashes to {}", info.id)));
    }
    Ok(info)
}

/// A delta commit body's base version (0: the body is not a delta).
#[wasm_bindgen(js_name = deltaBase)]
pub fn delta_base(body: &[u8]) -> Result<f64, JsError> {
    if !body.starts_with(b"cutpoint-delta ") {
        return Ok(0.0);
    }
    Ok(delta::parse(body).map_err(|e| fail(400, format!("delta: {e}")))?.base as f64)
}

/// A delta expanded against its base's stored recipe, bounded by `max_recipe` bytes of text
/// before anything is built (413), then checked like a full recipe.
#[wasm_bindgen(js_name = expandDelta)]
pub fn expand_delta(body: &[u8], base: &[u8], max_recipe: f64) -> Result<Commit, JsError> {
    let d = delta::parse(body).map_err(|e| fail(400, format!("delta: {e}")))?;
    if has_part_lines(base) {
        return Err(fail(404, format!("delta: version {} is committed in parts (it cannot be a delta's base)", d.base)));
    }
    let base = Recipe::read(base).map_err(|e| fail(500, format!("damaged base: {e}")))?;
    let r = d.expand(&base, max_recipe as u64).map_err(|e| match e {
        delta::ExpandError::TooLarge(m) => fail(413, format!("delta: {m}")),
        delta::ExpandError::Malformed(e) => fail(400, format!("delta: {e}")),
    })?;
    checked(r)
}

/// A stored recipe's entries (36 bytes each), for a restore; unreadable: 500.
#[wasm_bindgen(js_name = recipeEntries)]
pub fn recipe_entries(text: &[u8]) -> Result<Vec<u8>, JsError> {
    let r = Recipe::read(text).map_err(|e| fail(500, e))?;
    Ok(entries_bytes(r.entries.iter()))
}

/// A `Range` header against a file of `len` bytes: `[start, end)`, or `undefined` for the
/// whole file; past the end: `416 ...`.
#[wasm_bindgen(js_name = parseRange)]
pub fn parse_range(header: &str, len: f64) -> Result<Option<Vec<f64>>, JsError> {
    match range::parse_range(Some(header.as_bytes()), len as u64) {
        Ok(Some(r)) => Ok(Some(vec![r.start as f64, r.end as f64])),
        Ok(None) => Ok(None),
        Err(u) => Err(fail(416, format!("the range is past the end of the file ({} bytes)", u.len))),
    }
}

/// Which entries of an entry list a byte range reads: `[first, skip, end]`
/// (`cutpoint_core::protocol::range::plan`).
#[wasm_bindgen(js_name = planRange)]
pub fn plan_range(entries: &[u8], start: f64, end: f64) -> Vec<f64> {
    let sizes = entries.chunks_exact(36).map(|e| u32::from_le_bytes(e[32..36].try_into().unwrap()) as u64);
    let (a, skip, b) = range::plan(sizes, start as u64..end as u64);
    vec![a as f64, skip as f64, b as f64]
}

/// A batch commit body (`POST commits`, feature `batch`): its files, in order, as a flat array
/// `[name, start, end, name, start, end, ...]` (each body is `body[start..end]`, exactly a
/// `PUT files/{name}` body); a framing error: `400 ...`, over `max_files`: `413 ...`
/// (`cutpoint_core::protocol::batch::parse`, the store's parser).
#[wasm_bindgen(js_name = parseBatch)]
pub fn parse_batch(body: &[u8], max_files: u32) -> Result<Vec<JsValue>, JsError> {
    use cutpoint_core::protocol::batch;
    let files = batch::parse(body, max_files as usize).map_err(|e| match e {
        batch::BatchError::TooMany(_) => fail(413, e),
        batch::BatchError::Malformed(_) => fail(400, e),
    })?;
    let mut out = Vec::with_capacity(files.len() * 3);
    for (name, r) in files {
        out.push(JsValue::from_str(&name));
        out.push(JsValue::from_f64(r.start as f64));
        out.push(JsValue::from_f64(r.end as f64));
    }
    Ok(out)
}

/// The most files one batch may hold (`max_batch_files`, as `cutpoint serve` announces).
#[wasm_bindgen(js_name = maxBatchFiles)]
pub fn max_batch_files() -> u32 {
    cutpoint_core::protocol::batch::MAX_BATCH_FILES as u32
}

/// gc's rewrite of a pack with some dead chunks (the store's `rewrite_pack`): the live frames,
/// each checked against its id (`openFrame`) and copied as stored, into a new framed pack
/// (`PackWriter`, zstd codec when one of them is compressed). `add` returns the frame's new
/// offset; after `finish` (the new pack's bytes), `frames` and `packId` name it.
#[wasm_bindgen]
pub struct PackRewrite {
    alg: HashAlg,
    w: Option<cutpoint_core::protocol::pack::PackWriter<Vec<u8>>>,
    moved: Vec<Frame>,
}

#[wasm_bindgen]
impl PackRewrite {
    #[wasm_bindgen(constructor)]
    pub fn new(alg: &str, any_compressed: bool) -> Result<PackRewrite, JsError> {
        use cutpoint_core::protocol::codec::Codec;
        let alg = alg_of(alg)?;
        let codec = if any_compressed { Codec::Zstd } else { Codec::None };
        let w = cutpoint_core::protocol::pack::PackWriter::with_codec(Vec::new(), alg, codec).map_err(|e| fail(500, e))?;
        Ok(PackRewrite { alg, w: Some(w), moved: Vec::new() })
    }

    /// Appends one live frame as stored (checked first: a corrupt one is `500 ...`).
    pub fn add(&mut self, id: &[u8], stored: &[u8], compressed: bool, raw: u32) -> Result<f64, JsError> {
        let id: Digest = id.try_into().map_err(|_| fail(500, "an id is 32 bytes"))?;
        open_frame(self.alg, &id, stored, compressed, MAX_CHUNK).map_err(|m| fail(500, m))?;
        let w = self.w.as_mut().ok_or_else(|| fail(500, "the rewrite is finished"))?;
        let offset = w.add_frame(&id, stored, compressed).map_err(|e| fail(500, e))?;
        self.moved.push(Frame {
            id,
            offset,
            len: stored.len() as u32,
            raw,
            compressed,
            raw_off: 0,
            member: false,
        });
        Ok(offset as f64)
    }

    /// The new pack's bytes.
    pub fn finish(&mut self) -> Result<Vec<u8>, JsError> {
        let w = self.w.take().ok_or_else(|| fail(500, "the rewrite is finished"))?;
        w.finish().map_err(|e| fail(500, e))
    }

    /// The new pack's frames, 48 bytes each (as `Ingest.frames`).
    pub fn frames(&self) -> Vec<u8> {
        frames_bytes(&self.moved)
    }

    #[wasm_bindgen(js_name = packId)]
    pub fn pack_id(&self) -> String {
        cutpoint_core::protocol::pack::pack_id(self.alg, &self.moved)
    }
}
