//! The native client: the HTTP API ([`Client`]) and the two pipelines, [`push_file`] and
//! [`pull`], that `cutpoint push` / `pull` run.
//!
//! `push_file` is a P-Dedupe pipeline: a chunker thread (SS-CDC on all cores, or RapidCDC
//! with the base recipe's hints) → the existence queries, in batches → a packer thread that
//! reads the novel chunks back from the file by offset → uploader threads → the commit. A file
//! committed in parts has each part sent as soon as the packs holding its novel chunks are
//! stored ([`PartGate`]), while the file is still chunked.
//! Each stage is its own function, named as in web/src/client/push.ts: `prepare`,
//! `stage_chunk`, `stage_query`, `stage_pack`, `stage_upload`, `stage_commit`.
//! The stages overlap; memory is bounded by the channels (a few batches of chunk records and
//! at most `uploaders + 2` packs of `pack_bytes`), whatever the file size.
//!
//! Every request has an idle timeout ([`Client::with_timeout`]: each read and write must make
//! progress within it; a long body that keeps moving is never cut) and the safe ones are retried
//! with backoff; a pull resumes where its verified chunks end (a `Range` request), a commit whose
//! answer was lost is read back before it is sent again.

use crate::base_parts::{base_lines, BaseLine, BaseWindow, WINDOW_BYTES};
use crate::index::Version;
use crate::spool::{tee, StreamSpool};
use crate::store::{CheckReport, GcReport, PackReport};
use cutpoint_core::protocol::batch::BatchWriter;
use cutpoint_core::protocol::delta;
use cutpoint_core::protocol::part::{needs_parts, Line, Part, PartCutter, PartRecipe};
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::protocol::name::{encode_segment, validate_name, validate_namespace};
use cutpoint_core::protocol::codec::{Codec, Compressor, Sampler, AUTO_LEVEL, COMPRESS_GROUP, MAX_LEVEL};
use cutpoint_core::protocol::pack::{compress_group, fit_pack_chunks, fit_pack_target, group_runs, PackWriter, MAX_GROUP_RAW};
use cutpoint_core::protocol::query::{decode_ids, encode_ids, MAX_QUERY_IDS};
use cutpoint_core::rapid::{Criterion, HintTable, Rapid, RapidOptions, Recipe, RecipeEntry};
use cutpoint_core::{hex, Digest, Engine, HashAlg, Options, Profile};
use std::collections::{HashMap, HashSet, VecDeque};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Condvar, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub enum ClientError {
    /// Bad options (exit code 2).
    Usage(String),
    /// The store answered with an error status.
    Http { status: u16, code: String, message: String },
    /// A commit named chunks the store lacks.
    Missing(Vec<Digest>),
    /// The store could not be reached, or the connection failed.
    Network(String),
    /// Reading or writing a local file failed.
    Io(String),
    /// Restored bytes did not verify.
    Verify(String),
    /// The store's answer made no sense.
    Protocol(String),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Usage(m) | ClientError::Network(m) | ClientError::Io(m) | ClientError::Verify(m) | ClientError::Protocol(m) => {
                f.write_str(m)
            }
            ClientError::Http { status, message, .. } => write!(f, "the store answered {status}: {message}"),
            ClientError::Missing(m) => write!(f, "the store lacks {} chunks of the recipe", m.len()),
        }
    }
}

impl std::error::Error for ClientError {}

type R<T> = std::result::Result<T, ClientError>;

/// `CUTPOINT_TRACE=1`: a timeline of a push on stderr (milliseconds since the first line, and
/// the thread), for finding what a push waits for. Off, it costs one atomic load per call.
fn trace_on() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| std::env::var_os("CUTPOINT_TRACE").is_some_and(|v| v == "1"))
}

fn trace_line(what: fmt::Arguments) {
    static T0: std::sync::OnceLock<Instant> = std::sync::OnceLock::new();
    let t = T0.get_or_init(Instant::now).elapsed();
    eprintln!("cutpoint trace {:9.3} ms {what}", t.as_secs_f64() * 1e3);
}

macro_rules! trace {
    ($($a:tt)*) => {
        if trace_on() {
            trace_line(format_args!($($a)*));
        }
    };
}

/// How long a client waits for a store that does not answer (progress resets it: a body that
/// moves is never cut for being long), and for a connection to open (at most this).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(60);
/// The longest wait for a connection to open.
pub const MAX_CONNECT: Duration = Duration::from_secs(30);
/// Retries of a request that is safe to repeat (so 1 + this many tries), with backoff.
pub const DEFAULT_RETRIES: u32 = 3;
/// `gc` and `check` work before their answer's first byte: they wait this long at least.
const SLOW_ANSWER: Duration = Duration::from_secs(600);

/// A store, one namespace, one token.
#[derive(Clone)]
pub struct Client {
    agent: ureq::Agent,
    base: String,
    ns: String,
    token: Option<String>,
    /// Retries of idempotent requests (queries, uploads, reads) after a network error or a 5xx.
    pub retries: u32,
    /// No progress reading or writing for this long gives a request up (then it may be retried).
    idle: Duration,
    /// First wait before a retry, doubled each time.
    pub backoff: Duration,
}

impl Client {
    /// A client with the default timeout ([`DEFAULT_TIMEOUT`]).
    pub fn new(store: &str, ns: &str, token: Option<String>) -> R<Client> {
        Client::with_timeout(store, ns, token, DEFAULT_TIMEOUT)
    }

    /// A client that gives a request up after `idle` without progress (no byte read or
    /// written), and a connection after `idle` or [`MAX_CONNECT`], whichever is shorter.
    pub fn with_timeout(store: &str, ns: &str, token: Option<String>, idle: Duration) -> R<Client> {
        let base = store.trim_end_matches('/').to_string();
        if !(base.starts_with("http://") || base.starts_with("https://")) {
            return Err(ClientError::Usage(format!("--store '{store}' is not an http:// or https:// URL")));
        }
        validate_namespace(ns).map_err(|e| ClientError::Usage(e.to_string()))?;
        if idle.is_zero() {
            return Err(ClientError::Usage("the timeout must be more than 0 seconds".into()));
        }
        // Per-read and per-write limits only: ureq's phase limits (recv_body, global...) would
        // cut a long body that is making progress.
        let config = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_connect(Some(idle.min(MAX_CONNECT)))
            .timeout_per_read(Some(idle))
            .timeout_per_write(Some(idle))
            .build();
        Ok(Client {
            agent: ureq::Agent::new_with_config(config),
            base,
            ns: ns.to_string(),
            token: token.filter(|t| !t.is_empty()),
            retries: DEFAULT_RETRIES,
            idle,
            backoff: Duration::from_millis(200),
        })
    }

    /// The store's URL (as given, without a trailing `/`).
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn namespace(&self) -> &str {
        &self.ns
    }

    fn url(&self, tail: &str) -> String {
        format!("{}/v1/ns/{}/{tail}", self.base, self.ns)
    }

    fn file_url(&self, what: &str, name: &str, version: Option<u64>) -> String {
        let mut u = self.url(&format!("{what}/{}", encode_segment(name)));
        if let Some(v) = version {
            u.push_str(&format!("?version={v}"));
        }
        u
    }

    fn auth<B>(&self, rb: ureq::RequestBuilder<B>) -> ureq::RequestBuilder<B> {
        match &self.token {
            Some(t) => rb.header("Authorization", &format!("Bearer {t}")),
            None => rb,
        }
    }

    /// `GET /v1/ns/...`: a request as messages name it.
    fn what(&self, method: &str, url: &str) -> String {
        format!("{method} {}", url.strip_prefix(self.base.as_str()).unwrap_or(url))
    }

    /// A failed request as a [`ClientError::Network`] naming the store, the request and, for a
    /// timeout, how long it waited.
    fn net(&self, what: &str, e: ureq::Error) -> ClientError {
        let m = match e {
            ureq::Error::Timeout(ureq::Timeout::Connect) => format!("could not connect within {}", secs(self.idle.min(MAX_CONNECT))),
            ureq::Error::Timeout(ureq::Timeout::PerWrite | ureq::Timeout::SendBody | ureq::Timeout::SendRequest) => {
                format!("the store took no bytes for {}", secs(self.idle))
            }
            ureq::Error::Timeout(_) => format!("no answer for {}", secs(self.idle)),
            ureq::Error::Io(io) if io.kind() == io::ErrorKind::TimedOut || io.kind() == io::ErrorKind::WouldBlock => {
                format!("no answer for {}", secs(self.idle))
            }
            e => e.to_string(),
        };
        ClientError::Network(format!("{}: {what}: {m}", self.base))
    }

    /// A failed read of an answer's body (`io::Error` from ureq's reader) as [`Self::net`] says it.
    fn net_io(&self, what: &str, e: io::Error) -> ClientError {
        let timed_out = matches!(e.kind(), io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock);
        match e.into_inner().map(|i| i.downcast::<ureq::Error>()) {
            Some(Ok(u)) => self.net(what, *u),
            Some(Err(other)) if !timed_out => ClientError::Network(format!("{}: {what}: {other}", self.base)),
            _ if timed_out => ClientError::Network(format!("{}: {what}: no answer for {}", self.base, secs(self.idle))),
            _ => ClientError::Network(format!("{}: {what}: the answer failed", self.base)),
        }
    }

    /// Turns an error status into a [`ClientError`] with the store's JSON message.
    fn check(resp: ureq::http::Response<ureq::Body>) -> R<ureq::http::Response<ureq::Body>> {
        let status = resp.status().as_u16();
        if status < 400 {
            return Ok(resp);
        }
        let mut body = resp.into_body();
        let text = body.with_config().limit(4 << 20).read_to_string().unwrap_or_default();
        let v: serde_json::Value = serde_json::from_str(&text).unwrap_or(serde_json::Value::Null);
        if status == 409 {
            if let Some(list) = v.get("missing").and_then(|m| m.as_array()) {
                let ids: Vec<Digest> = list
                    .iter()
                    .filter_map(|x| x.as_str().and_then(cutpoint_core::rapid::recipe::parse_hex))
                    .collect();
                return Err(ClientError::Missing(ids));
            }
        }
        let message = v
            .get("error")
            .and_then(|m| m.as_str())
            .map(str::to_string)
            .unwrap_or_else(|| if text.is_empty() { "(no message)".into() } else { text.chars().take(300).collect() });
        let code = v.get("code").and_then(|m| m.as_str()).unwrap_or("").to_string();
        if code == "damaged" {
            // The store holds something unreadable (a recipe): not worth a retry, and a
            // verification failure to the caller (`cutpoint pull` exits 3).
            return Err(ClientError::Verify(format!("the store answered {status}: {message}")));
        }
        Err(ClientError::Http { status, code, message })
    }

    /// Runs `f` again after a network error or a 5xx, with exponential backoff, at most
    /// `retries` times; a network error given up on says how many tries it took. Only for
    /// requests that are safe to repeat.
    fn retry<T>(&self, mut f: impl FnMut() -> R<T>) -> R<T> {
        let mut wait = self.backoff;
        let mut n = 0;
        loop {
            match f() {
                Err(ClientError::Network(_)) | Err(ClientError::Http { status: 500..=599, .. }) if n < self.retries => {
                    std::thread::sleep(wait);
                    wait *= 2;
                    n += 1;
                }
                Err(ClientError::Network(m)) if n > 0 => return Err(ClientError::Network(format!("{m} (gave up after {} tries)", n + 1))),
                r => return r,
            }
        }
    }

    /// An answer's body as JSON (at most `limit` bytes): a read that fails is a network error
    /// (retried where the request is), bytes that are not JSON a protocol error.
    fn json_body<T: serde::de::DeserializeOwned>(&self, what: &str, resp: &mut ureq::http::Response<ureq::Body>, limit: u64, label: &str) -> R<T> {
        let b = resp.body_mut().with_config().limit(limit).read_to_vec().map_err(|e| self.net(what, e))?;
        serde_json::from_slice(&b).map_err(|e| ClientError::Protocol(format!("{label}: {e}")))
    }

    /// The store's `/v1` description (checks that it is a cutpoint store).
    pub fn info(&self) -> R<serde_json::Value> {
        let url = format!("{}/v1", self.base);
        let what = self.what("GET", &url);
        self.retry(|| {
            let resp = self.agent.get(&url).call().map_err(|e| self.net(&what, e))?;
            let mut resp = Self::check(resp)?;
            let v: serde_json::Value = self
                .json_body(&what, &mut resp, 1 << 20, "")
                .map_err(|e| match e {
                    ClientError::Protocol(m) => ClientError::Protocol(format!("{} is not a cutpoint store{m}", self.base)),
                    e => e,
                })?;
            if v.get("service").and_then(|s| s.as_str()) != Some("cutpoint") {
                return Err(ClientError::Protocol(format!("{} is not a cutpoint store", self.base)));
            }
            Ok(v)
        })
    }

    /// The ids among `ids` the namespace lacks.
    pub fn query(&self, ids: &[Digest]) -> R<Vec<Digest>> {
        self.query_at("query", ids)
    }

    /// The part ids among `ids` the namespace has no part of (`POST parts/query`).
    pub fn query_parts(&self, ids: &[Digest]) -> R<Vec<Digest>> {
        self.query_at("parts/query", ids)
    }

    /// Uploads a recipe part (safe to repeat: the store keeps a part once).
    pub fn put_part(&self, text: &[u8]) -> R<crate::store::PartStored> {
        let url = self.url("parts");
        let what = self.what("POST", &url);
        self.retry(|| {
            let rb = self.auth(self.agent.post(&url)).header("Content-Type", "text/plain; charset=utf-8");
            let resp = rb.send(text).map_err(|e| self.net(&what, e))?;
            let mut resp = Self::check(resp)?;
            self.json_body(&what, &mut resp, 1 << 20, "part answer")
        })
    }

    /// A recipe part (`GET parts/{id}`), verified: its text hashes to `id` under `alg` and
    /// parses (so a part is the one the recipe named, whatever the store sends).
    pub fn part(&self, id: &Digest, alg: HashAlg) -> R<Part> {
        let text = self.part_text(id)?;
        if alg.digest(&text) != Some(*id) {
            return Err(ClientError::Verify(format!("the store's part {} does not match its id", hex(id))));
        }
        Part::parse(&text).map_err(|e| ClientError::Verify(format!("the store's part {}: {e}", hex(id))))
    }

    /// A stored part's text as the store sends it (not checked: the caller checks it against
    /// its id).
    pub fn part_text(&self, id: &Digest) -> R<Vec<u8>> {
        let url = self.url(&format!("parts/{}", hex(id)));
        let what = self.what("GET", &url);
        self.retry(|| {
            let resp = self.auth(self.agent.get(&url)).call().map_err(|e| self.net(&what, e))?;
            let mut resp = Self::check(resp)?;
            resp.body_mut().with_config().limit(1 << 30).read_to_vec().map_err(|e| self.net(&what, e))
        })
    }

