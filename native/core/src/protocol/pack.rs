//! Packs: many chunks in one object, as they travel (a pack upload) and as they rest in the store.
//!
//! ```text
//! header   16 bytes  "CPPACK\0\x01" | hash algorithm (1 = blake3, 2 = sha256) | layout 0 | codec | 5 zero bytes
//! frame    36 bytes  length u32 LE (1..=MAX_CHUNK, bit 31: compressed) | fingerprint [32]     then `length` bytes
//! ...
//! end      36 bytes  0u32 | frame count u64 LE | 24 zero bytes
//! ```
//!
//! **Codec** (header byte 10): 0 = every frame raw (every pack before protocol revision 2),
//! 1 = zstd: a frame whose head's length has bit 31 set is compressed, its data the chunk's raw
//! length (u32 LE) and one zstd frame ([`super::codec`]: it must save bytes and decompress to
//! exactly that length, bounded before zstd runs). The fingerprint is over the raw bytes, so a
//! chunk's id does not depend on how it travels or rests. [`Frame::len`] is the stored length
//! (bit 31 cleared), [`Frame::raw`] the chunk's length; the reader yields the stored bytes and,
//! for a compressed frame, the decompressed ones ([`PackReader::raw_data`]).
//!
//! Codec 2 = zstd groups: as codec 1, and a compressed frame may hold several consecutive
//! chunks. Its head's id is the first chunk's, its data the group's **raw total** (u32 LE) and
//! one zstd frame of the chunks' raw bytes back to back; it is followed by one **member head**
//! per further chunk (bit 30 of the length set, bit 31 clear: the length is the member's raw
//! length, the id its fingerprint, no data follows). The first chunk's raw length is the raw
//! total less the members'. A group with members holds at most [`MAX_GROUP_CHUNKS`] chunks and
//! [`MAX_GROUP_RAW`] raw bytes; the reader checks every bound before zstd runs, decompresses
//! into a buffer of exactly the raw total and checks each chunk over its slice. A member head
//! anywhere else is an error. [`Frame::raw_off`] is a chunk's offset in its group's raw bytes.
//!
//! Nothing may follow the end frame. A frame's offset in the index is the offset of its data.
//! [`PackReader`] checks the structure and (optionally) recomputes every fingerprint;
//! [`PackWriter`] writes the same format. The server stores packs in this format too, so an
//! index can be rebuilt from the packs alone.
//!
//! An **upload** may also come heads first (header byte 9 = 1, [`Layout::HeadsFirst`]): the
//! header, every chunk's 36-byte head, the end frame, then the chunks' data back to back in the
//! same order. A browser builds such a body from its header and slices of the user's File
//! without reading the chunks into script (they cannot be interleaved with the heads without
//! copying them). At most [`MAX_HEADS_FIRST`] chunks, so that the reader's list of heads stays
//! small; [`PackReader::upload`] reads both layouts and yields the same frames, and the server
//! stores what it reads in the framed layout.

use super::codec::{Codec, Compressor, Decompressor, COMPRESSED, GROUP_MEMBER, RAW_LEN_BYTES};
pub use super::codec::{GROUP_SPREAD, MAX_GROUP_CHUNKS, MAX_GROUP_RAW};
use super::WireError;
use crate::fingerprint::{hex, Digest, HashAlg};
use std::io::{self, Read, Write};

pub const MAGIC: [u8; 8] = *b"CPPACK\x00\x01";
pub const HEADER_LEN: usize = 16;
pub const FRAME_HEAD_LEN: usize = 36;
/// The largest chunk a pack may carry (64 MiB); profiles with a larger MAX cannot be stored.
pub const MAX_CHUNK: usize = 64 << 20;
/// The most chunks a heads-first upload may list (their heads are held while the data streams).
pub const MAX_HEADS_FIRST: usize = 1 << 16;

/// How an upload lays out its heads and data (header byte 9). Stored packs are always framed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Each chunk's head, then its data (the stored format).
    Framed = 0,
    /// Every head and the end frame first, then all the data.
    HeadsFirst = 1,
}

/// The algorithm's code in a pack header.
pub fn alg_code(alg: HashAlg) -> Option<u8> {
    match alg {
        HashAlg::Blake3 => Some(1),
        HashAlg::Sha256 => Some(2),
        HashAlg::None => None,
    }
}

pub fn encode_header(alg: HashAlg) -> Result<[u8; HEADER_LEN], WireError> {
    encode_upload_header(alg, Layout::Framed)
}

/// The header of an upload in `layout`.
pub fn encode_upload_header(alg: HashAlg, layout: Layout) -> Result<[u8; HEADER_LEN], WireError> {
    encode_pack_header(alg, layout, Codec::None)
}

/// The header of a pack in `layout` whose frames may use `codec`.
pub fn encode_pack_header(alg: HashAlg, layout: Layout, codec: Codec) -> Result<[u8; HEADER_LEN], WireError> {
    let code = alg_code(alg).ok_or_else(|| WireError::malformed("a pack needs fingerprints (blake3 or sha256)"))?;
    let mut h = [0u8; HEADER_LEN];
    h[..8].copy_from_slice(&MAGIC);
    h[8] = code;
    h[9] = layout as u8;
    h[10] = codec as u8;
    Ok(h)
}

/// The header of a stored (framed) pack.
pub fn decode_header(h: &[u8; HEADER_LEN]) -> Result<HashAlg, WireError> {
    match decode_pack_header(h)? {
        (alg, Layout::Framed, _) => Ok(alg),
        (_, Layout::HeadsFirst, _) => Err(WireError::malformed(
            "pack header: a heads-first upload where a stored (framed) pack was expected",
        )),
    }
}

/// The header of an upload: its algorithm and layout.
pub fn decode_upload_header(h: &[u8; HEADER_LEN]) -> Result<(HashAlg, Layout), WireError> {
    decode_pack_header(h).map(|(alg, layout, _)| (alg, layout))
}

/// A pack's header: its algorithm, layout and codec.
pub fn decode_pack_header(h: &[u8; HEADER_LEN]) -> Result<(HashAlg, Layout, Codec), WireError> {
    if h[..8] != MAGIC {
        return Err(WireError::malformed("not a cutpoint pack (bad magic)"));
    }
    let codec = Codec::from_byte(h[10])
        .ok_or_else(|| WireError::malformed(format!("pack header: unknown codec {} (0 none, 1 zstd, 2 zstd groups)", h[10])))?;
    if h[11..].iter().any(|&b| b != 0) {
        return Err(WireError::malformed("pack header: reserved bytes are not zero"));
    }
    let layout = match h[9] {
        0 => Layout::Framed,
        1 => Layout::HeadsFirst,
        l => return Err(WireError::malformed(format!("pack header: unknown layout {l}"))),
    };
    let alg = match h[8] {
        1 => HashAlg::Blake3,
        2 => HashAlg::Sha256,
        c => return Err(WireError::malformed(format!("pack header: unknown hash algorithm code {c}"))),
    };
    Ok((alg, layout, codec))
}

/// A frame head: a chunk (`len`: its stored length, without bit 31; `compressed`: bit 31), a
/// group's member (codec 2, bit 30: `raw` its raw length, no data), or the end of the pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameHead {
    Chunk { len: u32, id: Digest, compressed: bool },
    Member { raw: u32, id: Digest },
    End { count: u64 },
}

impl FrameHead {
    /// The bytes of data that follow this head in the framed layout.
    pub fn data_len(&self) -> usize {
        match self {
            FrameHead::Chunk { len, .. } => *len as usize,
            _ => 0,
        }
    }
}

pub fn encode_frame_head(head: FrameHead) -> [u8; FRAME_HEAD_LEN] {
    let mut b = [0u8; FRAME_HEAD_LEN];
    match head {
        FrameHead::Chunk { len, id, compressed } => {
            let l = if compressed { len | COMPRESSED } else { len };
            b[..4].copy_from_slice(&l.to_le_bytes());
            b[4..].copy_from_slice(&id);
        }
        FrameHead::Member { raw, id } => {
            b[..4].copy_from_slice(&(raw | GROUP_MEMBER).to_le_bytes());
            b[4..].copy_from_slice(&id);
        }
        FrameHead::End { count } => {
            b[4..12].copy_from_slice(&count.to_le_bytes());
        }
    }
    b
}

