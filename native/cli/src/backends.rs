//! `cutpoint backends`: the stage-1 backends this CPU supports and the one chosen by default.

use super::common::Fail;
use cutpoint_core::{backend, Profile};

pub fn run() -> Result<(), Fail> {
    // An invalid CUTPOINT_BACKEND does not stop the listing (it is how one finds a valid name);
    // it is reported after it, and the exit code is 2 as for any invalid option.
    let bad_env = match backend::env_override() {
        Some(Err(e)) => Some(e),
        _ => None,
    };
    let active = match &bad_env {
        Some(_) => backend::fastest(Profile::default_profile().family),
        None => backend::detect().map_err(|e| Fail::usage(e.to_string()))?,
    };
    for b in backend::ALL {
        let mark = if b == active { "*" } else { " " };
        let status = if b.is_supported() { "available" } else { "not supported on this CPU" };
        println!("{mark} {:<12} {status}", b.name());
    }
    match bad_env {
        Some(e) => Err(Fail::usage(format!(
            "{e}; every other command refuses to run until it is corrected or unset (* marks the default without it)"
        ))),
        None => Ok(()),
    }
}