    /// The latest (or a given) version's number, digest, chunk count and bytes, from its stored
    /// text (`?parts=1`: a version committed in parts is not expanded); `Ok(None)`: none.
    pub fn head(&self, name: &str, version: Option<u64>) -> R<Option<(u64, cutpoint_core::protocol::part::PartRecipe)>> {
        let mut url = self.file_url("recipes", name, version);
        url.push_str(if version.is_some() { "&parts=1" } else { "?parts=1" });
        let what = self.what("GET", &url);
        self.retry(|| {
            let resp = self.auth(self.agent.get(&url)).call().map_err(|e| self.net(&what, e))?;
            if resp.status().as_u16() == 404 {
                return Ok(None);
            }
            let mut resp = Self::check(resp)?;
            let v: u64 = resp
                .headers()
                .get("x-cutpoint-version")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| ClientError::Protocol("the recipe came without its version".into()))?;
            let b = resp.body_mut().with_config().limit(1 << 30).read_to_vec().map_err(|e| self.net(&what, e))?;
            let r = cutpoint_core::protocol::part::PartRecipe::parse(&b).map_err(|e| ClientError::Protocol(format!("the store's recipe: {e}")))?;
            Ok(Some((v, r)))
        })
    }

    fn query_at(&self, tail: &str, ids: &[Digest]) -> R<Vec<Digest>> {
        let url = self.url(tail);
        let what = self.what("POST", &url);
        let mut out = Vec::new();
        for part in ids.chunks(MAX_QUERY_IDS) {
            let body = encode_ids(part);
            let missing = self.retry(|| {
                let rb = self.auth(self.agent.post(&url)).header("Content-Type", "application/octet-stream");
                let resp = rb.send(&body[..]).map_err(|e| self.net(&what, e))?;
                let mut resp = Self::check(resp)?;
                let b = resp
                    .body_mut()
                    .with_config()
                    .limit((MAX_QUERY_IDS * 32) as u64)
                    .read_to_vec()
                    .map_err(|e| self.net(&what, e))?;
                decode_ids(&b, part.len()).map_err(|e| ClientError::Protocol(format!("query answer: {e}")))
            })?;
            answer_was_asked(part, &missing)?;
            out.extend(missing);
        }
        Ok(out)
    }

    /// Uploads one pack (safe to repeat: the store keeps each chunk once).
    pub fn upload(&self, pack: &[u8]) -> R<PackReport> {
        let url = self.url("packs");
        let what = self.what("POST", &url);
        self.retry(|| {
            let rb = self.auth(self.agent.post(&url)).header("Content-Type", "application/octet-stream");
            let resp = rb.send(pack).map_err(|e| self.net(&what, e))?;
            let mut resp = Self::check(resp)?;
            self.json_body(&what, &mut resp, 1 << 20, "pack answer")
        })
    }

    /// Commits a recipe as the next version of `name` once (not retried here: a commit is not
    /// idempotent; [`push_file`] reads back a commit whose answer was lost).
    pub fn commit(&self, name: &str, recipe: &[u8]) -> R<Version> {
        let url = self.file_url("files", name, None);
        let what = self.what("PUT", &url);
        let rb = self.auth(self.agent.put(&url)).header("Content-Type", "text/plain; charset=utf-8");
        let resp = rb.send(recipe).map_err(|e| self.net(&what, e))?;
        let mut resp = Self::check(resp)?;
        self.json_body(&what, &mut resp, 1 << 20, "commit answer")
    }

    /// Commits many files in one request (`POST commits`, PROTOCOL.md §4.14): one result per
    /// file, in body order. Sent once (not idempotent; a lost answer is an error for each file).
    pub fn commit_batch(&self, body: &[u8], files: usize) -> R<Vec<R<Version>>> {
        let url = self.url("commits");
        let what = self.what("POST", &url);
        let rb = self.auth(self.agent.post(&url)).header("Content-Type", "text/plain; charset=utf-8");
        let resp = rb.send(body).map_err(|e| self.net(&what, e))?;
        let mut resp = Self::check(resp)?;
        let v: serde_json::Value = self.json_body(&what, &mut resp, 64 << 20, "batch answer")?;
        let list = v
            .get("results")
            .and_then(|r| r.as_array())
            .filter(|r| r.len() == files)
            .ok_or_else(|| ClientError::Protocol(format!("the batch answer does not hold {files} results")))?;
        Ok(list.iter().map(batch_result).collect())
    }

    /// A version's recipe (`None` version: the latest); `Ok(None)` if there is none.
    pub fn recipe(&self, name: &str, version: Option<u64>) -> R<Option<(u64, Recipe)>> {
        let url = self.file_url("recipes", name, version);
        let what = self.what("GET", &url);
        self.retry(|| {
            let resp = self.auth(self.agent.get(&url)).call().map_err(|e| self.net(&what, e))?;
            if resp.status().as_u16() == 404 {
                return Ok(None);
            }
            let mut resp = Self::check(resp)?;
            let v: u64 = resp
                .headers()
                .get("x-cutpoint-version")
                .and_then(|v| v.to_str().ok())
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| ClientError::Protocol("the recipe came without its version".into()))?;
            let b = resp.body_mut().with_config().limit(1 << 30).read_to_vec().map_err(|e| self.net(&what, e))?;
            let r = Recipe::read(&b[..]).map_err(|e| ClientError::Protocol(format!("the store's recipe: {e}")))?;
            Ok(Some((v, r)))
        })
    }

    /// The bytes of a version from byte `from` on (a `Range` request past 0), as a reader (not
    /// verified: [`pull`] verifies).
    pub fn download(&self, name: &str, version: u64, from: u64) -> R<impl Read + use<>> {
        let url = self.file_url("files", name, Some(version));
        let what = self.what("GET", &url);
        let resp = self.retry(|| {
            let mut rb = self.auth(self.agent.get(&url));
            if from > 0 {
                rb = rb.header("Range", &format!("bytes={from}-"));
            }
            let resp = Self::check(rb.call().map_err(|e| self.net(&what, e))?)?;
            if from > 0 {
                let start = resp
                    .headers()
                    .get("content-range")
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("bytes "))
                    .and_then(|v| v.split('-').next())
                    .and_then(|v| v.parse::<u64>().ok());
                if resp.status().as_u16() != 206 || start != Some(from) {
                    return Err(ClientError::Protocol(format!("{}: {what}: the store did not resume at byte {from}", self.base)));
                }
            }
            Ok(resp)
        })?;
        Ok(resp.into_body().into_with_config().limit(u64::MAX).reader())
    }

    pub fn list(&self) -> R<Vec<Version>> {
        let url = self.url("files");
        let what = self.what("GET", &url);
        self.retry(|| {
            let resp = self.auth(self.agent.get(&url)).call().map_err(|e| self.net(&what, e))?;
            let mut resp = Self::check(resp)?;
            let v: serde_json::Value = self.json_body(&what, &mut resp, 1 << 30, "list answer")?;
            serde_json::from_value(v["files"].clone()).map_err(|e| ClientError::Protocol(format!("list answer: {e}")))
        })
    }

    pub fn delete(&self, name: &str, version: Option<u64>) -> R<u64> {
        let url = self.file_url("files", name, version);
        let what = self.what("DELETE", &url);
        let resp = self.auth(self.agent.delete(&url)).call().map_err(|e| self.net(&what, e))?;
        let mut resp = Self::check(resp)?;
        let v: serde_json::Value = self.json_body(&what, &mut resp, 1 << 20, "delete answer")?;
        Ok(v["deleted"].as_u64().unwrap_or(0))
    }

    pub fn gc(&self, grace_secs: u64) -> R<GcReport> {
        let url = format!("{}?grace={grace_secs}", self.url("gc"));
        let what = self.what("POST", &url);
        let rb = self.auth(self.agent.post(&url)).config().timeout_per_read(Some(self.idle.max(SLOW_ANSWER))).build();
        let resp = rb.send_empty().map_err(|e| self.net(&what, e))?;
        let mut resp = Self::check(resp)?;
        self.json_body(&what, &mut resp, 1 << 20, "gc answer")
    }

    pub fn check_store(&self) -> R<CheckReport> {
        let url = self.url("check");
        let what = self.what("GET", &url);
        let rb = self.auth(self.agent.get(&url)).config().timeout_per_read(Some(self.idle.max(SLOW_ANSWER))).build();
        let resp = rb.call().map_err(|e| self.net(&what, e))?;
        let mut resp = Self::check(resp)?;
        self.json_body(&what, &mut resp, 1 << 30, "check answer")
    }
}

/// One result of a batch answer, as the same commit's own answer would be.
fn batch_result(r: &serde_json::Value) -> R<Version> {
    let status = r.get("status").and_then(|s| s.as_u64()).unwrap_or(0) as u16;
    if status == 201 {
        return serde_json::from_value(r.clone()).map_err(|e| ClientError::Protocol(format!("a batch result: {e}")));
    }
    if status == 409 {
        if let Some(list) = r.get("missing").and_then(|m| m.as_array()) {
            return Err(ClientError::Missing(
                list.iter().filter_map(|x| x.as_str().and_then(cutpoint_core::rapid::recipe::parse_hex)).collect(),
            ));
        }
    }
    let message = r.get("error").and_then(|m| m.as_str()).unwrap_or("(no message)").to_string();
    let code = r.get("code").and_then(|m| m.as_str()).unwrap_or("").to_string();
    if status < 400 {
        return Err(ClientError::Protocol(format!("a batch result with status {status}")));
    }
    Err(ClientError::Http { status, code, message })
}

/// `30 s`, `1.5 s`.
fn secs(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 {
        format!("{s:.0} s")
    } else {
        format!("{s} s")
    }
}

/// How to push.
#[derive(Clone)]
pub struct PushOptions {
    pub profile: Profile,
    pub engine: Options,
    /// RapidCDC with the base recipe of the same name as hints.
    pub rapid: Option<Criterion>,
    /// Pack size to aim at.
    pub pack_bytes: usize,
    /// Uploads in flight.
    pub uploaders: usize,
    /// Commit a big file in recipe parts when the store lists `parts` (PROTOCOL.md 3.7).
    pub parts: bool,
    /// Compress novel chunks (zstd) where the store lists `"zstd"` in `GET /v1`.
    pub compression: Compression,
    /// A push of many files with a push cache: commit a new version of every file the cache
    /// finds unchanged, even where its cached version is still the name's latest (by default
    /// such a file is reported `unchanged` with that version and not committed again).
    pub new_versions: bool,
}

/// `--compression`: off (codec 0), auto (zstd level 4, a chunk kept compressed only where that
/// saves at least 1/16 of it), max (zstd level 19: slow, for data pushed once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    Off,
    Auto,
    Max,
}

impl Compression {
    pub fn parse(s: &str) -> Option<Compression> {
        match s {
            "off" => Some(Compression::Off),
            "auto" => Some(Compression::Auto),
            "max" => Some(Compression::Max),
            _ => None,
        }
    }

    /// The zstd level, `None` for off.
    pub fn level(self) -> Option<i32> {
        match self {
            Compression::Off => None,
            Compression::Auto => Some(AUTO_LEVEL),
            Compression::Max => Some(MAX_LEVEL),
        }
    }
}

impl PushOptions {
    pub fn new(profile: Profile) -> PushOptions {
        PushOptions {
            profile,
            engine: Options::default(),
            rapid: None,
            pack_bytes: 8 << 20,
            uploaders: 2,
            parts: true,
            compression: Compression::Auto,
            new_versions: false,
        }
    }
}

/// Live counters of a push (for a progress bar).
#[derive(Default, Debug)]
pub struct Progress {
    pub total: AtomicU64,
    pub processed: AtomicU64,
    pub novel_bytes: AtomicU64,
    pub sent_bytes: AtomicU64,
}

/// What a push did (the `--json` fields).
#[derive(Debug, Clone, serde::Serialize)]
pub struct PushReport {
    pub name: String,
    pub bytes: u64,
    pub chunks: u64,
    /// Chunks (and their bytes) the store lacked: what had to be sent.
    pub novel_chunks: u64,
    pub novel_bytes: u64,
    /// The novel chunks' bytes as they travelled in packs: compressed where that saved
    /// (`--compression`), raw otherwise (without the framing).
    pub compressed_bytes: u64,
    /// Novel chunks sent compressed.
    pub compressed_chunks: u64,
    /// Every request body sent: queries, packs and the recipe.
    pub sent_bytes: u64,
    /// Of which pack bodies (chunk data and framing).
    pub pack_bytes: u64,
    pub packs: u64,
    /// Commit body bytes (a delta or the whole recipe; every attempt).
    pub recipe_bytes: u64,
    /// The version the commit was a delta against (none: the whole recipe was sent).
    pub delta_base: Option<u64>,
    /// Chunks known present from the base recipe (RapidCDC), not queried.
    pub known_from_base: u64,
    /// Chunks cut at a RapidCDC hint.
    pub hinted_chunks: u64,
    /// The recipe's parts (0: committed whole) and those the store lacked and were sent.
    pub parts: u64,
    pub parts_sent: u64,
    /// Of the parts sent, those sent as part deltas against a part of the base version
    /// (PROTOCOL.md 3.8), and the bytes of base parts read for that and for known ids.
    pub parts_delta: u64,
    pub base_part_bytes: u64,
    /// The most chunk ids the push held in memory at once (the ids asked about, where each lies
    /// in the input, the recipe's entries before it went to parts): a bound, not a size. A push
    /// in parts holds at most ~3 × 65,536 at any input size (issue #32).
    pub ids_held: u64,
    pub version: u64,
    pub digest: String,
    pub dedup_ratio: f64,
    pub seconds: f64,
    pub profile: String,
    pub hash: &'static str,
    pub backend: &'static str,
    /// Bytes read from the file (0 for a file the push cache found unchanged).
    pub read_bytes: u64,
    /// The push cache found the file unchanged (same size, times, inode): it was not read.
    /// `version` is its cached version where that is still the name's latest with the same
    /// digest (nothing committed, nothing sent), else (or with `new_versions`) the cached recipe
    /// committed again as a new version ([`crate::pushcache`]).
    pub unchanged: bool,
}

/// A chunk as the chunk stage hands it on (`file`: its input's index).
struct Item {
    file: u32,
    off: u64,
    len: u32,
    id: Digest,
    last: Option<u8>,
    regular: bool,
    hinted: bool,
}

const BATCH: usize = 2048;
/// The most chunk ids a push remembers having asked about (33 bytes a slot, at most ~4.3 MiB
/// with the hash set's spare slots); past it the set is emptied and an id met again is asked
/// again, which costs 32 bytes (issue #32: the client's memory is flat at any input size;
/// `PushReport::ids_held` counts what it holds).
pub const KNOWN_MAX: usize = 1 << 16;

/// What a push knows before it reads the file: the engine, the store's limits and the base
/// recipe (the latest version of the same name, same profile and fingerprint).
struct Plan {
    engine: Engine,
    alg: HashAlg,
    /// Pack size and chunks per pack, within the store's limits.
    pack_target: usize,
    pack_chunks: u64,
    /// The name's latest version before the push (a lost commit answer is read back against it).
    before: Option<u64>,
    base: Option<(u64, Recipe)>,
    /// RapidCDC: the hints of the base recipe and the criterion.
    hints: Option<(HintTable, Criterion)>,
    /// The store's `max_recipe_bytes` (a commit body and a part are at most this).
    max_recipe: u64,
    /// The store's `max_commit_entries`: the most chunks a file's commit may have.
    max_entries: u64,
    /// The store lists `parts` and the push may use them.
    parts: bool,
    /// The base version's part lines, where it was committed in parts with this profile and
    /// fingerprint (its parts are read in a window: [`BaseWindow`]); and whether the store
    /// takes part deltas (feature `part-delta`).
    part_base: Vec<BaseLine>,
    part_delta: bool,
    /// The store's `max_batch_files` when it lists the feature "batch".
    batch_files: Option<usize>,
    /// The zstd level novel chunks are compressed at (`None`: off, or the store lacks `zstd`).
    level: Option<i32>,
    /// Consecutive novel chunks are compressed in groups of about this many raw bytes (pack
    /// codec 2; 0: one frame per chunk, or the store lacks `zstd-group`).
    group_raw: usize,
    /// A push of a stream ([`push_stream`]): its bytes, kept until their chunks are answered
    /// and packed (`None`: files, read back by offset).
    stream: Option<StreamSpool>,
}

/// What the stages share: the first failure (which stops every stage) and the counters.
struct Flow<'a> {
    abort: AtomicBool,
    first_err: Mutex<Option<ClientError>>,
    sent: AtomicU64,
    pack_bytes: AtomicU64,
    packs: AtomicU64,
    /// Chunk data bytes in packs (compressed where that saved), and compressed chunks.
    stored: AtomicU64,
    compressed: AtomicU64,
    /// The most chunk ids the query stage held at once ([`PushReport::ids_held`]).
    ids_held: AtomicU64,
    /// Parts sent as deltas; bytes of base parts read ([`PushReport::parts_delta`]).
    parts_delta: AtomicU64,
    base_read: AtomicU64,
    /// The same two per input (the input of the chunk's first occurrence), once the pack stage
    /// is done.
    per_input: Mutex<Vec<(u64, u64)>>,
    /// Which packs are stored, and the parts waiting on them ([`PartGate`]).
    parts: PartGate,
    progress: &'a Progress,
}

