//! Recipes: the ordered list of a file's chunks (fingerprint, size), the hint source for a base
//! file (the paper's section 3.1).
//!
//! Text format, one record per line (UTF-8, `\n`):
//!
//! ```text
//! cutpoint-recipe 1
//! profile gear:2k:8k:64k
//! hash blake3
//! digest <64 hex digits>          (optional: the file digest, `protocol::FileDigest`)
//! <64 hex digits> <size> <last byte as 2 hex digits, or -> <r|h>
//! ...
//! end <chunk count> <total bytes>
//! ```
//!
//! The profile is the canonical string and the hash the fingerprint algorithm; a recipe is only
//! used with the same pair. The third field is the chunk's last byte (the FF+MT marker). The
//! fourth says how the chunk was cut: `r` by the boundary rule itself (regular CDC, or a hint
//! verified by FF+RWT+FPT), `h` by an unverified hint (FF, FF+MT, FF+RWT). Only `r` chunks can
//! satisfy the FF+RWT+FPT test (see [`crate::rapid`]). The `end` line guards against truncation.

use super::RapidChunk;
use crate::error::Error;
use crate::fingerprint::{hex, Digest, HashAlg};
use crate::profile::Profile;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;

/// Format version of the recipe text.
pub const RECIPE_VERSION: u32 = 1;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecipeEntry {
    pub fp: Digest,
    pub size: u32,
    /// Last byte of the chunk, when recorded.
    pub last: Option<u8>,
    /// Cut by the boundary rule (see the module docs).
    pub regular: bool,
}

impl RecipeEntry {
    /// The length of this entry's line in a recipe's text ([`Recipe::write`]): 64 hex digits,
    /// the size, the last byte (2 hex digits or `-`), `r`/`h`, three spaces and a newline.
    pub fn line_len(&self) -> u64 {
        let digits = self.size.checked_ilog10().unwrap_or(0) as u64 + 1;
        64 + 1 + digits + 1 + if self.last.is_some() { 2 } else { 1 } + 1 + 1 + 1
    }

    /// Appends this entry's line (with its newline), as [`Recipe::write`] writes it.
    pub fn write_line(&self, out: &mut String) {
        use std::fmt::Write as _;
        let _ = write!(out, "{} {} ", hex(&self.fp), self.size);
        match self.last {
            Some(b) => {
                let _ = write!(out, "{b:02x}");
            }
            None => out.push('-'),
        }
        out.push_str(if self.regular { " r\n" } else { " h\n" });
    }

    /// Parses a chunk line (without its newline); the error says what is wrong with it.
    pub fn parse_line(l: &str) -> Result<RecipeEntry, &'static str> {
        // Exactly four fields (no Vec: a part of 5,000 lines is parsed on every read of it).
        let mut it = l.split(' ');
        let f: [&str; 4] = match (it.next(), it.next(), it.next(), it.next(), it.next()) {
            (Some(a), Some(b), Some(c), Some(d), None) => [a, b, c, d],
            _ => return Err("expected '<fingerprint> <size> <last byte> <r|h>'"),
        };
        let fp = parse_hex(f[0]).ok_or("bad fingerprint (64 hex digits)")?;
        let size: u32 = f[1].parse().ok().filter(|&s| s > 0).ok_or("bad size")?;
        let last = match f[2] {
            "-" => None,
            s if s.len() == 2 => Some(u8::from_str_radix(s, 16).map_err(|_| "bad last byte")?),
            _ => return Err("bad last byte"),
        };
        let regular = match f[3] {
            "r" => true,
            "h" => false,
            _ => return Err("the fourth field must be r or h"),
        };
        Ok(RecipeEntry { fp, size, last, regular })
    }
}

/// The shortest line a recipe entry can have ([`RecipeEntry::line_len`]: a 1-digit size, no last byte).
pub const MIN_ENTRY_LINE: u64 = 70;

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// Canonical profile string.
    pub profile: String,
    pub hash: HashAlg,
    /// The file digest (`crate::protocol::FileDigest`, with [`Recipe::hash`]; a store's recipe carries it;
    /// a recipe saved for RapidCDC hints may not).
    pub digest: Option<Digest>,
    pub entries: Vec<RecipeEntry>,
}

impl Recipe {
    pub fn new(profile: &Profile, hash: HashAlg) -> Recipe {
        Recipe {
            profile: profile.to_string(),
            hash,
            digest: None,
            entries: Vec::new(),
        }
    }