/// A frame head of a pack whose header names `codec` (bit 31 only where it is not 0).
pub fn decode_frame_head(b: &[u8; FRAME_HEAD_LEN], max_chunk: usize, codec: Codec) -> Result<FrameHead, WireError> {
    let head = u32::from_le_bytes(b[..4].try_into().unwrap());
    let compressed = head & COMPRESSED != 0;
    if head & GROUP_MEMBER != 0 && codec == Codec::Group {
        if compressed {
            return Err(WireError::malformed("a frame head with both bit 31 (compressed) and bit 30 (group member) set"));
        }
        let raw = head & !GROUP_MEMBER;
        if raw == 0 || raw as usize > max_chunk {
            return Err(WireError::malformed(format!(
                "a group member of {raw} raw bytes (1..={max_chunk})"
            )));
        }
        return Ok(FrameHead::Member {
            raw,
            id: b[4..].try_into().unwrap(),
        });
    }
    let len = head & !COMPRESSED;
    if compressed {
        if codec == Codec::None {
            return Err(WireError::malformed(
                "a compressed frame (bit 31 of its length) in a pack whose codec is 0 (none)",
            ));
        }
        // Its data: 4 bytes of raw length and fewer zstd bytes than the raw length.
        if len as usize <= RAW_LEN_BYTES || len as usize >= max_chunk + RAW_LEN_BYTES {
            return Err(WireError::malformed(format!(
                "a compressed frame of {len} bytes (5..{} for chunks of at most {max_chunk} bytes)",
                max_chunk + RAW_LEN_BYTES
            )));
        }
        return Ok(FrameHead::Chunk {
            len,
            id: b[4..].try_into().unwrap(),
            compressed,
        });
    }
    if len == 0 {
        if b[12..].iter().any(|&x| x != 0) {
            return Err(WireError::malformed("end frame: reserved bytes are not zero"));
        }
        return Ok(FrameHead::End {
            count: u64::from_le_bytes(b[4..12].try_into().unwrap()),
        });
    }
    if len as usize > max_chunk {
        return Err(WireError::malformed(format!(
            "a frame of {len} bytes is larger than the limit of {max_chunk}{}",
            if head & GROUP_MEMBER != 0 { " (bit 30 marks a group member only in a pack of codec 2)" } else { "" }
        )));
    }
    Ok(FrameHead::Chunk {
        len,
        id: b[4..].try_into().unwrap(),
        compressed: false,
    })
}

/// One chunk read from a pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frame {
    pub id: Digest,
    /// Offset of the chunk's data in the pack.
    pub offset: u64,
    /// The frame's stored length (bit 31 cleared): the bytes at `offset`.
    pub len: u32,
    /// The chunk's (raw) length: `len` for a raw frame.
    pub raw: u32,
    /// Stored zstd-compressed (bit 31 of its head), alone or in a group (then `offset` and
    /// `len` are the group's compressed frame's, for its members too).
    pub compressed: bool,
    /// The chunk's offset in its compressed frame's raw bytes: 0 but for a group's members.
    pub raw_off: u32,
    /// A group's member (a head with bit 30, no data of its own), not its first chunk.
    pub member: bool,
}

impl Frame {
    /// A raw (uncompressed) frame.
    pub fn plain(id: Digest, offset: u64, len: u32) -> Frame {
        Frame {
            id,
            offset,
            len,
            raw: len,
            compressed: false,
            raw_off: 0,
            member: false,
        }
    }

    /// A compressed frame of one chunk (codec 1, or codec 2 without members).
    pub fn zstd(id: Digest, offset: u64, len: u32, raw: u32) -> Frame {
        Frame {
            compressed: true,
            raw,
            ..Frame::plain(id, offset, len)
        }
    }

    /// The head's length as stored (bit 31 for a compressed frame, bit 30 and the raw length
    /// for a group's member).
    pub fn head_len(&self) -> u32 {
        if self.member {
            self.raw | GROUP_MEMBER
        } else if self.compressed {
            self.len | COMPRESSED
        } else {
            self.len
        }
    }
}

/// Where [`PackReader::next_in`] puts a frame's stored data.
pub trait FrameSink {
    /// A buffer of exactly `len` bytes for the next frame's data (overwritten whole by the read).
    fn frame_buf(&mut self, len: usize) -> io::Result<&mut [u8]>;
}

impl FrameSink for Vec<u8> {
    fn frame_buf(&mut self, len: usize) -> io::Result<&mut [u8]> {
        // Overwritten whole by the read: only a longer buffer's new part is zeroed.
        self.resize(len, 0);
        Ok(&mut self[..])
    }
}

/// Reads a pack frame by frame, checking the structure and, with `verify`, every fingerprint.
pub struct PackReader<R: Read> {
    r: R,
    alg: HashAlg,
    codec: Codec,
    pos: u64,
    count: u64,
    max_chunk: usize,
    verify: bool,
    done: bool,
    /// A heads-first upload: the heads not yet matched with their data.
    heads: Option<std::collections::VecDeque<FrameHead>>,
    /// The last compressed frame's decompressed bytes (a whole group's), and the decoder.
    raw: Vec<u8>,
    dec: Option<Decompressor>,
    /// A group's members not yet returned (checked with the group).
    queued: std::collections::VecDeque<Frame>,
    /// The head read after a group's last member (framed layout): the next frame's, and where.
    ahead: Option<(FrameHead, u64)>,
}

/// What a reader holds that its next step reads without input ([`PackReader::buffered`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Buffered {
    /// Nothing: the next step reads a head (and its data, and, for a compressed frame of codec
    /// 2, every member head after it and the head after those).
    Nothing,
    /// A group's member: the next step reads no byte.
    Member,
    /// A head read ahead: the next step reads its data (and, for a compressed frame of codec 2,
    /// the heads after it as with [`Buffered::Nothing`]); a member head there is an error.
    Head(FrameHead),
}

fn read_exact_or<R: Read>(r: &mut R, buf: &mut [u8], what: impl FnOnce() -> String) -> Result<(), WireError> {
    match r.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(WireError::Truncated(what())),
        Err(e) => Err(WireError::Io(e)),
    }
}

fn at_frame(n: u64, at: u64) -> impl Fn(WireError) -> WireError {
    move |e| match e {
        WireError::Malformed(m) => WireError::Malformed(format!("frame {n} at byte {at}: {m}")),
        e => e,
    }
}

impl<R: Read> PackReader<R> {
    /// Reads the header of a stored pack (framed only).
    pub fn new(r: R, max_chunk: usize, verify: bool) -> Result<PackReader<R>, WireError> {
        Self::open(r, max_chunk, verify, false)
    }

    /// Reads the header of an upload, in either layout (and, heads first, every head).
    pub fn upload(r: R, max_chunk: usize, verify: bool) -> Result<PackReader<R>, WireError> {
        Self::open(r, max_chunk, verify, true)
    }

    fn open(mut r: R, max_chunk: usize, verify: bool, upload: bool) -> Result<PackReader<R>, WireError> {
        let mut h = [0u8; HEADER_LEN];
        read_exact_or(&mut r, &mut h, || "the pack ends inside its header".into())?;
        let (alg, layout, codec) = decode_pack_header(&h)?;
        if !upload && layout != Layout::Framed {
            decode_header(&h)?;
        }
        let mut p = PackReader {
            r,
            alg,
            codec,
            raw: Vec::new(),
            dec: None,
            pos: HEADER_LEN as u64,
            count: 0,
            max_chunk: max_chunk.min(MAX_CHUNK),
            verify,
            done: false,
            heads: None,
            queued: Default::default(),
            ahead: None,
        };
        if layout == Layout::HeadsFirst {
            let mut heads = std::collections::VecDeque::new();
            loop {
                let n = heads.len();
                let at = p.pos;
                let mut hb = [0u8; FRAME_HEAD_LEN];
                read_exact_or(&mut p.r, &mut hb, || {
                    format!("the pack ends at byte {at} where head {n} (or the end frame) should start")
                })?;
                p.pos += FRAME_HEAD_LEN as u64;
                match decode_frame_head(&hb, p.max_chunk, p.codec).map_err(|e| match e {
                    WireError::Malformed(m) => WireError::Malformed(format!("head {n} at byte {at}: {m}")),
                    e => e,
                })? {
                    FrameHead::End { count } => {
                        if count != n as u64 {
                            return Err(WireError::malformed(format!(
                                "the end frame counts {count} chunks; the pack lists {n}"
                            )));
                        }
                        break;
                    }
                    head => {
                        if n == MAX_HEADS_FIRST {
                            return Err(WireError::malformed(format!(
                                "a heads-first pack lists at most {MAX_HEADS_FIRST} chunks"
                            )));
                        }
                        heads.push_back(head);
                    }
                }
            }
            p.heads = Some(heads);
        }
        Ok(p)
    }

    pub fn alg(&self) -> HashAlg {
        self.alg
    }

    /// The pack's codec (header byte 10).
    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// What the reader holds for its next step ([`Buffered`]): a host feeding bytes as they
    /// arrive ([`super::ingest`]) gives it exactly what that step reads.
    pub fn buffered(&self) -> Buffered {
        if !self.queued.is_empty() {
            Buffered::Member
        } else {
            match self.ahead {
                Some((h, _)) => Buffered::Head(h),
                None => Buffered::Nothing,
            }
        }
    }

    /// The chunk's raw bytes of the frame [`PackReader::next_into`] just returned: `data` (its
    /// stored bytes) for a raw frame, the decompressed bytes for a compressed one (a group's
    /// chunk: its slice of the group's).
    pub fn raw_data<'a>(&'a self, f: &Frame, data: &'a [u8]) -> &'a [u8] {
        if f.compressed {
            &self.raw[f.raw_off as usize..f.raw_off as usize + f.raw as usize]
        } else {
            data
        }
    }

    /// Bytes read so far.
    pub fn position(&self) -> u64 {
        self.pos
    }

    /// The next chunk, its stored data in `data` (and a compressed frame's raw bytes in
    /// [`PackReader::raw_data`], decompressed and bounded whether or not `verify` is set);
    /// `None` after a valid end frame with nothing after it. A group's member has no data of
    /// its own: `data` is left as it was (the group's frame, returned just before).
    pub fn next_into(&mut self, data: &mut Vec<u8>) -> Result<Option<Frame>, WireError> {
        self.next_in(data)
    }