impl<'a> Flow<'a> {
    fn new(progress: &'a Progress) -> Flow<'a> {
        Flow {
            abort: AtomicBool::new(false),
            first_err: Mutex::new(None),
            sent: AtomicU64::new(0),
            pack_bytes: AtomicU64::new(0),
            packs: AtomicU64::new(0),
            stored: AtomicU64::new(0),
            compressed: AtomicU64::new(0),
            ids_held: AtomicU64::new(0),
            parts_delta: AtomicU64::new(0),
            base_read: AtomicU64::new(0),
            per_input: Mutex::new(Vec::new()),
            parts: PartGate::default(),
            progress,
        }
    }

    /// Records the first failure and stops the stages.
    fn fail(&self, e: ClientError) {
        let mut g = self.first_err.lock().unwrap_or_else(|p| p.into_inner());
        if g.is_none() {
            *g = Some(e);
        }
        self.abort.store(true, Ordering::Relaxed);
        drop(g);
        // The early part sender waits on the gate: woken to see the failure.
        self.parts.wake();
    }

    fn aborted(&self) -> bool {
        self.abort.load(Ordering::Relaxed)
    }

    fn take_err(&self) -> Option<ClientError> {
        self.first_err.lock().unwrap_or_else(|p| p.into_inner()).take()
    }

    /// A pack of `len` bytes the store acknowledged.
    fn uploaded(&self, len: u64) {
        self.sent.fetch_add(len, Ordering::Relaxed);
        self.pack_bytes.fetch_add(len, Ordering::Relaxed);
        self.packs.fetch_add(1, Ordering::Relaxed);
        self.progress.sent_bytes.fetch_add(len, Ordering::Relaxed);
    }
}

/// What the query stage learnt of one input: its recipe (entries, or parts on disk), its novel
/// chunks (those whose first occurrence in the push is in it) and the counts.
struct Queried {
    recipe: RecipeSink,
    novel_chunks: u64,
    novel_bytes: u64,
    known_hits: u64,
    hinted: u64,
    /// The window on the base version's parts (a push of one input whose base is in parts):
    /// the last part's delta is made against it when the recipe is sealed.
    window: Option<BaseWindow>,
}

/// Where each id first occurs in the push's inputs: (input, offset, length).
type Offsets = HashMap<Digest, (u32, u64, u32)>;
/// Novel chunks on their way to the pack stage: (input, offset, length, id).
type NovelList = Vec<(u32, u64, u32, Digest)>;

/// How a commit went.
struct Committed {
    version: Version,
    delta_base: Option<u64>,
    recipe_bytes: u64,
}

/// Pushes one file as the next version of `name`: only the chunks the store lacks travel.
/// The stages, each its own function (the same names as `push()` in web/src/client/push.ts):
/// [`prepare`] → [`stage_chunk`] → [`stage_query`] → [`stage_pack`] (reads the novel chunks
/// back) → [`stage_upload`] → [`stage_commit`].
pub fn push_file(client: &Client, path: &Path, name: &str, opts: &PushOptions, progress: &Progress) -> R<PushReport> {
    validate_name(name).map_err(|e| ClientError::Usage(e.to_string()))?;
    let t0 = Instant::now();
    let io_err = |e: io::Error| ClientError::Io(format!("{}: {e}", path.display()));
    let file = std::fs::File::open(path).map_err(io_err)?;
    let meta = file.metadata().map_err(io_err)?;
    if !meta.is_file() {
        return Err(ClientError::Io(format!("{}: not a regular file", path.display())));
    }
    progress.total.store(meta.len(), Ordering::Relaxed);
    trace!("push: start");
    let mut plan = prepare(client, Some(name), opts)?;
    trace!("push: prepared");
    check_limits(&plan, meta.len())?;
    let mut known: HashSet<Digest> = HashSet::new();
    if let Some((_, b)) = &plan.base {
        known.extend(b.entries.iter().map(|e| e.fp));
    }
    let flow = Flow::new(progress);
    let hints = plan.hints.take();
    let (mut qs, offsets) = run_pipeline(client, &[path], vec![Some(file)], &plan, hints, known, opts, &flow);
    trace!("push: pipeline done");
    if let Some(e) = flow.take_err() {
        return Err(e);
    }
    let q = qs.pop().expect("one input");
    // The file must not have changed while it was read twice (chunked, then its novel chunks
    // read back by offset); the store re-hashes every chunk, this catches the rest.
    let after = std::fs::metadata(path).map_err(io_err)?;
    if after.len() != meta.len() || after.modified().ok() != meta.modified().ok() {
        return Err(ClientError::Io(format!(
            "{}: the file changed while it was pushed; nothing was committed (push it again)",
            path.display()
        )));
    }
    if q.recipe.bytes != meta.len() {
        return Err(ClientError::Io(format!(
            "{}: chunked {} bytes of a {}-byte file; nothing was committed",
            path.display(),
            q.recipe.bytes,
            meta.len()
        )));
    }
    conclude(client, name, path, &plan, q, &offsets, &flow, t0)
}

/// Pushes a stream (`cutpoint push -`: standard input) as the next version of `name`, through
/// the same stages as [`push_file`]. A stream is read once: its bytes are kept in a
/// [`StreamSpool`] (temporary files, not memory) only until their chunks are answered and the
/// novel ones packed, so the window stays a few batches whatever the stream's length. A recipe
/// past the parts threshold is committed in parts, like a file's. Chunks that go missing from
/// the store after they were found present (a gc meanwhile) cannot be read again: the push then
/// fails and commits nothing.
pub fn push_stream(client: &Client, input: impl Read + Send, name: &str, opts: &PushOptions, progress: &Progress) -> R<PushReport> {
    validate_name(name).map_err(|e| ClientError::Usage(e.to_string()))?;
    let t0 = Instant::now();
    let label = Path::new("<stdin>");
    let io_err = |e: io::Error| ClientError::Io(format!("{}: {e}", label.display()));
    let mut plan = prepare(client, Some(name), opts)?;
    check_limits(&plan, 0)?;
    plan.stream = Some(StreamSpool::new());
    let mut known: HashSet<Digest> = HashSet::new();
    if let Some((_, b)) = &plan.base {
        known.extend(b.entries.iter().map(|e| e.fp));
    }
    let flow = Flow::new(progress);
    let hints = plan.hints.take();
    let (pipe_r, pipe_w) = io::pipe().map_err(io_err)?;
    let reader = std::fs::File::from(std::os::fd::OwnedFd::from(pipe_r));
    let plan = &plan;
    let (copied, (mut qs, offsets)) = std::thread::scope(|s| {
        let spool = plan.stream.as_ref().expect("a stream");
        let copy = s.spawn(move || tee(input, spool, pipe_w));
        let out = run_pipeline(client, &[label], vec![Some(reader)], plan, hints, known, opts, &flow);
        (copy.join().unwrap_or_else(|_| Err(io::Error::other("the copy thread failed"))), out)
    });
    if let Some(e) = flow.take_err() {
        return Err(e);
    }
    let len = copied.map_err(io_err)?;
    let q = qs.pop().expect("one input");
    if q.recipe.bytes != len {
        return Err(ClientError::Io(format!(
            "{}: chunked {} bytes of {} read; nothing was committed",
            label.display(),
            q.recipe.bytes,
            len
        )));
    }
    conclude(client, name, label, plan, q, &offsets, &flow, t0)
}

/// After the pipeline of one input: the recipe sealed and committed (whole, as a delta, or in
/// parts) and the report.
#[allow(clippy::too_many_arguments)]
fn conclude(client: &Client, name: &str, path: &Path, plan: &Plan, q: Queried, offsets: &Offsets, flow: &Flow, t0: Instant) -> R<PushReport> {
    let Queried {
        recipe: sink,
        novel_chunks,
        novel_bytes,
        known_hits,
        hinted,
        window,
    } = q;
    let (bytes, chunks) = (sink.bytes, sink.count);
    let (digest, c, parts, parts_sent) = match sink.finish(window.as_ref())? {
        Sealed::Whole(recipe) => {
            let digest = recipe.digest.ok_or_else(|| ClientError::Protocol("internal: file digest".into()))?;
            (digest, stage_commit(client, name, &[path], plan, &recipe, offsets, flow)?, 0, 0)
        }
        Sealed::Parts(spool, recipe) => {
            let digest = recipe.digest.ok_or_else(|| ClientError::Protocol("internal: file digest".into()))?;
            let early = flow.parts.take_done();
            trace!("commit: sealed, {} parts, {} handled early", spool.refs.len(), early.len());
            let (c, sent) = stage_commit_parts(client, name, path, plan, &spool, &recipe, &early, flow)?;
            (digest, c, spool.refs.len() as u64, sent)
        }
    };
    Ok(PushReport {
        name: name.to_string(),
        bytes,
        chunks,
        novel_chunks,
        novel_bytes,
        compressed_bytes: flow.stored.load(Ordering::Relaxed),
        compressed_chunks: flow.compressed.load(Ordering::Relaxed),
        sent_bytes: flow.sent.load(Ordering::Relaxed),
        pack_bytes: flow.pack_bytes.load(Ordering::Relaxed),
        packs: flow.packs.load(Ordering::Relaxed),
        recipe_bytes: c.recipe_bytes,
        delta_base: c.delta_base,
        known_from_base: known_hits,
        hinted_chunks: hinted,
        parts,
        parts_sent,
        parts_delta: flow.parts_delta.load(Ordering::Relaxed),
        base_part_bytes: flow.base_read.load(Ordering::Relaxed),
        ids_held: flow.ids_held.load(Ordering::Relaxed),
        version: c.version.version,
        digest: hex(&digest),
        dedup_ratio: if novel_bytes == 0 { f64::INFINITY } else { bytes as f64 / novel_bytes as f64 },
        seconds: t0.elapsed().as_secs_f64(),
        profile: plan.engine.profile().to_string(),
        hash: plan.alg.name(),
        backend: plan.engine.backend().name(),
        read_bytes: bytes,
        unchanged: false,
    })
}

/// A file of more chunks than the store's `max_commit_entries` (PROTOCOL.md 4.1).
fn too_many_entries(max: u64, has: &str) -> ClientError {
    ClientError::Http {
        status: 413,
        code: "too_many_entries".into(),
        message: format!(
            "this file {has} more chunks than the store's max_commit_entries of {max} (a bigger profile makes fewer chunks); nothing was committed"
        ),
    }
}

/// Check before sending: a limit of the store this push cannot meet is refused before a byte
/// is uploaded. A part must hold at least one chunk line; a store without parts takes the file's
/// whole recipe, at least ~70 bytes for each of at least `len / MAX` chunks.
fn check_limits(plan: &Plan, len: u64) -> R<()> {
    let max = plan.max_recipe;
    if plan.parts {
        let need = cutpoint_core::protocol::part::min_part_text(plan.alg);
        if need > max / 4 {
            return Err(ClientError::Usage(format!(
                "the store's max_recipe_bytes ({max}) is too small for a recipe part of one chunk ({need} bytes, a quarter of the limit); nothing was sent"
            )));
        }
        return Ok(());
    }
    let fewest = len.div_ceil(plan.engine.profile().max as u64);
    if fewest > plan.max_entries {
        return Err(too_many_entries(plan.max_entries, "would have at least"));
    }
    let floor = fewest * cutpoint_core::rapid::recipe::MIN_ENTRY_LINE;
    if floor > max {
        return Err(ClientError::Http {
            status: 413,
            code: "too_large".into(),
            message: format!(
                "this file's recipe would be at least {floor} bytes, over the store's max_recipe_bytes of {max}, and the store takes no recipe parts; nothing was sent"
            ),
        });
    }
    Ok(())
}

/// The recipe as the query stage builds it: the entries in memory while they are few, and,
/// once they pass the parts threshold (PROTOCOL.md 3.7), the parts cut so far spooled to a
/// temporary file, each entry dropped once its part is closed. The count, bytes and file
/// digest are kept as the entries go by.
struct RecipeSink {
    profile: String,
    alg: HashAlg,
    max_recipe: u64,
    max_entries: u64,
    parts_ok: bool,
    entries: Vec<RecipeEntry>,
    text_len: u64,
    count: u64,
    bytes: u64,
    digest: FileDigest,
    cutter: PartCutter,
    /// Parts closed before the recipe went to parts (text written once), each with its delta
    /// against a base part.
    closed: Vec<(ClosedPart, Option<Vec<u8>>)>,
    spool: Option<PartSpool>,
}

/// A part the cutter closed: its text and id computed once (a part is ~380 KB of text at the
/// default profile; its delta, its id and the spool all need it).
struct ClosedPart {
    part: Part,
    text: Vec<u8>,
    id: Digest,
    count: u64,
    bytes: u64,
}

impl ClosedPart {
    fn new(part: Part) -> ClosedPart {
        let text = part.text().into_bytes();
        let id = cutpoint_core::protocol::part::part_id(part.hash, &text).unwrap_or_default();
        let (count, bytes) = (part.entries.len() as u64, part.bytes());
        ClosedPart { part, text, id, count, bytes }
    }

    /// Its delta against the base parts in `window`, if it has one worth sending.
    fn delta(&self, window: Option<&BaseWindow>) -> Option<Vec<u8>> {
        window.and_then(|w| w.delta_for(&self.part, &self.id, self.text.len() as u64))
    }
}

/// The parts of a push on disk (an unlinked temporary file) and their (id, count, bytes,
/// offset, length, delta length) in it: a part's delta against a base part, if it has one,
/// follows its text.
struct PartSpool {
    file: std::fs::File,
    len: u64,
    refs: Vec<PartRef>,
}

/// A spooled part: (id, count, bytes, offset, length, delta length).
type PartRef = (Digest, u64, u64, u64, u32, u32);

/// Spooled part `r`'s text, or (`delta`) its delta (empty where it has none), from `file`.
fn read_part(file: &std::fs::File, r: &PartRef, delta: bool) -> R<Vec<u8>> {
    let (_, _, _, off, len, dlen) = *r;
    let (off, len) = if delta { (off + len as u64, dlen) } else { (off, len) };
    let mut b = vec![0; len as usize];
    file.read_exact_at(&mut b, off)
        .map_err(|e| ClientError::Io(format!("reading the recipe's parts back: {e}")))?;
    Ok(b)
}

impl PartSpool {
    fn new() -> R<PartSpool> {
        let p = std::env::temp_dir().join(format!(
            "cutpoint-parts-{}-{}",
            std::process::id(),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
        ));
        let io = |e: io::Error| ClientError::Io(format!("a temporary file for the recipe's parts: {e}"));
        let file = std::fs::OpenOptions::new().read(true).write(true).create_new(true).open(&p).map_err(io)?;
        let _ = std::fs::remove_file(&p);
        Ok(PartSpool { file, len: 0, refs: Vec::new() })
    }

    fn add(&mut self, p: &ClosedPart, delta: Option<&[u8]>) -> R<()> {
        let text = &p.text;
        let delta = delta.unwrap_or_default();
        let io = |e: io::Error| ClientError::Io(format!("writing the recipe's parts to a temporary file: {e}"));
        self.file.write_all_at(text, self.len).map_err(io)?;
        self.file.write_all_at(delta, self.len + text.len() as u64).map_err(io)?;
        self.refs.push((p.id, p.count, p.bytes, self.len, text.len() as u32, delta.len() as u32));
        self.len += (text.len() + delta.len()) as u64;
        Ok(())
    }

}

/// A sealed recipe: whole, or in parts.
enum Sealed {
    Whole(Recipe),
    Parts(PartSpool, PartRecipe),
}

impl RecipeSink {
    fn new(plan: &Plan) -> RecipeSink {
        RecipeSink {
            profile: plan.engine.profile().to_string(),
            alg: plan.alg,
            max_recipe: plan.max_recipe,
            max_entries: plan.max_entries,
            parts_ok: plan.parts,
            entries: Vec::new(),
            text_len: 0,
            count: 0,
            bytes: 0,
            digest: FileDigest::new(plan.alg),
            cutter: PartCutter::new(plan.alg, plan.max_recipe),
            closed: Vec::new(),
            spool: None,
        }
    }

