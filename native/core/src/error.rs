//! Errors. Library code never prints or panics on bad input; it returns these.

use std::fmt;

#[derive(Debug)]
pub enum Error {
    /// A profile string or profile parameters are invalid.
    Profile(String),
    /// An engine option (threads, segment size, backend, ...) is invalid.
    Config(String),
    /// Reading the input failed.
    Io(std::io::Error),
}

impl Error {
    pub(crate) fn profile(msg: impl Into<String>) -> Error {
        Error::Profile(msg.into())
    }
    pub(crate) fn config(msg: impl Into<String>) -> Error {
        Error::Config(msg.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Profile(m) => write!(f, "invalid profile: {m}"),
            Error::Config(m) => write!(f, "invalid option: {m}"),
            Error::Io(e) => write!(f, "read error: {e}"),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io(e) => Some(e),
            _ => None,
        }
    }
}

impl From<std::io::Error> for Error {
    fn from(e: std::io::Error) -> Self {
        Error::Io(e)
    }
}
