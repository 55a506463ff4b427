//! Existence queries: the request body is fingerprints back to back (32 bytes each, at most
//! [`MAX_QUERY_IDS`]); the answer is the ones the namespace lacks, in the same encoding and order.

use super::WireError;
use crate::fingerprint::Digest;

/// The most fingerprints one query may carry (512 KiB of body).
pub const MAX_QUERY_IDS: usize = 16384;

pub fn encode_ids<'a>(ids: impl IntoIterator<Item = &'a Digest>) -> Vec<u8> {
    let mut out = Vec::new();
    for id in ids {
        out.extend_from_slice(id);
    }
    out
}

pub fn decode_ids(body: &[u8], max: usize) -> Result<Vec<Digest>, WireError> {
    if body.len() % 32 != 0 {
        return Err(WireError::malformed(format!(
            "a list of fingerprints is a multiple of 32 bytes; this body has {}",
            body.len()
        )));
    }
    let n = body.len() / 32;
    if n > max {
        return Err(WireError::malformed(format!("{n} fingerprints in one request; the limit is {max}")));
    }
    Ok(body.chunks_exact(32).map(|c| c.try_into().unwrap()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn round_trip_and_errors() {
        let ids = [[1u8; 32], [2u8; 32]];
        let b = encode_ids(&ids);
        assert_eq!(decode_ids(&b, 10).unwrap(), ids.to_vec());
        assert!(decode_ids(&b[..33], 10).unwrap_err().to_string().contains("multiple of 32"));
        assert!(decode_ids(&b, 1).unwrap_err().to_string().contains("limit is 1"));
        assert!(decode_ids(&[], 10).unwrap().is_empty());
    }
}