    /// Adds the next entry; a part it closes gets its delta against the base parts in
    /// `window`, if any.
    fn push(&mut self, e: RecipeEntry, window: Option<&BaseWindow>) -> R<()> {
        self.count += 1;
        if self.count > self.max_entries {
            return Err(too_many_entries(self.max_entries, "has"));
        }
        self.bytes += e.size as u64;
        self.digest.add(&e.fp, e.size);
        if self.parts_ok {
            if let Some(p) = self.cutter.push(e.clone()) {
                let mut p = ClosedPart::new(p);
                let delta = p.delta(window);
                // Its entries are in its text: not kept while it waits in `closed`.
                p.part.entries = Vec::new();
                match &mut self.spool {
                    Some(s) => s.add(&p, delta.as_deref())?,
                    None => self.closed.push((p, delta)),
                }
            }
        }
        if self.spool.is_some() {
            return Ok(());
        }
        self.text_len += e.line_len();
        self.entries.push(e);
        // The header and end lines are under 300 bytes.
        if self.parts_ok && needs_parts(self.count, self.text_len + 300, self.max_recipe) {
            let mut s = PartSpool::new()?;
            for (p, d) in std::mem::take(&mut self.closed) {
                s.add(&p, d.as_deref())?;
            }
            self.spool = Some(s);
            self.entries = Vec::new();
        }
        Ok(())
    }

    /// The file offset where the open part starts.
    fn part_start(&self) -> u64 {
        self.bytes - self.cutter.pending_bytes()
    }

    /// The input is all chunked: closes its last part (with its delta against the base parts in
    /// `window`) into the spool, so that it can be sent with the others; [`RecipeSink::finish`]
    /// then has none left to close. A recipe not in parts is left as it is.
    fn close_last(&mut self, window: Option<&BaseWindow>) -> R<()> {
        let Some(s) = &mut self.spool else { return Ok(()) };
        if let Some(p) = self.cutter.finish() {
            let p = ClosedPart::new(p);
            let delta = p.delta(window);
            s.add(&p, delta.as_deref())?;
        }
        Ok(())
    }

    /// Seals the recipe; the last part gets its delta against the base parts in `window`.
    fn finish(mut self, window: Option<&BaseWindow>) -> R<Sealed> {
        let digest = std::mem::replace(&mut self.digest, FileDigest::new(self.alg)).finish();
        match self.spool.take() {
            None => Ok(Sealed::Whole(Recipe {
                profile: self.profile,
                hash: self.alg,
                digest,
                entries: self.entries,
            })),
            Some(mut s) => {
                if let Some(p) = self.cutter.finish() {
                    let p = ClosedPart::new(p);
                    let delta = p.delta(window);
                    s.add(&p, delta.as_deref())?;
                }
                let lines = s.refs.iter().map(|r| Line::Part { id: r.0, count: r.1, bytes: r.2 }).collect();
                let r = PartRecipe {
                    profile: self.profile,
                    hash: self.alg,
                    digest,
                    lines,
                    count: self.count,
                    bytes: self.bytes,
                };
                Ok(Sealed::Parts(s, r))
            }
        }
    }
}

/// Commits a recipe in parts: the parts the store lacks (`parts/query`) are uploaded from the
/// spool (a part whose chunks went missing meanwhile gets them sent again), then the short
/// recipe of part lines is committed (a part gone meanwhile, 409 `missing_parts`: sent again).
/// `early`: the parts [`send_early_parts`] already stored or found present while the file was
/// chunked (not asked about again the first time). Returns how it went and how many parts were
/// sent (those sent early included).
#[allow(clippy::too_many_arguments)]
fn stage_commit_parts(
    client: &Client,
    name: &str,
    path: &Path,
    plan: &Plan,
    spool: &PartSpool,
    recipe: &PartRecipe,
    early: &[(usize, bool)],
    flow: &Flow,
) -> R<(Committed, u64)> {
    let text = recipe.text().into_bytes();
    if text.len() as u64 > plan.max_recipe {
        return Err(ClientError::Http {
            status: 413,
            code: "too_large".into(),
            message: format!(
                "the recipe of {} parts is {} bytes, over the store's max_recipe_bytes of {}; its chunks were sent, nothing was committed",
                spool.refs.len(),
                text.len(),
                plan.max_recipe
            ),
        });
    }
    let mut sent_parts = early.iter().filter(|(_, sent)| *sent).count() as u64;
    let mut skip: HashSet<usize> = early.iter().map(|(i, _)| *i).collect();
    let mut recipe_bytes = 0u64;
    let mut rounds = 0;
    loop {
        sent_parts += send_parts(client, path, plan, spool, &skip, flow)?;
        trace!("commit: parts sent, committing");
        flow.sent.fetch_add(text.len() as u64, Ordering::Relaxed);
        recipe_bytes += text.len() as u64;
        let res = commit_read_back(client, name, &text, recipe.digest, plan.before);
        trace!("commit: answered");
        match res {
            Ok(version) => {
                let c = Committed {
                    version,
                    delta_base: None,
                    recipe_bytes,
                };
                return Ok((c, sent_parts));
            }
            Err(ClientError::Http { status: 409, code, .. }) if code == "missing_parts" && rounds < 3 => {
                rounds += 1;
                skip.clear();
            }
            Err(e) => return Err(e),
        }
    }
}

/// Parts sent at once by [`send_parts`]: the store checks each on its own thread (a part
/// delta's check is short, its parse and text are not), and the client waits on each.
const PART_SENDERS: usize = 4;

/// Uploads the spooled parts (but those in `skip`) the store lacks, [`PART_SENDERS`] at a time;
/// returns how many.
fn send_parts(client: &Client, path: &Path, plan: &Plan, spool: &PartSpool, skip: &HashSet<usize>, flow: &Flow) -> R<u64> {
    let asked: Vec<usize> = (0..spool.refs.len()).filter(|i| !skip.contains(i)).collect();
    if asked.is_empty() {
        return Ok(0);
    }
    let ids: Vec<Digest> = asked.iter().map(|&i| spool.refs[i].0).collect();
    flow.sent.fetch_add(ids.len() as u64 * 32, Ordering::Relaxed);
    let missing: HashSet<Digest> = client.query_parts(&ids)?.into_iter().collect();
    let todo: Vec<(usize, PartRef)> = asked.into_iter().filter(|&i| missing.contains(&spool.refs[i].0)).map(|i| (i, spool.refs[i])).collect();
    trace!("commit: {} parts asked, {} to send", ids.len(), todo.len());
    let done = put_parts(client, plan, &spool.file, &todo, flow);
    let mut n = 0;
    for (i, mut r) in done {
        // Chunks of the part collected since they were found present: sent again, then the
        // part (one part at a time: this reads the file again).
        let mut rounds = 0;
        let delta = loop {
            match r {
                Ok(delta) => break delta,
                Err(ClientError::Missing(lost)) if rounds < 3 => {
                    rounds += 1;
                    let offsets = locate(path, plan, &lost)?;
                    resend_missing(client, &[path], plan, &offsets, &lost, flow)?;
                    r = send_part(client, plan, &spool.file, &spool.refs[i], flow);
                }
                Err(e) => return Err(e),
            }
        };
        if delta {
            flow.parts_delta.fetch_add(1, Ordering::Relaxed);
        }
        n += 1;
    }
    Ok(n)
}

/// Uploads the parts `todo` (spool index, ref) from the spool `file`, [`PART_SENDERS`] at a time;
/// after a failure other than missing chunks the rest are not sent. Returns each one sent and
/// how it went (whether as a delta), in spool order.
fn put_parts(client: &Client, plan: &Plan, file: &std::fs::File, todo: &[(usize, PartRef)], flow: &Flow) -> Vec<(usize, R<bool>)> {
    let next = std::sync::atomic::AtomicUsize::new(0);
    let done: Mutex<Vec<(usize, R<bool>)>> = Mutex::new(Vec::new());
    std::thread::scope(|s| {
        for _ in 0..PART_SENDERS.min(todo.len()) {
            s.spawn(|| loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some((i, r)) = todo.get(k) else { break };
                let res = send_part(client, plan, file, r, flow);
                let failed = matches!(res, Err(ref e) if !matches!(e, ClientError::Missing(_)));
                done.lock().unwrap_or_else(|p| p.into_inner()).push((*i, res));
                if failed {
                    // Stop the others: this push fails.
                    next.store(todo.len(), Ordering::Relaxed);
                }
            });
        }
    });
    let mut done = done.into_inner().unwrap_or_else(|p| p.into_inner());
    done.sort_by_key(|(i, _)| *i);
    done
}

/// Uploads spooled part `r`: its delta against a base part where it has one and the store
/// takes them (PROTOCOL.md 3.8), else its text; a delta refused (its base gone meanwhile, or
/// any 4xx): the text. Returns whether the delta was stored.
fn send_part(client: &Client, plan: &Plan, file: &std::fs::File, r: &PartRef, flow: &Flow) -> R<bool> {
    let mut delta = plan.part_delta && r.5 > 0;
    loop {
        let body = read_part(file, r, delta)?;
        flow.sent.fetch_add(body.len() as u64, Ordering::Relaxed);
        flow.progress.sent_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        match client.put_part(&body) {
            Ok(_) => return Ok(delta),
            Err(ClientError::Http { status: 400..=499, .. }) if delta => delta = false,
            Err(e) => return Err(e),
        }
    }
}

/// Parts sent while the file is still chunked (PROTOCOL.md 5.1 step 5): a part may go once
/// every novel chunk queried up to its last entry is in a pack the store has acknowledged (a
/// part is stored only once its chunks are). The pack stage numbers its packs with the novel
/// chunks each closes ([`PartGate::pack_made`]), the uploaders say which are stored
/// ([`PartGate::pack_stored`]), the query stage queues each spooled part with the novel chunks
/// it needs ([`PartGate::queue`]), and [`send_early_parts`] sends those ready. The commit
/// stage then sends only the others (the last part, and any that failed here).
#[derive(Default)]
struct PartGate {
    st: Mutex<GateState>,
    cv: Condvar,
}

#[derive(Default)]
struct GateState {
    /// Packs made and not yet stored as a prefix: (novel chunks through this pack, stored).
    packs: VecDeque<(u64, bool)>,
    /// The number of the pack at the front of `packs`.
    first: u64,
    /// Novel chunks in the packs stored so far, all of them from the first on.
    stored: u64,
    /// Parts waiting: (spool index, ref, novel chunks it needs).
    queue: VecDeque<(usize, PartRef, u64)>,
    /// The spool's file (its own handle), once the recipe went to parts.
    file: Option<std::fs::File>,
    /// Spooled parts queued so far.
    queued: usize,
    /// No more parts are queued (the query stage is done).
    closed: bool,
    /// Parts handled early: (spool index, sent (else found present)).
    done: Vec<(usize, bool)>,
}

impl PartGate {
    fn lock(&self) -> std::sync::MutexGuard<'_, GateState> {
        self.st.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A pack was made holding the novel chunks up to `through` (counted from the first);
    /// returns its number.
    fn pack_made(&self, through: u64) -> u64 {
        let mut g = self.lock();
        g.packs.push_back((through, false));
        let seq = g.first + g.packs.len() as u64 - 1;
        trace!("pack: {seq} made, novel chunks through {through}");
        seq
    }

    /// Pack `seq` is stored.
    fn pack_stored(&self, seq: u64) {
        let mut g = self.lock();
        let Some(k) = seq.checked_sub(g.first) else { return };
        if let Some(p) = g.packs.get_mut(k as usize) {
            p.1 = true;
        }
        while g.packs.front().is_some_and(|p| p.1) {
            let (through, _) = g.packs.pop_front().expect("a pack");
            g.stored = through;
            g.first += 1;
        }
        trace!("pack: {seq} stored, novel chunks stored {}", g.stored);
        self.cv.notify_all();
    }

    /// Queues the parts spooled since the last call; each needs the first `novel` novel chunks
    /// stored.
    /// Returns whether any were.
    fn queue(&self, spool: &PartSpool, novel: u64) -> R<bool> {
        let mut g = self.lock();
        if g.queued == spool.refs.len() {
            return Ok(false);
        }
        if g.file.is_none() {
            let f = spool.file.try_clone().map_err(|e| ClientError::Io(format!("the recipe's parts' temporary file: {e}")))?;
            g.file = Some(f);
        }
        trace!("parts: {}..{} queued, need {novel} novel chunks (stored {})", g.queued, spool.refs.len(), g.stored);
        for i in g.queued..spool.refs.len() {
            g.queue.push_back((i, spool.refs[i], novel));
        }
        g.queued = spool.refs.len();
        self.cv.notify_all();
        Ok(true)
    }

    /// The query stage is done: no more parts.
    fn close(&self) {
        trace!("query: done");
        self.lock().closed = true;
        self.cv.notify_all();
    }

    /// The parts handled early.
    fn take_done(&self) -> Vec<(usize, bool)> {
        std::mem::take(&mut self.lock().done)
    }

    /// Waits for queued parts whose chunks are all stored and takes them (with the spool's
    /// file); `None` once no more will come (or the push failed).
    fn next_ready(&self, flow: &Flow) -> Option<(Vec<(usize, PartRef)>, std::fs::File)> {
        let mut g = self.lock();
        loop {
            if flow.aborted() || (g.closed && g.queue.is_empty()) {
                return None;
            }
            let mut ready = Vec::new();
            while g.queue.front().is_some_and(|q| q.2 <= g.stored) {
                let (i, r, _) = g.queue.pop_front().expect("a part");
                ready.push((i, r));
            }
            if !ready.is_empty() {
                let file = g.file.as_ref().and_then(|f| f.try_clone().ok())?;
                return Some((ready, file));
            }
            // Woken by a pack stored, a part queued, the close, or a failure ([`Flow::fail`]).
            g = self.cv.wait(g).unwrap_or_else(|p| p.into_inner());
        }
    }

    /// Wakes the part sender (a failure: it sees the abort flag).
    fn wake(&self) {
        // Under the lock, so that a sender between its check and its wait is not missed.
        let _g = self.lock();
        self.cv.notify_all();
    }

    /// How many queued parts need novel chunks after the first `made` (those in packs made)
    /// and within the first `packed` (those read so far): the parts that wait on the pack
    /// being filled.
    fn waiting_on_open(&self, made: u64, packed: u64) -> usize {
        let g = self.lock();
        // The queue is in the order of the novel chunks each part needs.
        g.queue.iter().rev().skip_while(|q| q.2 > packed).take_while(|q| q.2 > made).count()
    }
}

/// The early part sender (one input in parts): as parts become ready ([`PartGate`]), asks which
/// of them the store lacks (`parts/query`) and uploads those, [`PART_SENDERS`] at a time. A
/// part that fails here is left to the commit stage, which sends it again as before.
fn send_early_parts(client: &Client, plan: &Plan, flow: &Flow) {
    while let Some((ready, file)) = flow.parts.next_ready(flow) {
        let ids: Vec<Digest> = ready.iter().map(|(_, r)| r.0).collect();
        flow.sent.fetch_add(ids.len() as u64 * 32, Ordering::Relaxed);
        let missing: HashSet<Digest> = match client.query_parts(&ids) {
            Ok(m) => m.into_iter().collect(),
            Err(_) => continue, // the commit stage asks again
        };
        let (todo, present): (Vec<_>, Vec<_>) = ready.into_iter().partition(|(_, r)| missing.contains(&r.0));
        trace!("early: {} parts ready, {} to send", ids.len(), todo.len());
        let mut done: Vec<(usize, bool)> = present.into_iter().map(|(i, _)| (i, false)).collect();
        for (i, res) in put_parts(client, plan, &file, &todo, flow) {
            if let Ok(delta) = res {
                if delta {
                    flow.parts_delta.fetch_add(1, Ordering::Relaxed);
                }
                done.push((i, true));
            }
        }
        trace!("early: {} parts handled", done.len());
        flow.parts.lock().done.extend(done);
    }
    trace!("early: done");
}