    /// The next head (from the heads-first list, read ahead, or read now) and where it is.
    fn next_head(&mut self) -> Result<(FrameHead, u64), WireError> {
        let n = self.count;
        if let Some(h) = self.ahead.take() {
            return Ok(h);
        }
        let at = self.pos;
        if let Some(heads) = &mut self.heads {
            return Ok((heads.pop_front().unwrap_or(FrameHead::End { count: n }), at));
        }
        let mut hb = [0u8; FRAME_HEAD_LEN];
        read_exact_or(&mut self.r, &mut hb, || {
            format!("the pack ends at byte {at} where frame {n} (or the end frame) should start")
        })?;
        self.pos += FRAME_HEAD_LEN as u64;
        Ok((decode_frame_head(&hb, self.max_chunk, self.codec).map_err(at_frame(n, at))?, at))
    }

    /// [`PackReader::next_into`], the frame's stored data read straight into the buffer `data`
    /// gives for it (a store reads an upload's frames into its spool's buffer: no copy between).
    pub fn next_in(&mut self, data: &mut impl FrameSink) -> Result<Option<Frame>, WireError> {
        if self.done {
            return Ok(None);
        }
        if let Some(f) = self.queued.pop_front() {
            self.count += 1;
            return Ok(Some(f));
        }
        let n = self.count;
        let (head, at) = self.next_head()?;
        match head {
            FrameHead::End { count } => {
                if count != self.count {
                    return Err(WireError::malformed(format!(
                        "the end frame counts {count} chunks; the pack holds {}",
                        self.count
                    )));
                }
                let mut extra = [0u8; 1];
                loop {
                    match self.r.read(&mut extra) {
                        Ok(0) => break,
                        Ok(_) => return Err(WireError::malformed("bytes after the end frame")),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(WireError::Io(e)),
                    }
                }
                self.done = true;
                Ok(None)
            }
            FrameHead::Member { .. } => Err(WireError::malformed(format!(
                "frame {n} at byte {at}: a group member head (bit 30) may only follow a compressed frame or another member of its group"
            ))),
            FrameHead::Chunk { len, id, compressed } => {
                let data = data.frame_buf(len as usize).map_err(WireError::Io)?;
                read_exact_or(&mut self.r, data, || {
                    format!("frame {n} at byte {at}: the pack ends inside its {len} bytes of data")
                })?;
                let offset = self.pos;
                self.pos += len as u64;
                if !compressed {
                    if self.verify {
                        self.check(n, at, &id, data, "")?;
                    }
                    self.count += 1;
                    return Ok(Some(Frame::plain(id, offset, len)));
                }
                let members = if self.codec == Codec::Group { self.read_members(n, at)? } else { Vec::new() };
                let first = if members.is_empty() {
                    let max_chunk = self.max_chunk;
                    let dec = self.dec.get_or_insert_with(Decompressor::new);
                    dec.decompress(data, max_chunk, &mut self.raw).map_err(|m| WireError::malformed(format!("frame {n} at byte {at}: {m}")))?;
                    if self.verify {
                        let raw = std::mem::take(&mut self.raw);
                        let r = self.check(n, at, &id, &raw, " (decompressed)");
                        self.raw = raw;
                        r?;
                    }
                    Frame::zstd(id, offset, len, self.raw.len() as u32)
                } else {
                    self.open_group(n, at, Frame::zstd(id, offset, len, 0), data, &members)?
                };
                self.count += 1;
                Ok(Some(first))
            }
        }
    }

    /// The member heads after a compressed frame (`n` at byte `at`) of codec 2, each with its
    /// position; the head after them is kept for the next step.
    fn read_members(&mut self, n: u64, at: u64) -> Result<Vec<(Digest, u32, u64)>, WireError> {
        let mut members = Vec::new();
        loop {
            let k = n + 1 + members.len() as u64;
            let (head, hat) = match self.heads.as_mut() {
                Some(heads) => match heads.front() {
                    Some(FrameHead::Member { .. }) => (heads.pop_front().unwrap(), self.pos),
                    _ => return Ok(members),
                },
                None => {
                    self.count = k; // names the head read next
                    let h = self.next_head();
                    self.count = n;
                    h?
                }
            };
            match head {
                FrameHead::Member { raw, id } => {
                    if members.len() + 1 >= MAX_GROUP_CHUNKS {
                        return Err(WireError::malformed(format!(
                            "frame {n} at byte {at}: a group of more than {MAX_GROUP_CHUNKS} chunks (member head at byte {hat})"
                        )));
                    }
                    members.push((id, raw, hat));
                }
                other => {
                    self.ahead = Some((other, hat));
                    return Ok(members);
                }
            }
        }
    }

    /// A group: its frame `g` (`data` its stored bytes) and its members; checks the bounds,
    /// decompresses it once, checks every chunk over its slice and queues the members.
    fn open_group(&mut self, n: u64, at: u64, g: Frame, data: &[u8], members: &[(Digest, u32, u64)]) -> Result<Frame, WireError> {
        let bad = |m: String| WireError::malformed(format!("frame {n} at byte {at}: {m}"));
        let total = Decompressor::raw_len(data, MAX_CHUNK).map_err(&bad)? as usize;
        if total > MAX_GROUP_RAW {
            return Err(bad(format!(
                "a group of {} chunks declares {total} raw bytes (at most {MAX_GROUP_RAW})",
                members.len() + 1
            )));
        }
        // In u64: 64 members of 64 MiB sum to 2^32, which a 32-bit usize (wasm) would wrap.
        let in_members: u64 = members.iter().map(|m| m.1 as u64).sum();
        if in_members >= total as u64 {
            return Err(bad(format!(
                "a group's members hold {in_members} raw bytes of its declared {total}: its first chunk would have none"
            )));
        }
        let first = total - in_members as usize;
        if first > self.max_chunk {
            return Err(bad(format!("a group's first chunk of {first} bytes is larger than the limit of {}", self.max_chunk)));
        }
        let least = members.iter().map(|m| m.1 as usize).min().unwrap_or(first).min(first);
        if least * GROUP_SPREAD < total {
            return Err(bad(format!(
                "a group of {total} raw bytes has a chunk of {least} bytes: every chunk of a group holds at least 1/{GROUP_SPREAD} of it"
            )));
        }
        let dec = self.dec.get_or_insert_with(Decompressor::new);
        dec.decompress(data, MAX_GROUP_RAW, &mut self.raw).map_err(&bad)?;
        let raw = std::mem::take(&mut self.raw);
        let r = self.check_group(n, at, g, first, &raw, members);
        self.raw = raw;
        r
    }

    fn check_group(&mut self, n: u64, at: u64, g: Frame, first: usize, raw: &[u8], members: &[(Digest, u32, u64)]) -> Result<Frame, WireError> {
        if self.verify {
            self.check(n, at, &g.id, &raw[..first], " (decompressed)")?;
        }
        let mut off = first;
        for (i, &(id, len, hat)) in members.iter().enumerate() {
            if self.verify {
                self.check(n + 1 + i as u64, hat, &id, &raw[off..off + len as usize], " (group member, decompressed)")?;
            }
            self.queued.push_back(Frame {
                raw: len,
                raw_off: off as u32,
                member: true,
                ..Frame::zstd(id, g.offset, g.len, 0)
            });
            off += len as usize;
        }
        Ok(Frame { raw: first as u32, ..g })
    }

    fn check(&self, n: u64, at: u64, id: &Digest, raw: &[u8], how: &str) -> Result<(), WireError> {
        let got = self.alg.digest(raw).expect("packs always have an algorithm");
        if got != *id {
            return Err(WireError::malformed(format!(
                "frame {n} at byte {at}: its {} bytes{how} hash to {} with {}, not to the frame's {}",
                raw.len(),
                hex(&got),
                self.alg.name(),
                hex(id)
            )));
        }
        Ok(())
    }
}

/// A pack's name: BLAKE3 over its algorithm and its frames (id, offset, length). Every frame's
/// data is checked against its id when the pack is read, so this names the content as well as
/// a hash of every byte would, without a second pass over the data.
pub fn pack_id(alg: HashAlg, frames: &[Frame]) -> String {
    let mut h = blake3::Hasher::new();
    h.update(b"cutpoint pack id v1");
    h.update(&[alg_code(alg).unwrap_or(0)]);
    for f in frames {
        h.update(&f.id);
        h.update(&f.offset.to_le_bytes());
        // The head's length as stored: bit 31 for a compressed frame (raw frames as before).
        h.update(&f.head_len().to_le_bytes());
    }
    hex(h.finalize().as_bytes())
}

/// Decodes a whole pack held in memory (tests, fuzzing, small packs).
pub fn decode_pack(bytes: &[u8], verify: bool) -> Result<(HashAlg, Vec<Frame>), WireError> {
    decode_all(PackReader::new(bytes, MAX_CHUNK, verify)?)
}

/// Decodes a whole upload held in memory, in either layout: its frames (offsets are where each
/// chunk's data lies in `bytes`).
pub fn decode_upload(bytes: &[u8], verify: bool) -> Result<(HashAlg, Vec<Frame>), WireError> {
    decode_all(PackReader::upload(bytes, MAX_CHUNK, verify)?)
}

fn decode_all(mut r: PackReader<&[u8]>) -> Result<(HashAlg, Vec<Frame>), WireError> {
    let mut out = Vec::new();
    let mut buf = Vec::new();
    while let Some(f) = r.next_into(&mut buf)? {
        out.push(f);
    }
    Ok((r.alg(), out))
}

