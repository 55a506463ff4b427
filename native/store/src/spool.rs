//! The window of a pushed stream (`cutpoint push -`): a stream cannot be read twice, so the
//! bytes read from it are kept until every chunk in them has been either found present by its
//! existence query or read into a pack, and no longer.
//!
//! The bytes go to unlinked temporary files of [`SEGMENT`] bytes each (disk, not memory: the
//! client's memory stays flat). A segment is dropped once the release mark passes its end. The
//! query stage reports each batch of chunks it has answered ([`StreamSpool::batch_done`], with
//! whether it handed novel chunks of it to the pack stage); the pack stage reports each list of
//! novel chunks it has read ([`StreamSpool::list_done`]). The bytes before a batch's end are
//! released once the pack stage has read every list handed to it up to that batch. So the
//! window is what the pipeline's bounded channels hold (a few batches of chunks), whatever the
//! stream's length.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::sync::Mutex;

/// Bytes per spool file.
pub const SEGMENT: u64 = 16 << 20;

#[derive(Default)]
struct State {
    /// Kept segments: (offset of their first byte, file), in order.
    segs: VecDeque<(u64, std::fs::File)>,
    /// Bytes written (the stream's length so far).
    len: u64,
    /// Bytes before this offset are released.
    released: u64,
    /// Lists of novel chunks handed to the pack stage, and those it has read.
    sent: u64,
    done: u64,
    /// (lists that must be read first, offset released then), in stream order.
    pending: VecDeque<(u64, u64)>,
    /// The most bytes kept at once (for reports and tests).
    peak: u64,
}

pub struct StreamSpool {
    st: Mutex<State>,
}

/// A new file in the temporary directory, unlinked at once (its space is freed when it is
/// dropped, or when the process ends however it ends).
fn temp_file() -> io::Result<std::fs::File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let p = std::env::temp_dir().join(format!(
        "cutpoint-stream-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
    ));
    let f = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&p)?;
    let _ = std::fs::remove_file(&p);
    Ok(f)
}