/// Where chunks `ids` lie in the file: found by chunking it again (a push in parts keeps no
/// map of every chunk; this is only needed when chunks went missing after they were queried).
fn locate(path: &Path, plan: &Plan, ids: &[Digest]) -> R<Offsets> {
    if plan.stream.is_some() {
        return Err(stream_lost(ids.len()));
    }
    let want: HashSet<Digest> = ids.iter().copied().collect();
    let f = std::fs::File::open(path).map_err(|e| ClientError::Io(format!("{}: {e}", path.display())))?;
    let mut out = HashMap::new();
    for c in plan.engine.stream_prefetch(f) {
        let c = c.map_err(|e| ClientError::Io(format!("{}: {e}", path.display())))?;
        if let Some(h) = c.hash.filter(|h| want.contains(h)) {
            out.entry(h).or_insert((0, c.offset, c.length as u32));
        }
    }
    Ok(out)
}

/// Before the file is read: the engine, packs within the store's limits (`GET /v1`), the
/// base recipe and, with RapidCDC, its hints.
fn prepare(client: &Client, name: Option<&str>, opts: &PushOptions) -> R<Plan> {
    let engine = Engine::new(opts.profile.clone(), opts.engine.clone()).map_err(|e| ClientError::Usage(e.to_string()))?;
    let alg = engine.hash_alg();
    if alg == HashAlg::None {
        return Err(ClientError::Usage("a push needs fingerprints (--hash blake3 or sha256)".into()));
    }
    // Packs within the store's limit (`limits.max_pack_bytes` of `GET /v1`), whatever --pack-size.
    let info = client.info()?;
    let pack_target = match info.pointer("/limits/max_pack_bytes").and_then(|v| v.as_u64()) {
        Some(max) => fit_pack_target(opts.pack_bytes, engine.profile().max, max).map_err(ClientError::Usage)?,
        None => opts.pack_bytes.max(1),
    };
    // And within its count of chunks per pack (`limits.max_pack_chunks`).
    let pack_chunks = fit_pack_chunks(info.pointer("/limits/max_pack_chunks").and_then(|v| v.as_u64()));
    let batch = info.get("features").and_then(|f| f.as_array()).is_some_and(|f| f.iter().any(|x| x == "batch"));
    let batch_files = batch.then(|| info.pointer("/limits/max_batch_files").and_then(|v| v.as_u64()).unwrap_or(1).max(1) as usize);
    let max_recipe = info.pointer("/limits/max_recipe_bytes").and_then(|v| v.as_u64()).unwrap_or(u64::MAX);
    let max_entries = info.pointer("/limits/max_commit_entries").and_then(|v| v.as_u64()).unwrap_or(u64::MAX);
    let parts = opts.parts
        && info
            .get("features")
            .and_then(|f| f.as_array())
            .is_some_and(|f| f.iter().any(|x| x == "parts"));
    // Compressed frames only where the store lists them (an older store: raw, as before).
    let zstd = info
        .get("features")
        .and_then(|f| f.as_array())
        .is_some_and(|f| f.iter().any(|x| x == "zstd"));
    let level = opts.compression.level().filter(|_| zstd);
    let group_raw = if level.is_some() && has_feature(&info, "zstd-group") { group_target(engine.profile().max) } else { 0 };
    let part_delta = parts
        && info
            .get("features")
            .and_then(|f| f.as_array())
            .is_some_and(|f| f.iter().any(|x| x == "part-delta"));
    let Some(name) = name else {
        return Ok(Plan {
            level,
            group_raw,
            engine,
            alg,
            pack_target,
            pack_chunks,
            before: None,
            base: None,
            hints: None,
            batch_files,
            max_recipe,
            max_entries,
            parts,
            part_base: Vec::new(),
            part_delta,
            stream: None,
        });
    };
    // The base recipe (the latest version of the same name, same profile and fingerprint):
    // chunks known present without asking, the base of a delta commit, and RapidCDC hints.
    // A damaged latest recipe is no base: the push commits its whole recipe.
    // A version committed in parts is no such base (its stored text is read, `?parts=1`, not
    // its expansion): its part lines are kept, and its parts read in a window as the file is
    // chunked ([`BaseWindow`]: known ids, part deltas); unchanged parts are found present by
    // `parts/query`.
    let latest = match client.head(name, None) {
        Err(ClientError::Verify(_) | ClientError::Protocol(_)) => None,
        r => r?,
    };
    let before = latest.as_ref().map(|(v, _)| *v);
    let part_base = match &latest {
        Some((_, r)) if parts && r.has_parts() && r.profile == engine.profile().to_string() && r.hash == alg => base_lines(&r.lines),
        _ => Vec::new(),
    };
    let base: Option<(u64, Recipe)> = latest
        .and_then(|(v, r)| r.into_recipe().map(|r| (v, r)))
        .filter(|(_, b)| b.profile == engine.profile().to_string() && b.hash == alg);
    let mut hints = None;
    if let Some(crit) = opts.rapid {
        let mut t = HintTable::new(engine.profile(), alg, 2).map_err(|e| ClientError::Usage(e.to_string()))?;
        if let Some((_, b)) = &base {
            t.add_recipe(b).map_err(|e| ClientError::Protocol(e.to_string()))?;
        }
        hints = Some((t, crit));
    }
    Ok(Plan {
        level,
        group_raw,
        engine,
        alg,
        pack_target,
        pack_chunks,
        before,
        base,
        hints,
        max_recipe,
        max_entries,
        parts,
        part_base,
        part_delta,
        batch_files,
        stream: None,
    })
}

/// The stages of a push of `paths` (their files open in `files`, or opened by the chunk stage
/// in turn where `None`), run together: the chunk
/// stage and the pack stage on threads of their own, `opts.uploaders` upload threads, the
/// query stage on this one. Returns what the query stage learnt of each input and where each
/// id first occurs; a failure is in `flow`.
#[allow(clippy::too_many_arguments)]
fn run_pipeline(
    client: &Client,
    paths: &[&Path],
    files: Vec<Option<std::fs::File>>,
    plan: &Plan,
    hints: Option<(HintTable, Criterion)>,
    known: HashSet<Digest>,
    opts: &PushOptions,
    flow: &Flow,
) -> (Vec<Queried>, Offsets) {
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Vec<Item>>(8);
    let (novel_tx, novel_rx) = mpsc::sync_channel::<NovelList>(8);
    let (pack_tx, pack_rx) = mpsc::sync_channel::<(u64, Vec<u8>)>(1);
    let pack_rx = Mutex::new(pack_rx);
    std::thread::scope(|s| {
        s.spawn(move || stage_chunk(&plan.engine, hints, files, paths, flow, chunk_tx));
        s.spawn(move || stage_pack(paths, plan, flow, novel_rx, pack_tx));
        for _ in 0..opts.uploaders.max(1) {
            let pack_rx = &pack_rx;
            s.spawn(move || stage_upload(client, flow, pack_rx));
        }
        if paths.len() == 1 && plan.parts {
            // One input that may go to parts: its parts are sent as their chunks are stored.
            s.spawn(move || send_early_parts(client, plan, flow));
        }
        // This thread: the recipes, and existence queries for what is not known.
        stage_query(client, flow, plan, paths.len(), known, chunk_rx, novel_tx)
    })
}

/// Chunk + fingerprint the inputs in order (SS-CDC, or RapidCDC with the base's hints), in
/// batches that run on across inputs (many small files share a batch, so a query).
fn stage_chunk(engine: &Engine, hints: Option<(HintTable, Criterion)>, files: Vec<Option<std::fs::File>>, paths: &[&Path], flow: &Flow, chunk_tx: mpsc::SyncSender<Vec<Item>>) {
    let mut batch = Vec::with_capacity(BATCH);
    let send = |batch: &mut Vec<Item>| -> bool {
        let b = std::mem::replace(batch, Vec::with_capacity(BATCH));
        !flow.aborted() && chunk_tx.send(b).is_ok()
    };
    let mut hints = hints;
    let mut buf = Vec::new();
    for (i, rd) in files.into_iter().enumerate() {
        let file = i as u32;
        // Opened in turn (a push of many files holds one open at a time).
        let rd = match rd {
            Some(f) => f,
            None => match std::fs::File::open(paths[i]) {
                Ok(f) => f,
                Err(e) => return flow.fail(ClientError::Io(format!("{}: {e}", paths[i].display()))),
            },
        };
        let res = chunk_one(engine, hints.take(), rd, file, &mut buf, &mut batch, &send);
        match res {
            Ok(true) => {}
            Ok(false) => return,
            Err(e) => {
                return flow.fail(match e {
                    cutpoint_core::Error::Io(io) => ClientError::Io(format!("{}: {io}", paths[i].display())),
                    other => ClientError::Usage(other.to_string()),
                })
            }
        }
    }
    if !batch.is_empty() {
        send(&mut batch);
    }
    trace!("chunk: done");
}

/// Files up to this size are read whole into one reused buffer and chunked there
/// ([`Engine::chunks`]: the same chunks as streaming): a stream costs a read-ahead thread and
/// two zeroed block buffers, which dominated a push of many small files.
const SMALL_FILE: u64 = 1 << 20;

/// One input of the chunk stage; `Ok(false)`: the push stopped.
fn chunk_one(
    engine: &Engine,
    hints: Option<(HintTable, Criterion)>,
    rd: std::fs::File,
    file: u32,
    buf: &mut Vec<u8>,
    batch: &mut Vec<Item>,
    send: &impl Fn(&mut Vec<Item>) -> bool,
) -> Result<bool, cutpoint_core::Error> {
    // Adds one chunk; false once the receiver is gone.
    let mut add = |it: Item| {
        batch.push(it);
        batch.len() < BATCH || send(batch)
    };
    let plain = |off: u64, len: usize, id: Option<Digest>| Item {
        file,
        off,
        len: len as u32,
        id: id.expect("the engine fingerprints"),
        last: None,
        regular: true,
        hinted: false,
    };
    match hints {
        Some((t, crit)) => {
            let mut rapid = Rapid::new(engine, t, RapidOptions::new(crit))?;
            for c in rapid.stream(rd) {
                let c = c?;
                let hinted = matches!(c.found, cutpoint_core::rapid::Found::Hint(_));
                let it = Item { last: Some(c.last), regular: c.regular, hinted, ..plain(c.offset, c.length, Some(c.hash)) };
                if !add(it) {
                    return Ok(false);
                }
            }
        }
        None if rd.metadata().is_ok_and(|m| m.is_file() && m.len() <= SMALL_FILE) => {
            // A file that grew meanwhile is cut at SMALL_FILE + 1 bytes: its length then
            // differs from its metadata's and the push refuses it (sealed).
            buf.clear();
            (&rd).take(SMALL_FILE + 1).read_to_end(buf).map_err(cutpoint_core::Error::Io)?;
            for c in engine.chunks(buf) {
                if !add(plain(c.offset, c.length, c.hash)) {
                    return Ok(false);
                }
            }
        }
        None => {
            for c in engine.stream_prefetch(rd) {
                let c = c?;
                if !add(plain(c.offset, c.length, c.hash)) {
                    return Ok(false);
                }
            }
        }
    }
    Ok(true)
}

/// The recipe's entries, and existence queries for the ids not known present; the novel
/// chunks go on to the pack stage. Returns what it learnt (after a failure: what it had).
/// A query's answer names only ids that were asked: a store naming another is a protocol error
/// (the push would otherwise look up an id it never chunked).
fn answer_was_asked(asked: &[Digest], answer: &[Digest]) -> R<()> {
    if answer.is_empty() {
        return Ok(());
    }
    let asked: HashSet<&Digest> = asked.iter().collect();
    match answer.iter().find(|id| !asked.contains(id)) {
        Some(id) => Err(ClientError::Protocol(format!("the store's query answer names {}, which was not asked", hex(id)))),
        None => Ok(()),
    }
}

/// Ends the push when a stage panics: the part sender would otherwise wait for packs that never
/// come, and `thread::scope` joins every thread before it passes the panic on.
struct AbortOnPanic<'a>(&'a Flow<'a>);

impl Drop for AbortOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abort.store(true, Ordering::Relaxed);
            self.0.parts.close();
        }
    }
}

/// Empties a channel when its thread panics (see [`stage_upload`]).
struct DrainOnPanic<'a, T>(&'a Mutex<mpsc::Receiver<T>>);

impl<T> Drop for DrainOnPanic<'_, T> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            let rx = self.0.lock().unwrap_or_else(|p| p.into_inner());
            while rx.recv().is_ok() {}
        }
    }
}

