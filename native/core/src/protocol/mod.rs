//! The chunk store's wire format (protocol v1), shared by the server (`cutpoint-store`), the
//! native client and the WebAssembly build, so that there is one encoder and one parser:
//!
//! * [`pack`] — a pack: many chunks in one body, each framed with its length and fingerprint;
//! * [`query`] — the body of an existence query (fingerprints in, the missing ones out);
//! * [`name`] — what a namespace and a file name may be.
//!
//! File recipes (the body of a commit) are [`crate::rapid::Recipe`]s with a `digest` line.
//! Every parser here is a pure function over bytes or a reader, with no I/O of its own beyond
//! that reader, so a fuzz target can call it directly (`native/fuzz`).
//! The requests themselves are documented in `native/store/PROTOCOL.md`.

pub mod delta;
pub mod name;
pub mod pack;
pub mod query;

use std::fmt;

/// Why a body is not valid protocol.
#[derive(Debug)]
pub enum WireError {
    /// The body ended early (a cut connection, or a truncated body).
    Truncated(String),
    /// The body is malformed (bad magic, a bad frame, a fingerprint that does not match).
    Malformed(String),
    /// Reading the body failed.
    Io(std::io::Error),
}

impl WireError {
    pub(crate) fn malformed(m: impl Into<String>) -> WireError {
        WireError::Malformed(m.into())
    }
}

impl fmt::Display for WireError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            WireError::Truncated(m) => write!(f, "truncated: {m}"),
            WireError::Malformed(m) => write!(f, "{m}"),
            WireError::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

impl std::error::Error for WireError {}
