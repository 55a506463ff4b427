//! Who may call the store from a web page, and by which names it may be reached.
//!
//! A browser on the user's machine reaches a store on loopback like any local program, so the
//! loopback bind alone does not keep web pages out. Two checks, before any handler runs:
//!
//! * **Origin.** A request with an `Origin` header (every cross-origin `fetch` and every
//!   non-GET request a browser sends) is refused (403, nothing done) unless that origin is
//!   allowed. Allowed: the origins given with `--cors-origin` — and, on a store with `--tokens`
//!   and no `--cors-origin`, any origin, since every request there needs a bearer token that a
//!   page only has when the user gave it one (tokens are headers, never cookies). An open store
//!   answers no web page until `--cors-origin` names one, and refuses `--cors-origin '*'`.
//!   CORS answers (and Chromium's private-network preflight) are only ever given to allowed
//!   origins.
//! * **Host.** Against DNS rebinding (a page of `evil.example` whose name is re-pointed at
//!   127.0.0.1 is same-origin with itself, so CORS never applies): a request whose `Host` is not
//!   a loopback address, the address the store listens on, `localhost` (or `*.localhost`) or a
//!   name given with `--allowed-host` is refused (403, nothing done). A store with `--tokens`
//!   and no `--allowed-host` answers to any `Host` (a rebound page has no token).

use std::net::{IpAddr, SocketAddr};

