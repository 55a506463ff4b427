//! A pack upload read as its bytes arrive (push, not pull): the same checks as
//! [`PackReader::upload`](super::pack::PackReader) — it *is* a `PackReader`, fed only once the
//! bytes of its next step are there — for a host that cannot block on a reader (the edge
//! store's Worker gets the body as a stream of pieces). It writes the stored pack (always
//! framed, frames as they arrived, a compressed frame stays compressed) as it goes, so the host
//! passes the output on (to object storage) and holds at most one frame of the upload.
//!
//! The stored pack keeps every frame of the upload, a chunk repeated in it too, so that its
//! length is the upload's (both layouts have the same length): a host that must announce the
//! length of an object before writing it (R2) knows it from `Content-Length`. The index names
//! one copy; gc rewrites such a pack like any other partly referenced one.

use super::codec::{Codec, COMPRESSED, GROUP_MEMBER, MAX_GROUP_CHUNKS, MAX_GROUP_RAW};
use super::pack::{Buffered, Frame, FrameHead, PackReader, PackWriter, FRAME_HEAD_LEN, HEADER_LEN, MAX_HEADS_FIRST};
use super::WireError;
use crate::{Digest, HashAlg};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::rc::Rc;

/// Why an upload is refused.
#[derive(Debug)]
pub enum IngestError {
    /// 400: the pack is not valid (the message names the frame and its offset).
    Bad(String),
    /// 413: more chunks than the store takes.
    TooManyChunks(u64),
}

impl std::fmt::Display for IngestError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            IngestError::Bad(m) => write!(f, "{m}"),
            IngestError::TooManyChunks(n) => write!(f, "the pack holds more than this store's limit of {n} chunks"),
        }
    }
}

impl From<WireError> for IngestError {
    fn from(e: WireError) -> IngestError {
        IngestError::Bad(format!("pack: {e}"))
    }
}

/// The bytes received and not yet read by the `PackReader`; `Read` answers end of input only
/// after [`PackIngest::finish`] (before that the ingest never asks for more than is there).
#[derive(Clone, Default)]
struct Pending(Rc<RefCell<(VecDeque<u8>, bool)>>);

impl Read for Pending {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let mut p = self.0.borrow_mut();
        if p.0.is_empty() && !p.1 {
            return Err(io::Error::new(io::ErrorKind::WouldBlock, "no bytes yet"));
        }
        p.0.read(buf)
    }
}

#[derive(Clone, Default)]
struct Out(Rc<RefCell<Vec<u8>>>);

impl Write for Out {
    fn write(&mut self, b: &[u8]) -> io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// A pack upload fed piece by piece ([`PackIngest::push`]), ended by [`PackIngest::finish`].
pub struct PackIngest {
    pending: Pending,
    out: Out,
    max_chunk: usize,
    max_chunks: u64,
    reader: Option<PackReader<Pending>>,
    writer: Option<PackWriter<Out>>,
    /// Heads first: the stored lengths of the chunks whose data has not come yet.
    heads: Option<VecDeque<u32>>,
    frames: Vec<Frame>,
    data: Vec<u8>,
    received: u64,
    finished: bool,
}

fn u32_at(q: &VecDeque<u8>, at: usize) -> u32 {
    u32::from_le_bytes([q[at], q[at + 1], q[at + 2], q[at + 3]])
}

impl PackIngest {
    /// `max_chunk`: the largest chunk taken (at most 64 MiB); `max_chunks`: the most chunks.
    pub fn new(max_chunk: usize, max_chunks: u64) -> PackIngest {
        PackIngest {
            pending: Pending::default(),
            out: Out::default(),
            max_chunk,
            max_chunks,
            reader: None,
            writer: None,
            heads: None,
            frames: Vec::new(),
            data: Vec::new(),
            received: 0,
            finished: false,
        }
    }

    /// Takes the next piece of the upload and reads every step it completes.
    pub fn push(&mut self, piece: &[u8]) -> Result<(), IngestError> {
        self.received += piece.len() as u64;
        self.pending.0.borrow_mut().0.extend(piece);
        self.advance()
    }