/// A heads-first upload of these chunks (ids vouched for by the caller).
pub fn encode_heads_first(alg: HashAlg, chunks: &[(Digest, &[u8])]) -> Result<Vec<u8>, WireError> {
    let frames: Vec<(Digest, &[u8], bool)> = chunks.iter().map(|(id, d)| (*id, *d, false)).collect();
    encode_heads_first_frames(alg, Codec::None, &frames)
}

/// A heads-first upload of frames `(id, stored data, compressed)` in a pack of `codec`.
pub fn encode_heads_first_frames(alg: HashAlg, codec: Codec, frames: &[(Digest, &[u8], bool)]) -> Result<Vec<u8>, WireError> {
    if frames.len() > MAX_HEADS_FIRST {
        return Err(WireError::malformed(format!("a heads-first pack lists at most {MAX_HEADS_FIRST} chunks")));
    }
    let mut out = encode_pack_header(alg, Layout::HeadsFirst, codec)?.to_vec();
    for (id, data, compressed) in frames {
        check_stored(data, *compressed, codec)?;
        out.extend_from_slice(&encode_frame_head(FrameHead::Chunk {
            len: data.len() as u32,
            id: *id,
            compressed: *compressed,
        }));
    }
    out.extend_from_slice(&encode_frame_head(FrameHead::End { count: frames.len() as u64 }));
    for (_, data, _) in frames {
        out.extend_from_slice(data);
    }
    Ok(out)
}

/// A frame a writer may write: a raw chunk of 1..=MAX_CHUNK bytes, or a compressed frame's
/// data that keeps the rules (its raw length checked, not its zstd data) in a pack of a codec.
fn check_stored(data: &[u8], compressed: bool, codec: Codec) -> Result<(), WireError> {
    if compressed {
        if codec == Codec::None {
            return Err(WireError::malformed("a compressed frame in a pack of codec 0"));
        }
        Decompressor::raw_len(data, MAX_CHUNK).map(|_| ()).map_err(WireError::Malformed)
    } else if data.is_empty() || data.len() > MAX_CHUNK {
        Err(WireError::malformed(format!(
            "a chunk of {} bytes cannot be packed (1..={MAX_CHUNK})",
            data.len()
        )))
    } else {
        Ok(())
    }
}

/// Writes a pack.
pub struct PackWriter<W: Write> {
    w: W,
    pos: u64,
    count: u64,
    codec: Codec,
    /// The last frame's group, where members may follow it (codec 2, a compressed frame).
    group: Option<OpenGroup>,
}

/// A group being written: its frame's data offset, raw total, the members' raw bytes and count.
#[derive(Clone, Copy, Debug)]
struct OpenGroup {
    offset: u64,
    total: usize,
    in_members: usize,
    chunks: usize,
}

/// What [`PackWriter::add_group`] wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GroupWritten {
    /// One compressed frame with member heads (else one frame per chunk).
    pub grouped: bool,
    /// Bytes of frame data written (heads not counted).
    pub data_bytes: u64,
    /// Chunks stored compressed (alone or in the group).
    pub compressed: u64,
}

impl<W: Write> PackWriter<W> {
    /// A pack of raw frames (codec 0).
    pub fn new(w: W, alg: HashAlg) -> Result<PackWriter<W>, WireError> {
        Self::with_codec(w, alg, Codec::None)
    }

    /// A pack whose frames may be compressed with `codec` ([`PackWriter::add_frame`]).
    pub fn with_codec(mut w: W, alg: HashAlg, codec: Codec) -> Result<PackWriter<W>, WireError> {
        let h = encode_pack_header(alg, Layout::Framed, codec)?;
        w.write_all(&h).map_err(WireError::Io)?;
        Ok(PackWriter {
            w,
            pos: HEADER_LEN as u64,
            count: 0,
            codec,
            group: None,
        })
    }

    pub fn codec(&self) -> Codec {
        self.codec
    }

    /// Appends a chunk; returns the offset of its data. The caller vouches that `id` is the
    /// fingerprint of `data` (a reader with `verify` checks it).
    pub fn add(&mut self, id: &Digest, data: &[u8]) -> Result<u64, WireError> {
        self.add_frame(id, data, false)
    }

    /// Appends a frame as it is stored: a raw chunk, or (`compressed`) a compressed frame's
    /// data ([`super::codec::Compressor::compress`]) in a pack of a codec. Returns the offset of
    /// its data. The caller vouches for `id` and the zstd data (a reader checks both).
    pub fn add_frame(&mut self, id: &Digest, data: &[u8], compressed: bool) -> Result<u64, WireError> {
        check_stored(data, compressed, self.codec)?;
        let head = encode_frame_head(FrameHead::Chunk {
            len: data.len() as u32,
            id: *id,
            compressed,
        });
        self.w.write_all(&head).map_err(WireError::Io)?;
        self.w.write_all(data).map_err(WireError::Io)?;
        let off = self.pos + FRAME_HEAD_LEN as u64;
        self.pos = off + data.len() as u64;
        self.count += 1;
        self.group = if compressed && self.codec == Codec::Group {
            Some(OpenGroup {
                offset: off,
                total: u32::from_le_bytes(data[..RAW_LEN_BYTES].try_into().unwrap()) as usize,
                in_members: 0,
                chunks: 1,
            })
        } else {
            None
        };
        Ok(off)
    }

    /// Appends a member head (codec 2) to the group of the compressed frame just written (or
    /// of the member just written); returns the group's data offset. The caller vouches for
    /// `id`; the group's bounds ([`MAX_GROUP_CHUNKS`], [`MAX_GROUP_RAW`], a first chunk of at
    /// least one byte) are checked.
    pub fn add_member(&mut self, id: &Digest, raw: u32) -> Result<u64, WireError> {
        let Some(g) = self.group.as_mut() else {
            return Err(WireError::malformed(
                "a group member head may only follow a compressed frame or another member (in a pack of codec 2)",
            ));
        };
        if raw == 0 || raw as usize > MAX_CHUNK || g.chunks >= MAX_GROUP_CHUNKS || g.total > MAX_GROUP_RAW || g.in_members + raw as usize >= g.total {
            return Err(WireError::malformed(format!(
                "a group member of {raw} raw bytes does not fit its group (chunk {} of at most {MAX_GROUP_CHUNKS}, {} of {} raw bytes already in members, at most {MAX_GROUP_RAW})",
                g.chunks + 1,
                g.in_members,
                g.total
            )));
        }
        g.in_members += raw as usize;
        g.chunks += 1;
        let off = g.offset;
        self.w.write_all(&encode_frame_head(FrameHead::Member { raw, id: *id })).map_err(WireError::Io)?;
        self.pos += FRAME_HEAD_LEN as u64;
        self.count += 1;
        Ok(off)
    }

    /// Appends consecutive chunks (ids vouched for by the caller) as one group: their raw bytes
    /// back to back compressed into one frame and a member head per further chunk, where the
    /// pack's codec is 2, there are two or more, the raw total is at most [`MAX_GROUP_RAW`] and
    /// the frame saves at least 1/16 of it. Otherwise each chunk is its own frame, compressed
    /// where that saves 1/16 (codec 1 or 2) or raw. `buf` and `z` are scratch buffers. Returns
    /// each chunk's data offset in `offsets` (cleared first) and what was written.
    pub fn add_group(
        &mut self,
        chunks: &[(Digest, &[u8])],
        cx: &mut Compressor,
        buf: &mut Vec<u8>,
        z: &mut Vec<u8>,
        offsets: &mut Vec<u64>,
    ) -> Result<GroupWritten, WireError> {
        offsets.clear();
        if self.codec == Codec::Group {
            let raws: Vec<&[u8]> = chunks.iter().map(|c| c.1).collect();
            if compress_group(cx, &raws, buf, z) {
                let off = self.add_frame(&chunks[0].0, z, true)?;
                offsets.push(off);
                for (id, d) in &chunks[1..] {
                    offsets.push(self.add_member(id, d.len() as u32)?);
                }
                return Ok(GroupWritten {
                    grouped: true,
                    data_bytes: z.len() as u64,
                    compressed: chunks.len() as u64,
                });
            }
        }
        let mut out = GroupWritten::default();
        for (id, d) in chunks {
            let comp = self.codec != Codec::None && cx.compress(d, z);
            let stored: &[u8] = if comp { z } else { d };
            offsets.push(self.add_frame(id, stored, comp)?);
            out.data_bytes += stored.len() as u64;
            out.compressed += comp as u64;
        }
        Ok(out)
    }

    pub fn count(&self) -> u64 {
        self.count
    }

    /// Bytes written so far (without the end frame).
    pub fn len(&self) -> u64 {
        self.pos
    }

    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Writes the end frame and returns the writer.
    pub fn finish(mut self) -> Result<W, WireError> {
        let end = encode_frame_head(FrameHead::End { count: self.count });
        self.w.write_all(&end).map_err(WireError::Io)?;
        self.w.flush().map_err(WireError::Io)?;
        Ok(self.w)
    }
}