    /// The recipe of a file chunked by RapidCDC (or regularly: chunks of
    /// [`super::Rapid::regular_chunks`]).
    pub fn from_chunks<'a>(
        profile: &Profile,
        hash: HashAlg,
        chunks: impl IntoIterator<Item = &'a RapidChunk>,
    ) -> Recipe {
        let mut r = Recipe::new(profile, hash);
        r.entries.extend(chunks.into_iter().map(|c| RecipeEntry {
            fp: c.hash,
            size: c.length as u32,
            last: Some(c.last),
            regular: c.regular,
        }));
        r
    }

    pub fn total_bytes(&self) -> u64 {
        self.entries.iter().map(|e| e.size as u64).sum()
    }

    pub fn write<W: Write>(&self, w: W) -> Result<(), Error> {
        let mut w = BufWriter::new(w);
        writeln!(w, "cutpoint-recipe {RECIPE_VERSION}")?;
        writeln!(w, "profile {}", self.profile)?;
        writeln!(w, "hash {}", self.hash.name())?;
        if let Some(d) = &self.digest {
            writeln!(w, "digest {}", hex(d))?;
        }
        for e in &self.entries {
            let last = match e.last {
                Some(b) => format!("{b:02x}"),
                None => "-".into(),
            };
            writeln!(
                w,
                "{} {} {} {}",
                hex(&e.fp),
                e.size,
                last,
                if e.regular { 'r' } else { 'h' }
            )?;
        }
        writeln!(w, "end {} {}", self.entries.len(), self.total_bytes())?;
        w.flush()?;
        Ok(())
    }

    pub fn write_file(&self, path: &Path) -> Result<(), Error> {
        let f = std::fs::File::create(path)?;
        self.write(&f)?;
        f.sync_all()?;
        Ok(())
    }

    /// Parses a recipe. Malformed or truncated input is an `InvalidData` I/O error naming the
    /// line; an unknown version is a configuration error.
    pub fn read<R: Read>(r: R) -> Result<Recipe, Error> {
        let mut lines = Lines {
            r: BufReader::new(r),
            n: 0,
            buf: Vec::new(),
        };
        // The header is checked as bytes: a binary file is "not a cutpoint recipe", not a
        // UTF-8 error, and a long file without newlines is not read whole.
        let first = lines.raw()?;
        let v = match first.as_deref().map(|l| l.strip_prefix(b"cutpoint-recipe ")) {
            Some(Some(v)) => std::str::from_utf8(v).map_err(|_| bad(1, "not a cutpoint recipe"))?.to_string(),
            Some(None) => return Err(bad(1, "not a cutpoint recipe")),
            None => return Err(bad(0, "truncated: expected the header (an empty file is not a cutpoint recipe)")),
        };
        let mut next = |what: &str| -> Result<(usize, String), Error> {
            match lines.text()? {
                Some(l) => Ok((lines.n, l)),
                None => Err(bad(0, &format!("truncated: expected {what}"))),
            }
        };
        if v != RECIPE_VERSION.to_string() {
            return Err(Error::config(format!(
                "recipe format version {v}; this build reads version {RECIPE_VERSION}"
            )));
        }
        let (n, l) = next("the profile")?;
        let p = l
            .strip_prefix("profile ")
            .ok_or_else(|| bad(n, "expected 'profile ...'"))?;
        let profile: Profile = p.parse()?;
        let (n, l) = next("the hash")?;
        let h = l.strip_prefix("hash ").ok_or_else(|| bad(n, "expected 'hash ...'"))?;
        let hash = HashAlg::parse(h)?;
        if hash == HashAlg::None {
            return Err(bad(n, "a recipe needs fingerprints"));
        }
        let mut entries = Vec::new();
        let mut digest = None;
        let mut first = true;
        loop {
            let (n, l) = next("more chunks or the 'end' line")?;
            if first {
                first = false;
                if let Some(d) = l.strip_prefix("digest ") {
                    digest = Some(parse_hex(d).ok_or_else(|| bad(n, "bad digest (64 hex digits)"))?);
                    continue;
                }
            }
            let f: Vec<&str> = l.split(' ').collect();
            if f[0] == "end" {
                let count: Option<usize> = f.get(1).and_then(|s| s.parse().ok());
                let bytes: Option<u64> = f.get(2).and_then(|s| s.parse().ok());
                let total: u64 = entries.iter().map(|e: &RecipeEntry| e.size as u64).sum();
                if f.len() != 3 || count != Some(entries.len()) || bytes != Some(total) {
                    return Err(bad(n, "the 'end' line does not match the chunks above it"));
                }
                break;
            }
            entries.push(RecipeEntry::parse_line(&l).map_err(|m| bad(n, m))?);
        }
        if lines.raw()?.is_some() {
            return Err(bad(lines.n, "text after the 'end' line"));
        }
        Ok(Recipe {
            profile: profile.to_string(),
            hash,
            digest,
            entries,
        })
    }

    /// Reads the recipe at `path`; every error message names the path once.
    pub fn read_file(path: &Path) -> Result<Recipe, Error> {
        std::fs::File::open(path).map_err(Error::Io).and_then(Recipe::read).map_err(|e| match e {
            Error::Io(io) => Error::Io(io::Error::new(io.kind(), format!("{}: {io}", path.display()))),
            Error::Config(m) => Error::Config(format!("{}: {m}", path.display())),
            Error::Profile(m) => Error::Profile(format!("{}: {m}", path.display())),
        })
    }
}