impl StreamSpool {
    pub fn new() -> StreamSpool {
        StreamSpool {
            st: Mutex::new(State::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Appends the stream's next bytes.
    pub fn write(&self, mut buf: &[u8]) -> io::Result<()> {
        let mut st = self.lock();
        while !buf.is_empty() {
            let in_seg = st.len % SEGMENT;
            if in_seg == 0 {
                let start = st.len;
                st.segs.push_back((start, temp_file()?));
            }
            let n = buf.len().min((SEGMENT - in_seg) as usize);
            let (_, f) = st.segs.back().expect("a segment");
            f.write_all_at(&buf[..n], in_seg)?;
            st.len += n as u64;
            buf = &buf[n..];
        }
        let kept = st.len - st.released;
        st.peak = st.peak.max(kept);
        Ok(())
    }

    /// Reads `buf.len()` bytes at `off` (an error if they were released or not written yet).
    pub fn read_at(&self, buf: &mut [u8], off: u64) -> io::Result<()> {
        let st = self.lock();
        let end = off + buf.len() as u64;
        if off < st.released || end > st.len {
            return Err(io::Error::other(format!(
                "bytes {off}..{end} of the stream are no longer kept (kept: {}..{})",
                st.released, st.len
            )));
        }
        let mut at = 0usize;
        while at < buf.len() {
            let pos = off + at as u64;
            let i = st.segs.partition_point(|(s, _)| *s + SEGMENT <= pos);
            let (start, f) = &st.segs[i];
            let n = (buf.len() - at).min((start + SEGMENT - pos) as usize);
            f.read_exact_at(&mut buf[at..at + n], pos - start)?;
            at += n;
        }
        Ok(())
    }

    /// The query stage answered the chunks up to stream offset `end`, and handed the novel
    /// ones among them to the pack stage as one list (`list`) or found none.
    pub fn batch_done(&self, end: u64, list: bool) {
        let mut st = self.lock();
        if list {
            st.sent += 1;
        }
        let need = st.sent;
        st.pending.push_back((need, end));
        Self::release(&mut st);
    }

    /// The pack stage read every chunk of the next list.
    pub fn list_done(&self) {
        let mut st = self.lock();
        st.done += 1;
        Self::release(&mut st);
    }

    fn release(st: &mut State) {
        while let Some(&(need, end)) = st.pending.front() {
            if need > st.done {
                break;
            }
            st.pending.pop_front();
            st.released = st.released.max(end);
        }
        while st.segs.front().is_some_and(|(s, _)| s + SEGMENT <= st.released) {
            st.segs.pop_front();
        }
    }

    /// The most bytes kept at once so far.
    pub fn peak(&self) -> u64 {
        self.lock().peak
    }

    /// Bytes written so far.
    pub fn len(&self) -> u64 {
        self.lock().len
    }
}

impl Default for StreamSpool {
    fn default() -> Self {
        StreamSpool::new()
    }
}

/// Copies `input` into `spool` and on to `out` (the chunk stage's end of a pipe) until the
/// input ends; returns its length. The spool has each block before the chunker sees it, so a
/// novel chunk is always there when the pack stage reads it. An `out` closed early (the push
/// stopped) ends the copy without an error: the push reports its own.
pub fn tee(mut input: impl Read, spool: &StreamSpool, mut out: impl Write) -> io::Result<u64> {
    let mut buf = vec![0u8; 1 << 20];
    let mut total = 0u64;
    loop {
        let n = match input.read(&mut buf) {
            Ok(0) => return Ok(total),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        spool.write(&buf[..n])?;
        total += n as u64;
        if let Err(e) = out.write_all(&buf[..n]) {
            if e.kind() == io::ErrorKind::BrokenPipe {
                return Ok(total);
            }
            return Err(e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_are_kept_until_their_batch_is_answered_and_its_list_is_read() {
        let s = StreamSpool::new();
        let data: Vec<u8> = (0..(SEGMENT * 3 + 100)).map(|i| (i % 251) as u8).collect();
        s.write(&data).unwrap();
        assert_eq!(s.len(), data.len() as u64);
        // A read across a segment boundary.
        let mut b = vec![0; 1000];
        s.read_at(&mut b, SEGMENT - 500).unwrap();
        assert_eq!(b, data[(SEGMENT - 500) as usize..(SEGMENT + 500) as usize]);
        // A batch up to 1.5 segments with a list the pack stage has not read: nothing released.
        s.batch_done(SEGMENT + SEGMENT / 2, true);
        // A later batch with no novel chunks waits for that list too.
        s.batch_done(SEGMENT * 2 + 10, false);
        s.read_at(&mut b, 0).unwrap();
        s.list_done();
        // Both released: the first two segments dropped, the third kept.
        assert!(s.read_at(&mut b, SEGMENT * 2).is_err(), "released");
        s.read_at(&mut b, SEGMENT * 2 + 10).unwrap();
        assert_eq!(b, data[(SEGMENT * 2 + 10) as usize..(SEGMENT * 2 + 1010) as usize]);
        assert_eq!(s.lock().segs.len(), 2);
        assert!(s.read_at(&mut b, SEGMENT * 3 + 50).is_err(), "past the end");
        assert_eq!(s.peak(), data.len() as u64);
    }

    #[test]
    fn tee_copies_everything_and_stops_quietly_when_the_reader_is_gone() {
        let s = StreamSpool::new();
        let data: Vec<u8> = (0..3_000_000u32).map(|i| (i % 7) as u8).collect();
        let mut out = Vec::new();
        assert_eq!(tee(&data[..], &s, &mut out).unwrap(), data.len() as u64);
        assert_eq!(out, data);
        let (r, w) = io::pipe().unwrap();
        drop(r);
        let s2 = StreamSpool::new();
        assert!(tee(&data[..], &s2, w).is_ok());
    }
}
