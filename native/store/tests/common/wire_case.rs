//! One wire-format fuzz case, shared by the seeded loop of `cargo test` (`tests/parsers.rs`) and
//! the cargo-fuzz target `native/fuzz/fuzz_targets/wire.rs`: the first byte picks a parser, the
//! rest is its input. Every parser must return a value or an error — never panic, hang or
//! allocate without bound — and what it accepts must be consistent.

use cutpoint_core::protocol::name::{encode_segment, name_from_key, name_key, validate_name, validate_namespace};
use cutpoint_core::protocol::{delta, pack, query};
use cutpoint_core::rapid::{Recipe, RecipeEntry};
use cutpoint_core::HashAlg;
use cutpoint_store::auth::{authorize, Scope, Tokens};
use cutpoint_store::range::parse_range;

/// The token the fixed tokens file of the `Authorization` case grants (`rw` on namespace `a`).
pub const TOKEN: &str = "cpt_0123456789abcdef";

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
    match which % 7 {
        0 => {
            // A pack: what verifies must be a frame list whose raw data (a compressed frame's
            // decompressed bytes, exactly its raw length) hashes to the ids.
            if let Ok((alg, frames)) = pack::decode_pack(body, true) {
                for f in &frames {
                    let d = raw_of(body, f)?;
                    if alg.digest(&d) != Some(f.id) {
                        return Err(format!("accepted frame at {} does not hash to its id", f.offset));
                    }
                }
            }
            // An upload, in either layout: the same, and a heads-first upload that verifies
            // holds the same bytes as the framed pack of its frames.
            if let Ok((alg, frames)) = pack::decode_upload(body, true) {
                let mut chunks = Vec::new();
                for f in &frames {
                    let d = raw_of(body, f)?;
                    if alg.digest(&d) != Some(f.id) {
                        return Err(format!("accepted upload frame at {} does not hash to its id", f.offset));
                    }
                    chunks.push((f.id, &body[f.offset as usize..f.offset as usize + f.len as usize], f.compressed));
                }
                if body.get(9) == Some(&1) {
                    let codec = cutpoint_core::protocol::codec::Codec::from_byte(body[10]).ok_or("an unknown codec was accepted")?;
                    let again = pack::encode_heads_first_frames(alg, codec, &chunks).map_err(|e| e.to_string())?;
                    if again != body {
                        return Err("a heads-first upload that verifies does not encode back to itself".into());
                    }
                }
            }
        }
        1 => {
            // A delta: what parses and expands must match its own end line and digest, and
            // its text must be within the limit it was expanded under.
            if let Ok(d) = delta::parse(body) {
                let limit = 2048;
                if let Ok(r) = d.expand(&base(), limit) {
                    if r.entries.len() as u64 != d.count || r.total_bytes() != d.bytes {
                        return Err("expanded delta disagrees with its end line".into());
                    }
                    if cutpoint_core::protocol::FileDigest::of(&r) != Some(d.digest) {
                        return Err("expanded delta disagrees with its digest".into());
                    }
                    let mut t = Vec::new();
                    r.write(&mut t).map_err(|e| e.to_string())?;
                    if t.len() as u64 > limit {
                        return Err("expanded delta is over the limit it was expanded under".into());
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
        4 => {
            // A Range header against a few lengths: a range given is inside the file.
            for len in [0u64, 1, 100, u64::MAX / 2] {
                if let Ok(Some(r)) = parse_range(Some(body), len) {
                    if !(r.start < r.end && r.end <= len) {
                        return Err(format!("range {r:?} for a file of {len} bytes"));
                    }
                }
            }
        }
        5 => {
            // A file name and a namespace (URL path segments, after percent-decoding; a name
            // that is not UTF-8 is refused before these). What is accepted is safe as a key.
            let Ok(text) = std::str::from_utf8(body) else { return Ok(()) };
            if validate_name(text).is_ok() {
                if text.is_empty() || text.len() > 255 || text.starts_with('/') || text.chars().any(char::is_control) {
                    return Err(format!("accepted name {text:?}"));
                }
                if text.split('/').any(|s| s.is_empty() || s == "." || s == "..") {
                    return Err(format!("accepted a traversal name {text:?}"));
                }
                if name_from_key(&name_key(text)).as_deref() != Some(text) {
                    return Err(format!("name {text:?} does not survive its key"));
                }
                if !encode_segment(text).bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~%".contains(&b)) {
                    return Err(format!("name {text:?} encodes to an unsafe segment"));
                }
            }
            if validate_namespace(text).is_ok()
                && (text.is_empty() || text.starts_with('.') || text.contains('/') || text.len() > 64)
            {
                return Err(format!("accepted namespace {text:?}"));
            }
            // Any text as a recipe key: decodes to something or nothing, without a panic.
            let _ = name_from_key(text);
        }
        _ => {
            // An Authorization header against a fixed tokens file, and the text as a tokens
            // file. A grant is given only for the token itself, only on its namespace, and
            // a read token never writes.
            let line = format!("{} a rw\n", cutpoint_core::hex(&HashAlg::Blake3.digest(TOKEN.as_bytes()).unwrap()));
            let tokens = Tokens::parse(&format!("# fixed\n{line}")).map_err(|e| e.to_string())?;
            let Ok(h) = std::str::from_utf8(body) else { return Ok(()) };
            for ns in ["a", "b"] {
                for need in [Scope::Read, Scope::Write] {
                    let ok = authorize(Some(&tokens), Some(h), ns, need).is_ok();
                    // The scheme in any case (RFC 9110), a space, the token (spaces around it).
                    let token = h.split_once(' ').filter(|(s, _)| s.eq_ignore_ascii_case("bearer")).map(|(_, t)| t.trim());
                    let right = ns == "a" && token == Some(TOKEN);
                    if ok != right {
                        return Err(format!("Authorization {h:?} on {ns}: granted {ok}"));
                    }
                }
            }
            if let Ok(t) = Tokens::parse(h) {
                // A tokens file that parses still gives no grant without its token.
                let _ = authorize(Some(&t), Some(h), "a", Scope::Write);
            }
        }
    }
    Ok(())
}

/// A verified frame's raw bytes: its stored bytes, or (compressed) their zstd data decompressed
/// to exactly the raw length the frame declares, which is more than its zstd bytes.
fn raw_of(body: &[u8], f: &pack::Frame) -> Result<Vec<u8>, String> {
    let stored = &body[f.offset as usize..f.offset as usize + f.len as usize];
    if !f.compressed {
        return Ok(stored.to_vec());
    }
    let raw = u32::from_le_bytes(stored[..4].try_into().unwrap());
    if raw != f.raw || stored.len() - 4 >= raw as usize {
        return Err(format!("accepted compressed frame at {} breaks the length rules", f.offset));
    }
    let d = zstd::bulk::decompress(&stored[4..], raw as usize).map_err(|e| format!("accepted compressed frame does not decompress: {e}"))?;
    if d.len() != raw as usize {
        return Err("accepted compressed frame decompresses to another length".into());
    }
    Ok(d)
}