/// Longest line read: recipe lines are under 100 bytes but for the profile's.
const MAX_LINE: usize = 4096;

/// The lines of a recipe, numbered from 1, each at most [`MAX_LINE`] bytes, without the `\n`.
struct Lines<R: BufRead> {
    r: R,
    /// Number of the line last read.
    n: usize,
    buf: Vec<u8>,
}

impl<R: BufRead> Lines<R> {
    /// The next line as bytes, `None` at the end.
    fn raw(&mut self) -> Result<Option<Vec<u8>>, Error> {
        self.buf.clear();
        let got = (&mut self.r).take(MAX_LINE as u64 + 1).read_until(b'\n', &mut self.buf)?;
        if got == 0 {
            return Ok(None);
        }
        self.n += 1;
        if self.buf.last() == Some(&b'\n') {
            self.buf.pop();
            if self.buf.last() == Some(&b'\r') {
                return Err(bad(self.n, "ends with CR LF: recipe lines end with LF only"));
            }
        } else if self.buf.len() > MAX_LINE {
            let msg = if self.n == 1 { "not a cutpoint recipe" } else { "line too long" };
            return Err(bad(self.n, msg));
        }
        Ok(Some(std::mem::take(&mut self.buf)))
    }

    /// The next line as text.
    fn text(&mut self) -> Result<Option<String>, Error> {
        match self.raw()? {
            Some(b) => String::from_utf8(b).map(Some).map_err(|_| bad(self.n, "not UTF-8 text")),
            None => Ok(None),
        }
    }
}

fn bad(line: usize, msg: &str) -> Error {
    let m = if line > 0 {
        format!("recipe line {line}: {msg}")
    } else {
        format!("recipe {msg}")
    };
    Error::Io(io::Error::new(io::ErrorKind::InvalidData, m))
}

