//! The file an upload is spooled to before it is stored: written with `O_DIRECT` where the
//! file system takes it, so the pack's bytes go from the writer's buffer to the disk without a
//! copy into the page cache (the kernel's copy and its page bookkeeping were the largest part of
//! the store's CPU per GiB ingested after BLAKE3 itself: issue #28). Durability is unchanged:
//! the caller still calls `sync_all` on the file [`Spool::finish`] returns (the file's size and
//! the device's cache), before the pack is stored and indexed.
//!
//! Writes are gathered in a [`BUF`]-byte buffer aligned to [`ALIGN`] and written in whole
//! blocks; an upload's frames are read straight into that buffer ([`Spool::frame_slot`]: the
//! frame's bytes are copied once, from the request body, not into a buffer and then again into
//! this one). The tail is written padded to [`ALIGN`] and the file then cut to its true length. A file system
//! that refuses `O_DIRECT` (tmpfs, some overlays) at open or at the first write gets plain
//! buffered writes of the same buffer.
//!
//! The buffers come from a [`BufPool`] and go back to it when the spool is dropped: a store
//! makes one per upload (a pack of 8 MiB each), and a fresh 1 MiB buffer cost 256 page faults
//! and the zeroing of its pages every time (4% of the store's CPU for a first push: issue #28).
//! A buffer taken again holds the last upload's bytes; nothing reads them (every slot is filled
//! before it is kept, the tail is padded with zeros).