/// Compresses consecutive chunks as one group's frame data into `z` (`buf`: scratch) and
/// returns true where that is worth a group: two or more chunks (at most [`MAX_GROUP_CHUNKS`],
/// none empty nor under 1/[`GROUP_SPREAD`] of the total, at most [`MAX_GROUP_RAW`] raw bytes in
/// all) whose frame and member heads save at
/// least 1/16 of their raw total. False: each chunk travels as its own frame. Both clients'
/// rule ([`PackWriter::add_group`]; the native client runs it on its cores).
pub fn compress_group(cx: &mut Compressor, chunks: &[&[u8]], buf: &mut Vec<u8>, z: &mut Vec<u8>) -> bool {
    let total: usize = chunks.iter().map(|c| c.len()).sum();
    if chunks.len() < 2 || chunks.len() > MAX_GROUP_CHUNKS || total > MAX_GROUP_RAW || chunks.iter().any(|c| c.is_empty() || c.len() * GROUP_SPREAD < total) {
        return false;
    }
    buf.clear();
    for c in chunks {
        buf.extend_from_slice(c);
    }
    let heads = (chunks.len() - 1) * FRAME_HEAD_LEN;
    cx.compress(buf, z) && super::codec::saves_enough(total, z.len() + heads)
}

/// Cuts chunks of these raw lengths, in order, into runs of consecutive chunks for groups:
/// each run at most `target` raw bytes (a longer chunk alone), [`MAX_GROUP_CHUNKS`] chunks, and
/// no chunk under 1/[`GROUP_SPREAD`] of its run's raw total. Returns each run's length in chunks.
pub fn group_runs(lens: impl IntoIterator<Item = usize>, target: usize) -> Vec<usize> {
    let mut runs = Vec::new();
    let (mut n, mut raw, mut least) = (0usize, 0usize, usize::MAX);
    for l in lens {
        if n > 0 && (raw + l > target || n == MAX_GROUP_CHUNKS || least.min(l) * GROUP_SPREAD < raw + l) {
            runs.push(n);
            (n, raw, least) = (0, 0, usize::MAX);
        }
        n += 1;
        raw += l;
        least = least.min(l);
    }
    if n > 0 {
        runs.push(n);
    }
    runs
}

/// The most chunks a client puts in one pack: the store's `limits.max_pack_chunks` of `GET /v1`
/// (`None`: a store that does not say), and never more than a heads-first upload may list
/// ([`MAX_HEADS_FIRST`], the store's default), so that every push stays within any store's
/// count and either layout carries the same packs.
pub fn fit_pack_chunks(store_max: Option<u64>) -> u64 {
    store_max.unwrap_or(MAX_HEADS_FIRST as u64).clamp(1, MAX_HEADS_FIRST as u64)
}

/// Bytes a pack of chunks with these lengths takes.
pub fn packed_len(lengths: impl IntoIterator<Item = usize>) -> u64 {
    let mut n = (HEADER_LEN + FRAME_HEAD_LEN) as u64;
    for l in lengths {
        n += (FRAME_HEAD_LEN + l) as u64;
    }
    n
}