/// The digest written as 64 hex digits (either case), or `None`.
pub fn parse_hex(s: &str) -> Option<Digest> {
    if s.len() != 64 {
        return None;
    }
    fn nibble(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            b'A'..=b'F' => Some(c - b'A' + 10),
            _ => None,
        }
    }
    let mut d = [0u8; 32];
    let bytes = s.as_bytes();
    for (i, b) in d.iter_mut().enumerate() {
        *b = match (nibble(bytes[2 * i]), nibble(bytes[2 * i + 1])) {
            (Some(h), Some(l)) => h << 4 | l,
            // Anything else as `from_str_radix` has it (the same digests accepted as before).
            _ => u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?,
        };
    }
    Some(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_hex_accepts_what_from_str_radix_did() {
        let reference = |s: &str| -> Option<Digest> {
            if s.len() != 64 {
                return None;
            }
            let mut d = [0u8; 32];
            for (i, b) in d.iter_mut().enumerate() {
                *b = u8::from_str_radix(s.get(2 * i..2 * i + 2)?, 16).ok()?;
            }
            Some(d)
        };
        let good = crate::fingerprint::hex(&[0xa5; 32]);
        let mut cases = vec![good.clone(), good.to_uppercase(), "0123456789abcdefABCDEF".repeat(3)[..64].to_string()];
        for bad in ["+a", "g0", " 1", "-1", "é"] {
            cases.push(format!("{bad}{}", &good[bad.len()..]));
            cases.push(format!("{}{bad}", &good[..64 - bad.len()]));
        }
        cases.push(good[..62].to_string());
        for c in cases {
            assert_eq!(parse_hex(&c), reference(&c), "{c}");
        }
        assert_eq!(parse_hex(&good), Some([0xa5; 32]));
    }

    fn sample() -> Recipe {
        let p: Profile = "rabin:4k:8k:12k".parse().unwrap();
        let mut r = Recipe::new(&p, HashAlg::Sha256);
        for i in 0..5u32 {
            r.entries.push(RecipeEntry {
                fp: *blake3::hash(&i.to_le_bytes()).as_bytes(),
                size: 4096 + i,
                last: if i == 2 { None } else { Some(i as u8 * 50) },
                regular: i != 3,
            });
        }
        r
    }

    #[test]
    fn round_trip() {
        let r = sample();
        let mut buf = Vec::new();
        r.write(&mut buf).unwrap();
        let text = String::from_utf8(buf.clone()).unwrap();
        assert!(
            text.starts_with("cutpoint-recipe 1\nprofile rabin:4k:8k:12k\nhash sha256\n"),
            "{text}"
        );
        assert!(text.ends_with(&format!("end 5 {}\n", 5 * 4096 + 10)), "{text}");
        assert_eq!(Recipe::read(&buf[..]).unwrap(), r);
        // With the whole-file digest (a store's file recipe).
        let mut r2 = r.clone();
        r2.digest = Some([0xab; 32]);
        let mut buf2 = Vec::new();
        r2.write(&mut buf2).unwrap();
        let text2 = String::from_utf8(buf2.clone()).unwrap();
        assert!(text2.contains(&format!("\nhash sha256\ndigest {}\n", "ab".repeat(32))), "{text2}");
        assert_eq!(Recipe::read(&buf2[..]).unwrap(), r2);
        // A bad digest line is an error naming the line.
        let bad_text = text2.replace(&"ab".repeat(32), "xyz");
        let crlf = Recipe::read(&b"cutpoint-recipe 1\r\nprofile gear:2k:8k:64k\r\n"[..]).unwrap_err().to_string();
        assert!(crlf.contains("line 1") && crlf.contains("LF only"), "{crlf}");
        let e = Recipe::read(bad_text.as_bytes()).unwrap_err().to_string();
        assert!(e.contains("line 4") && e.contains("digest"), "{e}");
    }

    #[test]
    fn damage_is_an_error() {
        let mut buf = Vec::new();
        sample().write(&mut buf).unwrap();
        let text = String::from_utf8(buf).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        // Truncated: the end line is missing.
        let t = lines[..lines.len() - 1].join("\n");
        assert!(Recipe::read(t.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("truncated"));
        // A chunk line dropped: the end line no longer matches.
        let mut l2 = lines.clone();
        l2.remove(4);
        assert!(Recipe::read(l2.join("\n").as_bytes())
            .unwrap_err()
            .to_string()
            .contains("does not match"));
        // A bad flag.
        let t = text.replacen(" r\n", " x\n", 1);
        assert!(Recipe::read(t.as_bytes()).unwrap_err().to_string().contains("r or h"));
        // Another version.
        let t = text.replacen("cutpoint-recipe 1", "cutpoint-recipe 2", 1);
        assert!(Recipe::read(t.as_bytes())
            .unwrap_err()
            .to_string()
            .contains("version 2"));
        assert!(Recipe::read(&b"hello\n"[..]).is_err());
    }

    #[test]
    fn not_a_recipe_says_so() {
        // Issue #19: a binary file said "stream did not contain valid UTF-8".
        let binary: Vec<u8> = (0..300u32).map(|i| (i.wrapping_mul(2654435761) >> 13) as u8 | 0x80).collect();
        let long = vec![b'x'; 100_000]; // no newline at all: not read whole
        for (what, bytes) in [
            ("binary", &binary[..]),
            ("text", &b"hello\nworld\n"[..]),
            ("no newline", &long[..]),
            ("binary after a good prefix", &b"cutpoint-recipe \xff\xfe\n"[..]),
        ] {
            let e = Recipe::read(bytes).unwrap_err().to_string();
            assert!(e.ends_with("recipe line 1: not a cutpoint recipe"), "{what}: {e}");
        }
        let e = Recipe::read(&b""[..]).unwrap_err().to_string();
        assert!(e.contains("truncated") && e.contains("not a cutpoint recipe"), "{e}");
        // A later line that is not text names its line.
        let mut buf = Vec::new();
        sample().write(&mut buf).unwrap();
        let mut t = buf.clone();
        let at = t.iter().position(|&b| b == b'\n').unwrap() + 1;
        let at = at + t[at..].iter().position(|&b| b == b'\n').unwrap() + 1;
        let at = at + t[at..].iter().position(|&b| b == b'\n').unwrap() + 1; // line 4
        t[at] = 0xff;
        let e = Recipe::read(&t[..]).unwrap_err().to_string();
        assert!(e.ends_with("recipe line 4: not UTF-8 text"), "{e}");
        // The undamaged recipe still reads.
        assert_eq!(Recipe::read(&buf[..]).unwrap(), sample());
    }

    #[test]
    fn read_file_names_the_path_once() {
        // Issue #19: the CLI printed "cutpoint: r: r: recipe line 903: ...".
        let dir = std::env::temp_dir().join(format!("cutpoint-recipe-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("r");
        let mut buf = Vec::new();
        sample().write(&mut buf).unwrap();
        let end = buf.windows(4).rposition(|w| w == b"end ").unwrap();
        std::fs::write(&p, &buf[..end]).unwrap();
        let e = Recipe::read_file(&p).unwrap_err().to_string();
        let shown = p.display().to_string();
        assert_eq!(e.matches(&shown).count(), 1, "{e}");
        assert!(e.contains("truncated"), "{e}");
        let missing = dir.join("missing");
        let e = Recipe::read_file(&missing).unwrap_err().to_string();
        assert_eq!(e.matches(&missing.display().to_string()).count(), 1, "{e}");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