    /// The upload ended: reads its end (a truncated pack, bytes after the end frame: 400).
    pub fn finish(&mut self) -> Result<(), IngestError> {
        self.pending.0.borrow_mut().1 = true;
        self.advance()?;
        let Some(rd) = self.reader.as_mut() else {
            // Fewer bytes than a header: PackReader says so.
            return Err(PackReader::upload(self.pending.clone(), self.max_chunk, true).err().map(Into::into).unwrap_or_else(|| {
                IngestError::Bad("pack: truncated".into())
            }));
        };
        match rd.next_into(&mut self.data)? {
            None => {}
            Some(f) => return Err(IngestError::Bad(format!("pack: the upload ended with chunk {} unread", self.frames.len() + usize::from(f.len > 0)))),
        }
        if let Some(w) = self.writer.take() {
            w.finish()?;
        }
        self.finished = true;
        Ok(())
    }

    /// The stored pack's bytes written since the last call.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut *self.out.0.borrow_mut())
    }

    /// Bytes received so far.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// The algorithm of the pack's header, once read.
    pub fn alg(&self) -> Option<HashAlg> {
        self.reader.as_ref().map(|r| r.alg())
    }

    /// The frames of the stored pack, in order (offsets in the stored pack).
    pub fn frames(&self) -> &[Frame] {
        &self.frames
    }

    /// The stored pack's id ([`pack_id`](super::pack::pack_id)), once finished.
    pub fn pack_id(&self) -> Option<String> {
        if !self.finished {
            return None;
        }
        Some(super::pack::pack_id(self.alg()?, &self.frames))
    }

    fn available(&self) -> usize {
        self.pending.0.borrow().0.len()
    }

    /// Runs the reader as far as the received bytes go, never asking it for a byte not there.
    fn advance(&mut self) -> Result<(), IngestError> {
        let eof = self.pending.0.borrow().1;
        if self.reader.is_none() && !self.open(eof)? {
            return Ok(());
        }
        loop {
            let Some(need) = self.need() else { return Ok(()) };
            if self.available() < need {
                return Ok(());
            }
            let rd = self.reader.as_mut().expect("opened");
            let Some(f) = rd.next_into(&mut self.data)? else { return Ok(()) };
            if let Some(h) = self.heads.as_mut() {
                h.pop_front();
            }
            if self.frames.len() as u64 >= self.max_chunks {
                return Err(IngestError::TooManyChunks(self.max_chunks));
            }
            let w = self.writer.as_mut().expect("opened");
            let off = if f.member { w.add_member(&f.id, f.raw)? } else { w.add_frame(&f.id, &self.data, f.compressed)? };
            self.frames.push(Frame { offset: off, ..f });
        }
    }

    /// The bytes the reader's next step reads (`None`: the end frame, read by finish, which
    /// knows whether anything follows it). Heads first: the next chunk's data (a member: none).
    /// Framed: its head and data; for a compressed frame of codec 2 also every member head
    /// after it and the head after those, which the reader reads with it.
    fn need(&self) -> Option<usize> {
        if let Some(h) = self.heads.as_ref() {
            return h.front().map(|&len| len as usize);
        }
        let rd = self.reader.as_ref().expect("opened");
        let p = self.pending.0.borrow();
        let q = &p.0;
        let (mut need, compressed) = match rd.buffered() {
            Buffered::Member => return Some(0),
            Buffered::Head(FrameHead::End { .. }) => return None,
            Buffered::Head(FrameHead::Member { .. }) => return Some(0), // refused
            Buffered::Head(FrameHead::Chunk { len, compressed, .. }) => (len as usize, compressed),
            Buffered::Nothing => {
                if q.len() < FRAME_HEAD_LEN {
                    return Some(FRAME_HEAD_LEN);
                }
                let head = u32_at(q, 0);
                let len = head & !COMPRESSED;
                if len == 0 {
                    return None;
                }
                if len as usize > self.max_chunk + super::codec::RAW_LEN_BYTES || head & GROUP_MEMBER != 0 {
                    return Some(FRAME_HEAD_LEN); // the reader refuses the head before it reads its data
                }
                (FRAME_HEAD_LEN + len as usize, head & COMPRESSED != 0)
            }
        };
        if !compressed || rd.codec() != Codec::Group {
            return Some(need);
        }
        // The member heads (at most MAX_GROUP_CHUNKS - 1; the reader refuses one more) and the
        // head after them.
        for _ in 0..MAX_GROUP_CHUNKS {
            if q.len() < need + FRAME_HEAD_LEN {
                return Some(need + FRAME_HEAD_LEN); // not there yet
            }
            let h = u32_at(q, need);
            need += FRAME_HEAD_LEN;
            if h & GROUP_MEMBER == 0 || h & COMPRESSED != 0 {
                break;
            }
        }
        Some(need)
    }