#[derive(Debug, Clone, PartialEq, Eq)]
enum Origins {
    /// Every origin (only on a store that wants tokens).
    Any,
    /// These origins, normalized (`scheme://host[:port]`, lower case); none when empty.
    List(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Hosts {
    /// Any `Host` (a store with tokens and no `--allowed-host`).
    Any,
    /// Loopback addresses, `localhost`, the listen address (any address when it is
    /// unspecified, `0.0.0.0` / `::`), and these names (lower case).
    List { names: Vec<String>, listen: IpAddr },
}

/// The store's answer to "may this request be served at all", settled at start.
#[derive(Debug, Clone)]
pub struct Access {
    origins: Origins,
    hosts: Hosts,
}

/// `scheme://host[:port]` as a browser writes it in `Origin` (lower case, no path, no default
/// port is not rewritten: give the origin as the browser shows it); `null` stays `null`.
fn normalize_origin(o: &str) -> std::result::Result<String, String> {
    let o = o.trim();
    if o == "null" {
        return Ok(o.to_string());
    }
    let bad = || format!("--cors-origin '{o}' is not an origin like http://localhost:5173 (scheme://host[:port], no path)");
    let (scheme, rest) = o.split_once("://").ok_or_else(bad)?;
    let rest = rest.strip_suffix('/').unwrap_or(rest);
    if scheme.is_empty()
        || !scheme.chars().all(|c| c.is_ascii_alphanumeric() || c == '+' || c == '-' || c == '.')
        || rest.is_empty()
        || rest.contains(['/', '?', '#', '@', ' '])
    {
        return Err(bad());
    }
    Ok(format!("{}://{}", scheme.to_ascii_lowercase(), rest.to_ascii_lowercase()))
}

/// The host name of a `Host` header value (`name`, `name:port`, `[v6]:port`), lower case,
/// without a trailing dot.
fn host_name(h: &str) -> &str {
    let h = h.trim();
    let name = if let Some(rest) = h.strip_prefix('[') {
        rest.split(']').next().unwrap_or("")
    } else {
        match h.rsplit_once(':') {
            Some((n, port)) if port.chars().all(|c| c.is_ascii_digit()) => n,
            _ => h,
        }
    };
    name.strip_suffix('.').unwrap_or(name)
}

impl Access {
    /// `tokens`: the store wants bearer tokens. `cors`: `--cors-origin` values (`*` for any).
    /// `allowed_hosts`: `--allowed-host` values (`*` for any). Errors are usage errors.
    pub fn new(tokens: bool, cors: &[String], allowed_hosts: &[String], listen: SocketAddr) -> std::result::Result<Access, String> {
        let origins = if cors.iter().any(|o| o.trim() == "*") {
            if !tokens {
                return Err("--cors-origin '*' needs --tokens: an open store would answer every web page the user visits \
                            (name the page's origin instead, e.g. --cors-origin http://localhost:5173)"
                    .into());
            }
            Origins::Any
        } else if cors.is_empty() && tokens {
            Origins::Any
        } else {
            let mut v = Vec::new();
            for o in cors {
                v.push(normalize_origin(o)?);
            }
            Origins::List(v)
        };
        let hosts = if allowed_hosts.iter().any(|h| h.trim() == "*") {
            if !tokens {
                return Err("--allowed-host '*' needs --tokens: an open store checks the Host header against DNS rebinding".into());
            }
            Hosts::Any
        } else if allowed_hosts.is_empty() && tokens {
            Hosts::Any
        } else {
            let mut names = Vec::new();
            for h in allowed_hosts {
                let n = host_name(h).to_ascii_lowercase();
                if n.is_empty() || n.contains(['/', ' ', '@']) {
                    return Err(format!("--allowed-host '{h}' is not a host name like store.example.com"));
                }
                names.push(n);
            }
            Hosts::List { names, listen: listen.ip() }
        };
        Ok(Access { origins, hosts })
    }

    /// Whether a page of `origin` (the `Origin` header's value) may call the store.
    pub fn origin_allowed(&self, origin: &str) -> bool {
        match &self.origins {
            Origins::Any => true,
            Origins::List(v) => {
                let o = origin.trim().to_ascii_lowercase();
                v.iter().any(|a| *a == o)
            }
        }
    }

    /// Whether the store answers to this `Host` header value.
    pub fn host_allowed(&self, host: &str) -> bool {
        let (names, listen) = match &self.hosts {
            Hosts::Any => return true,
            Hosts::List { names, listen } => (names, listen),
        };
        let name = host_name(host).to_ascii_lowercase();
        if let Ok(ip) = name.parse::<IpAddr>() {
            return ip.is_loopback() || ip == *listen || listen.is_unspecified();
        }
        name == "localhost" || name.ends_with(".localhost") || names.iter().any(|n| *n == name)
    }

    /// Whether every origin is allowed (the CORS layer then answers `*`).
    pub fn any_origin(&self) -> bool {
        self.origins == Origins::Any
    }

    /// The allowed origins (empty when any or none).
    pub fn origins(&self) -> &[String] {
        match &self.origins {
            Origins::Any => &[],
            Origins::List(v) => v,
        }
    }

    /// One line for the server's start: which web pages and which names it answers.
    pub fn describe(&self) -> String {
        let pages = match &self.origins {
            Origins::Any => "web pages: any origin (each request needs a token)".to_string(),
            Origins::List(v) if v.is_empty() => "web pages: none (allow one with --cors-origin ORIGIN)".to_string(),
            Origins::List(v) => format!("web pages: {}", v.join(", ")),
        };
        let hosts = match &self.hosts {
            Hosts::Any => "Host: any".to_string(),
            Hosts::List { names, listen } => {
                let mut s = String::from("Host: loopback addresses, localhost");
                if !listen.is_loopback() {
                    s += &format!(", {listen}");
                }
                for n in names {
                    s += &format!(", {n}");
                }
                s
            }
        };
        format!("{pages}; {hosts}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn an_open_store_allows_no_origin_by_default_and_never_any() {
        let a = Access::new(false, &[], &[], addr("127.0.0.1:7373")).unwrap();
        assert!(!a.origin_allowed("https://evil.example"));
        assert!(!a.origin_allowed("null"));
        assert!(!a.any_origin());
        assert!(Access::new(false, &["*".into()], &[], addr("127.0.0.1:7373")).is_err());
        let a = Access::new(false, &["http://LOCALHOST:5173/".into()], &[], addr("127.0.0.1:7373")).unwrap();
        assert!(a.origin_allowed("http://localhost:5173"));
        assert!(!a.origin_allowed("http://localhost:5174"));
        assert!(!a.origin_allowed("https://localhost:5173"));
    }

    #[test]
    fn a_store_with_tokens_allows_any_origin_unless_told_otherwise() {
        let a = Access::new(true, &[], &[], addr("0.0.0.0:7373")).unwrap();
        assert!(a.any_origin() && a.origin_allowed("https://app.example"));
        assert!(a.host_allowed("store.example.com"));
        let a = Access::new(true, &["https://app.example".into()], &["store.example.com".into()], addr("0.0.0.0:7373")).unwrap();
        assert!(a.origin_allowed("https://app.example") && !a.origin_allowed("https://evil.example"));
        assert!(a.host_allowed("store.example.com:443") && !a.host_allowed("evil.example"));
        assert!(a.host_allowed("10.1.2.3:7373"), "any address of an unspecified listen address");
    }

    #[test]
    fn bad_origins_and_hosts_are_usage_errors() {
        for o in ["localhost:5173", "http://a.example/path", "http://", "http://a b"] {
            assert!(Access::new(false, &[o.into()], &[], addr("127.0.0.1:1")).is_err(), "{o}");
        }
        assert!(Access::new(false, &[], &["*".into()], addr("127.0.0.1:1")).is_err());
        assert!(Access::new(false, &[], &["a/b".into()], addr("127.0.0.1:1")).is_err());
    }

    #[test]
    fn the_host_check_stops_rebound_names() {
        let a = Access::new(false, &[], &["dev.example".into()], addr("127.0.0.1:7373")).unwrap();
        for ok in ["127.0.0.1:7373", "127.0.0.1", "localhost:7373", "LOCALHOST", "app.localhost:7373", "[::1]:7373", "127.0.0.2", "dev.example:7373", "dev.example."] {
            assert!(a.host_allowed(ok), "{ok}");
        }
        for bad in ["evil.example:7373", "evil.example", "10.0.0.1:7373", "localhost.evil.example", "", "[::2]:7373"] {
            assert!(!a.host_allowed(bad), "{bad}");
        }
    }
}
