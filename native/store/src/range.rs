//! The HTTP `Range` header of a restore (the parser lives in the core:
//! `cutpoint_core::protocol::range`, used by the edge store too).

use crate::error::{Result, StoreError};
use std::ops::Range;

/// The byte range `header` asks of a file of `len` bytes: `Ok(None)` for the whole file,
/// `Ok(Some(a..b))` for a satisfiable single range, `Err(Range)` (416) past the end.
pub fn parse_range(header: Option<&[u8]>, len: u64) -> Result<Option<Range<u64>>> {
    cutpoint_core::protocol::range::parse_range(header, len).map_err(|u| StoreError::Range { len: u.len })
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
