//! Compressed frames (pack codec 1 = zstd), see [`super::pack`] and PROTOCOL.md 3.1.
//!
//! A compressed frame's data is the chunk's raw length (u32 LE) and one zstd frame. It must
//! save bytes (`stored length - 4 < raw length`), and it decompresses to exactly its raw
//! length: the decoder's output buffer is that length before decompressing, so a bomb or a
//! lying length costs at most `raw length` (≤ the reader's chunk limit) bytes and is an error.
//! The encoder keeps the compressed form only where it saves at least 1/16 of the chunk
//! ([`Compressor::compress`]), the client's per-chunk decision.

/// Bit 31 of a frame head's length: the frame is compressed (only in a pack whose codec is not 0).
pub const COMPRESSED: u32 = 1 << 31;
/// A compressed frame's data starts with the raw length.
pub const RAW_LEN_BYTES: usize = 4;
/// Bit 30 of a frame head's length (bit 31 clear), only in a pack of codec 2: a group's member
/// head (its length the member chunk's raw length, no data follows; [`super::pack`]).
pub const GROUP_MEMBER: u32 = 1 << 30;
/// The most raw bytes a group with members decompresses to (its raw total).
pub const MAX_GROUP_RAW: usize = 1 << 20;
/// The most chunks in one group (its compressed frame's chunk and 255 member heads).
pub const MAX_GROUP_CHUNKS: usize = 256;
/// Every chunk of a group with members holds at least 1/`GROUP_SPREAD` of the group's raw total,
/// so that a restore, which decompresses a chunk's whole group, never decompresses more than
/// `GROUP_SPREAD` times the bytes it serves (a recipe alternating between 1-byte members of two
/// 1 MiB groups would otherwise cost 1 MiB of zstd per byte served). The default profile's
/// groups (64 KiB of chunks of at least 2 KiB) are well within it.
pub const GROUP_SPREAD: usize = 64;
/// `--compression auto`: zstd level 4 (on 8 KiB chunks about 5% smaller than level 3, at about
/// half its speed, still far above what a push's network and store take; docs/performance.md).
pub const AUTO_LEVEL: i32 = 4;
/// `--compression max`.
pub const MAX_LEVEL: i32 = 19;

/// A pack's codec (header byte 10).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Codec {
    /// Every frame raw (every pack before protocol revision 2).
    None = 0,
    /// Frames may be zstd-compressed (bit 31 of their head's length).
    Zstd = 1,
    /// As 1, and a compressed frame may hold a group of chunks (member heads, bit 30).
    Group = 2,
}

impl Codec {
    pub fn from_byte(b: u8) -> Option<Codec> {
        match b {
            0 => Some(Codec::None),
            1 => Some(Codec::Zstd),
            2 => Some(Codec::Group),
            _ => None,
        }
    }
}

/// Whether a frame of `stored` bytes is worth sending for a chunk of `raw` bytes: it saves at
/// least 1/16 of the chunk (and at least one byte).
pub fn saves_enough(raw: usize, stored: usize) -> bool {
    stored < raw && stored + raw / 16 <= raw
}

/// Novel chunks a client compresses together (natively across its cores, in the library across
/// its workers); at most this many chunks' data (each at most the profile's MAX) are held at once.
pub const COMPRESS_GROUP: usize = 256;
/// Chunks tried first in a group after a group where none compressed.
pub const SAMPLE: usize = 16;

/// The clients' per-input rule that keeps incompressible data cheap: after a group of
/// [`COMPRESS_GROUP`] chunks none of which compressed (saving 1/16), the next group tries its
/// first [`SAMPLE`] chunks only, and the rest of it only if one of those compressed.
/// Compressible data is tried chunk by chunk. The native client and the library (through wasm)
/// both follow it, so that they send the same frames.
#[derive(Clone, Copy, Debug, Default)]
pub struct Sampler {
    incompressible: bool,
}

impl Sampler {
    /// How many of a group's `n` chunks are tried first.
    pub fn first(&self, n: usize) -> usize {
        if self.incompressible {
            SAMPLE.min(n)
        } else {
            n
        }
    }

    /// Whether the rest of the group is tried, given whether any of its first chunks compressed.
    pub fn try_rest(&self, any_first: bool) -> bool {
        any_first || !self.incompressible
    }

    /// Records a group's outcome: whether any of its chunks compressed.
    pub fn record(&mut self, any: bool) {
        self.incompressible = !any;
    }
}

