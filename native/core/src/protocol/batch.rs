//! The body of a batch commit (`POST /v1/ns/{ns}/commits`, PROTOCOL.md §4.14): many commit
//! bodies, each under its file's name.
//!
//! ```text
//! batch = "cutpoint-batch 1" LF
//!         *( "file " NAME-PCT " " LENGTH LF BODY )   ; BODY: LENGTH bytes, a commit body (4.4)
//!         "end " COUNT LF
//! ```
//!
//! NAME-PCT is the name as one URL path segment ([`super::name::encode_segment`]); the parser
//! decodes it (any `%XX`, other bytes as they are, but no space, control character or `%` not
//! followed by two hex digits) and leaves checking the name to the commit of that file.

use super::name::encode_segment;
use super::WireError;
use std::ops::Range;

pub const MAGIC: &[u8] = b"cutpoint-batch 1\n";
/// Most files in one batch (`limits.max_batch_files` of `GET /v1`).
pub const MAX_BATCH_FILES: usize = 4096;

/// A batch body being built.
pub struct BatchWriter {
    buf: Vec<u8>,
    count: usize,
}

impl Default for BatchWriter {
    fn default() -> Self {
        Self::new()
    }
}

impl BatchWriter {
    pub fn new() -> BatchWriter {
        BatchWriter {
            buf: MAGIC.to_vec(),
            count: 0,
        }
    }

    /// Adds one file's commit body.
    pub fn add(&mut self, name: &str, body: &[u8]) {
        self.buf.extend_from_slice(format!("file {} {}\n", encode_segment(name), body.len()).as_bytes());
        self.buf.extend_from_slice(body);
        self.count += 1;
    }

    /// Files added so far.
    pub fn count(&self) -> usize {
        self.count
    }

    /// The body's length so far.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }
    /// The finished body's length with one more file of `name` and `body_len` bytes: what a
    /// client compares with `max_recipe_bytes`.
    pub fn len_with(&self, name: &str, body_len: usize) -> usize {
        self.buf.len() + format!("file {} {}\n", encode_segment(name), body_len).len() + body_len + format!("end {}\n", self.count + 1).len()
    }

    pub fn finish(mut self) -> Vec<u8> {
        self.buf.extend_from_slice(format!("end {}\n", self.count).as_bytes());
        self.buf
    }
}

/// Why a batch body was refused: malformed (400) or over `max_files` (413).
#[derive(Debug)]
pub enum BatchError {
    Malformed(String),
    TooMany(usize),
}

impl std::fmt::Display for BatchError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BatchError::Malformed(m) => write!(f, "batch: {m}"),
            BatchError::TooMany(max) => write!(f, "batch: more than {max} files"),
        }
    }
}

impl From<BatchError> for WireError {
    fn from(e: BatchError) -> WireError {
        WireError::Malformed(e.to_string())
    }
}

/// Parses a whole batch body: each file's decoded name and the range of its body within
/// `body`. Nothing after the end line is allowed.
pub fn parse(body: &[u8], max_files: usize) -> Result<Vec<(String, Range<usize>)>, BatchError> {
    let bad = |m: String| BatchError::Malformed(m);
    if !body.starts_with(MAGIC) {
        return Err(bad("the body does not start with 'cutpoint-batch 1' and a line feed".into()));
    }
    let mut at = MAGIC.len();
    let mut files = Vec::new();
    loop {
        let nl = body[at..]
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| bad(format!("line at byte {at}: no line feed (the body ends without its 'end' line)")))?;
        let line = &body[at..at + nl];
        let line_at = at;
        at += nl + 1;
        if let Some(rest) = line.strip_prefix(b"end ") {
            let count = number(rest).ok_or_else(|| bad(format!("line at byte {line_at}: a bad count in the 'end' line")))?;
            if count != files.len() as u64 {
                return Err(bad(format!("the 'end' line counts {count} files; the body has {}", files.len())));
            }
            if at != body.len() {
                return Err(bad(format!("{} bytes after the 'end' line", body.len() - at)));
            }
            return Ok(files);
        }
        let rest = line
            .strip_prefix(b"file ")
            .ok_or_else(|| bad(format!("line at byte {line_at}: expected 'file NAME LENGTH' or 'end COUNT'")))?;
        let sp = rest
            .iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| bad(format!("line at byte {line_at}: expected 'file NAME LENGTH'")))?;
        let name = decode_name(&rest[..sp]).map_err(|m| bad(format!("line at byte {line_at}: {m}")))?;
        let len = number(&rest[sp + 1..]).ok_or_else(|| bad(format!("line at byte {line_at}: a bad length")))?;
        if len > (body.len() - at) as u64 {
            return Err(bad(format!("line at byte {line_at}: a body of {len} bytes, {} left", body.len() - at)));
        }
        if files.len() == max_files {
            return Err(BatchError::TooMany(max_files));
        }
        let end = at + len as usize;
        files.push((name, at..end));
        at = end;
    }
}

