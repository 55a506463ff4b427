//! Who may call a store from a web page, and by which names (issue #31): an open store answers no
//! foreign origin and no foreign `Host` on any route, changes nothing for them, and gives CORS
//! answers (private-network preflight included) only to the origins given with --cors-origin.
//! Raw HTTP/1.1 over a TcpStream, so that the `Host` header is exactly the one written here.

mod common;
use common::*;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

struct Answer {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Answer {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// One request on its own connection: `host` is the `Host` header as sent.
fn raw(url: &str, method: &str, path: &str, host: &str, headers: &[(&str, &str)], body: &[u8]) -> Answer {
    let addr = url.strip_prefix("http://").unwrap();
    let mut s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\nContent-Length: {}\r\n", body.len());
    for (k, v) in headers {
        head += &format!("{k}: {v}\r\n");
    }
    head += "\r\n";
    s.write_all(head.as_bytes()).unwrap();
    s.write_all(body).unwrap();
    let mut all = Vec::new();
    s.read_to_end(&mut all).unwrap();
    let end = all.windows(4).position(|w| w == b"\r\n\r\n").expect("an answer head");
    let text = String::from_utf8_lossy(&all[..end]).to_string();
    let mut lines = text.split("\r\n");
    let status = lines.next().unwrap().split(' ').nth(1).unwrap().parse().unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect();
    Answer {
        status,
        headers,
        body: all[end + 4..].to_vec(),
    }
}

/// Every route of protocol v1, with a body that would change the store where the route writes.
fn routes(ch: &[(cutpoint_core::Digest, Vec<u8>)]) -> Vec<(&'static str, &'static str, Vec<u8>)> {
    let ids: Vec<u8> = ch.iter().flat_map(|(id, _)| id.to_vec()).collect();
    vec![
        ("GET", "/v1", vec![]),
        ("POST", "/v1/ns/default/query", ids),
        ("POST", "/v1/ns/default/packs", pack(ch)),
        ("GET", "/v1/ns/default/files", vec![]),
        ("GET", "/v1/ns/default/files/kept.bin", vec![]),
        ("HEAD", "/v1/ns/default/files/kept.bin", vec![]),
        ("PUT", "/v1/ns/default/files/new.bin", recipe_text(ch)),
        ("DELETE", "/v1/ns/default/files/kept.bin", vec![]),
        ("GET", "/v1/ns/default/recipes/kept.bin", vec![]),
        ("POST", "/v1/ns/default/gc?grace=0", vec![]),
        ("GET", "/v1/ns/default/check", vec![]),
        ("OPTIONS", "/v1/ns/default/files/kept.bin", vec![]),
    ]
}

/// The files under a directory with their sizes (what a refused request must leave as it was).
fn tree(dir: &std::path::Path) -> Vec<(String, u64)> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                out.push((e.path().display().to_string(), m.len()));
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_open_store_refuses_foreign_origins_and_hosts_on_every_route_and_changes_nothing() {
    let dir = tmpdir("access-open");
    let loc = Loc::new(Backend::Local, &dir, None);
    let page = "http://127.0.0.1:1";
    let srv = Server::start(&loc, &["--cors-origin", page, "--allowed-host", "dev.example"], &[]);
    let port = srv.url.rsplit(':').next().unwrap().to_string();
    let own = format!("127.0.0.1:{port}");
    // One version to protect, and chunks a foreign request would upload.
    let f = dir.join("kept.bin");
    std::fs::write(&f, data(200_000, 7)).unwrap();
    let out = bin().args(["push", f.to_str().unwrap(), "--name", "kept.bin", "--store", &srv.url]).output().unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let other = data(30000, 8);
    let ch = chunks_of(&other, &[10000, 10000, 10000]);
    let before = tree(&loc.objects);

    let evil_host = format!("evil.example:{port}");
    for (method, path, body) in routes(&ch) {
        // A page of another origin (a fetch from any web site the user visits).
        let preflight = [("Access-Control-Request-Method", "DELETE"), ("Access-Control-Request-Private-Network", "true")];
        let mut hs = vec![("Origin", "https://evil.example")];
        if method == "OPTIONS" {
            hs.extend(preflight);
        }
        let a = raw(&srv.url, method, path, &own, &hs, &body);
        assert_eq!(a.status, 403, "{method} {path} from a foreign origin: {}", String::from_utf8_lossy(&a.body));
        assert!(a.header("access-control-allow-origin").is_none(), "{method} {path}: a CORS answer to a foreign origin");
        assert!(a.header("access-control-allow-private-network").is_none(), "{method} {path}");
        if method != "HEAD" {
            let v = json(&a.body);
            assert!(v["error"].as_str().unwrap().contains("--cors-origin https://evil.example"), "{v}");
        }
        // A rebound name (DNS rebinding: the page's own origin, so no CORS at all).
        let a = raw(&srv.url, method, path, &evil_host, &[], &body);
        assert_eq!(a.status, 403, "{method} {path} with Host {evil_host}: {}", String::from_utf8_lossy(&a.body));
        if method != "HEAD" {
            let v = json(&a.body);
            assert!(v["error"].as_str().unwrap().contains("evil.example"), "{v}");
        }
    }
    assert_eq!(tree(&loc.objects), before, "a refused request changed the store's objects");
    let ls = bin().args(["ls", "--store", &srv.url, "--json"]).output().unwrap();
    let v = json(&ls.stdout);
    assert_eq!(v.as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v[0]["name"], "kept.bin", "{v}");

    // The names it answers to: loopback addresses, localhost, --allowed-host.
    for host in [own.clone(), format!("localhost:{port}"), "127.0.0.1".into(), format!("dev.example:{port}")] {
        let a = raw(&srv.url, "GET", "/v1/ns/default/files", &host, &[], &[]);
        assert_eq!(a.status, 200, "Host {host}");
    }
    // The allowed page gets its CORS answers, the private-network preflight included.
    let a = raw(&srv.url, "GET", "/v1/ns/default/files", &own, &[("Origin", page)], &[]);
    assert_eq!(a.status, 200);
    assert_eq!(a.header("access-control-allow-origin"), Some(page));
    let a = raw(
        &srv.url,
        "OPTIONS",
        "/v1/ns/default/files/kept.bin",
        &own,
        &[("Origin", page), ("Access-Control-Request-Method", "DELETE"), ("Access-Control-Request-Private-Network", "true")],
        &[],
    );
    assert_eq!(a.status, 200);
    assert_eq!(a.header("access-control-allow-origin"), Some(page));
    assert_eq!(a.header("access-control-allow-private-network"), Some("true"));
    assert!(a.header("access-control-allow-methods").unwrap_or("").contains("DELETE"));
}

#[test]
fn open_stores_never_answer_any_origin_and_say_who_can_reach_them() {
    let dir = tmpdir("access-start");
    std::fs::create_dir_all(&dir).unwrap();
    let data_dir = dir.join("d");
    for flag in ["--cors-origin", "--allowed-host"] {
        let out = bin()
            .args(["serve", "--data", data_dir.to_str().unwrap(), "--listen", "127.0.0.1:0", flag, "*"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} '*' on an open store");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("needs --tokens"), "{err}");
    }
    let out = bin()
        .args(["serve", "--data", data_dir.to_str().unwrap(), "--listen", "127.0.0.1:0", "--cors-origin", "localhost:5173"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not an origin"));

    // Default: no web page; the start-up lines say so.
    let loc = Loc::new(Backend::Local, &dir, None);
    let srv = Server::start(&loc, &[], &[]);
    let own = srv.url.strip_prefix("http://").unwrap().to_string();
    let a = raw(&srv.url, "GET", "/v1/ns/default/files", &own, &[("Origin", "http://127.0.0.1:5173")], &[]);
    assert_eq!(a.status, 403);
    drop(srv);
    let mut child = bin()
        .args(["serve", "--data", data_dir.to_str().unwrap(), "--listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    for _ in 0..4 {
        std::io::BufRead::read_line(&mut out, &mut text).unwrap();
    }
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("web pages: none (allow one with --cors-origin ORIGIN)"), "{text}");
    assert!(text.contains("Host: loopback addresses, localhost"), "{text}");

    // A store with tokens: any origin (each request needs a token), any Host.
    let tokens = dir.join("tokens");
    let t = bin().args(["token", "--ns", "default", "--tokens", tokens.to_str().unwrap()]).output().unwrap();
    assert!(t.status.success());
    let token = String::from_utf8(t.stdout).unwrap().trim().to_string();
    let srv = Server::start(&loc, &["--tokens", tokens.to_str().unwrap()], &[]);
    let auth = format!("Bearer {token}");
    let a = raw(&srv.url, "GET", "/v1/ns/default/files", "store.example.com", &[("Origin", "https://app.example"), ("Authorization", &auth)], &[]);
    assert_eq!(a.status, 200, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(a.header("access-control-allow-origin"), Some("*"));
    let a = raw(&srv.url, "GET", "/v1/ns/default/files", "store.example.com", &[("Origin", "https://app.example")], &[]);
    assert_eq!(a.status, 401, "no token, no answer");
}