/// A zstd compressor at one level, reused across chunks (its context is kept).
pub struct Compressor {
    cx: zstd::bulk::Compressor<'static>,
}

impl Compressor {
    pub fn new(level: i32) -> Compressor {
        Compressor {
            cx: zstd::bulk::Compressor::new(level).expect("a zstd compression context"),
        }
    }

    /// Compresses `raw` into `out` as a compressed frame's data (raw length, zstd frame) and
    /// returns true where that saves at least 1/16 ([`saves_enough`]); false (and `out` is
    /// to be ignored) where the chunk should travel raw.
    pub fn compress(&mut self, raw: &[u8], out: &mut Vec<u8>) -> bool {
        out.clear();
        if raw.is_empty() || raw.len() > u32::MAX as usize >> 1 {
            return false;
        }
        // Room for a frame that saves enough; zstd stops (an error) where it would not fit.
        let room = raw.len() - raw.len() / 16;
        if room <= RAW_LEN_BYTES {
            return false;
        }
        out.resize(room, 0);
        out[..RAW_LEN_BYTES].copy_from_slice(&(raw.len() as u32).to_le_bytes());
        let n = self.cx.compress_to_buffer(raw, &mut out[RAW_LEN_BYTES..]);
        match n {
            Ok(n) if saves_enough(raw.len(), RAW_LEN_BYTES + n) => {
                out.truncate(RAW_LEN_BYTES + n);
                true
            }
            _ => {
                out.clear();
                false
            }
        }
    }
}

/// A bounded zstd decompressor, reused across frames.
pub struct Decompressor {
    dx: zstd::bulk::Decompressor<'static>,
}

impl Default for Decompressor {
    fn default() -> Self {
        Self::new()
    }
}

impl Decompressor {
    pub fn new() -> Decompressor {
        Decompressor {
            dx: zstd::bulk::Decompressor::new().expect("a zstd decompression context"),
        }
    }

    /// The raw length a compressed frame's data declares, checked against the frame's rules
    /// (raw length 1..=`max_chunk`, at least 5 bytes, `stored - 4 < raw`).
    pub fn raw_len(stored: &[u8], max_chunk: usize) -> Result<u32, String> {
        if stored.len() <= RAW_LEN_BYTES {
            return Err(format!(
                "a compressed frame of {} bytes (at least 5: its raw length and a zstd frame)",
                stored.len()
            ));
        }
        let raw = u32::from_le_bytes(stored[..RAW_LEN_BYTES].try_into().unwrap());
        if raw == 0 || raw as usize > max_chunk {
            return Err(format!("a compressed frame declares a raw length of {raw} bytes (1..={max_chunk})"));
        }
        if stored.len() - RAW_LEN_BYTES >= raw as usize {
            return Err(format!(
                "a compressed frame of {} bytes for {raw} raw bytes saves nothing (send it raw, bit 31 clear)",
                stored.len()
            ));
        }
        Ok(raw)
    }