    /// Reads the header (and, heads first, every head) once they are all there.
    fn open(&mut self, eof: bool) -> Result<bool, IngestError> {
        let heads = {
            let p = self.pending.0.borrow();
            let q = &p.0;
            if q.len() < HEADER_LEN {
                return Ok(false);
            }
            if q[9] == 1 {
                // Heads first: every head up to the end frame (bounded: MAX_HEADS_FIRST + 1).
                let mut lens = VecDeque::new();
                let mut at = HEADER_LEN;
                loop {
                    if q.len() < at + FRAME_HEAD_LEN {
                        if eof || lens.len() > MAX_HEADS_FIRST {
                            break; // the reader names the defect
                        }
                        return Ok(false);
                    }
                    let raw = u32_at(q, at);
                    if raw == 0 {
                        break;
                    }
                    // A member head has no data.
                    let member = raw & GROUP_MEMBER != 0 && raw & COMPRESSED == 0;
                    lens.push_back(if member { 0 } else { raw & !COMPRESSED });
                    at += FRAME_HEAD_LEN;
                    if lens.len() > MAX_HEADS_FIRST {
                        break;
                    }
                }
                Some(lens)
            } else {
                None
            }
        };
        let rd = PackReader::upload(self.pending.clone(), self.max_chunk, true)?;
        let codec: Codec = rd.codec();
        self.writer = Some(PackWriter::with_codec(self.out.clone(), rd.alg(), codec)?);
        self.reader = Some(rd);
        self.heads = heads;
        Ok(true)
    }
}

/// A stored frame's raw bytes, checked: `stored` is the frame's data (a compressed frame's raw
/// length and zstd frame), decompressed within `max_chunk` when `compressed`, and its
/// fingerprint must be `id` (a restore checks every chunk it sends).
pub fn open_frame(alg: HashAlg, id: &Digest, stored: &[u8], compressed: bool, max_chunk: usize) -> Result<Vec<u8>, String> {
    let raw = if compressed {
        let mut out = Vec::new();
        super::codec::Decompressor::new().decompress(stored, max_chunk, &mut out)?;
        out
    } else {
        stored.to_vec()
    };
    check_id(alg, id, &raw)?;
    Ok(raw)
}

fn check_id(alg: HashAlg, id: &Digest, raw: &[u8]) -> Result<(), String> {
    if alg.digest(raw).as_ref() != Some(id) {
        return Err(format!("chunk {} does not match its fingerprint", crate::hex(id)));
    }
    Ok(())
}

/// A group's decompressed raw bytes (codec 2): `stored` is its compressed frame's data,
/// decompressed within [`MAX_GROUP_RAW`] into `out` (a restore decompresses a group once for its
/// consecutive chunks and slices each with [`group_chunk`]).
pub fn open_group(stored: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    super::codec::Decompressor::new().decompress(stored, MAX_GROUP_RAW, out)
}