fn stage_query(
    client: &Client,
    flow: &Flow,
    plan: &Plan,
    inputs: usize,
    mut known: HashSet<Digest>,
    chunk_rx: mpsc::Receiver<Vec<Item>>,
    novel_tx: mpsc::SyncSender<NovelList>,
) -> (Vec<Queried>, Offsets) {
    let _panic = AbortOnPanic(flow);
    let known_base = known.clone();
    let mut qs: Vec<Queried> = (0..inputs)
        .map(|_| Queried {
            recipe: RecipeSink::new(plan),
            novel_chunks: 0,
            novel_bytes: 0,
            known_hits: 0,
            hinted: 0,
            window: None,
        })
        .collect();
    // The base version's parts near the offset being queried (one input: a push of a file or
    // a stream whose base is in parts).
    let mut window = (inputs == 1 && !plan.part_base.is_empty()).then(|| BaseWindow::new(plan.alg, plan.part_base.clone(), plan.part_delta));
    let mut offsets = Offsets::new();
    // Recipe entries held in memory by the inputs' sinks (before their recipes go to parts).
    let mut entries_held = 0usize;
    // Novel chunks handed to the pack stage so far: a part closed in a batch may be sent once
    // that many are stored ([`PartGate`]; one input).
    let mut novel_total = 0u64;
    // Queues the parts closed since (one input); true if any were.
    let queue_parts = |qs: &[Queried], novel: u64| -> R<bool> {
        match &qs[0].recipe.spool {
            Some(s) if inputs == 1 => flow.parts.queue(s, novel),
            _ => Ok(false),
        }
    };
    // The end of a batch (its novel chunks, if any, `listed` to the pack stage): the stream's
    // spool told, the parts closed since queued, and then an empty list, so that the pack stage
    // counts them at once (it may close its open pack for them, [`FLUSH_PARTS`]; parts queued
    // after a list would be seen only at the next one). False where the push stops.
    let end_batch = |qs: &[Queried], end: u64, listed: bool, novel: u64| -> bool {
        if let Some(s) = &plan.stream {
            s.batch_done(end, listed);
        }
        match queue_parts(qs, novel) {
            Ok(queued) => !(queued && novel_tx.send(Vec::new()).is_err()),
            Err(e) => {
                flow.fail(e);
                false
            }
        }
    };
    for batch in chunk_rx.iter() {
        if flow.aborted() {
            break;
        }
        let mut ask = Vec::new();
        // Where this batch's ids lie (every id's, while the recipe is whole: a commit's
        // missing chunks are read back from there; a push in parts finds them again).
        let mut here: Offsets = HashMap::new();
        // The ids asked about are remembered up to a bound (memory flat at any size): past
        // it an id may be asked twice, which costs 32 bytes.
        if known.len() > KNOWN_MAX {
            known.clear();
        }
        let end = batch.last().map_or(0, |it| it.off + it.len as u64);
        if let Some(w) = &mut window {
            // From before the open part (its delta's base) to past this batch.
            let lo = qs[0].recipe.part_start().saturating_sub(WINDOW_BYTES);
            w.advance(client, lo, end + WINDOW_BYTES);
        }
        for it in &batch {
            let q = &mut qs[it.file as usize];
            let before = q.recipe.entries.len();
            if let Err(e) = q.recipe.push(
                RecipeEntry {
                    fp: it.id,
                    size: it.len,
                    last: it.last,
                    regular: it.regular,
                },
                window.as_ref(),
            ) {
                flow.fail(e);
                break;
            }
            entries_held = entries_held + q.recipe.entries.len() - before;
            q.hinted += it.hinted as u64;
            here.entry(it.id).or_insert((it.file, it.off, it.len));
            if q.recipe.spool.is_none() {
                offsets.entry(it.id).or_insert((it.file, it.off, it.len));
            } else if !offsets.is_empty() {
                offsets = HashMap::new();
            }
            // In the base recipe, or in a base part in the window: present, not asked.
            let in_base = known_base.contains(&it.id) || window.as_ref().is_some_and(|w| w.contains(&it.id));
            if in_base {
                q.known_hits += 1;
            }
            if !in_base && known.insert(it.id) {
                ask.push(it.id);
            }
            flow.progress.processed.fetch_add(it.len as u64, Ordering::Relaxed);
        }
        let held = known.len() + known_base.len() + offsets.len() + here.len() + entries_held + window.as_ref().map_or(0, |w| w.len());
        flow.ids_held.fetch_max(held as u64, Ordering::Relaxed);
        if ask.is_empty() {
            if !end_batch(&qs, end, false, novel_total) {
                break;
            }
            continue;
        }
        flow.sent.fetch_add(ask.len() as u64 * 32, Ordering::Relaxed);
        flow.progress.sent_bytes.fetch_add(ask.len() as u64 * 32, Ordering::Relaxed);
        let missing = match client.query(&ask) {
            Ok(m) => m,
            Err(e) => {
                flow.fail(e);
                break;
            }
        };
        let mut list = Vec::with_capacity(missing.len());
        for id in missing {
            let (file, off, len) = here[&id];
            let q = &mut qs[file as usize];
            q.novel_chunks += 1;
            q.novel_bytes += len as u64;
            flow.progress.novel_bytes.fetch_add(len as u64, Ordering::Relaxed);
            list.push((file, off, len, id));
        }
        let listed = !list.is_empty();
        trace!("query: batch to {end}: {} asked, {} novel", ask.len(), list.len());
        novel_total += list.len() as u64;
        if listed && novel_tx.send(list).is_err() {
            break;
        }
        if !end_batch(&qs, end, listed, novel_total) {
            break;
        }
    }
    // The input is all chunked (one input in parts): its last part goes with the others.
    if inputs == 1 && !flow.aborted() {
        let closed = qs[0].recipe.close_last(window.as_ref()).and_then(|_| queue_parts(&qs, novel_total));
        if let Err(e) = closed {
            flow.fail(e);
        }
    }
    flow.parts.close();
    drop(novel_tx);
    // Drain so that the chunker never blocks on a full channel after an error.
    for _ in chunk_rx.iter() {}
    if let Some(w) = window {
        flow.base_read.fetch_add(w.read_bytes, Ordering::Relaxed);
        qs[0].window = Some(w);
    }
    (qs, offsets)
}

/// Whether `GET /v1` lists `feature`.
fn has_feature(info: &serde_json::Value, feature: &str) -> bool {
    info.get("features").and_then(|f| f.as_array()).is_some_and(|f| f.iter().any(|x| x == feature))
}

/// The raw bytes of a group of novel chunks ([`GROUP_RAW`]; `CUTPOINT_GROUP_RAW` overrides it,
/// 0 for none: measurements), at most the profile's MAX, so that a pack passes its target by no
/// more than one chunk would (a group's frame and heads save at least 1/16 of its raw bytes).
fn group_target(max_chunk: usize) -> usize {
    let want = std::env::var("CUTPOINT_GROUP_RAW").ok().and_then(|v| v.parse().ok()).unwrap_or(GROUP_RAW);
    want.min(max_chunk).min(MAX_GROUP_RAW)
}

/// `--compression auto|max` with a store that lists `zstd-group`: consecutive novel chunks of a
/// pack are compressed together in groups of about this many raw bytes (docs/performance.md:
/// measured 32/64/128 KiB on the restic bench).
pub const GROUP_RAW: usize = 64 << 10;

/// Reads the novel chunks back by offset (novel chunks of all the inputs share packs),
/// compresses them (where the plan says, in groups of [`COMPRESS_GROUP`] across the cores) and
/// frames them into packs of the plan's size.
fn stage_pack(paths: &[&Path], plan: &Plan, flow: &Flow, novel_rx: mpsc::Receiver<NovelList>, pack_tx: mpsc::SyncSender<(u64, Vec<u8>)>) {
    let _panic = AbortOnPanic(flow);
    let mut per = vec![(0u64, 0u64); paths.len()];
    pack_inputs(paths, plan, flow, novel_rx, pack_tx, &mut per);
    *flow.per_input.lock().unwrap_or_else(|p| p.into_inner()) = per;
}

/// [`stage_pack`]'s work; `per`: each input's stored bytes and compressed chunks.
/// Each pack goes with its number ([`PartGate::pack_made`]: the novel chunks it holds, counted
/// from the first, tell which parts may go once it is stored).
fn pack_inputs(paths: &[&Path], plan: &Plan, flow: &Flow, novel_rx: mpsc::Receiver<NovelList>, pack_tx: mpsc::SyncSender<(u64, Vec<u8>)>, per: &mut [(u64, u64)]) {
    let codec = match plan.level {
        Some(_) if plan.group_raw > 0 => Codec::Group,
        Some(_) => Codec::Zstd,
        None => Codec::None,
    };
    let mut cur: Option<PackWriter<Vec<u8>>> = None;
    let mut sampler = Sampler::default();
    let mut open: Option<(u32, std::fs::File)> = None;
    // Novel chunks in the packs made so far and in the open one; in the packs made.
    let mut packed = 0u64;
    let mut made = 0u64;
    // Closes the open pack early where [`FLUSH_PARTS`] parts wait on it; false once the
    // uploaders are gone.
    let flush_for_parts = |cur: &mut Option<PackWriter<Vec<u8>>>, made: &mut u64, packed: u64| -> bool {
        if cur.is_none() || flow.parts.waiting_on_open(*made, packed) < FLUSH_PARTS {
            return true;
        }
        let p = cur.take().expect("an open pack").finish().expect("in memory");
        *made = packed;
        trace!("pack: closed early for the parts waiting on it");
        pack_tx.send((flow.parts.pack_made(packed), p)).is_ok()
    };
    for list in novel_rx.iter() {
        // The parts queued since the last list are in the gate by now (the query stage queues
        // them before it sends the next list).
        if !flush_for_parts(&mut cur, &mut made, packed) {
            return;
        }
        for group in list.chunks(COMPRESS_GROUP) {
            if flow.aborted() {
                return;
            }
            let mut read = Vec::with_capacity(group.len());
            for &(file, off, len, id) in group {
                let path = paths[file as usize];
                let io_err = |e: io::Error| ClientError::Io(format!("{}: {e}", path.display()));
                if let Some(s) = &plan.stream {
                    let mut data = vec![0u8; len as usize];
                    if let Err(e) = s.read_at(&mut data, off) {
                        return flow.fail(io_err(e));
                    }
                    read.push((id, data));
                    continue;
                }
                if open.as_ref().is_none_or(|(f, _)| *f != file) {
                    match std::fs::File::open(path) {
                        Ok(f) => open = Some((file, f)),
                        Err(e) => return flow.fail(io_err(e)),
                    }
                }
                let pfile = &open.as_ref().expect("opened").1;
                let mut data = vec![0u8; len as usize];
                if let Err(e) = pfile.read_exact_at(&mut data, off) {
                    return flow.fail(io_err(e));
                }
                read.push((id, data));
            }
            let units = match plan.level {
                Some(level) => compress_units(read, level, plan.group_raw, &mut sampler),
                None => read.into_iter().map(|(id, d)| Unit::one(id, d, false, None)).collect(),
            };
            let mut files = group.iter().map(|&(file, ..)| file as usize);
            for u in units {
                // A group's bytes are counted to its chunks' inputs in proportion to their raw bytes.
                let raw_total: u64 = u.ids.iter().map(|c| c.1 as u64).sum();
                for (&(_, raw), file) in u.ids.iter().zip(files.by_ref()) {
                    per[file].0 += u.data.len() as u64 * raw as u64 / raw_total.max(1);
                    per[file].1 += u.compressed as u64;
                }
                let w = match &mut cur {
                    Some(w) => w,
                    None => cur.insert(PackWriter::with_codec(Vec::with_capacity(plan.pack_target + (1 << 20)), plan.alg, codec).expect("alg")),
                };
                w.add_frame(&u.ids[0].0, &u.data, u.compressed).expect("chunk sizes are within the pack limit");
                for (id, raw) in &u.ids[1..] {
                    w.add_member(id, *raw).expect("a group within its bounds");
                }
                packed += u.ids.len() as u64;
                flow.stored.fetch_add(u.data.len() as u64, Ordering::Relaxed);
                if u.compressed {
                    flow.compressed.fetch_add(u.ids.len() as u64, Ordering::Relaxed);
                }
                if w.len() as usize >= plan.pack_target || w.count() >= plan.pack_chunks {
                    let p = cur.take().unwrap().finish().expect("in memory");
                    made = packed;
                    if pack_tx.send((flow.parts.pack_made(packed), p)).is_err() {
                        return;
                    }
                }
            }
        }
        if let Some(s) = plan.stream.as_ref().filter(|_| !list.is_empty()) {
            s.list_done();
        }
        if !flush_for_parts(&mut cur, &mut made, packed) {
            return;
        }
    }
    if let Some(w) = cur.take() {
        let _ = pack_tx.send((flow.parts.pack_made(packed), w.finish().expect("in memory")));
    }
}

/// The open pack is closed early (under its target size) once this many parts wait on it
/// ([`PartGate`]): they go while the file is still chunked, and no more than this many wait for
/// the last pack (the senders take [`PART_SENDERS`] at a time). A push whose novel chunks fill
/// packs faster than parts close (a first push) closes one early only where its recipe passes
/// the parts threshold and the parts closed before it are queued at once (1 GiB: 129 packs,
/// as before, the same bytes). Not measured: a profile of small chunks with a small
/// `max_recipe` closes parts faster than packs fill, so a first push there makes more, smaller
/// packs (52 bytes and a request each).
const FLUSH_PARTS: usize = PART_SENDERS;

/// One frame of novel chunks as it goes into a pack: a chunk's (raw, or compressed where that
/// saves at least 1/16) or a group's (compressed; its chunks' ids and raw lengths, the first
/// the frame's).
struct Unit {
    ids: Vec<(Digest, u32)>,
    data: Vec<u8>,
    compressed: bool,
}

impl Unit {
    /// One chunk's frame (`raw`: its raw length where `data` is compressed).
    fn one(id: Digest, data: Vec<u8>, compressed: bool, raw: Option<usize>) -> Unit {
        let len = raw.unwrap_or(data.len()) as u32;
        Unit { ids: vec![(id, len)], data, compressed }
    }
}

/// The frames of a batch of novel chunks, compressed across the cores: runs of consecutive
/// chunks of about `group_raw` bytes as one group each where that saves
/// ([`compress_group`]), else each chunk compressed where that saves at least 1/16, else raw.
fn compress_units(read: Vec<(Digest, Vec<u8>)>, level: i32, group_raw: usize, sampler: &mut Sampler) -> Vec<Unit> {
    use rayon::prelude::*;
    let n = read.len();
    let try_n = sampler.first(n);
    let run = |items: Vec<(Digest, Vec<u8>)>| -> Vec<Unit> {
        let runs = if group_raw > 0 { group_runs(items.iter().map(|c| c.1.len()), group_raw) } else { vec![1; items.len()] };
        let mut it = items.into_iter();
        let runs: Vec<Vec<(Digest, Vec<u8>)>> = runs.iter().map(|&k| it.by_ref().take(k).collect()).collect();
        runs.into_par_iter()
            .map_init(
                || (Compressor::new(level), Vec::new(), Vec::new()),
                |(c, buf, z), run| {
                    if run.len() > 1 {
                        let raws: Vec<&[u8]> = run.iter().map(|r| &r.1[..]).collect();
                        if compress_group(c, &raws, buf, z) {
                            let ids = run.iter().map(|(id, d)| (*id, d.len() as u32)).collect();
                            return vec![Unit { ids, data: std::mem::take(z), compressed: true }];
                        }
                    }
                    run.into_iter()
                        .map(|(id, raw)| {
                            if c.compress(&raw, z) {
                                Unit::one(id, std::mem::take(z), true, Some(raw.len()))
                            } else {
                                Unit::one(id, raw, false, None)
                            }
                        })
                        .collect()
                },
            )
            .flatten()
            .collect()
    };
    let mut read = read;
    let rest = read.split_off(try_n);
    let mut out = run(read);
    let any = out.iter().any(|u| u.compressed);
    if sampler.try_rest(any) {
        out.extend(run(rest));
    } else {
        out.extend(rest.into_iter().map(|(id, d)| Unit::one(id, d, false, None)));
    }
    sampler.record(out.iter().any(|u| u.compressed));
    out
}

/// One uploader: sends packs until the pack stage is done (after a failure it drains them).
fn stage_upload(client: &Client, flow: &Flow, pack_rx: &Mutex<mpsc::Receiver<(u64, Vec<u8>)>>) {
    // Dropped last: after a panic (the push aborted first), the packs still sent are taken and
    // dropped until the pack stage ends, so that it is never left blocked on a full channel
    // when every uploader is gone.
    let _drain = DrainOnPanic(pack_rx);
    let _panic = AbortOnPanic(flow);
    loop {
        let (seq, p) = match pack_rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(p) => p,
            Err(_) => return,
        };
        if flow.aborted() {
            continue;
        }
        match client.upload(&p) {
            Ok(_) => {
                flow.uploaded(p.len() as u64);
                flow.parts.pack_stored(seq);
            }
            Err(e) => flow.fail(e),
        }
    }
}

