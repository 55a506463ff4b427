//! Namespaces and file names.
//!
//! * A namespace is 1..=64 ASCII letters, digits, `.`, `_` or `-`, not starting with `.`.
//! * A file name is 1..=255 bytes of UTF-8 without control characters; `/` is allowed (names
//!   may look like paths), but not an empty, `.` or `..` segment, nor a leading `/`. The store
//!   never uses a name as a path (it keys recipes by the name's hex), and a client that derives
//!   an output file from a name takes its last segment.

use super::WireError;

pub const MAX_NAMESPACE: usize = 64;
pub const MAX_NAME: usize = 255;

pub fn validate_namespace(ns: &str) -> Result<(), WireError> {
    let ok = !ns.is_empty()
        && ns.len() <= MAX_NAMESPACE
        && !ns.starts_with('.')
        && ns.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-');
    if ok {
        Ok(())
    } else {
        Err(WireError::malformed(format!(
            "invalid namespace {ns:?}: 1 to {MAX_NAMESPACE} of A-Z a-z 0-9 . _ -, not starting with '.'"
        )))
    }
}

pub fn validate_name(name: &str) -> Result<(), WireError> {
    let why = if name.is_empty() {
        Some("it is empty")
    } else if name.len() > MAX_NAME {
        Some("it is longer than 255 bytes")
    } else if name.chars().any(|c| c.is_control()) {
        Some("it holds a control character")
    } else if name.starts_with('/') {
        Some("it starts with '/'")
    } else if name.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
        Some("it has an empty, '.' or '..' segment")
    } else {
        None
    };
    match why {
        None => Ok(()),
        Some(w) => Err(WireError::malformed(format!("invalid file name {name:?}: {w}"))),
    }
}

/// A name (or any text) as one URL path segment: every byte but `A-Z a-z 0-9 - . _ ~`
/// percent-encoded, `/` included (RFC 3986 unreserved characters), as clients send names.
pub fn encode_segment(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Hex digits of a name in one segment of its key: 254, so that a segment with its `-` mark
/// is 255 bytes, the longest file name of common file systems (ext4, XFS, APFS, NTFS).
pub const KEY_SEGMENT_HEX: usize = 254;

/// How the store keys a name: the lower-case hex of its bytes, cut into `/`-separated segments
/// of [`KEY_SEGMENT_HEX`] digits, every segment but the last marked with a trailing `-` (a
/// name of up to 127 bytes is one segment, as before). A segment is then never longer than
/// 255 bytes, for every valid name (255 bytes: 510 digits, three segments), and the key of a
/// name is never a directory of another name's key (a `-` segment is never a last one).
pub fn name_key(name: &str) -> String {
    let hex: String = name.bytes().map(|b| format!("{b:02x}")).collect();
    let mut out = String::with_capacity(hex.len() + hex.len() / KEY_SEGMENT_HEX * 2);
    let mut rest = hex.as_str();
    while rest.len() > KEY_SEGMENT_HEX {
        out.push_str(&rest[..KEY_SEGMENT_HEX]);
        out.push_str("-/");
        rest = &rest[KEY_SEGMENT_HEX..];
    }
    out.push_str(rest);
    out
}

/// The inverse of [`name_key`] (`None` for any other text).
pub fn name_from_key(key: &str) -> Option<String> {
    let segs: Vec<&str> = key.split('/').collect();
    let mut hex = String::with_capacity(key.len());
    for (i, seg) in segs.iter().enumerate() {
        let digits = if i + 1 < segs.len() {
            seg.strip_suffix('-').filter(|d| d.len() == KEY_SEGMENT_HEX)?
        } else {
            Some(*seg).filter(|d| !d.is_empty() && d.len() <= KEY_SEGMENT_HEX)?
        };
        hex.push_str(digits);
    }
    if hex.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..hex.len())
        .step_by(2)
        .map(|i| {
            let d = hex.get(i..i + 2)?;
            // Lower-case digits only: one key per name.
            if d.bytes().any(|b| b.is_ascii_uppercase()) {
                return None;
            }
            u8::from_str_radix(d, 16).ok()
        })
        .collect();
    String::from_utf8(bytes?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn names() {
        for ok in ["a", "dir/file.bin", "ünï cödé", &"x".repeat(255)] {
            validate_name(ok).unwrap();
            assert_eq!(name_from_key(&name_key(ok)).as_deref(), Some(ok));
        }
        for bad in ["", "/etc/passwd", "a/../b", "..", "a//b", "a/", "tab\there", &"x".repeat(256)] {
            assert!(validate_name(bad).is_err(), "{bad:?}");
        }
        for ok in ["default", "team-1", "a.b_c"] {
            validate_namespace(ok).unwrap();
        }
        for bad in ["", ".hidden", "a/b", "sp ace", &"n".repeat(65)] {
            assert!(validate_namespace(bad).is_err(), "{bad:?}");
        }
        assert_eq!(name_from_key("zz"), None);
        // Every segment of a key fits a file name (255 bytes), whatever the name's length.
        for n in [1, 126, 127, 128, 200, 254, 255] {
            let name = "é".repeat(n / 2) + &"y".repeat(n % 2);
            let k = name_key(&name);
            assert!(k.split('/').all(|s| s.len() <= 255), "{n}: {k}");
            assert_eq!(name_from_key(&k).as_deref(), Some(name.as_str()), "{n}");
        }
        assert_eq!(name_key(&"a".repeat(127)), "61".repeat(127), "short names keep their one-segment key");
        assert_eq!(name_key(&"a".repeat(128)), format!("{}-/61", "61".repeat(127)));
        // Not keys: an unmarked inner segment, a marked last one, a short inner one, upper case.
        for bad in [format!("{}/61", "61".repeat(127)), format!("{}-", "61".repeat(127)), "61-/61".to_string(), "6A".to_string(), String::new()] {
            assert_eq!(name_from_key(&bad), None, "{bad}");
        }
        assert_eq!(encode_segment("dir/a b~ü"), "dir%2Fa%20b~%C3%BC");
    }
}
