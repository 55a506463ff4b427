//! One wire-format fuzz case, shared by the seeded loop of `cargo test` (`tests/parsers.rs`) and
//! the cargo-fuzz target `native/fuzz/fuzz_targets/wire.rs`: the first byte picks a parser, the
//! rest is its input. Every parser must return a value or an error — never panic, hang or
//! allocate without bound — and what it accepts must be consistent.

use cutpoint_core::protocol::{delta, pack, query};
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::HashAlg;
use cutpoint_store::range::parse_range;

/// A small base recipe that deltas are expanded against.
pub fn base() -> Recipe {
    Recipe {
        profile: "gear:2k:8k:64k".into(),
        hash: HashAlg::Blake3,
        digest: Some([1; 32]),
        entries: (0..8u8)
            .map(|i| RecipeEntry { fp: HashAlg::Blake3.digest(&[i]).unwrap(), size: 100 + i as u32, last: Some(i), regular: true })
            .collect(),
    }
}

pub fn check(input: &[u8]) -> Result<(), String> {
    let Some((&which, body)) = input.split_first() else { return Ok(()) };
    match which % 5 {
        0 => {
            // A pack: what verifies must be a frame list whose data hashes to the ids.
            if let Ok((alg, frames)) = pack::decode_pack(body, true) {
                for f in &frames {
                    let d = &body[f.offset as usize..f.offset as usize + f.len as usize];
                    if alg.digest(d) != Some(f.id) {
                        return Err(format!("accepted frame at {} does not hash to its id", f.offset));
                    }
                }
            }
        }
        1 => {
            // A delta: what parses and expands must match its own end line.
            if let Ok(d) = delta::parse(body) {
                if let Ok(r) = d.expand(&base()) {
                    if r.entries.len() as u64 != d.count || r.total_bytes() != d.bytes {
                        return Err("expanded delta disagrees with its end line".into());
                    }
                }
            }
        }
        2 => {
            if let Ok(ids) = query::decode_ids(body, query::MAX_QUERY_IDS) {
                if ids.len() * 32 != body.len() {
                    return Err("query ids do not cover the body".into());
                }
            }
        }
        3 => {
            // A recipe: one that parses writes back to a text that parses to the same recipe.
            if let Ok(r) = Recipe::read(body) {
                let mut t = Vec::new();
                r.write(&mut t).map_err(|e| e.to_string())?;
                if Recipe::read(&t[..]).map_err(|e| e.to_string())? != r {
                    return Err("recipe does not survive a write and a read".into());
                }
            }
        }
        _ => {
            // A Range header against a few lengths: a range given is inside the file.
            for len in [0u64, 1, 100, u64::MAX / 2] {
                if let Ok(Some(r)) = parse_range(Some(body), len) {
                    if !(r.start < r.end && r.end <= len) {
                        return Err(format!("range {r:?} for a file of {len} bytes"));
                    }
                }
            }
        }
    }
    Ok(())
}
