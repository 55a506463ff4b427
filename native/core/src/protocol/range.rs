//! The HTTP `Range` header of a restore and the plan of which recipe entries a range reads, as
//! pure functions (the store and the edge store's wasm use them; fuzzed with the other parsers).

use std::ops::Range;

/// A range past the end of a file of `len` bytes (416, `Content-Range: bytes */len`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Unsatisfiable {
    pub len: u64,
}

/// The byte range `header` asks of a file of `len` bytes: `Ok(None)` for the whole file (no
/// header, a header that is not a single `bytes=` range, which RFC 9110 lets a server ignore),
/// `Ok(Some(a..b))` for a satisfiable single range, `Err(Unsatisfiable)` (416) past the end.
pub fn parse_range(header: Option<&[u8]>, len: u64) -> Result<Option<Range<u64>>, Unsatisfiable> {
    let Some(h) = header else { return Ok(None) };
    let Ok(h) = std::str::from_utf8(h) else { return Ok(None) };
    let Some(spec) = h.trim().strip_prefix("bytes=") else { return Ok(None) };
    if spec.contains(',') {
        return Ok(None);
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Ok(None) };
    let num = |s: &str| -> Option<u64> {
        if s.is_empty() || s.len() > 19 || !s.bytes().all(|c| c.is_ascii_digit()) {
            None
        } else {
            s.parse().ok()
        }
    };
    let unsat = Err(Unsatisfiable { len });
    match (a.trim(), b.trim()) {
        ("", n) => {
            let Some(n) = num(n) else { return Ok(None) };
            if n == 0 || len == 0 {
                return unsat;
            }
            Ok(Some(len.saturating_sub(n)..len))
        }
        (a, "") => {
            let Some(a) = num(a) else { return Ok(None) };
            if a >= len {
                return unsat;
            }
            Ok(Some(a..len))
        }
        (a, b) => {
            let (Some(a), Some(b)) = (num(a), num(b)) else { return Ok(None) };
            if b < a {
                return Ok(None);
            }
            if a >= len {
                return unsat;
            }
            Ok(Some(a..(b.saturating_add(1)).min(len)))
        }
    }
}

/// Which entries of a recipe (their sizes, in file order) a byte `range` reads: the first
/// entry's index, the bytes to skip in it, and the entries' end index (exclusive). The
/// restore sends entry `first` from byte `skip`, then whole entries, and cuts the last one at
/// the range's end.
pub fn plan(sizes: impl IntoIterator<Item = u64>, range: Range<u64>) -> (usize, u64, usize) {
    let (mut first, mut skip, mut end) = (None, 0, 0);
    let mut at = 0u64;
    for (i, s) in sizes.into_iter().enumerate() {
        if at >= range.end {
            break;
        }
        if first.is_none() && at + s > range.start {
            first = Some(i);
            skip = range.start - at;
        }
        at += s;
        end = i + 1;
    }
    (first.unwrap_or(end), skip, end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plans() {
        let s = [10u64, 20, 30];
        assert_eq!(plan(s, 0..60), (0, 0, 3));
        assert_eq!(plan(s, 5..15), (0, 5, 2));
        assert_eq!(plan(s, 10..30), (1, 0, 2));
        assert_eq!(plan(s, 59..60), (2, 29, 3));
        assert_eq!(plan(s, 30..31), (2, 0, 3));
    }
}