/// A chunk's bytes in its group's raw bytes (`raw_off`, `raw`: where the index put it), checked
/// against `id`.
pub fn group_chunk<'a>(alg: HashAlg, id: &Digest, group: &'a [u8], raw_off: u32, raw: u32) -> Result<&'a [u8], String> {
    let (a, b) = (raw_off as usize, raw_off as usize + raw as usize);
    let s = group
        .get(a..b)
        .ok_or_else(|| format!("chunk {}: bytes {a}..{b} of a group of {} raw bytes", crate::hex(id), group.len()))?;
    check_id(alg, id, s)?;
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::pack::{decode_pack, encode_heads_first, PackWriter};

    fn chunks() -> Vec<(Digest, Vec<u8>)> {
        (0..5u8)
            .map(|i| {
                let d: Vec<u8> = (0..(100 + 700 * i as usize)).map(|j| (j as u8) ^ i).collect();
                (HashAlg::Blake3.digest(&d).unwrap(), d)
            })
            .collect()
    }

    fn framed(cs: &[(Digest, Vec<u8>)]) -> Vec<u8> {
        let mut w = PackWriter::new(Vec::new(), HashAlg::Blake3).unwrap();
        for (id, d) in cs {
            w.add(id, d).unwrap();
        }
        w.finish().unwrap()
    }

    fn feed(body: &[u8], piece: usize) -> Result<(Vec<u8>, PackIngest), IngestError> {
        let mut g = PackIngest::new(crate::protocol::pack::MAX_CHUNK, 65536);
        let mut out = Vec::new();
        for p in body.chunks(piece.max(1)) {
            g.push(p)?;
            out.extend(g.take_output());
        }
        g.finish()?;
        out.extend(g.take_output());
        Ok((out, g))
    }

    #[test]
    fn both_layouts_in_any_pieces_store_the_framed_pack() {
        let cs = chunks();
        let want = framed(&cs);
        let refs: Vec<(Digest, &[u8])> = cs.iter().map(|(i, d)| (*i, &d[..])).collect();
        let hf = encode_heads_first(HashAlg::Blake3, &refs).unwrap();
        assert_eq!(hf.len(), want.len());
        for body in [&want, &hf] {
            for piece in [1, 7, 36, 1000, 1 << 20] {
                let (out, g) = feed(body, piece).unwrap();
                assert_eq!(out, want, "piece {piece}");
                let (_, frames) = decode_pack(&out, true).unwrap();
                assert_eq!(g.frames(), &frames[..]);
                assert!(g.pack_id().is_some());
            }
        }
    }

    #[test]
    fn groups_in_any_pieces_store_the_same_pack() {
        use crate::protocol::pack::tests::{gpack, grouped_text, to_heads_first};
        let chunks: Vec<Vec<u8>> = (0..8).map(|i| grouped_text(300 + 500 * i, i as u64)).collect();
        let (want, _) = gpack(&chunks, &[3, 1, 4]);
        let (_, frames) = decode_pack(&want, true).unwrap();
        assert!(frames.iter().filter(|f| f.member).count() == 5);
        let hf = to_heads_first(&want);
        for body in [&want, &hf] {
            for piece in [1, 7, 36, 100, 1000, 1 << 20] {
                let (out, g) = feed(body, piece).unwrap();
                assert_eq!(out, want, "piece {piece}");
                assert_eq!(g.frames(), &frames[..]);
                assert_eq!(g.pack_id(), Some(crate::protocol::pack::pack_id(HashAlg::Blake3, &frames)));
            }
        }
        // A member's fingerprint wrong, in any pieces: refused.
        let mut bad = want.clone();
        let (_, fs) = decode_pack(&want, false).unwrap();
        let m = fs.iter().position(|f| f.member).unwrap();
        let head_at = fs[m - 1].offset as usize + fs[m - 1].len as usize; // right after the group's data
        bad[head_at + 4] ^= 1;
        for piece in [1, 36, 1 << 20] {
            assert!(matches!(feed(&bad, piece), Err(IngestError::Bad(e)) if e.contains("group member")), "piece {piece}");
        }
    }

    #[test]
    fn defects_are_refused() {
        let cs = chunks();
        let good = framed(&cs);
        // A wrong fingerprint.
        let mut bad = good.clone();
        let n = bad.len();
        bad[n - 40] ^= 1;
        assert!(matches!(feed(&bad, 13), Err(IngestError::Bad(m)) if m.contains("hash")));
        // Truncated, at every length.
        for cut in [0, 5, 16, 30, 52, n - 37, n - 1] {
            assert!(feed(&good[..cut], 11).is_err(), "cut {cut}");
        }
        // Bytes after the end.
        let mut more = good.clone();
        more.push(0);
        assert!(feed(&more, 64).is_err());
        // Too many chunks.
        let mut g = PackIngest::new(crate::protocol::pack::MAX_CHUNK, 2);
        assert!(matches!(g.push(&good), Err(IngestError::TooManyChunks(2))));
    }

    #[test]
    fn open_frame_checks_the_id() {
        let cs = chunks();
        assert_eq!(open_frame(HashAlg::Blake3, &cs[0].0, &cs[0].1, false, 1 << 20).unwrap(), cs[0].1);
        assert!(open_frame(HashAlg::Blake3, &cs[1].0, &cs[0].1, false, 1 << 20).is_err());
    }
}