use cutpoint_core::protocol::pack::{FrameSink, FRAME_HEAD_LEN};
use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fs::File;
use std::io::{self, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::io::AsRawFd;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The buffer: each `O_DIRECT` write is this many bytes.
pub const BUF: usize = 1 << 20;
/// The alignment of `O_DIRECT` buffers, offsets and lengths (a page: enough for any block size
/// up to 4 KiB).
pub const ALIGN: usize = 4096;

struct Aligned {
    ptr: *mut u8,
}

// The buffer is owned by one `Spool` and never shared.
unsafe impl Send for Aligned {}

impl Aligned {
    fn layout() -> Layout {
        Layout::from_size_align(BUF, ALIGN).expect("a valid layout")
    }

    fn new() -> Aligned {
        // SAFETY: the layout has a non-zero size; a null result is handled.
        let ptr = unsafe { alloc_zeroed(Self::layout()) };
        if ptr.is_null() {
            std::alloc::handle_alloc_error(Self::layout());
        }
        Aligned { ptr }
    }

    fn slice(&mut self) -> &mut [u8] {
        // SAFETY: `ptr` points at BUF bytes owned by this value, initialised (zeroed) at birth.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, BUF) }
    }
}

impl Drop for Aligned {
    fn drop(&mut self) {
        // SAFETY: allocated with this layout in `new`.
        unsafe { dealloc(self.ptr, Self::layout()) }
    }
}

/// Idle spool buffers, at most `max` of them (the rest are freed): `max` MiB held at most.
pub struct BufPool {
    max: usize,
    idle: Mutex<Vec<Aligned>>,
    /// Buffers allocated by this pool so far (for tests and stats).
    made: std::sync::atomic::AtomicU64,
}

impl BufPool {
    pub fn new(max: usize) -> Arc<BufPool> {
        Arc::new(BufPool {
            max,
            idle: Mutex::new(Vec::new()),
            made: Default::default(),
        })
    }

    fn idle(&self) -> std::sync::MutexGuard<'_, Vec<Aligned>> {
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn take(&self) -> Aligned {
        if let Some(b) = self.idle().pop() {
            return b;
        }
        self.made.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Aligned::new()
    }

    fn give(&self, b: Aligned) {
        let mut idle = self.idle();
        if idle.len() < self.max {
            idle.push(b);
        }
    }

    /// Buffers allocated so far.
    pub fn made(&self) -> u64 {
        self.made.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Buffers idle now.
    pub fn idle_count(&self) -> usize {
        self.idle().len()
    }
}

/// A spool file being written (see the module's text).
pub struct Spool {
    file: File,
    buf: PoolBuf,
    /// Bytes in `buf`.
    fill: usize,
    /// Bytes written to the file so far (a multiple of [`ALIGN`] while `direct`).
    written: u64,
    direct: bool,
    /// The data of a frame too large for `buf` ([`Spool::frame_slot`]), and whether the last
    /// slot given was there.
    big: Vec<u8>,
    in_big: bool,
}

impl Spool {
    /// Creates `path` (which must not exist), with a buffer of its own.
    pub fn create(path: &Path) -> io::Result<Spool> {
        Self::create_in(path, BufPool::new(0))
    }

    /// Creates `path` (which must not exist), its buffer taken from `pool` (and given back when
    /// the spool is dropped).
    pub fn create_in(path: &Path, pool: Arc<BufPool>) -> io::Result<Spool> {
        let mut o = std::fs::OpenOptions::new();
        o.write(true).create_new(true);
        let (file, direct) = match o.clone().custom_flags(libc::O_DIRECT).open(path) {
            Ok(f) => (f, true),
            Err(e) if e.raw_os_error() == Some(libc::EINVAL) => (o.open(path)?, false),
            Err(e) => return Err(e),
        };
        Ok(Spool {
            file,
            buf: PoolBuf { b: Some(pool.take()), pool },
            fill: 0,
            written: 0,
            direct,
            big: Vec::new(),
            in_big: false,
        })
    }

    fn buf(&mut self) -> &mut [u8] {
        self.buf.slice()
    }

    /// Whether the file is written with `O_DIRECT`.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Bytes written so far (in the file and the buffer).
    pub fn len(&self) -> u64 {
        self.written + self.fill as u64
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Writes the first `n` bytes of the buffer (`n` a multiple of [`ALIGN`] while direct).
    fn write_buf(&mut self, n: usize) -> io::Result<()> {
        let mut off = 0;
        while off < n {
            let r = {
                let b = &self.buf.slice()[off..n];
                (&self.file).write(b)
            };
            match r {
                Ok(0) => return Err(io::Error::new(io::ErrorKind::WriteZero, "the spool file took no bytes")),
                Ok(k) => {
                    off += k;
                    self.written += k as u64;
                    if self.direct && k % ALIGN != 0 {
                        // A short direct write leaves the file at an unaligned end: go on buffered.
                        self.buffered()?;
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // The file system took the open but not the direct write: go on buffered.
                Err(e) if self.direct && e.raw_os_error() == Some(libc::EINVAL) => self.buffered()?,
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// Writes the buffer's whole blocks (all of it when not direct) and moves the rest (less
    /// than a block) to its start.
    fn drain(&mut self) -> io::Result<()> {
        let k = if self.direct { self.fill / ALIGN * ALIGN } else { self.fill };
        if k == 0 {
            return Ok(());
        }
        self.write_buf(k)?;
        let fill = self.fill;
        self.buf().copy_within(k..fill, 0);
        self.fill = fill - k;
        Ok(())
    }

    /// A place for the next frame of the pack: `len` bytes of data after room for its head,
    /// in the buffer itself (a frame too large for it: in a side buffer). The reader fills it;
    /// [`Spool::keep_frame`] keeps it, and the next slot overwrites a frame not kept.
    pub fn frame_slot(&mut self, len: usize) -> io::Result<&mut [u8]> {
        let n = FRAME_HEAD_LEN + len;
        self.in_big = n > BUF - ALIGN;
        if self.in_big {
            self.big.resize(len, 0);
            return Ok(&mut self.big[..]);
        }
        if BUF - self.fill < n {
            self.drain()?;
        }
        let at = self.fill + FRAME_HEAD_LEN;
        Ok(&mut self.buf()[at..at + len])
    }

    /// Keeps the frame of the last [`Spool::frame_slot`] (of `len` bytes) with its `head`.
    pub fn keep_frame(&mut self, head: &[u8; FRAME_HEAD_LEN], len: usize) -> io::Result<()> {
        if self.in_big {
            let big = std::mem::take(&mut self.big);
            let r = self.write_all(head).and_then(|_| self.write_all(&big[..len]));
            self.big = big;
            return r;
        }
        let at = self.fill;
        self.buf()[at..at + FRAME_HEAD_LEN].copy_from_slice(head);
        self.fill += FRAME_HEAD_LEN + len;
        if self.fill == BUF {
            self.write_buf(BUF)?;
            self.fill = 0;
        }
        Ok(())
    }

    /// Drops `O_DIRECT` from the file's flags (the rest goes through the page cache).
    fn buffered(&mut self) -> io::Result<()> {
        let fd = self.file.as_raw_fd();
        // SAFETY: fcntl on a file descriptor this value owns.
        let fl = unsafe { libc::fcntl(fd, libc::F_GETFL) };
        if fl < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_DIRECT) } < 0 {
            return Err(io::Error::last_os_error());
        }
        self.direct = false;
        Ok(())
    }

    /// Writes what is buffered and returns the file (not yet synced: the caller syncs it).
    pub fn finish(mut self) -> io::Result<File> {
        let n = self.fill;
        if n > 0 {
            if self.direct {
                // The tail padded with zeros to a whole block, then the file cut to its length.
                let padded = n.div_ceil(ALIGN) * ALIGN;
                self.buf()[n..padded].fill(0);
                let end = self.written + n as u64;
                self.write_buf(padded)?;
                self.file.set_len(end)?;
                self.written = end;
            } else {
                self.write_buf(n)?;
            }
            self.fill = 0;
        }
        Ok(self.file)
    }
}

/// A buffer of a [`BufPool`], given back when dropped.
struct PoolBuf {
    /// `Some` until dropped.
    b: Option<Aligned>,
    pool: Arc<BufPool>,
}

impl PoolBuf {
    fn slice(&mut self) -> &mut [u8] {
        self.b.as_mut().expect("a buffer until dropped").slice()
    }
}

impl Drop for PoolBuf {
    fn drop(&mut self) {
        if let Some(b) = self.b.take() {
            self.pool.give(b);
        }
    }
}

impl FrameSink for Spool {
    fn frame_buf(&mut self, len: usize) -> io::Result<&mut [u8]> {
        self.frame_slot(len)
    }
}

impl Write for Spool {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let k = data.len().min(BUF - self.fill);
        let at = self.fill;
        self.buf()[at..at + k].copy_from_slice(&data[..k]);
        self.fill += k;
        if self.fill == BUF {
            self.write_buf(BUF)?;
            self.fill = 0;
        }
        Ok(k)
    }

    fn flush(&mut self) -> io::Result<()> {
        // Whole buffers only: the tail is written by `finish`.
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(sizes: &[usize]) {
        check_in(&tempfile::tempdir().unwrap(), sizes);
    }

    fn check_in(dir: &tempfile::TempDir, sizes: &[usize]) {
        let p = dir.path().join("s.spool");
        let mut s = Spool::create(&p).unwrap();
        let mut want = Vec::new();
        let mut x = 7u8;
        for &n in sizes {
            let piece: Vec<u8> = (0..n)
                .map(|_| {
                    x = x.wrapping_mul(31).wrapping_add(11);
                    x
                })
                .collect();
            s.write_all(&piece).unwrap();
            want.extend_from_slice(&piece);
        }
        assert_eq!(s.len(), want.len() as u64);
        let f = s.finish().unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), want, "sizes {sizes:?}");
    }

    #[test]
    fn every_byte_arrives_whatever_the_sizes() {
        check(&[]);
        check(&[1]);
        check(&[ALIGN]);
        check(&[ALIGN + 1]);
        check(&[BUF]);
        check(&[BUF - 1, 2]);
        check(&[BUF, BUF, 17]);
        check(&[3 * BUF + 4095]);
        check(&[40, 8192, 70_000, BUF / 3, BUF / 2, 5, BUF + 9]);
    }

    /// tmpfs takes no O_DIRECT: the same bytes arrive through buffered writes.
    #[test]
    fn a_file_system_without_o_direct_gets_buffered_writes() {
        let Ok(dir) = tempfile::tempdir_in("/dev/shm") else { return };
        let s = Spool::create(&dir.path().join("probe")).unwrap();
        let direct = s.is_direct();
        drop(s);
        for sizes in [&[1usize][..], &[BUF + 1, 7], &[3 * ALIGN + 5]] {
            check_in(&dir, sizes);
            std::fs::remove_file(dir.path().join("s.spool")).unwrap();
        }
        eprintln!("/dev/shm: O_DIRECT {}", if direct { "taken" } else { "refused: buffered" });
    }

    /// Frames read into slots (some dropped, one larger than the buffer) between plain writes:
    /// the file holds the plain bytes and the kept frames with their heads, in order.
    fn check_frames_in(dir: &tempfile::TempDir, frames: &[(usize, bool)]) {
        let p = dir.path().join("f.spool");
        let mut s = Spool::create(&p).unwrap();
        let mut want = b"header".to_vec();
        s.write_all(&want).unwrap();
        for (i, &(n, keep)) in frames.iter().enumerate() {
            let data: Vec<u8> = (0..n).map(|k| (k * 7 + i) as u8).collect();
            s.frame_slot(n).unwrap().copy_from_slice(&data);
            if keep {
                let head = [i as u8; FRAME_HEAD_LEN];
                s.keep_frame(&head, n).unwrap();
                want.extend_from_slice(&head);
                want.extend_from_slice(&data);
            }
        }
        s.write_all(b"end").unwrap();
        want.extend_from_slice(b"end");
        assert_eq!(s.len(), want.len() as u64);
        let f = s.finish().unwrap();
        f.sync_all().unwrap();
        drop(f);
        assert_eq!(std::fs::read(&p).unwrap(), want, "frames {frames:?}");
        std::fs::remove_file(&p).unwrap();
    }

    #[test]
    fn frames_read_into_slots_arrive_with_their_heads() {
        let frames: Vec<(usize, bool)> = (0..700).map(|i| (1 + (i * 7919) % 20_000, i % 5 != 3)).collect();
        let mut dirs = vec![tempfile::tempdir().unwrap()];
        // Buffered writes too, where tmpfs refuses O_DIRECT.
        dirs.extend(tempfile::tempdir_in("/dev/shm").ok());
        for dir in &dirs {
            check_frames_in(dir, &frames);
            check_frames_in(dir, &[(BUF - FRAME_HEAD_LEN - 100, true), (BUF, false), (10, true), (BUF + 5, true), (3, true)]);
            check_frames_in(dir, &[(BUF - ALIGN - FRAME_HEAD_LEN, true), (BUF - ALIGN - FRAME_HEAD_LEN + 1, true), (1, false)]);
        }
    }

    /// Spools taken one after another from one pool share one buffer (allocated once), and a
    /// buffer taken again, full of the last spool's bytes, writes only the new spool's.
    #[test]
    fn a_pool_lends_one_buffer_again_and_its_old_bytes_never_reach_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let pool = BufPool::new(2);
        let mut files = Vec::new();
        for round in 0..4u8 {
            let p = dir.path().join(format!("p{round}.spool"));
            let mut s = Spool::create_in(&p, pool.clone()).unwrap();
            // A frame dropped (its slot filled, not kept), then a short file: the buffer's tail
            // beyond it holds old bytes.
            s.frame_slot(BUF / 2).unwrap().fill(0xA0 + round);
            let want = vec![round; 1000 + round as usize];
            s.write_all(&want).unwrap();
            let f = s.finish().unwrap();
            f.sync_all().unwrap();
            drop(f);
            assert_eq!(std::fs::read(&p).unwrap(), want, "round {round}");
            files.push(p);
        }
        assert_eq!(pool.made(), 1, "one buffer, lent four times");
        assert_eq!(pool.idle_count(), 1);
        // Two at once: two buffers, both kept idle (the pool's max); a third beyond it is freed.
        let a = Spool::create_in(&dir.path().join("a"), pool.clone()).unwrap();
        let b = Spool::create_in(&dir.path().join("b"), pool.clone()).unwrap();
        let c = Spool::create_in(&dir.path().join("c"), pool.clone()).unwrap();
        assert_eq!(pool.made(), 3);
        drop((a, b, c));
        assert_eq!(pool.idle_count(), 2);
    }

    #[test]
    fn a_file_that_exists_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("s.spool");
        std::fs::write(&p, b"x").unwrap();
        assert!(Spool::create(&p).is_err());
    }
}