/// The pack size a client aims at (`want`: a pack is sent once it reaches it) within a store's
/// limit of `max_pack` bytes, for chunks of at most `max_chunk` bytes. A pack passes its target
/// by less than one chunk and two frame heads (the chunk's and the end frame), so the target is
/// lowered to keep every pack within the limit. An error where the limit cannot take a pack of
/// one chunk of `max_chunk` bytes.
pub fn fit_pack_target(want: usize, max_chunk: usize, max_pack: u64) -> Result<usize, String> {
    let one = (HEADER_LEN + 2 * FRAME_HEAD_LEN + max_chunk) as u64;
    if max_pack < one {
        return Err(format!(
            "the store takes packs of at most {max_pack} bytes, less than one chunk of this profile's MAX ({max_chunk} bytes) and its framing ({one} bytes): use a smaller MAX or a store with a larger --max-pack"
        ));
    }
    let room = max_pack - (max_chunk + 2 * FRAME_HEAD_LEN) as u64;
    Ok(want.max(1).min(usize::try_from(room).unwrap_or(usize::MAX)))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    #[test]
    fn a_fitted_pack_target_keeps_every_pack_within_the_limit() {
        // Below the limit: unchanged; above it: lowered so that the target, one more chunk and
        // the end frame still fit.
        assert_eq!(fit_pack_target(8 << 20, 64 << 10, 256 << 20), Ok(8 << 20));
        let t = fit_pack_target(32 << 20, 64 << 10, 8 << 20).unwrap();
        assert!(t < 8 << 20);
        // The largest pack a client cuts at `t`: t - 1 bytes, then a frame of the largest chunk, then the end.
        assert!((t - 1 + FRAME_HEAD_LEN + (64 << 10) + FRAME_HEAD_LEN) as u64 <= 8 << 20);
        assert_eq!((t + FRAME_HEAD_LEN + (64 << 10) + FRAME_HEAD_LEN) as u64, 8 << 20);
        // A limit that takes exactly one largest chunk, and one byte less.
        let one = (HEADER_LEN + 2 * FRAME_HEAD_LEN + 1000) as u64;
        assert_eq!(fit_pack_target(1 << 20, 1000, one), Ok(HEADER_LEN));
        let e = fit_pack_target(1 << 20, 1000, one - 1).unwrap_err();
        assert!(e.contains("--max-pack"), "{e}");
        assert_eq!(fit_pack_target(0, 1000, 1 << 20), Ok(1));
        // A packed pack of chunks at the target's edge is within the limit (packed_len).
        let lens = [t - HEADER_LEN - FRAME_HEAD_LEN - 1, 64 << 10];
        assert!(packed_len(lens) <= 8 << 20);
    }

    fn pack_of(chunks: &[&[u8]], alg: HashAlg) -> Vec<u8> {
        let mut w = PackWriter::new(Vec::new(), alg).unwrap();
        for c in chunks {
            w.add(&alg.digest(c).unwrap(), c).unwrap();
        }
        w.finish().unwrap()
    }

    #[test]
    fn round_trip_both_algorithms() {
        for alg in [HashAlg::Blake3, HashAlg::Sha256] {
            let chunks: [&[u8]; 3] = [b"a", b"hello world", &[7u8; 1000]];
            let p = pack_of(&chunks, alg);
            assert_eq!(p.len() as u64, packed_len(chunks.iter().map(|c| c.len())));
            let (a, frames) = decode_pack(&p, true).unwrap();
            assert_eq!(a, alg);
            assert_eq!(frames.len(), 3);
            for (f, c) in frames.iter().zip(chunks) {
                assert_eq!(&p[f.offset as usize..f.offset as usize + f.len as usize], c);
                assert_eq!(f.id, alg.digest(c).unwrap());
            }
        }
        let empty = pack_of(&[], HashAlg::Blake3);
        assert!(decode_pack(&empty, true).unwrap().1.is_empty());
    }

    #[test]
    fn every_truncation_is_an_error() {
        let framed = pack_of(&[b"abc", b"defgh"], HashAlg::Blake3);
        let hf = heads_first_of(&[b"abc", b"defgh"], HashAlg::Blake3);
        for (p, upload) in [(&framed, false), (&framed, true), (&hf, true)] {
            for cut in 0..p.len() {
                let r = if upload { decode_upload(&p[..cut], true) } else { decode_pack(&p[..cut], true) };
                match r {
                    Err(WireError::Truncated(_)) => {}
                    other => panic!("cut at {cut} (upload: {upload}): {other:?}"),
                }
            }
        }
    }

    #[test]
    fn malformed_packs_are_named() {
        let p = pack_of(&[b"abc", b"defgh"], HashAlg::Blake3);
        let err = |b: &[u8]| decode_pack(b, true).unwrap_err().to_string();
        // A flipped data byte: the fingerprint does not match.
        let mut q = p.clone();
        q[HEADER_LEN + FRAME_HEAD_LEN] ^= 1;
        assert!(err(&q).contains("frame 0") && err(&q).contains("hash to"), "{}", err(&q));
        // Without verification the structure alone passes.
        assert!(decode_pack(&q, false).is_ok());
        // Bad magic, unknown algorithm, nonzero reserved bytes.
        let mut q = p.clone();
        q[0] = b'X';
        assert!(err(&q).contains("magic"));
        let mut q = p.clone();
        q[8] = 9;
        assert!(err(&q).contains("algorithm code 9"));
        let mut q = p.clone();
        q[12] = 1;
        assert!(err(&q).contains("reserved"));
        // Wrong count in the end frame.
        let mut q = p.clone();
        let end = q.len() - FRAME_HEAD_LEN;
        q[end + 4] = 5;
        assert!(err(&q).contains("counts 5 chunks"), "{}", err(&q));
        // Bytes after the end.
        let mut q = p.clone();
        q.push(0);
        assert!(err(&q).contains("after the end"));
        // A frame larger than the limit.
        let mut q = p.clone();
        q[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        assert!(err(&q).contains("larger than the limit"), "{}", err(&q));
        // A zero-length chunk cannot be written.
        let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
        assert!(w.add(&[0; 32], b"").is_err());
        assert!(PackWriter::new(Vec::new(), HashAlg::None).is_err());
    }

    fn heads_first_of(chunks: &[&[u8]], alg: HashAlg) -> Vec<u8> {
        let list: Vec<(Digest, &[u8])> = chunks.iter().map(|c| (alg.digest(c).unwrap(), *c)).collect();
        encode_heads_first(alg, &list).unwrap()
    }

    #[test]
    fn heads_first_reads_as_the_same_frames() {
        for alg in [HashAlg::Blake3, HashAlg::Sha256] {
            let chunks: [&[u8]; 4] = [b"a", b"hello world", &[7u8; 1000], b"a"];
            let framed = pack_of(&chunks, alg);
            let hf = heads_first_of(&chunks, alg);
            assert_eq!(hf.len(), framed.len(), "the same bytes, in another order");
            let (a, frames) = decode_upload(&hf, true).unwrap();
            let (_, want) = decode_pack(&framed, true).unwrap();
            assert_eq!(a, alg);
            assert_eq!(frames.len(), 4);
            for ((f, w), c) in frames.iter().zip(&want).zip(chunks) {
                assert_eq!((f.id, f.len), (w.id, w.len));
                assert_eq!(&hf[f.offset as usize..f.offset as usize + f.len as usize], c);
            }
            // A framed upload reads as before; a stored pack may not be heads first.
            assert_eq!(decode_upload(&framed, true).unwrap().1, want);
            assert!(decode_pack(&hf, true).unwrap_err().to_string().contains("heads-first upload where a stored"));
        }
        let empty = heads_first_of(&[], HashAlg::Blake3);
        assert!(decode_upload(&empty, true).unwrap().1.is_empty());
    }

    #[test]
    fn heads_first_malformed_is_named() {
        let p = heads_first_of(&[b"abc", b"defgh"], HashAlg::Blake3);
        let err = |b: &[u8]| decode_upload(b, true).unwrap_err().to_string();
        let data = HEADER_LEN + 3 * FRAME_HEAD_LEN;
        // A flipped data byte in the second chunk.
        let mut q = p.clone();
        q[data + 3] ^= 1;
        assert!(err(&q).contains("frame 1") && err(&q).contains("hash to"), "{}", err(&q));
        // Heads and data that disagree in length: the data runs out, or bytes are left over.
        let mut q = p.clone();
        q[HEADER_LEN] = 4;
        assert!(matches!(decode_upload(&q, false), Err(WireError::Truncated(_))));
        let mut q = p.clone();
        q[HEADER_LEN] = 2;
        assert!(err(&q).contains("hash to"), "{}", err(&q));
        assert!(decode_upload(&q, false).unwrap_err().to_string().contains("after the end"));
        // The end frame's count, an unknown layout, a head over the limit.
        let mut q = p.clone();
        q[HEADER_LEN + 2 * FRAME_HEAD_LEN + 4] = 3;
        assert!(err(&q).contains("counts 3 chunks; the pack lists 2"), "{}", err(&q));
        let mut q = p.clone();
        q[9] = 2;
        assert!(err(&q).contains("unknown layout 2"), "{}", err(&q));
        let mut q = p.clone();
        q[HEADER_LEN + FRAME_HEAD_LEN..HEADER_LEN + FRAME_HEAD_LEN + 4].copy_from_slice(&0x7fff_ffffu32.to_le_bytes());
        assert!(err(&q).contains("head 1") && err(&q).contains("larger than the limit"), "{}", err(&q));
        // More heads than a heads-first pack may list: refused before any data is read.
        let mut q = encode_upload_header(HashAlg::Blake3, Layout::HeadsFirst).unwrap().to_vec();
        for _ in 0..=MAX_HEADS_FIRST {
            q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: 1, id: [0; 32], compressed: false }));
        }
        assert!(err(&q).contains("at most 65536 chunks"), "{}", err(&q));
        let one: &[u8] = b"x";
        let too_many = vec![([0u8; 32], one); MAX_HEADS_FIRST + 1];
        assert!(encode_heads_first(HashAlg::Blake3, &too_many).is_err());
    }

    fn text(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| b"compressible text, mostly; "[i % 27] ^ (seed & 1)).collect()
    }

    /// A zstd pack: the compressible chunks compressed (where that saves), the others raw.
    fn zpack(chunks: &[&[u8]], layout: Layout) -> Vec<u8> {
        use super::super::codec::Compressor;
        let alg = HashAlg::Blake3;
        let mut c = Compressor::new(3);
        let mut stored: Vec<(Digest, Vec<u8>, bool)> = Vec::new();
        for ch in chunks {
            let mut z = Vec::new();
            let comp = c.compress(ch, &mut z);
            stored.push((alg.digest(ch).unwrap(), if comp { z } else { ch.to_vec() }, comp));
        }
        match layout {
            Layout::Framed => {
                let mut w = PackWriter::with_codec(Vec::new(), alg, Codec::Zstd).unwrap();
                for (id, d, comp) in &stored {
                    w.add_frame(id, d, *comp).unwrap();
                }
                w.finish().unwrap()
            }
            Layout::HeadsFirst => {
                let list: Vec<(Digest, &[u8], bool)> = stored.iter().map(|(i, d, c)| (*i, &d[..], *c)).collect();
                encode_heads_first_frames(alg, Codec::Zstd, &list).unwrap()
            }
        }
    }

    fn raw_frames(p: &[u8], upload: bool) -> Result<Vec<(Frame, Vec<u8>)>, WireError> {
        let mut r = if upload { PackReader::upload(p, MAX_CHUNK, true)? } else { PackReader::new(p, MAX_CHUNK, true)? };
        let mut out = Vec::new();
        let mut buf = Vec::new();
        while let Some(f) = r.next_into(&mut buf)? {
            out.push((f, r.raw_data(&f, &buf).to_vec()));
        }
        Ok(out)
    }

    #[test]
    fn compressed_frames_round_trip_in_both_layouts() {
        let big = text(8192, 0);
        let chunks: [&[u8]; 4] = [b"tiny", &big, b"0123456789abcdef", &[9u8; 3000]];
        for layout in [Layout::Framed, Layout::HeadsFirst] {
            let p = zpack(&chunks, layout);
            assert_eq!(p[10], 1, "codec byte");
            let got = raw_frames(&p, true).unwrap();
            assert_eq!(got.len(), 4);
            for ((f, raw), c) in got.iter().zip(chunks) {
                assert_eq!(&raw[..], c);
                assert_eq!(f.raw as usize, c.len());
                assert_eq!(f.compressed, f.len < f.raw, "{f:?}");
            }
            assert!(got[1].0.compressed && got[3].0.compressed && !got[0].0.compressed);
            assert!(p.len() < packed_len(chunks.iter().map(|c| c.len())) as usize - 8000);
        }
        // The framed layout is a stored pack; its frames' stored form is at their offsets.
        let p = zpack(&chunks, Layout::Framed);
        for (f, _) in raw_frames(&p, false).unwrap() {
            let head = u32::from_le_bytes(p[f.offset as usize - 36..f.offset as usize - 32].try_into().unwrap());
            assert_eq!(head, f.head_len());
        }
    }

    #[test]
    fn bad_compressed_frames_are_named() {
        let big = text(8192, 0);
        let p = zpack(&[&big], Layout::Framed);
        let at = HEADER_LEN + FRAME_HEAD_LEN;
        let err = |b: &[u8]| decode_upload(b, true).unwrap_err().to_string();
        // Bit 31 in a pack of codec 0.
        let mut q = p.clone();
        q[10] = 0;
        assert!(err(&q).contains("codec is 0"), "{}", err(&q));
        // An unknown codec.
        let mut q = p.clone();
        q[10] = 3;
        assert!(err(&q).contains("unknown codec 3"), "{}", err(&q));
        // A raw length smaller / larger than the data's.
        for (lie, want) in [(8000u32, "declared 8000"), (8193, "decompresses to 8192"), (0, "raw length of 0"), ((MAX_CHUNK + 1) as u32, "raw length of")] {
            let mut q = p.clone();
            q[at..at + 4].copy_from_slice(&lie.to_le_bytes());
            let e = err(&q);
            assert!(e.contains(want) && e.contains("frame 0 at byte 16"), "{lie}: {e}");
        }
        // A corrupt zstd stream, and a wrong id (the hash is over the decompressed bytes).
        let mut q = p.clone();
        q[at + 4] ^= 0x55;
        assert!(err(&q).contains("frame 0"), "{}", err(&q));
        let mut q = p.clone();
        q[HEADER_LEN + 4] ^= 1;
        assert!(err(&q).contains("(decompressed) hash to"), "{}", err(&q));
        // A frame that saves nothing: its raw length at most its zstd bytes.
        let zlen = u32::from_le_bytes(p[HEADER_LEN..HEADER_LEN + 4].try_into().unwrap()) & !COMPRESSED;
        let mut q = p.clone();
        q[at..at + 4].copy_from_slice(&(zlen - 4).to_le_bytes());
        assert!(err(&q).contains("saves nothing"), "{}", err(&q));
        // Too short a compressed frame: refused at its head.
        let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, Codec::Zstd).unwrap().to_vec();
        q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: 4, id: [0; 32], compressed: true }));
        q.extend_from_slice(&[1, 0, 0, 0]);
        assert!(err(&q).contains("a compressed frame of 4 bytes"), "{}", err(&q));
        // A bomb: a few hundred bytes that inflate to 64 MiB, declared as 8 KiB.
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
        let mut data = 8192u32.to_le_bytes().to_vec();
        data.extend_from_slice(&bomb);
        let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
        w.add_frame(&HashAlg::Blake3.digest(&[0u8; 8192]).unwrap(), &data, true).unwrap();
        let q = w.finish().unwrap();
        assert!(err(&q).contains("declared 8192"), "{}", err(&q));
        // Every truncation is an error.
        for cut in 0..p.len() {
            assert!(decode_upload(&p[..cut], true).is_err(), "cut at {cut}");
        }
        // A writer refuses a compressed frame in a pack of codec 0, or one that saves nothing.
        let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
        assert!(w.add_frame(&[0; 32], &data, true).is_err());
        let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
        assert!(w.add_frame(&[0; 32], &[2, 0, 0, 0, 1, 2], true).is_err());
    }

    // ---- codec 2: groups ----

    pub(crate) fn grouped_text(n: usize, seed: u64) -> Vec<u8> {
        // Compressible, and different per seed (so that chunks differ).
        let words = [&b"alpha "[..], b"beta ", b"gamma ", b"delta ", b"epsilon ", b"zeta "];
        let mut x = seed.wrapping_mul(0x9e3779b97f4a7c15) | 1;
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend_from_slice(words[(x % 6) as usize]);
        }
        out.truncate(n);
        out
    }

    /// A pack of codec 2 whose chunks are written in groups (`sizes` of each group).
    pub(crate) fn gpack(chunks: &[Vec<u8>], sizes: &[usize]) -> (Vec<u8>, Vec<GroupWritten>) {
        let alg = HashAlg::Blake3;
        let mut w = PackWriter::with_codec(Vec::new(), alg, Codec::Group).unwrap();
        let mut cx = Compressor::new(3);
        let (mut buf, mut z, mut offs) = (Vec::new(), Vec::new(), Vec::new());
        let mut at = 0;
        let mut outs = Vec::new();
        for &k in sizes {
            let list: Vec<(Digest, &[u8])> = chunks[at..at + k].iter().map(|c| (alg.digest(c).unwrap(), &c[..])).collect();
            outs.push(w.add_group(&list, &mut cx, &mut buf, &mut z, &mut offs).unwrap());
            assert_eq!(offs.len(), k);
            at += k;
        }
        assert_eq!(at, chunks.len());
        (w.finish().unwrap(), outs)
    }

    /// The same pack heads first: every head, the end frame, then the data (members have none).
    pub(crate) fn to_heads_first(framed: &[u8]) -> Vec<u8> {
        let mut heads = framed[..HEADER_LEN].to_vec();
        heads[9] = 1;
        let mut data = Vec::new();
        let mut at = HEADER_LEN;
        loop {
            let h = u32::from_le_bytes(framed[at..at + 4].try_into().unwrap());
            heads.extend_from_slice(&framed[at..at + FRAME_HEAD_LEN]);
            at += FRAME_HEAD_LEN;
            if h == 0 {
                break;
            }
            if h & GROUP_MEMBER == 0 || h & COMPRESSED != 0 {
                let n = (h & !COMPRESSED) as usize;
                data.extend_from_slice(&framed[at..at + n]);
                at += n;
            }
        }
        heads.extend_from_slice(&data);
        heads
    }

    #[test]
    fn groups_round_trip_in_both_layouts() {
        let chunks: Vec<Vec<u8>> = (0..9).map(|i| grouped_text(500 + 900 * i, i as u64)).collect();
        // A group of 4, one of 1 (a codec-1 frame), a group of 3, one raw-or-compressed pair.
        let (p, outs) = gpack(&chunks, &[4, 1, 3, 1]);
        assert_eq!(p[10], 2, "codec byte");
        assert!(outs[0].grouped && outs[2].grouped && !outs[1].grouped && !outs[3].grouped);
        for hf in [false, true] {
            let body = if hf { to_heads_first(&p) } else { p.clone() };
            assert_eq!(body.len(), p.len());
            let got = raw_frames(&body, true).unwrap();
            assert_eq!(got.len(), 9);
            for ((f, raw), c) in got.iter().zip(&chunks) {
                assert_eq!(raw, c);
                assert_eq!(f.raw as usize, c.len());
            }
            let fs: Vec<Frame> = got.iter().map(|g| g.0).collect();
            // Members share their group's offset and stored length; raw offsets run on.
            assert!(!fs[0].member && fs[1].member && fs[2].member && fs[3].member && !fs[4].member);
            assert_eq!((fs[1].offset, fs[1].len), (fs[0].offset, fs[0].len));
            assert_eq!(fs[1].raw_off, fs[0].raw);
            assert_eq!(fs[3].raw_off, fs[0].raw + fs[1].raw + fs[2].raw);
            assert_eq!(fs[4].raw_off, 0);
            assert_eq!(fs[6].raw_off, fs[5].raw);
        }
        // The stored form: each head as `head_len` says, the pack id over them.
        let (_, fs) = decode_pack(&p, true).unwrap();
        let mut at = HEADER_LEN;
        for f in &fs {
            let h = u32::from_le_bytes(p[at..at + 4].try_into().unwrap());
            assert_eq!(h, f.head_len(), "{f:?}");
            at += FRAME_HEAD_LEN + if f.member { 0 } else { f.len as usize };
        }
        assert_eq!(&p[at..at + 4], &[0, 0, 0, 0]);
        assert_eq!(u64::from_le_bytes(p[at + 4..at + 12].try_into().unwrap()), 9, "the end frame counts members");
        // Smaller than one frame per chunk.
        let mut w = PackWriter::with_codec(Vec::new(), HashAlg::Blake3, Codec::Zstd).unwrap();
        let (mut b, mut z, mut o) = (Vec::new(), Vec::new(), Vec::new());
        let list: Vec<(Digest, &[u8])> = chunks.iter().map(|c| (HashAlg::Blake3.digest(c).unwrap(), &c[..])).collect();
        let one = w.add_group(&list, &mut Compressor::new(3), &mut b, &mut z, &mut o).unwrap();
        assert!(!one.grouped && one.compressed == 9, "codec 1: one frame per chunk");
        assert!(p.len() < w.finish().unwrap().len());
    }

    #[test]
    fn group_runs_keep_the_bounds() {
        assert_eq!(group_runs([10, 10, 10, 10], 25), vec![2, 2]);
        assert_eq!(group_runs([30, 10, 10], 25), vec![1, 2]);
        assert_eq!(group_runs([10, 30, 10], 25), vec![1, 1, 1]);
        // Equal chunks: at most GROUP_SPREAD in a run (each holds 1/64 of it), below the 256.
        assert_eq!(group_runs(std::iter::repeat_n(1, 600), 1 << 20), [vec![64; 9], vec![24]].concat());
        assert!(group_runs([], 25).is_empty());
        // No chunk under 1/GROUP_SPREAD of its run: a small chunk ends the run before it and
        // starts one the next big chunk cannot join.
        assert_eq!(group_runs([8192, 100, 8192, 8192], 1 << 16), vec![1, 1, 2]);
        assert_eq!(group_runs([8192, 300, 4000], 1 << 16), vec![3]);
    }

    #[test]
    fn a_group_that_does_not_save_is_written_chunk_by_chunk() {
        let mut x = 7u64;
        let rnd: Vec<Vec<u8>> = (0..3)
            .map(|_| {
                (0..3000)
                    .map(|_| {
                        x ^= x << 13;
                        x ^= x >> 7;
                        x ^= x << 17;
                        x as u8
                    })
                    .collect()
            })
            .collect();
        let (p, outs) = gpack(&rnd, &[3]);
        assert_eq!(outs[0], GroupWritten { grouped: false, data_bytes: 9000, compressed: 0 });
        let got = raw_frames(&p, true).unwrap();
        assert!(got.iter().all(|(f, _)| !f.compressed && !f.member));
        // Over MAX_GROUP_RAW: not grouped either.
        let big: Vec<Vec<u8>> = (0..3).map(|i| grouped_text(400 << 10, i)).collect();
        let (p, outs) = gpack(&big, &[3]);
        assert!(!outs[0].grouped && outs[0].compressed == 3);
        assert_eq!(raw_frames(&p, true).unwrap().len(), 3);
    }

    /// A codec-2 pack with one group written by hand: the first chunk's id, the declared raw
    /// total, the zstd bytes of `raw`, then member heads `(raw length, id)`.
    fn hand_group(first: Digest, total: u32, raw: &[u8], members: &[(u32, Digest)]) -> Vec<u8> {
        let mut q = encode_pack_header(HashAlg::Blake3, Layout::Framed, Codec::Group).unwrap().to_vec();
        let mut data = total.to_le_bytes().to_vec();
        data.extend_from_slice(&zstd::bulk::compress(raw, 3).unwrap());
        q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: data.len() as u32, id: first, compressed: true }));
        q.extend_from_slice(&data);
        for &(r, id) in members {
            q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: r, id }));
        }
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 1 + members.len() as u64 }));
        q
    }

    #[test]
    fn bad_groups_are_named() {
        let alg = HashAlg::Blake3;
        let d = |b: &[u8]| alg.digest(b).unwrap();
        let err = |b: &[u8]| {
            let e1 = decode_upload(b, true).unwrap_err().to_string();
            // The same refusal heads first (where the framed layout could be parsed for it).
            if let Ok(hf) = std::panic::catch_unwind(|| to_heads_first(b)) {
                assert!(decode_upload(&hf, true).is_err(), "heads first accepted what framed refused: {e1}");
            }
            e1
        };
        let a = grouped_text(3000, 1);
        let b = grouped_text(2000, 2);
        let c = grouped_text(1000, 3);
        let mut all = a.clone();
        all.extend_from_slice(&b);
        all.extend_from_slice(&c);
        let good = hand_group(d(&a), 6000, &all, &[(2000, d(&b)), (1000, d(&c))]);
        assert_eq!(raw_frames(&good, true).unwrap().len(), 3);
        // A member fingerprint wrong.
        let q = hand_group(d(&a), 6000, &all, &[(2000, d(&c)), (1000, d(&c))]);
        let e = err(&q);
        assert!(e.contains("frame 1") && e.contains("group member"), "{e}");
        // A lying raw total: larger, smaller (the group decompresses to 6000).
        assert!(err(&hand_group(d(&a), 6001, &all, &[(2000, d(&b)), (1000, d(&c))])).contains("decompresses to 6000"));
        assert!(err(&hand_group(d(&a), 5999, &all, &[(1999, d(&b)), (1000, d(&c))])).contains("declared 5999"));
        // Members that leave the first chunk nothing (or less than nothing).
        let e = err(&hand_group(d(&a), 6000, &all, &[(5000, d(&b)), (1000, d(&c))]));
        assert!(e.contains("first chunk would have none") && e.contains("frame 0 at byte 16"), "{e}");
        assert!(err(&hand_group(d(&a), 6000, &all, &[(5000, d(&b)), (3000, d(&c))])).contains("would have none"));
        // Member lengths that shift the slices: the fingerprints say so.
        assert!(err(&hand_group(d(&a), 6000, &all, &[(2001, d(&b)), (1000, d(&c))])).contains("hash to"));
        // Raw total over 1 MiB (a group with members), checked before zstd runs.
        let big = grouped_text(MAX_GROUP_RAW, 4);
        let mut big2 = big.clone();
        big2.extend_from_slice(&c);
        let e = err(&hand_group(d(&big), big2.len() as u32, &big2, &[(1000, d(&c))]));
        assert!(e.contains("at most 1048576"), "{e}");
        // More than 256 chunks in a group.
        let one = [7u8; 10];
        let many = vec![7u8; 10 * 257];
        let ms: Vec<(u32, Digest)> = (0..256).map(|_| (10, d(&one))).collect();
        let e = err(&hand_group(d(&one), many.len() as u32, &many, &ms));
        assert!(e.contains("more than 256 chunks"), "{e}");
        // Every chunk at least 1/64 of the group: 64 equal chunks are a group, 65 are not.
        let ms: Vec<(u32, Digest)> = (0..63).map(|_| (10, d(&one))).collect();
        assert_eq!(raw_frames(&hand_group(d(&one), 640, &many[..640], &ms), true).unwrap().len(), 64);
        let ms: Vec<(u32, Digest)> = (0..64).map(|_| (10, d(&one))).collect();
        let e = err(&hand_group(d(&one), 650, &many[..650], &ms));
        assert!(e.contains("at least 1/64"), "{e}");
        // A bomb: declared 6000, inflates to 64 MiB.
        let zeros = vec![0u8; 64 << 20];
        let e = err(&hand_group(d(&a), 6000, &zeros, &[(2000, d(&b))]));
        assert!(e.contains("declared 6000"), "{e}");
        // A member head with no group: first in the pack, after a raw frame, after the end of
        // a group by another frame.
        let mut q = encode_pack_header(alg, Layout::Framed, Codec::Group).unwrap().to_vec();
        q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: 10, id: d(&one) }));
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 1 }));
        let e = err(&q);
        assert!(e.contains("frame 0 at byte 16") && e.contains("may only follow"), "{e}");
        let mut q = encode_pack_header(alg, Layout::Framed, Codec::Group).unwrap().to_vec();
        q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: 10, id: d(&one), compressed: false }));
        q.extend_from_slice(&one);
        q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: 10, id: d(&one) }));
        q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 2 }));
        let e = err(&q);
        assert!(e.contains("frame 1 at byte 62") && e.contains("may only follow"), "{e}");
        // Bit 30 in packs of codec 0 and 1 (after a raw frame, which both take), and with bit 31.
        for codec in [0u8, 1] {
            let mut q = good.clone();
            q[10] = codec;
            assert!(err(&q).contains("frame 0"), "codec {codec}");
            let mut q = encode_pack_header(alg, Layout::Framed, Codec::from_byte(codec).unwrap()).unwrap().to_vec();
            q.extend_from_slice(&encode_frame_head(FrameHead::Chunk { len: 10, id: d(&one), compressed: false }));
            q.extend_from_slice(&one);
            q.extend_from_slice(&encode_frame_head(FrameHead::Member { raw: 10, id: d(&one) }));
            q.extend_from_slice(&encode_frame_head(FrameHead::End { count: 2 }));
            let e = err(&q);
            assert!(e.contains("frame 1") && e.contains("bit 30 marks a group member only in a pack of codec 2"), "codec {codec}: {e}");
        }
        let mut q = good.clone();
        let m = q.len() - 3 * FRAME_HEAD_LEN;
        q[m + 3] |= 0x80;
        assert!(err(&q).contains("both bit 31"), "{}", err(&q));
        // A writer keeps the same rules.
        let mut w = PackWriter::with_codec(Vec::new(), alg, Codec::Group).unwrap();
        assert!(w.add_member(&d(&one), 10).is_err(), "no group");
        w.add(&d(&one), &one).unwrap();
        assert!(w.add_member(&d(&one), 10).is_err(), "after a raw frame");
        let mut w = PackWriter::with_codec(Vec::new(), alg, Codec::Zstd).unwrap();
        let mut z = Vec::new();
        assert!(Compressor::new(3).compress(&all, &mut z));
        w.add_frame(&d(&a), &z, true).unwrap();
        assert!(w.add_member(&d(&b), 2000).is_err(), "codec 1");
        let mut w = PackWriter::with_codec(Vec::new(), alg, Codec::Group).unwrap();
        w.add_frame(&d(&a), &z, true).unwrap();
        w.add_member(&d(&b), 2000).unwrap();
        assert!(w.add_member(&d(&c), 4000).is_err(), "leaves the first chunk nothing");
        w.add_member(&d(&c), 1000).unwrap();
        assert_eq!(decode_pack(&w.finish().unwrap(), true).unwrap().1.len(), 3);
        // Every truncation of a group pack is an error.
        for cut in 0..good.len() {
            assert!(decode_upload(&good[..cut], true).is_err(), "cut at {cut}");
        }
    }

    mod props {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            /// Any chunks, compressed where that saves, read back as the same raw bytes in both
            /// layouts; any single flipped byte is an error or reads back the same chunks.
            #[test]
            fn compressed_packs_round_trip(chunks in prop::collection::vec(
                prop_oneof![prop::collection::vec(any::<u8>(), 1..600), (1usize..5000, any::<u8>()).prop_map(|(n, s)| text(n, s))], 0..6),
                flip in any::<prop::sample::Index>(), bit in 0u8..8, heads_first in any::<bool>()) {
                let refs: Vec<&[u8]> = chunks.iter().map(|c| &c[..]).collect();
                let layout = if heads_first { Layout::HeadsFirst } else { Layout::Framed };
                let p = zpack(&refs, layout);
                let got = raw_frames(&p, true).unwrap();
                prop_assert_eq!(got.len(), chunks.len());
                for ((f, raw), c) in got.iter().zip(&chunks) {
                    prop_assert_eq!(raw, c);
                    prop_assert_eq!(f.raw as usize, c.len());
                }
                let mut q = p.clone();
                let i = flip.index(q.len());
                q[i] ^= 1 << bit;
                if let Ok(back) = raw_frames(&q, true) {
                    let raws: Vec<Vec<u8>> = back.into_iter().map(|(_, r)| r).collect();
                    prop_assert_eq!(raws, chunks);
                }
            }

            /// Any chunks written in any groups read back as the same raw bytes in both layouts
            /// (members at their raw offsets); any single flipped byte is an error or reads
            /// back the same chunks.
            #[test]
            fn group_packs_round_trip(chunks in prop::collection::vec(
                prop_oneof![prop::collection::vec(any::<u8>(), 1..300), (1usize..3000, any::<u64>()).prop_map(|(n, s)| grouped_text(n, s))], 0..12),
                cuts in prop::collection::vec(1usize..5, 12), flip in any::<prop::sample::Index>(), bit in 0u8..8, heads_first in any::<bool>()) {
                let mut sizes = Vec::new();
                let mut left = chunks.len();
                for c in cuts {
                    if left == 0 { break; }
                    let k = c.min(left);
                    sizes.push(k);
                    left -= k;
                }
                let (p, _) = gpack(&chunks, &sizes);
                let p = if heads_first { to_heads_first(&p) } else { p };
                let got = raw_frames(&p, true).unwrap();
                prop_assert_eq!(got.len(), chunks.len());
                for ((f, raw), c) in got.iter().zip(&chunks) {
                    prop_assert_eq!(raw, c);
                    prop_assert_eq!(f.raw as usize, c.len());
                }
                let mut q = p.clone();
                let i = flip.index(q.len());
                q[i] ^= 1 << bit;
                if let Ok(back) = raw_frames(&q, true) {
                    let raws: Vec<Vec<u8>> = back.into_iter().map(|(_, r)| r).collect();
                    prop_assert_eq!(raws, chunks);
                }
            }
        }
    }
}