/// Commits the sealed recipe: a delta against the base when there is one (a few bytes per
/// unchanged run), else the whole recipe. If chunks went missing meanwhile (collected, or a
/// racing delete) they are sent again ([`resend_missing`]); if the base version went
/// (deleted meanwhile), the whole recipe is sent.
fn stage_commit(client: &Client, name: &str, paths: &[&Path], plan: &Plan, recipe: &Recipe, offsets: &Offsets, flow: &Flow) -> R<Committed> {
    let full = || -> R<Vec<u8>> {
        let mut text = Vec::new();
        recipe.write(&mut text).map_err(|e| ClientError::Io(e.to_string()))?;
        Ok(text)
    };
    let mut delta_base = plan.base.as_ref().map(|(v, _)| *v);
    let mut text = match &plan.base {
        Some((v, b)) => delta::encode(recipe, b, *v).map_err(|e| ClientError::Protocol(e.to_string()))?,
        None => full()?,
    };
    let mut rounds = 0;
    let mut recipe_bytes = 0u64;
    loop {
        flow.sent.fetch_add(text.len() as u64, Ordering::Relaxed);
        recipe_bytes += text.len() as u64;
        match commit_read_back(client, name, &text, recipe.digest, plan.before) {
            Ok(version) => {
                return Ok(Committed {
                    version,
                    delta_base,
                    recipe_bytes,
                })
            }
            Err(ClientError::Http { status: 404, .. }) if delta_base.is_some() => {
                delta_base = None;
                text = full()?;
            }
            Err(ClientError::Missing(ids)) if rounds < 3 => {
                rounds += 1;
                resend_missing(client, paths, plan, offsets, &ids, flow)?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Chunks of a stream that went missing from the store after it was asked about them (a gc
/// meanwhile) cannot be read again.
fn stream_lost(n: usize) -> ClientError {
    ClientError::Http {
        status: 409,
        code: "missing_chunks".into(),
        message: format!(
            "{n} chunks went missing from the store after it was asked about them (a gc meanwhile?); \
             a stream cannot be read again: nothing was committed, push it again"
        ),
    }
}

/// Reads the chunks a commit named missing back from the inputs and uploads them in packs.
fn resend_missing(client: &Client, paths: &[&Path], plan: &Plan, offsets: &Offsets, ids: &[Digest], flow: &Flow) -> R<()> {
    if plan.stream.is_some() {
        return Err(stream_lost(ids.len()));
    }
    let alg = plan.alg;
    let mut w = PackWriter::new(Vec::new(), alg).expect("alg");
    let mut data = Vec::new();
    for id in ids {
        let &(file, off, len) = offsets
            .get(id)
            .ok_or_else(|| ClientError::Protocol(format!("the store asks for chunk {} that the file lacks", hex(id))))?;
        let path = paths[file as usize];
        let io_err = |e: io::Error| ClientError::Io(format!("{}: {e}", path.display()));
        let pfile = std::fs::File::open(path).map_err(io_err)?;
        data.resize(len as usize, 0);
        pfile.read_exact_at(&mut data, off).map_err(io_err)?;
        w.add(id, &data).expect("chunk size");
        if w.len() as usize >= plan.pack_target || w.count() >= plan.pack_chunks {
            let p = std::mem::replace(&mut w, PackWriter::new(Vec::new(), alg).expect("alg")).finish().expect("mem");
            client.upload(&p)?;
            flow.uploaded(p.len() as u64);
        }
    }
    if !w.is_empty() {
        let p = w.finish().expect("mem");
        client.upload(&p)?;
        flow.uploaded(p.len() as u64);
    }
    Ok(())
}

/// Pushes many files as one pipeline (PROTOCOL.md §5.1): their chunk ids share queries, their
/// novel chunks share packs, and their recipes are committed in batches (`POST commits`; one
/// `PUT` per file against a store without the feature "batch"). No base recipe is fetched
/// (that would be a request per file): every recipe is committed whole. Each file gets its own
/// result; a failure of the pipeline itself (a file unreadable, the store unreachable) is the
/// `Err`, and nothing is committed then.
pub fn push_files(client: &Client, inputs: &[(std::path::PathBuf, String)], opts: &PushOptions, progress: &Progress) -> R<Vec<R<PushReport>>> {
    push_files_cached(client, inputs, opts, progress, None)
}

/// [`push_files`] with a push cache ([`crate::pushcache`]): a file whose metadata match its
/// entry is not read. One `GET files` tells which of those cached versions are still their
/// name's latest (same digest): those are reported unchanged and nothing is committed for them
/// (`opts.new_versions`: they are committed again too). The others are committed again from the
/// cache (in batches), and only if the store refuses that (the version or its chunks gone: a
/// 4xx) is the file read and pushed. The files found unchanged are committed before the others
/// are read (a failure of the pipeline then leaves their new versions standing). The cache is updated with every file
/// committed (not saved: the caller saves it).
pub fn push_files_cached(
    client: &Client,
    inputs: &[(std::path::PathBuf, String)],
    opts: &PushOptions,
    progress: &Progress,
    mut cache: Option<&mut crate::pushcache::PushCache>,
) -> R<Vec<R<PushReport>>> {
    use crate::pushcache::{key_path, Stamp};
    let t0 = Instant::now();
    let read_at = std::time::SystemTime::now();
    let mut metas = Vec::with_capacity(inputs.len());
    for (path, name) in inputs {
        validate_name(name).map_err(|e| ClientError::Usage(e.to_string()))?;
        // Metadata only: a file is opened when the chunk stage comes to it (never all at once).
        let meta = std::fs::metadata(path).map_err(|e| ClientError::Io(format!("{}: {e}", path.display())))?;
        if !meta.is_file() {
            return Err(ClientError::Io(format!("{}: not a regular file", path.display())));
        }
        metas.push(meta);
    }
    let plan = prepare(client, None, opts)?;
    let n = inputs.len();
    let mut out: Vec<Option<R<PushReport>>> = (0..n).map(|_| None).collect();
    let keys: Vec<Option<String>> = match &cache {
        Some(_) => inputs.iter().map(|(p, _)| key_path(p)).collect(),
        None => vec![None; n],
    };
    let read: Vec<usize> = match cache.as_deref_mut() {
        Some(c) => push_unchanged(client, inputs, &metas, &keys, &plan, opts.new_versions, c, &mut out, t0)?,
        None => (0..n).collect(),
    };
    if !read.is_empty() {
        let sub: Vec<(std::path::PathBuf, String)> = read.iter().map(|&i| inputs[i].clone()).collect();
        let sub_metas: Vec<std::fs::Metadata> = read.iter().map(|&i| metas[i].clone()).collect();
        let (reps, texts) = push_read(client, &plan, opts, &sub, &sub_metas, progress, t0)?;
        for ((&i, r), text) in read.iter().zip(reps).zip(texts) {
            if let (Some(c), Some(k)) = (cache.as_deref_mut(), &keys[i]) {
                let stamp = Stamp::of(&metas[i]);
                match &r {
                    Ok(rep) if !stamp.racy(read_at) => c.record(cache_entry(k, rep, stamp, text)),
                    _ => c.forget(k, &inputs[i].1),
                }
            }
            out[i] = Some(r);
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(ClientError::Protocol("internal: a file without a result".into()))))
        .collect())
}

/// A cache entry for a file just committed (`text`: what it was committed with).
fn cache_entry(path: &str, rep: &PushReport, stamp: crate::pushcache::Stamp, text: Option<String>) -> crate::pushcache::Entry {
    crate::pushcache::Entry {
        path: path.to_string(),
        name: rep.name.clone(),
        stamp,
        profile: rep.profile.clone(),
        hash: rep.hash.to_string(),
        version: rep.version,
        digest: rep.digest.clone(),
        chunks: rep.chunks,
        bytes: rep.bytes,
        text: text.filter(|t| t.len() <= crate::pushcache::MAX_TEXT),
    }
}

/// The files the cache finds unchanged (a name pushed once in this push, the same metadata,
/// profile and hash), without reading them: one whose cached version is still its name's
/// latest with the same digest is reported unchanged with that version and not committed
/// ([`latest_unchanged`]; every such file with `new_versions`: committed again); the others
/// are committed again from the cache, in batches. Their results go to `out` and their
/// entries are updated. Returns the files to read: the others, and those whose cached commit
/// the store refused with a 4xx (a version deleted, chunks collected, another store at the
/// same URL: the store checks a cached commit as any other).
#[allow(clippy::too_many_arguments)]
fn push_unchanged(
    client: &Client,
    inputs: &[(std::path::PathBuf, String)],
    metas: &[std::fs::Metadata],
    keys: &[Option<String>],
    plan: &Plan,
    new_versions: bool,
    cache: &mut crate::pushcache::PushCache,
    out: &mut [Option<R<PushReport>>],
    t0: Instant,
) -> R<Vec<usize>> {
    use crate::pushcache::Stamp;
    let mut times: HashMap<&str, u32> = HashMap::new();
    for (_, name) in inputs {
        *times.entry(name.as_str()).or_default() += 1;
    }
    let profile = plan.engine.profile().to_string();
    let mut read = Vec::new();
    let mut hits = Vec::new();
    for (i, (_, name)) in inputs.iter().enumerate() {
        let hit = keys[i]
            .as_deref()
            .filter(|_| times[name.as_str()] == 1)
            .and_then(|k| cache.lookup(k, name, &Stamp::of(&metas[i]), &profile, plan.alg));
        match hit {
            Some(e) => hits.push((i, e.clone())),
            None => read.push(i),
        }
    }
    if !hits.is_empty() && !new_versions {
        hits = latest_unchanged(client, plan, hits, out, t0)?;
    }
    if !hits.is_empty() {
        commit_unchanged(client, inputs, plan, &hits, cache, out, &mut read, t0);
    }
    read.sort_unstable();
    Ok(read)
}

/// The report of a file the cache found unchanged, as `v` (`body`: the commit body sent for
/// it, 0 where nothing was committed).
fn unchanged_report(e: &crate::pushcache::Entry, v: Version, body: u64, delta_base: Option<u64>, plan: &Plan, t0: Instant) -> PushReport {
    PushReport {
        name: e.name.clone(),
        bytes: e.bytes,
        chunks: e.chunks,
        novel_chunks: 0,
        novel_bytes: 0,
        compressed_bytes: 0,
        compressed_chunks: 0,
        sent_bytes: body,
        pack_bytes: 0,
        packs: 0,
        recipe_bytes: body,
        delta_base,
        known_from_base: 0,
        hinted_chunks: 0,
        parts: 0,
        parts_sent: 0,
        parts_delta: 0,
        base_part_bytes: 0,
        ids_held: 0,
        version: v.version,
        digest: v.digest,
        dedup_ratio: f64::INFINITY,
        seconds: t0.elapsed().as_secs_f64(),
        profile: plan.engine.profile().to_string(),
        hash: plan.alg.name(),
        backend: plan.engine.backend().name(),
        read_bytes: 0,
        unchanged: true,
    }
}

/// One `GET files` (the namespace's list): each cache hit whose cached version is still its
/// name's latest version, with the cached digest, is reported unchanged as that version
/// (nothing sent). Returns the other hits (a version deleted, a newer version by another push,
/// another digest): they are committed again.
fn latest_unchanged(
    client: &Client,
    plan: &Plan,
    hits: Vec<(usize, crate::pushcache::Entry)>,
    out: &mut [Option<R<PushReport>>],
    t0: Instant,
) -> R<Vec<(usize, crate::pushcache::Entry)>> {
    let mut latest: HashMap<String, Version> = HashMap::new();
    for v in client.list()? {
        match latest.get(&v.name) {
            Some(l) if l.version >= v.version => {}
            _ => {
                latest.insert(v.name.clone(), v);
            }
        }
    }
    let mut rest = Vec::new();
    for (i, e) in hits {
        match latest.remove(&e.name) {
            Some(v) if v.version == e.version && v.digest == e.digest => out[i] = Some(Ok(unchanged_report(&e, v, 0, None, plan, t0))),
            _ => rest.push((i, e)),
        }
    }
    Ok(rest)
}

/// Commits the cache hits again from their cached texts (in batches where the store takes
/// them); a hit the store refuses with a 4xx goes to `read`.
#[allow(clippy::too_many_arguments)]
fn commit_unchanged(
    client: &Client,
    inputs: &[(std::path::PathBuf, String)],
    plan: &Plan,
    hits: &[(usize, crate::pushcache::Entry)],
    cache: &mut crate::pushcache::PushCache,
    out: &mut [Option<R<PushReport>>],
    read: &mut Vec<usize>,
    t0: Instant,
) {
    let names: Vec<&str> = hits.iter().map(|(i, _)| inputs[*i].1.as_str()).collect();
    let bodies: Vec<Vec<u8>> = hits.iter().map(|(_, e)| e.body()).collect();
    let texts: Vec<&[u8]> = bodies.iter().map(|b| &b[..]).collect();
    let all: Vec<usize> = (0..hits.len()).collect();
    let answers: Vec<(usize, R<Version>)> = match plan.batch_files {
        Some(max_files) => commit_batches(client, &names, &texts, &all, max_files, plan.max_recipe, None),
        None => all
            .iter()
            .map(|&j| {
                let digest = cutpoint_core::rapid::recipe::parse_hex(&hits[j].1.digest);
                (j, commit_read_back(client, names[j], texts[j], digest, None))
            })
            .collect(),
    };
    for (j, r) in answers {
        let (i, e) = &hits[j];
        match r {
            Ok(v) if v.digest != e.digest => {
                out[*i] = Some(Err(ClientError::Protocol(format!(
                    "the store committed '{}' with digest {}, not the cached {}",
                    names[j], v.digest, e.digest
                ))));
                cache.forget(&e.path, &e.name);
            }
            Ok(v) => {
                cache.record(crate::pushcache::Entry { version: v.version, ..e.clone() });
                let body = texts[j].len() as u64;
                out[*i] = Some(Ok(unchanged_report(e, v, body, e.is_delta().then_some(e.version), plan, t0)));
            }
            Err(ClientError::Missing(_) | ClientError::Http { status: 400..=499, .. }) => {
                cache.forget(&e.path, &e.name);
                read.push(*i);
            }
            Err(err) => out[*i] = Some(Err(err)),
        }
    }
}

/// The files of a push of many files that are read: the pipeline, then their commits. Each
/// file's result and the text it was committed with (for the push cache).
#[allow(clippy::type_complexity)]
fn push_read(
    client: &Client,
    plan: &Plan,
    opts: &PushOptions,
    inputs: &[(std::path::PathBuf, String)],
    metas: &[std::fs::Metadata],
    progress: &Progress,
    t0: Instant,
) -> R<(Vec<R<PushReport>>, Vec<Option<String>>)> {
    progress.total.store(metas.iter().map(|m| m.len()).sum(), Ordering::Relaxed);
    let flow = Flow::new(progress);
    let paths: Vec<&Path> = inputs.iter().map(|(p, _)| p.as_path()).collect();
    let files = (0..inputs.len()).map(|_| None).collect();
    let (qs, offsets) = run_pipeline(client, &paths, files, plan, None, HashSet::new(), opts, &flow);
    if let Some(e) = flow.take_err() {
        return Err(e);
    }
    // Each input's recipe, sealed; one so large that it went to parts is committed on its own
    // (in parts), the others in batches.
    let mut recipes = Vec::with_capacity(inputs.len());
    let mut texts = Vec::with_capacity(inputs.len());
    let mut in_parts: Vec<Option<R<(Version, u64)>>> = (0..inputs.len()).map(|_| None).collect();
    for (i, ((q, meta), path)) in qs.into_iter().zip(metas).zip(&paths).enumerate() {
        let (sealed, counts) = seal_recipe(plan, q, meta, path)?;
        match sealed {
            Sealed::Whole(recipe) => {
                let mut text = Vec::new();
                recipe.write(&mut text).map_err(|e| ClientError::Io(e.to_string()))?;
                texts.push(String::from_utf8(text.clone()).ok());
                recipes.push(SealedFile { recipe, counts, text });
            }
            Sealed::Parts(spool, recipe) => {
                texts.push(Some(recipe.text()));
                let r = stage_commit_parts(client, &inputs[i].1, path, plan, &spool, &recipe, &[], &flow).map(|(c, _)| (c.version, 1));
                in_parts[i] = Some(r);
                // A placeholder (never committed as a batch entry): its counts for the report.
                recipes.push(SealedFile {
                    recipe: Recipe {
                        profile: plan.engine.profile().to_string(),
                        hash: plan.alg,
                        digest: recipe.digest,
                        entries: Vec::new(),
                    },
                    counts: Counts { bytes: recipe.bytes, chunks: recipe.count, ..counts },
                    text: Vec::new(),
                });
            }
        }
    }
    let names: Vec<&str> = inputs.iter().map(|(_, n)| n.as_str()).collect();
    let whole: Vec<usize> = (0..inputs.len()).filter(|&i| in_parts[i].is_none()).collect();
    let mut committed = commit_many(client, &names, &paths, plan, &recipes, &whole, &offsets, &flow)?;
    for (i, r) in in_parts.into_iter().enumerate() {
        if let Some(r) = r {
            committed[i] = r;
        }
    }
    let seconds = t0.elapsed().as_secs_f64();
    let packs = flow.packs.load(Ordering::Relaxed);
    let ids_held = flow.ids_held.load(Ordering::Relaxed);
    let per = std::mem::take(&mut *flow.per_input.lock().unwrap_or_else(|p| p.into_inner()));
    let reps = recipes
        .iter()
        .zip(committed)
        .zip(&names)
        .enumerate()
        .map(|(i, ((f, r), name))| {
            let (version, tries) = r?;
            let c = &f.counts;
            // This file's novel chunks as they travelled (compressed where that saved).
            let (stored, compressed) = per.get(i).copied().unwrap_or((c.novel_bytes, 0));
            let frames = stored + FRAME_HEAD * c.novel_chunks;
            Ok(PushReport {
                name: name.to_string(),
                bytes: c.bytes,
                chunks: c.chunks,
                novel_chunks: c.novel_chunks,
                novel_bytes: c.novel_bytes,
                compressed_bytes: stored,
                compressed_chunks: compressed,
                sent_bytes: frames + tries * f.text.len() as u64,
                pack_bytes: frames,
                // The whole push's (packs are shared by the files).
                packs,
                recipe_bytes: tries * f.text.len() as u64,
                delta_base: None,
                known_from_base: 0,
                hinted_chunks: 0,
                parts: 0,
                parts_sent: 0,
                parts_delta: 0,
                base_part_bytes: 0,
                // The whole push's (the files share the query stage).
                ids_held,
                version: version.version,
                digest: version.digest,
                dedup_ratio: if c.novel_bytes == 0 { f64::INFINITY } else { c.bytes as f64 / c.novel_bytes as f64 },
                seconds,
                profile: plan.engine.profile().to_string(),
                hash: plan.alg.name(),
                backend: plan.engine.backend().name(),
                read_bytes: c.bytes,
                unchanged: false,
            })
        })
        .collect();
    Ok((reps, texts))
}

/// A frame head's bytes (length and id) in a pack.
const FRAME_HEAD: u64 = 36;

/// One input's counts, for its report.
#[derive(Clone, Copy)]
struct Counts {
    bytes: u64,
    chunks: u64,
    novel_chunks: u64,
    novel_bytes: u64,
}

/// One input of a push of many files, sealed: its recipe (with its digest) and its text.
struct SealedFile {
    recipe: Recipe,
    counts: Counts,
    text: Vec<u8>,
}

/// One input's recipe, sealed with its digest, after checking that the file did not change
/// while it was read.
fn seal_recipe(_plan: &Plan, q: Queried, meta: &std::fs::Metadata, path: &Path) -> R<(Sealed, Counts)> {
    let after = std::fs::metadata(path).map_err(|e| ClientError::Io(format!("{}: {e}", path.display())))?;
    if after.len() != meta.len() || after.modified().ok() != meta.modified().ok() {
        return Err(ClientError::Io(format!(
            "{}: the file changed while it was pushed; nothing was committed (push it again)",
            path.display()
        )));
    }
    if q.recipe.bytes != meta.len() {
        return Err(ClientError::Io(format!(
            "{}: chunked {} bytes of a {}-byte file; nothing was committed",
            path.display(),
            q.recipe.bytes,
            meta.len()
        )));
    }
    let counts = Counts {
        bytes: q.recipe.bytes,
        chunks: q.recipe.count,
        novel_chunks: q.novel_chunks,
        novel_bytes: q.novel_bytes,
    };
    Ok((q.recipe.finish(None)?, counts))
}

/// Commits the recipes of a push of many files: in batches within the store's
/// `max_batch_files` and `max_recipe_bytes`, or one `PUT` each without the feature "batch".
/// Files answered 409 have their missing chunks sent again and are committed again (3 rounds
/// at most). Each file's version and how many times its recipe was sent.
fn commit_many(
    client: &Client,
    names: &[&str],
    paths: &[&Path],
    plan: &Plan,
    recipes: &[SealedFile],
    which: &[usize],
    offsets: &Offsets,
    flow: &Flow,
) -> R<Vec<R<(Version, u64)>>> {
    let mut out: Vec<Option<R<(Version, u64)>>> = (0..names.len()).map(|_| None).collect();
    let mut tries = vec![0u64; names.len()];
    let mut pending: Vec<usize> = which.to_vec();
    let mut rounds = 0;
    while !pending.is_empty() {
        let answers = match plan.batch_files {
            Some(max_files) => {
                let texts: Vec<&[u8]> = recipes.iter().map(|r| &r.text[..]).collect();
                commit_batches(client, names, &texts, &pending, max_files, plan.max_recipe, Some(flow))
            }
            None => pending
                .iter()
                .map(|&i| {
                    flow.sent.fetch_add(recipes[i].text.len() as u64, Ordering::Relaxed);
                    (i, commit_read_back(client, names[i], &recipes[i].text, recipes[i].recipe.digest, None))
                })
                .collect(),
        };
        let mut again = Vec::new();
        let mut missing = Vec::new();
        for (i, r) in answers {
            tries[i] += 1;
            match r {
                Err(ClientError::Missing(ids)) if rounds < 3 => {
                    missing.extend(ids);
                    again.push(i);
                }
                r => out[i] = Some(r.map(|v| (v, tries[i]))),
            }
        }
        if !again.is_empty() {
            missing.sort_unstable();
            missing.dedup();
            resend_missing(client, paths, plan, offsets, &missing, flow)?;
        }
        rounds += 1;
        pending = again;
    }
    // A file not in `which` (committed in parts by the caller) gets a placeholder the caller
    // replaces.
    Ok(out
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err(ClientError::Protocol("internal: a file committed elsewhere".into()))))
        .collect())
}

/// Sends the `pending` files' commit bodies (`texts`) in batch requests; each file's answer.
fn commit_batches(
    client: &Client,
    names: &[&str],
    texts: &[&[u8]],
    pending: &[usize],
    max_files: usize,
    max_bytes: u64,
    flow: Option<&Flow>,
) -> Vec<(usize, R<Version>)> {
    let mut out = Vec::with_capacity(pending.len());
    let send = |w: BatchWriter, idx: Vec<usize>, out: &mut Vec<(usize, R<Version>)>| {
        let n = idx.len();
        let body = w.finish();
        if let Some(flow) = flow {
            flow.sent.fetch_add(body.len() as u64, Ordering::Relaxed);
            flow.progress.sent_bytes.fetch_add(body.len() as u64, Ordering::Relaxed);
        }
        match client.commit_batch(&body, n) {
            Ok(rs) => out.extend(idx.into_iter().zip(rs)),
            Err(e) => out.extend(idx.into_iter().map(|i| (i, Err(e.clone())))),
        }
    };
    let mut w = BatchWriter::new();
    let mut idx = Vec::new();
    for &i in pending {
        let text = texts[i];
        if !w.is_empty() && (w.count() >= max_files || w.len_with(names[i], text.len()) as u64 > max_bytes) {
            send(std::mem::take(&mut w), std::mem::take(&mut idx), &mut out);
        }
        w.add(names[i], text);
        idx.push(i);
    }
    if !w.is_empty() {
        send(w, idx, &mut out);
    }
    out
}

/// Commits `text` as the next version of `name`. A commit is not idempotent: after a network
/// error or a 5xx (its answer may have been lost) the name's latest version is read back, and
/// one newer than `before` with this recipe's digest is the commit; otherwise it is sent again,
/// at most `client.retries` times, with backoff.
fn commit_read_back(client: &Client, name: &str, text: &[u8], digest: Option<Digest>, before: Option<u64>) -> R<Version> {
    let mut wait = client.backoff;
    let mut n = 0;
    loop {
        match client.commit(name, text) {
            Err(e @ (ClientError::Network(_) | ClientError::Http { status: 500..=599, .. })) => {
                if n >= client.retries {
                    return Err(match e {
                        ClientError::Network(m) if n > 0 => ClientError::Network(format!("{m} (gave up after {} tries)", n + 1)),
                        e => e,
                    });
                }
                std::thread::sleep(wait);
                wait *= 2;
                n += 1;
                // A damaged latest recipe is not this commit (sent again).
                let latest = match client.head(name, None) {
                    Err(ClientError::Verify(_) | ClientError::Protocol(_)) => None,
                    r => r?,
                };
                if let Some((v, r)) = latest {
                    if before.is_none_or(|b| v > b) && r.digest.is_some() && r.digest == digest {
                        return Ok(Version {
                            name: name.to_string(),
                            version: v,
                            bytes: r.bytes,
                            chunks: r.count,
                            digest: r.digest.map(|d| hex(&d)).unwrap_or_default(),
                            created: 0,
                        });
                    }
                }
            }
            r => return r,
        }
    }
}

/// What a pull did.
#[derive(Debug, Clone, serde::Serialize)]
pub struct PullReport {
    pub name: String,
    pub version: u64,
    pub bytes: u64,
    pub chunks: u64,
    pub digest: String,
    pub seconds: f64,
}

/// Restores a version into `out`, verifying the recipe against its digest and every chunk
/// against the recipe. On a mismatch it stops with [`ClientError::Verify`] (the caller then
/// discards what was written).
pub fn pull(client: &Client, name: &str, version: Option<u64>, out: &mut dyn Write, progress: &Progress) -> R<PullReport> {
    validate_name(name).map_err(|e| ClientError::Usage(e.to_string()))?;
    let t0 = Instant::now();
    // The stored text (`?parts=1`): a version committed in parts is its part lines, and each
    // part is fetched when its turn comes, so memory does not grow with the file.
    let (v, recipe) = client.head(name, version)?.ok_or_else(|| ClientError::Http {
        status: 404,
        code: "not_found".into(),
        message: match version {
            Some(v) => format!("no version {v} of '{name}' in namespace '{}'", client.namespace()),
            None => format!("no file '{name}' in namespace '{}'", client.namespace()),
        },
    })?;
    progress.total.store(recipe.bytes, Ordering::Relaxed);
    let mut body: Box<dyn Read> = Box::new(client.download(name, v, 0)?);
    let mut buf = Vec::new();
    let mut pos = 0u64;
    // After a failed read the body is asked again from `pos`, the end of the verified chunks (a
    // Range request: no verified byte is read twice), at most `client.retries` times a pull.
    let mut fails = 0u32;
    let mut wait = client.backoff;
    let n = recipe.count as usize;
    let mut digest = FileDigest::new(recipe.hash);
    let mut entries = Entries::new(client, &recipe);
    let mut i = 0usize;
    while let Some(e) = entries.next_entry()? {
        digest.add(&e.fp, e.size);
        buf.resize(e.size as usize, 0);
        while let Err(err) = body.read_exact(&mut buf) {
            if fails >= client.retries {
                return Err(pull_failed(client, name, v, pos, i, n, fails, err));
            }
            fails += 1;
            std::thread::sleep(wait);
            wait *= 2;
            body = Box::new(client.download(name, v, pos)?);
        }
        if recipe.hash.digest(&buf) != Some(e.fp) {
            return Err(ClientError::Verify(format!("chunk {i} at byte {pos} does not match its fingerprint {}", hex(&e.fp))));
        }
        out.write_all(&buf).map_err(|err| ClientError::Io(format!("writing the output: {err}")))?;
        pos += e.size as u64;
        i += 1;
        progress.processed.store(pos, Ordering::Relaxed);
    }
    // Verified chunks in recipe order are the file once the recipe's digest is its chunk list's
    // (checked as the entries went by; until then the output is not the file: `cutpoint pull`
    // writes it to a temporary file, renamed only now).
    let got = digest.finish();
    if got.is_none() || got != recipe.digest || i as u64 != recipe.count || pos != recipe.bytes {
        return Err(ClientError::Verify(format!("the store's recipe of '{name}' does not match its digest")));
    }
    let mut extra = [0u8; 1];
    match body.read(&mut extra) {
        Ok(0) => {}
        Ok(_) => return Err(ClientError::Verify("the store sent more bytes than the recipe holds".into())),
        Err(e) => return Err(ClientError::Verify(format!("the store's answer failed at its end: {e}"))),
    }
    out.flush().map_err(|err| ClientError::Io(format!("writing the output: {err}")))?;
    Ok(PullReport {
        name: name.to_string(),
        version: v,
        bytes: pos,
        chunks: i as u64,
        digest: got.map(|d| hex(&d)).unwrap_or_default(),
        seconds: t0.elapsed().as_secs_f64(),
    })
}

/// The entries of a stored recipe in file order: its chunk lines, and each part's entries,
/// the part fetched (and verified against its id, COUNT and BYTES) when its turn comes, one at
/// a time.
struct Entries<'a> {
    client: &'a Client,
    alg: HashAlg,
    lines: std::slice::Iter<'a, Line>,
    part: std::vec::IntoIter<RecipeEntry>,
}

impl<'a> Entries<'a> {
    fn new(client: &'a Client, r: &'a PartRecipe) -> Entries<'a> {
        Entries {
            client,
            alg: r.hash,
            lines: r.lines.iter(),
            part: Vec::new().into_iter(),
        }
    }

    fn next_entry(&mut self) -> R<Option<RecipeEntry>> {
        loop {
            if let Some(e) = self.part.next() {
                return Ok(Some(e));
            }
            match self.lines.next() {
                None => return Ok(None),
                Some(Line::Chunk(e)) => return Ok(Some(e.clone())),
                Some(Line::Part { id, count, bytes }) => {
                    let p = self.client.part(id, self.alg)?;
                    if p.entries.len() as u64 != *count || p.bytes() != *bytes {
                        return Err(ClientError::Verify(format!("the store's part {} does not match its recipe line", hex(id))));
                    }
                    self.part = p.entries.into_iter();
                }
            }
        }
    }
}

