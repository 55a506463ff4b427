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

/// Lower-case hex of a name's bytes (how the store keys it).
pub fn name_key(name: &str) -> String {
    name.bytes().map(|b| format!("{b:02x}")).collect()
}

/// The inverse of [`name_key`].
pub fn name_from_key(key: &str) -> Option<String> {
    if key.len() % 2 != 0 {
        return None;
    }
    let bytes: Option<Vec<u8>> = (0..key.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(key.get(i..i + 2)?, 16).ok())
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
        assert_eq!(encode_segment("dir/a b~ü"), "dir%2Fa%20b~%C3%BC");
    }
}
