//! The store's errors; `routes` maps each kind to an HTTP status and a JSON body.

use cutpoint_core::protocol::WireError;
use cutpoint_core::{hex, Digest};
use std::fmt;

#[derive(Debug)]
pub enum StoreError {
    /// 400: a malformed request or body (the message says what).
    BadRequest(String),
    /// 401: no token, or an unknown one.
    Unauthorized(String),
    /// 403: a token of another namespace, or read-only where writing.
    Forbidden(String),
    /// 404
    NotFound(String),
    /// 409: a commit naming chunks the namespace lacks (or that another commit won).
    Missing { message: String, missing: Vec<Digest> },
    /// 409 `missing_parts`: a commit naming recipe parts the namespace lacks.
    MissingParts { message: String, missing: Vec<Digest> },
    /// 413: a body over its limit.
    TooLarge(String),
    /// 413 `too_many_entries`: a commit whose expanded entries (its part lines' COUNTs and
    /// its chunk lines) are over `max_commit_entries`.
    TooManyEntries(String),
    /// 416: a range past the end.
    Range { len: u64 },
    /// 500: the store failed (storage, index). Its message stays in the server's log; the
    /// client gets a reference to it (it may name server paths).
    Internal(String),
    /// 500 `damaged`: a stored object (a recipe) is unreadable; the message names the file and
    /// version, never a server path.
    Damaged(String),
    /// 503: try again later (a gc holds the namespace's lock in a shared bucket).
    Busy(String),
}

pub type Result<T> = std::result::Result<T, StoreError>;

impl StoreError {
    pub fn internal(e: impl fmt::Display) -> StoreError {
        StoreError::Internal(e.to_string())
    }
    pub fn bad(e: impl fmt::Display) -> StoreError {
        StoreError::BadRequest(e.to_string())
    }
    pub fn status(&self) -> u16 {
        match self {
            StoreError::BadRequest(_) => 400,
            StoreError::Unauthorized(_) => 401,
            StoreError::Forbidden(_) => 403,
            StoreError::NotFound(_) => 404,
            StoreError::Missing { .. } | StoreError::MissingParts { .. } => 409,
            StoreError::TooLarge(_) | StoreError::TooManyEntries(_) => 413,
            StoreError::Range { .. } => 416,
            StoreError::Internal(_) | StoreError::Damaged(_) => 500,
            StoreError::Busy(_) => 503,
        }
    }
    /// A stable word for the kind (the `code` field of a JSON error).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::BadRequest(_) => "bad_request",
            StoreError::Unauthorized(_) => "unauthorized",
            StoreError::Forbidden(_) => "forbidden",
            StoreError::NotFound(_) => "not_found",
            StoreError::Missing { .. } => "missing_chunks",
            StoreError::MissingParts { .. } => "missing_parts",
            StoreError::TooLarge(_) => "too_large",
            StoreError::TooManyEntries(_) => "too_many_entries",
            StoreError::Range { .. } => "range_not_satisfiable",
            StoreError::Internal(_) => "internal",
            StoreError::Damaged(_) => "damaged",
            StoreError::Busy(_) => "busy",
        }
    }
    /// The JSON body of the error. An internal error's text is logged (stderr) under a
    /// reference and only the reference is sent: such a text may name the server's paths.
    pub fn to_json(&self) -> serde_json::Value {
        let text = match self {
            StoreError::Internal(m) => {
                use std::sync::atomic::{AtomicU64, Ordering};
                static N: AtomicU64 = AtomicU64::new(1);
                let r = N.fetch_add(1, Ordering::Relaxed);
                eprintln!("cutpoint serve: internal error #{r}: {m}");
                format!("the store failed (internal error #{r}; its log has the details)")
            }
            other => other.to_string(),
        };
        let mut v = serde_json::json!({ "error": text, "code": self.code() });
        if let StoreError::Missing { missing, .. } = self {
            v["missing"] = missing.iter().map(|d| serde_json::Value::String(hex(d))).collect();
        }
        if let StoreError::MissingParts { missing, .. } = self {
            v["missing_parts"] = missing.iter().map(|d| serde_json::Value::String(hex(d))).collect();
        }
        v
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::BadRequest(m)
            | StoreError::Unauthorized(m)
            | StoreError::Forbidden(m)
            | StoreError::NotFound(m)
            | StoreError::TooLarge(m)
            | StoreError::TooManyEntries(m)
            | StoreError::Internal(m)
            | StoreError::Damaged(m)
            | StoreError::Busy(m) => f.write_str(m),
            StoreError::Missing { message, .. } | StoreError::MissingParts { message, .. } => f.write_str(message),
            StoreError::Range { len } => write!(f, "the range is past the end of the file ({len} bytes)"),
        }
    }
}

impl std::error::Error for StoreError {}

impl From<WireError> for StoreError {
    fn from(e: WireError) -> StoreError {
        match e {
            WireError::Io(io) => StoreError::BadRequest(format!("reading the body failed: {io}")),
            other => StoreError::BadRequest(other.to_string()),
        }
    }
}

impl From<rusqlite::Error> for StoreError {
    fn from(e: rusqlite::Error) -> StoreError {
        StoreError::Internal(format!("index: {e}"))
    }
}

impl From<object_store::Error> for StoreError {
    fn from(e: object_store::Error) -> StoreError {
        match e {
            object_store::Error::NotFound { path, .. } => StoreError::NotFound(format!("no object {path}")),
            e => StoreError::Internal(format!("object store: {e}")),
        }
    }
}

impl From<std::io::Error> for StoreError {
    fn from(e: std::io::Error) -> StoreError {
        StoreError::Internal(format!("I/O: {e}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn an_internal_error_sends_no_server_path() {
        let e = StoreError::Internal("I/O: /srv/secret/data/objects/ns/a/x: File name too long (os error 36)".into());
        let v = e.to_json();
        let msg = v["error"].as_str().unwrap();
        assert!(!msg.contains("/srv/secret"), "{msg}");
        assert!(msg.contains("internal error #"), "{msg}");
        assert_eq!(v["code"], "internal");
        let d = StoreError::Damaged("the stored recipe of 'a' v2 in namespace 'n' is damaged: x".into());
        assert_eq!(d.status(), 500);
        assert_eq!(d.to_json()["code"], "damaged");
        assert!(d.to_json()["error"].as_str().unwrap().contains("'a' v2"));
    }
}