    /// Decompresses a compressed frame's data into `out` (exactly its raw length, or an error:
    /// the output is bounded to that length before zstd runs).
    pub fn decompress(&mut self, stored: &[u8], max_chunk: usize, out: &mut Vec<u8>) -> Result<(), String> {
        let raw = Self::raw_len(stored, max_chunk)? as usize;
        let z = &stored[RAW_LEN_BYTES..];
        // One zstd frame, and nothing after it.
        match zstd::zstd_safe::find_frame_compressed_size(z) {
            Ok(n) if n == z.len() => {}
            Ok(n) => {
                return Err(format!(
                    "a compressed frame holds {} bytes after its zstd frame of {n} bytes",
                    z.len() - n
                ))
            }
            Err(_) => return Err("a compressed frame's data is not a complete zstd frame (truncated or corrupt)".into()),
        }
        out.clear();
        out.resize(raw, 0);
        match self.dx.decompress_to_buffer(z, &mut out[..]) {
            Ok(n) if n == raw => Ok(()),
            Ok(n) => Err(format!("a compressed frame decompresses to {n} bytes; it declares {raw}")),
            Err(e) => Err(format!(
                "a compressed frame does not decompress to its declared {raw} bytes (a longer, truncated or corrupt zstd frame: {})",
                e
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(n: usize) -> Vec<u8> {
        (0..n).map(|i| b"the quick brown fox jumps over the lazy dog "[i % 44]).collect()
    }

    #[test]
    fn round_trip_and_the_saving_rule() {
        let mut c = Compressor::new(AUTO_LEVEL);
        let mut d = Decompressor::new();
        let raw = text(8192);
        let mut z = Vec::new();
        assert!(c.compress(&raw, &mut z));
        assert!(z.len() < raw.len() / 4);
        let mut out = Vec::new();
        d.decompress(&z, 1 << 20, &mut out).unwrap();
        assert_eq!(out, raw);
        // Random bytes do not shrink: they travel raw.
        let mut x = 0x9e3779b97f4a7c15u64;
        let rnd: Vec<u8> = (0..8192)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                x as u8
            })
            .collect();
        assert!(!c.compress(&rnd, &mut z));
        assert!(!c.compress(b"", &mut z));
        assert!(!c.compress(b"abcd", &mut z));
        assert!(saves_enough(16, 15) && !saves_enough(16, 16) && !saves_enough(32, 31) && saves_enough(32, 30));
    }

    #[test]
    fn the_sampler_tries_a_sample_after_a_group_that_did_not_compress() {
        let mut s = Sampler::default();
        assert_eq!(s.first(COMPRESS_GROUP), COMPRESS_GROUP);
        assert!(s.try_rest(false));
        s.record(false);
        assert_eq!(s.first(COMPRESS_GROUP), SAMPLE);
        assert_eq!(s.first(3), 3);
        assert!(!s.try_rest(false) && s.try_rest(true));
        s.record(true);
        assert_eq!(s.first(COMPRESS_GROUP), COMPRESS_GROUP);
    }

    #[test]
    fn bad_frames_are_errors() {
        let mut c = Compressor::new(AUTO_LEVEL);
        let mut d = Decompressor::new();
        let raw = text(8192);
        let mut z = Vec::new();
        assert!(c.compress(&raw, &mut z));
        let mut out = Vec::new();
        let err = |d: &mut Decompressor, b: &[u8], max: usize| d.decompress(b, max, &mut Vec::new()).unwrap_err();
        // A raw length smaller than the data: the output does not fit (a bomb looks the same).
        let mut q = z.clone();
        q[..4].copy_from_slice(&4000u32.to_le_bytes());
        assert!(err(&mut d, &q, 1 << 20).contains("declared 4000"), "{}", err(&mut d, &q, 1 << 20));
        // Larger: too few bytes come out.
        let mut q = z.clone();
        q[..4].copy_from_slice(&9000u32.to_le_bytes());
        assert!(err(&mut d, &q, 1 << 20).contains("decompresses to 8192"), "{}", err(&mut d, &q, 1 << 20));
        // Over the chunk limit, zero, a frame that saves nothing, too short.
        assert!(err(&mut d, &z, 4096).contains("(1..=4096)"));
        let mut q = z.clone();
        q[..4].copy_from_slice(&0u32.to_le_bytes());
        assert!(err(&mut d, &q, 1 << 20).contains("raw length of 0"));
        let mut q = z.clone();
        q[..4].copy_from_slice(&((z.len() - 4) as u32).to_le_bytes());
        assert!(err(&mut d, &q, 1 << 20).contains("saves nothing"));
        assert!(err(&mut d, &z[..4], 1 << 20).contains("at least 5"));
        // Truncated, corrupt, trailing bytes.
        for cut in 5..z.len() {
            assert!(d.decompress(&z[..cut], 1 << 20, &mut out).is_err(), "cut at {cut}");
        }
        let mut q = z.clone();
        q[4] ^= 0xff;
        assert!(err(&mut d, &q, 1 << 20).contains("not a complete zstd frame"));
        let mut q = z.clone();
        q.push(0);
        assert!(err(&mut d, &q, 1 << 20).contains("after its zstd frame"));
        // A bomb: 64 MiB of zeros in a few bytes, declared as 8 KiB: refused without inflating.
        let bomb = zstd::bulk::compress(&vec![0u8; 64 << 20], 19).unwrap();
        let mut q = 8192u32.to_le_bytes().to_vec();
        q.extend_from_slice(&bomb);
        assert!(q.len() < 8192);
        assert!(err(&mut d, &q, 1 << 20).contains("declared 8192"));
        d.decompress(&z, 1 << 20, &mut out).unwrap();
        assert_eq!(out, raw);
    }
}