/// The error of a pull that gave up reading the store's answer at byte `pos` (chunk `i` of `n`)
/// after `fails` resumed tries: an answer that ended early is a verify error (as ever); a read
/// that stalled or failed names the store, the request and how long it waited.
#[allow(clippy::too_many_arguments)]
fn pull_failed(client: &Client, name: &str, v: u64, pos: u64, i: usize, n: usize, fails: u32, err: io::Error) -> ClientError {
    let tries = if fails > 0 { format!(" (gave up after {} tries)", fails + 1) } else { String::new() };
    if err.kind() == io::ErrorKind::UnexpectedEof {
        return ClientError::Verify(format!("the store's answer ended at byte {pos} (chunk {i} of {n}){tries}"));
    }
    let url = client.file_url("files", name, Some(v));
    match client.net_io(&client.what("GET", &url), err) {
        ClientError::Network(m) => ClientError::Network(format!("{m} at byte {pos} (chunk {i} of {n}){tries}")),
        e => e,
    }
}

#[cfg(test)]
mod answer_tests {
    use super::*;
    use std::io::{BufRead, BufReader, Read, Write};
    use std::net::TcpListener;

    /// A one-request store on 127.0.0.1 that answers any request with `body` (200).
    fn answering(body: Vec<u8>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", l.local_addr().unwrap());
        std::thread::spawn(move || {
            let Ok((c, _)) = l.accept() else { return };
            let mut r = BufReader::new(c.try_clone().unwrap());
            let mut len = 0usize;
            loop {
                let mut line = String::new();
                if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap_or(0);
                }
            }
            let mut req = vec![0u8; len];
            let _ = r.read_exact(&mut req);
            let mut w = c;
            let head = format!("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {}\r\nConnection: close\r\n\r\n", body.len());
            let _ = w.write_all(head.as_bytes());
            let _ = w.write_all(&body);
        });
        url
    }

    #[test]
    fn a_query_answer_naming_an_id_not_asked_is_a_protocol_error() {
        let asked = [[1u8; 32], [2u8; 32]];
        let url = answering([7u8; 32].to_vec());
        let err = Client::new(&url, "default", None).unwrap().query(&asked).unwrap_err();
        assert!(matches!(&err, ClientError::Protocol(m) if m.contains(&hex(&[7u8; 32]))), "{err:?}");
        // Parts are asked about the same way.
        let url = answering([7u8; 32].to_vec());
        let err = Client::new(&url, "default", None).unwrap().query_parts(&asked).unwrap_err();
        assert!(matches!(err, ClientError::Protocol(_)), "{err:?}");
        // An answer within the ids asked is taken.
        let url = answering([2u8; 32].to_vec());
        assert_eq!(Client::new(&url, "default", None).unwrap().query(&asked).unwrap(), vec![[2u8; 32]]);
    }
}
