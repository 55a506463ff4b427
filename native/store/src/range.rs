//! The HTTP `Range` header of a restore, as a pure function (fuzzed with the other parsers).

use crate::error::{Result, StoreError};
use std::ops::Range;

/// The byte range `header` asks of a file of `len` bytes: `Ok(None)` for the whole file (no
/// header, a header that is not a single `bytes=` range, which RFC 9110 lets a server ignore),
/// `Ok(Some(a..b))` for a satisfiable single range, `Err(Range)` (416) past the end.
pub fn parse_range(header: Option<&[u8]>, len: u64) -> Result<Option<Range<u64>>> {
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
    let unsat = Err(StoreError::Range { len });
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

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn ranges() {
        let p = |h: &str, len| parse_range(Some(h.as_bytes()), len).map_err(|e| e.status());
        assert_eq!(parse_range(None, 10).unwrap(), None);
        assert_eq!(p("bytes=0-0", 10), Ok(Some(0..1)));
        assert_eq!(p("bytes=2-5", 10), Ok(Some(2..6)));
        assert_eq!(p("bytes=2-", 10), Ok(Some(2..10)));
        assert_eq!(p("bytes=-3", 10), Ok(Some(7..10)));
        assert_eq!(p("bytes=-30", 10), Ok(Some(0..10)));
        assert_eq!(p("bytes=5-100", 10), Ok(Some(5..10)));
        assert_eq!(p("bytes=10-", 10), Err(416));
        assert_eq!(p("bytes=10-20", 10), Err(416));
        assert_eq!(p("bytes=-0", 10), Err(416));
        assert_eq!(p("bytes=0-", 0), Err(416));
        // Not a single byte range: ignored (the whole file).
        assert_eq!(p("bytes=0-1,3-4", 10), Ok(None));
        assert_eq!(p("items=0-1", 10), Ok(None));
        assert_eq!(p("bytes=x-1", 10), Ok(None));
        assert_eq!(p("bytes=5-2", 10), Ok(None));
        assert_eq!(p("bytes=99999999999999999999999-", 10), Ok(None));
        assert_eq!(parse_range(Some(&[0xff, 0xfe]), 10).unwrap(), None);
    }
}
