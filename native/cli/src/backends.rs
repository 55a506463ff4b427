//! `cutpoint backends`: the stage-1 backends this CPU supports, the one chosen by default, and
//! per family the kernel dispatch measured fastest (with the figures) or the one forced; for
//! gear also the skip-MIN engine's figure and whether engines use it.

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
    if let Some(e) = bad_env {
        return Err(Fail::usage(format!(
            "{e}; every other command refuses to run until it is corrected or unset (* marks the default without it)"
        )));
    }
    // Per family: what dispatch uses and why (forced, or the figures it measured).
    let forced = std::env::var("CUTPOINT_BACKEND").ok().filter(|v| !v.trim().is_empty());
    println!("per family (stage-1 GB/s measured at first use, best of runs; * = chosen):");
    for f in [cutpoint_core::Family::Crc32, cutpoint_core::Family::Rabin, cutpoint_core::Family::Gear] {
        let used = backend::detect_for(f).map_err(|e| Fail::usage(e.to_string()))?;
        if let Some(v) = &forced {
            println!("  {:<6} {:<12} forced by CUTPOINT_BACKEND={v}", f.name(), used.name());
            continue;
        }
        let c = backend::calibration(f);
        let figs: Vec<String> = c
            .figures
            .iter()
            .map(|(b, g)| format!("{}{} {g:.2}", if *b == used { "*" } else { "" }, b.name()))
            .collect();
        let why = if figs.is_empty() { "preference order (nothing timed here)".to_string() } else { figs.join(", ") };
        println!("  {:<6} {:<12} {why}  [{}, {} KiB x {}]", f.name(), used.name(), c.profile, c.bytes >> 10, c.runs);
        // gear: the skip-MIN engine (whole chunking, one chain that skips MIN after each cut),
        // which replaces stage 1 + stage 2 when it measured faster.
        if let Some(g) = c.skip_min {
            let verdict = if c.skip_min_chosen {
                format!("used by default (faster than {}'s stage 1 alone)", used.name())
            } else {
                format!("not used ({}'s stage 1 is as fast)", used.name())
            };
            println!("  {:<6} {:<12} skip-min {g:.2}: {verdict}", "", "");
        }
    }
    Ok(())
}
