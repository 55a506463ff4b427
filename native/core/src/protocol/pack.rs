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

use super::codec::{Codec, Decompressor, COMPRESSED, RAW_LEN_BYTES};
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
        .ok_or_else(|| WireError::malformed(format!("pack header: unknown codec {} (0 none, 1 zstd)", h[10])))?;
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

/// A frame head: a chunk (`len`: its stored length, without bit 31; `compressed`: bit 31), or
/// the end of the pack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameHead {
    Chunk { len: u32, id: Digest, compressed: bool },
    End { count: u64 },
}

pub fn encode_frame_head(head: FrameHead) -> [u8; FRAME_HEAD_LEN] {
    let mut b = [0u8; FRAME_HEAD_LEN];
    match head {
        FrameHead::Chunk { len, id, compressed } => {
            let l = if compressed { len | COMPRESSED } else { len };
            b[..4].copy_from_slice(&l.to_le_bytes());
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
            "a frame of {len} bytes is larger than the limit of {max_chunk}"
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
    /// Stored zstd-compressed (bit 31 of its head).
    pub compressed: bool,
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
        }
    }

    /// The head's length as stored (bit 31 for a compressed frame).
    pub fn head_len(&self) -> u32 {
        if self.compressed {
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
    heads: Option<std::collections::VecDeque<(u32, Digest, bool)>>,
    /// The last compressed frame's decompressed bytes, and the decoder (made on first use).
    raw: Vec<u8>,
    dec: Option<Decompressor>,
}

fn read_exact_or<R: Read>(r: &mut R, buf: &mut [u8], what: impl FnOnce() -> String) -> Result<(), WireError> {
    match r.read_exact(buf) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => Err(WireError::Truncated(what())),
        Err(e) => Err(WireError::Io(e)),
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
                    FrameHead::Chunk { len, id, compressed } => {
                        if n == MAX_HEADS_FIRST {
                            return Err(WireError::malformed(format!(
                                "a heads-first pack lists at most {MAX_HEADS_FIRST} chunks"
                            )));
                        }
                        heads.push_back((len, id, compressed));
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

    /// The chunk's raw bytes of the frame [`PackReader::next_into`] just returned: `data` (its
    /// stored bytes) for a raw frame, the decompressed bytes for a compressed one.
    pub fn raw_data<'a>(&'a self, f: &Frame, data: &'a [u8]) -> &'a [u8] {
        if f.compressed {
            &self.raw
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
    /// `None` after a valid end frame with nothing after it.
    pub fn next_into(&mut self, data: &mut Vec<u8>) -> Result<Option<Frame>, WireError> {
        self.next_in(data)
    }

    /// [`PackReader::next_into`], the frame's stored data read straight into the buffer `data`
    /// gives for it (a store reads an upload's frames into its spool's buffer: no copy between).
    pub fn next_in(&mut self, data: &mut impl FrameSink) -> Result<Option<Frame>, WireError> {
        if self.done {
            return Ok(None);
        }
        let n = self.count;
        let at = self.pos;
        let head = if let Some(heads) = &mut self.heads {
            match heads.pop_front() {
                Some((len, id, compressed)) => FrameHead::Chunk { len, id, compressed },
                None => FrameHead::End { count: n },
            }
        } else {
            let mut hb = [0u8; FRAME_HEAD_LEN];
            read_exact_or(&mut self.r, &mut hb, || {
                format!("the pack ends at byte {at} where frame {n} (or the end frame) should start")
            })?;
            self.pos += FRAME_HEAD_LEN as u64;
            decode_frame_head(&hb, self.max_chunk, self.codec).map_err(|e| match e {
                WireError::Malformed(m) => WireError::Malformed(format!("frame {n} at byte {at}: {m}")),
                e => e,
            })?
        };
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
            FrameHead::Chunk { len, id, compressed } => {
                let data = data.frame_buf(len as usize).map_err(WireError::Io)?;
                read_exact_or(&mut self.r, data, || {
                    format!("frame {n} at byte {at}: the pack ends inside its {len} bytes of data")
                })?;
                let raw = if compressed {
                    let max_chunk = self.max_chunk;
                    let dec = self.dec.get_or_insert_with(Decompressor::new);
                    dec.decompress(data, max_chunk, &mut self.raw)
                        .map_err(|m| WireError::malformed(format!("frame {n} at byte {at}: {m}")))?;
                    &self.raw[..]
                } else {
                    &data[..]
                };
                if self.verify {
                    let got = self.alg.digest(raw).expect("packs always have an algorithm");
                    if got != id {
                        return Err(WireError::malformed(format!(
                            "frame {n} at byte {at}: its {} bytes{} hash to {} with {}, not to the frame's {}",
                            raw.len(),
                            if compressed { " (decompressed)" } else { "" },
                            hex(&got),
                            self.alg.name(),
                            hex(&id)
                        )));
                    }
                }
                let f = Frame {
                    id,
                    offset: self.pos,
                    len,
                    raw: raw.len() as u32,
                    compressed,
                };
                self.pos += len as u64;
                self.count += 1;
                Ok(Some(f))
            }
        }
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
        Ok(off)
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
mod tests {
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
        q[10] = 2;
        assert!(err(&q).contains("unknown codec 2"), "{}", err(&q));
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
        }
    }
}
