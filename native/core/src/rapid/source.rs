//! Where the chunker's bytes come from: a slice ([`SliceSource`]), a reader through a bounded
//! buffer ([`ReadSource`]), or pieces pushed by the caller ([`FeedSource`]).

use crate::error::Error;
use std::io::Read;

/// Where the chunker's bytes come from: a slice, or a reader through a bounded buffer.
pub trait Source {
    /// Makes the input's bytes up to `end` available, if it has them. Returns the end of the
    /// available bytes: `>= end`, or the input's length when it ends before `end`.
    fn ensure(&mut self, end: usize) -> Result<usize, Error>;
    /// The input's length, once its end has been seen.
    fn known_len(&self) -> Option<usize>;
    /// The buffered bytes and the offset of the first.
    fn window(&self) -> (&[u8], usize);
    /// Bytes before `pos` will not be asked for again.
    fn release(&mut self, pos: usize);
}

pub struct SliceSource<'a> {
    pub(super) data: &'a [u8],
}

impl Source for SliceSource<'_> {
    fn ensure(&mut self, end: usize) -> Result<usize, Error> {
        let _ = end;
        Ok(self.data.len())
    }
    fn known_len(&self) -> Option<usize> {
        Some(self.data.len())
    }
    fn window(&self) -> (&[u8], usize) {
        (self.data, 0)
    }
    fn release(&mut self, _pos: usize) {}
}

pub struct ReadSource<R: Read> {
    pub(super) reader: R,
    /// Bytes `[base, base + filled)` of the input are in `buf[..filled]`.
    pub(super) buf: Vec<u8>,
    pub(super) base: usize,
    pub(super) filled: usize,
    pub(super) eof: bool,
}

pub(super) const READ_AHEAD: usize = 1 << 20;

impl<R: Read> Source for ReadSource<R> {
    fn ensure(&mut self, end: usize) -> Result<usize, Error> {
        while !self.eof && self.base + self.filled < end {
            let target = (end - self.base).max(self.filled + READ_AHEAD);
            if self.buf.len() < target {
                self.buf.resize(target, 0);
            }
            match self.reader.read(&mut self.buf[self.filled..]) {
                Ok(0) => self.eof = true,
                Ok(k) => self.filled += k,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Error::Io(e)),
            }
        }
        Ok(self.base + self.filled)
    }
    fn known_len(&self) -> Option<usize> {
        self.eof.then_some(self.base + self.filled)
    }
    fn window(&self) -> (&[u8], usize) {
        (&self.buf[..self.filled], self.base)
    }
    fn release(&mut self, pos: usize) {
        let drop = pos.saturating_sub(self.base).min(self.filled);
        // Move the tail down only when it pays off (a large or a majority prefix is dead).
        if drop > 0 && (drop >= READ_AHEAD || 2 * drop >= self.filled) {
            self.buf.copy_within(drop..self.filled, 0);
            self.filled -= drop;
            self.base += drop;
        }
    }
}

/// A [`Source`] whose bytes are pushed by the caller (see [`Rapid::feed`](super::Rapid::feed)). Holds the bytes from
/// the oldest one the chunker may still read (about one fallback block plus MAX behind the
/// newest), never the whole input.
#[derive(Default)]
pub struct FeedSource {
    pub(super) buf: Vec<u8>,
    /// Input offset of `buf[0]`.
    pub(super) base: usize,
    pub(super) eof: bool,
}

impl FeedSource {
    /// Appends the next bytes of the input.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), Error> {
        if self.eof {
            return Err(Error::config("bytes pushed after the end of the input"));
        }
        if (self.base + self.buf.len()).checked_add(bytes.len()).is_none() {
            return Err(Error::config("input too large for this platform's offsets"));
        }
        self.buf.extend_from_slice(bytes);
        Ok(())
    }
    /// No more bytes follow.
    pub fn end(&mut self) {
        self.eof = true;
    }
    /// Offset just past the last byte pushed.
    pub fn pushed(&self) -> usize {
        self.base + self.buf.len()
    }
    pub fn ended(&self) -> bool {
        self.eof
    }
}

impl Source for FeedSource {
    fn ensure(&mut self, _end: usize) -> Result<usize, Error> {
        Ok(self.pushed())
    }
    fn known_len(&self) -> Option<usize> {
        self.eof.then(|| self.pushed())
    }
    fn window(&self) -> (&[u8], usize) {
        (&self.buf, self.base)
    }
    fn release(&mut self, pos: usize) {
        let drop = pos.saturating_sub(self.base).min(self.buf.len());
        if drop > 0 && (drop >= READ_AHEAD || 2 * drop >= self.buf.len()) {
            self.buf.drain(..drop);
            self.base += drop;
        }
    }
}