/// A decimal number without sign or leading zeros.
fn number(s: &[u8]) -> Option<u64> {
    if s.is_empty() || s.len() > 19 || (s.len() > 1 && s[0] == b'0') || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    std::str::from_utf8(s).ok()?.parse().ok()
}

/// A percent-encoded name, decoded.
fn decode_name(s: &[u8]) -> Result<String, String> {
    if s.is_empty() {
        return Err("an empty name".into());
    }
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        if b == b'%' {
            let h = s.get(i + 1..i + 3).and_then(|h| std::str::from_utf8(h).ok()).and_then(|h| u8::from_str_radix(h, 16).ok());
            match h {
                Some(v) if s[i + 1].is_ascii_hexdigit() && s[i + 2].is_ascii_hexdigit() => out.push(v),
                _ => return Err("a '%' not followed by two hex digits in the name".into()),
            }
            i += 3;
        } else if b <= b' ' || b == 0x7f {
            return Err("a space or control byte in the name (percent-encode it)".into());
        } else {
            out.push(b);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| "the decoded name is not UTF-8".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_names_and_bodies() {
        let mut w = BatchWriter::new();
        w.add("a b/c%d", b"x\ny");
        w.add("é", b"");
        let body = w.finish();
        let mut w1 = BatchWriter::new();
        let want = w1.len_with("a b", 7);
        w1.add("a b", b"1234567");
        assert_eq!(w1.finish().len(), want);
        let files = parse(&body, 10).unwrap();
        assert_eq!(files.len(), 2);
        assert_eq!(files[0].0, "a b/c%d");
        assert_eq!(&body[files[0].1.clone()], b"x\ny");
        assert_eq!(files[1].0, "é");
        assert!(files[1].1.is_empty());
    }

    #[test]
    fn refuses_bad_framing() {
        for b in [
            &b""[..],
            b"cutpoint-batch 2\nend 0\n",
            b"cutpoint-batch 1\n",
            b"cutpoint-batch 1\nend 1\n",
            b"cutpoint-batch 1\nend 0\nx",
            b"cutpoint-batch 1\nend 00\n",
            b"cutpoint-batch 1\nfile a 5\nab\nend 1\n",
            b"cutpoint-batch 1\nfile a%2 1\nx\nend 1\n",
            b"cutpoint-batch 1\nfile a\tb 1\nx\nend 1\n",
            b"cutpoint-batch 1\nfile a 01\nx\nend 1\n",
            b"cutpoint-batch 1\nfile a -1\nend 1\n",
            b"cutpoint-batch 1\nfile %FF 1\nx\nend 1\n",
            b"cutpoint-batch 1\nfile a 1\nxyend 1\n",
        ] {
            assert!(matches!(parse(b, 10), Err(BatchError::Malformed(_))), "{:?}", String::from_utf8_lossy(b));
        }
        assert!(parse(b"cutpoint-batch 1\nend 0\n", 10).unwrap().is_empty());
    }

    #[test]
    fn more_files_than_the_limit_is_too_many() {
        let mut w = BatchWriter::new();
        for i in 0..3 {
            w.add(&format!("f{i}"), b"");
        }
        assert!(matches!(parse(&w.finish(), 2), Err(BatchError::TooMany(2))));
    }
}
