//! Bearer tokens: each grants read (`r`) or read+write (`rw`) on one namespace.
//!
//! The tokens file holds one grant per line, `<blake3 hex of the token> <namespace> <r|rw>`
//! (`#` starts a comment); the token itself is shown once, by `cutpoint token`, and never
//! stored. Without a tokens file the server is open (every request allowed) and listens on
//! loopback only.

use crate::error::{Result, StoreError};
use cutpoint_core::protocol::name::validate_namespace;
use std::collections::HashMap;
use std::path::Path;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scope {
    Read,
    Write,
}

impl Scope {
    pub fn parse(s: &str) -> Option<Scope> {
        match s {
            "r" => Some(Scope::Read),
            "rw" => Some(Scope::Write),
            _ => None,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Scope::Read => "r",
            Scope::Write => "rw",
        }
    }
}

#[derive(Debug, Default)]
pub struct Tokens {
    grants: HashMap<[u8; 32], (String, Scope)>,
}

fn token_hash(token: &str) -> [u8; 32] {
    *blake3::hash(token.as_bytes()).as_bytes()
}

impl Tokens {
    pub fn parse(text: &str) -> std::result::Result<Tokens, String> {
        let mut t = Tokens::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.split('#').next().unwrap_or("").trim();
            if line.is_empty() {
                continue;
            }
            let f: Vec<&str> = line.split_whitespace().collect();
            let bad = |m: &str| format!("tokens file line {}: {m}", i + 1);
            if f.len() != 3 {
                return Err(bad("expected '<token hash> <namespace> <r|rw>'"));
            }
            let h = cutpoint_core::rapid::recipe::parse_hex(f[0]).ok_or_else(|| bad("the token hash is not 64 hex digits"))?;
            validate_namespace(f[1]).map_err(|e| bad(&e.to_string()))?;
            let scope = Scope::parse(f[2]).ok_or_else(|| bad("the scope is not r or rw"))?;
            t.grants.insert(h, (f[1].to_string(), scope));
        }
        Ok(t)
    }

    pub fn load(path: &Path) -> std::result::Result<Tokens, String> {
        let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
        Tokens::parse(&text).map_err(|e| format!("{}: {e}", path.display()))
    }

    pub fn len(&self) -> usize {
        self.grants.len()
    }

    pub fn is_empty(&self) -> bool {
        self.grants.is_empty()
    }
}

/// Checks the `Authorization` header for `need` on `ns`. `tokens == None` is the open mode.
pub fn authorize(tokens: Option<&Tokens>, authorization: Option<&str>, ns: &str, need: Scope) -> Result<()> {
    let Some(tokens) = tokens else { return Ok(()) };
    let Some(h) = authorization else {
        return Err(StoreError::Unauthorized("this store needs a token: 'Authorization: Bearer <token>'".into()));
    };
    // The scheme is case-insensitive (RFC 9110, 11.1), one or more spaces before the token.
    let token = h
        .split_once(' ')
        .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
        .map(|(_, t)| t.trim())
        .filter(|t| !t.is_empty());
    let Some(token) = token else {
        return Err(StoreError::Unauthorized("the Authorization header is not 'Bearer <token>'".into()));
    };
    let Some((tns, scope)) = tokens.grants.get(&token_hash(token)) else {
        return Err(StoreError::Unauthorized("unknown token".into()));
    };
    if tns != ns {
        return Err(StoreError::Forbidden(format!("this token is not valid for namespace '{ns}'")));
    }
    if need == Scope::Write && *scope == Scope::Read {
        return Err(StoreError::Forbidden(format!("this token may only read namespace '{ns}'")));
    }
    Ok(())
}

/// A new random token (192 bits, hex) and its tokens-file line.
pub fn new_token(ns: &str, scope: Scope) -> std::result::Result<(String, String), String> {
    validate_namespace(ns).map_err(|e| e.to_string())?;
    let mut b = [0u8; 24];
    getrandom::fill(&mut b).map_err(|e| format!("no random numbers: {e}"))?;
    let token: String = std::iter::once("cpt_".to_string()).chain(b.iter().map(|x| format!("{x:02x}"))).collect();
    let line = format!("{} {ns} {}", cutpoint_core::hex(&token_hash(&token)), scope.name());
    Ok((token, line))
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn grants() {
        let (tw, lw) = new_token("a", Scope::Write).unwrap();
        let (tr, lr) = new_token("a", Scope::Read).unwrap();
        let (tb, lb) = new_token("b", Scope::Write).unwrap();
        let t = Tokens::parse(&format!("# comment\n{lw}\n{lr}\n\n{lb}\n")).unwrap();
        let auth = |tok: &str, ns: &str, s: Scope| authorize(Some(&t), Some(&format!("Bearer {tok}")), ns, s).map_err(|e| e.status());
        assert_eq!(auth(&tw, "a", Scope::Write), Ok(()));
        assert_eq!(auth(&tr, "a", Scope::Read), Ok(()));
        assert_eq!(auth(&tr, "a", Scope::Write), Err(403));
        assert_eq!(auth(&tb, "a", Scope::Read), Err(403));
        assert_eq!(auth("cpt_nope", "a", Scope::Read), Err(401));
        assert_eq!(authorize(Some(&t), None, "a", Scope::Read).unwrap_err().status(), 401);
        assert!(authorize(None, None, "a", Scope::Write).is_ok());
        // The scheme in any case (RFC 9110); anything else is not a bearer token.
        for h in [format!("bearer {tw}"), format!("BEARER {tw}"), format!("BeArEr   {tw}")] {
            assert_eq!(authorize(Some(&t), Some(&h), "a", Scope::Write).map_err(|e| e.status()), Ok(()), "{h}");
        }
        for h in [format!("Basic {tw}"), format!("Bearer{tw}"), "Bearer ".to_string(), tw.clone()] {
            assert_eq!(authorize(Some(&t), Some(&h), "a", Scope::Write).unwrap_err().status(), 401, "{h}");
        }
        assert!(Tokens::parse("zz a rw").unwrap_err().contains("line 1"));
        assert!(Tokens::parse(&format!("{} a x", "0".repeat(64))).unwrap_err().contains("scope"));
    }
}
