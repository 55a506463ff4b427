//! The native client: the HTTP API ([`Client`]) and the two pipelines, [`push_file`] and
//! [`pull`], that `cutpoint push` / `pull` run.
//!
//! `push_file` is a P-Dedupe pipeline: a chunker thread (SS-CDC on all cores, or RapidCDC
//! with the base recipe's hints) → the existence queries, in batches → a packer thread that
//! reads the novel chunks back from the file by offset → uploader threads → the commit.
//! Each stage is its own function, named as in web/src/client/push.ts: `prepare`,
//! `stage_chunk`, `stage_query`, `stage_pack`, `stage_upload`, `stage_commit`.
//! The stages overlap; memory is bounded by the channels (a few batches of chunk records and
//! at most `uploaders + 2` packs of `pack_bytes`), whatever the file size.
//!
//! Every request has an idle timeout ([`Client::with_timeout`]: each read and write must make
//! progress within it; a long body that keeps moving is never cut) and the safe ones are retried
//! with backoff; a pull resumes where its verified chunks end (a `Range` request), a commit whose
//! answer was lost is read back before it is sent again.

use crate::index::Version;
use crate::store::{CheckReport, GcReport, PackReport};
use cutpoint_core::protocol::delta;
use cutpoint_core::protocol::FileDigest;
use cutpoint_core::protocol::name::{encode_segment, validate_name, validate_namespace};
use cutpoint_core::protocol::codec::{Codec, Compressor, AUTO_LEVEL, MAX_LEVEL};
use cutpoint_core::protocol::pack::{fit_pack_chunks, fit_pack_target, PackWriter};
use cutpoint_core::protocol::query::{decode_ids, encode_ids, MAX_QUERY_IDS};
use cutpoint_core::rapid::{Criterion, HintTable, Rapid, RapidOptions, Recipe, RecipeEntry};
use cutpoint_core::{hex, Digest, Engine, HashAlg, Options, Profile};
use std::collections::{HashMap, HashSet};
use std::fmt;
use std::io::{self, Read, Write};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Mutex};
use std::time::{Duration, Instant};

#[derive(Debug)]
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
        let url = self.url("query");
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
    /// Compress novel chunks (zstd) where the store lists `"zstd"` in `GET /v1`.
    pub compression: Compression,
}

/// `--compression`: off (codec 0), auto (zstd level 3, a chunk kept compressed only where that
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
            compression: Compression::Auto,
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
    pub version: u64,
    pub digest: String,
    pub dedup_ratio: f64,
    pub seconds: f64,
    pub profile: String,
    pub hash: &'static str,
    pub backend: &'static str,
}

/// A chunk as the chunk stage hands it on.
struct Item {
    off: u64,
    len: u32,
    id: Digest,
    last: Option<u8>,
    regular: bool,
    hinted: bool,
}

const BATCH: usize = 2048;

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
    /// The zstd level novel chunks are compressed at (`None`: off, or the store lacks `zstd`).
    level: Option<i32>,
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

/// What the query stage learnt: the recipe's entries, where each id first occurs, the novel
/// chunks and the counts.
#[derive(Default)]
struct Queried {
    entries: Vec<RecipeEntry>,
    offsets: HashMap<Digest, (u64, u32)>,
    novel_chunks: u64,
    novel_bytes: u64,
    known_hits: u64,
    hinted: u64,
}

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
    let mut plan = prepare(client, name, opts)?;
    let mut known: HashSet<Digest> = HashSet::new();
    if let Some((_, b)) = &plan.base {
        known.extend(b.entries.iter().map(|e| e.fp));
    }
    let flow = Flow::new(progress);
    let (chunk_tx, chunk_rx) = mpsc::sync_channel::<Vec<Item>>(8);
    let (novel_tx, novel_rx) = mpsc::sync_channel::<Vec<(u64, u32, Digest)>>(8);
    let (pack_tx, pack_rx) = mpsc::sync_channel::<Vec<u8>>(1);
    let pack_rx = Mutex::new(pack_rx);
    let hints = plan.hints.take();
    let q = std::thread::scope(|s| {
        let (flow, plan) = (&flow, &plan);
        s.spawn(move || stage_chunk(&plan.engine, hints, file, path, flow, chunk_tx));
        let pfile = std::fs::File::open(path);
        s.spawn(move || match pfile {
            Ok(f) => stage_pack(&f, path, plan, flow, novel_rx, pack_tx),
            Err(e) => flow.fail(io_err(e)),
        });
        for _ in 0..opts.uploaders.max(1) {
            let pack_rx = &pack_rx;
            s.spawn(move || stage_upload(client, flow, pack_rx));
        }
        // This thread: the recipe, and existence queries for what is not known.
        stage_query(client, flow, known, chunk_rx, novel_tx)
    });
    if let Some(e) = flow.take_err() {
        return Err(e);
    }
    // The file must not have changed while it was read twice (chunked, then its novel chunks
    // read back by offset); the store re-hashes every chunk, this catches the rest.
    let after = std::fs::metadata(path).map_err(io_err)?;
    if after.len() != meta.len() || after.modified().ok() != meta.modified().ok() {
        return Err(ClientError::Io(format!(
            "{}: the file changed while it was pushed; nothing was committed (push it again)",
            path.display()
        )));
    }
    let Queried {
        entries,
        offsets,
        novel_chunks,
        novel_bytes,
        known_hits,
        hinted,
    } = q;
    let mut recipe = Recipe {
        profile: plan.engine.profile().to_string(),
        hash: plan.alg,
        digest: None,
        entries,
    };
    if recipe.total_bytes() != meta.len() {
        return Err(ClientError::Io(format!(
            "{}: chunked {} bytes of a {}-byte file; nothing was committed",
            path.display(),
            recipe.total_bytes(),
            meta.len()
        )));
    }
    let digest = FileDigest::of(&recipe).ok_or_else(|| ClientError::Protocol("internal: file digest".into()))?;
    recipe.digest = Some(digest);
    let c = stage_commit(client, name, path, &plan, &recipe, &offsets, &flow)?;
    let bytes = recipe.total_bytes();
    Ok(PushReport {
        name: name.to_string(),
        bytes,
        chunks: recipe.entries.len() as u64,
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
        version: c.version.version,
        digest: hex(&digest),
        dedup_ratio: if novel_bytes == 0 { f64::INFINITY } else { bytes as f64 / novel_bytes as f64 },
        seconds: t0.elapsed().as_secs_f64(),
        profile: plan.engine.profile().to_string(),
        hash: plan.alg.name(),
        backend: plan.engine.backend().name(),
    })
}

/// Before the file is read: the engine, packs within the store's limits (`GET /v1`), the
/// base recipe and, with RapidCDC, its hints.
fn prepare(client: &Client, name: &str, opts: &PushOptions) -> R<Plan> {
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
    // The base recipe (the latest version of the same name, same profile and fingerprint):
    // chunks known present without asking, the base of a delta commit, and RapidCDC hints.
    // A damaged latest recipe is no base: the push commits its whole recipe.
    let latest = match client.recipe(name, None) {
        Err(ClientError::Verify(_)) => None,
        r => r?,
    };
    let before = latest.as_ref().map(|(v, _)| *v);
    let base: Option<(u64, Recipe)> = latest.filter(|(_, b)| b.profile == engine.profile().to_string() && b.hash == alg);
    let mut hints = None;
    if let Some(crit) = opts.rapid {
        let mut t = HintTable::new(engine.profile(), alg, 2).map_err(|e| ClientError::Usage(e.to_string()))?;
        if let Some((_, b)) = &base {
            t.add_recipe(b).map_err(|e| ClientError::Protocol(e.to_string()))?;
        }
        hints = Some((t, crit));
    }
    // Compressed frames only where the store lists them (an older store: raw, as before).
    let zstd = info
        .get("features")
        .and_then(|f| f.as_array())
        .is_some_and(|f| f.iter().any(|x| x == "zstd"));
    let level = opts.compression.level().filter(|_| zstd);
    Ok(Plan {
        level,
        engine,
        alg,
        pack_target,
        pack_chunks,
        before,
        base,
        hints,
    })
}

/// Chunk + fingerprint the file (SS-CDC, or RapidCDC with the base's hints), in batches.
fn stage_chunk(engine: &Engine, hints: Option<(HintTable, Criterion)>, rd: std::fs::File, path: &Path, flow: &Flow, chunk_tx: mpsc::SyncSender<Vec<Item>>) {
    let mut batch = Vec::with_capacity(BATCH);
    let send = |batch: &mut Vec<Item>| -> bool {
        let b = std::mem::replace(batch, Vec::with_capacity(BATCH));
        !flow.aborted() && chunk_tx.send(b).is_ok()
    };
    let res: Result<(), cutpoint_core::Error> = (|| {
        match hints {
            Some((t, crit)) => {
                let mut rapid = Rapid::new(engine, t, RapidOptions::new(crit))?;
                for c in rapid.stream(rd) {
                    let c = c?;
                    batch.push(Item {
                        off: c.offset,
                        len: c.length as u32,
                        id: c.hash,
                        last: Some(c.last),
                        regular: c.regular,
                        hinted: matches!(c.found, cutpoint_core::rapid::Found::Hint(_)),
                    });
                    if batch.len() == BATCH && !send(&mut batch) {
                        return Ok(());
                    }
                }
            }
            None => {
                for c in engine.stream_prefetch(rd) {
                    let c = c?;
                    batch.push(Item {
                        off: c.offset,
                        len: c.length as u32,
                        id: c.hash.expect("the engine fingerprints"),
                        last: None,
                        regular: true,
                        hinted: false,
                    });
                    if batch.len() == BATCH && !send(&mut batch) {
                        return Ok(());
                    }
                }
            }
        }
        if !batch.is_empty() {
            send(&mut batch);
        }
        Ok(())
    })();
    if let Err(e) = res {
        flow.fail(match e {
            cutpoint_core::Error::Io(io) => ClientError::Io(format!("{}: {io}", path.display())),
            other => ClientError::Usage(other.to_string()),
        });
    }
}

/// The recipe's entries, and existence queries for the ids not known present; the novel
/// chunks go on to the pack stage. Returns what it learnt (after a failure: what it had).
fn stage_query(
    client: &Client,
    flow: &Flow,
    mut known: HashSet<Digest>,
    chunk_rx: mpsc::Receiver<Vec<Item>>,
    novel_tx: mpsc::SyncSender<Vec<(u64, u32, Digest)>>,
) -> Queried {
    let known_base = known.clone();
    let mut q = Queried::default();
    for batch in chunk_rx.iter() {
        if flow.aborted() {
            break;
        }
        let mut ask = Vec::new();
        for it in &batch {
            q.entries.push(RecipeEntry {
                fp: it.id,
                size: it.len,
                last: it.last,
                regular: it.regular,
            });
            q.hinted += it.hinted as u64;
            q.offsets.entry(it.id).or_insert((it.off, it.len));
            if known_base.contains(&it.id) {
                q.known_hits += 1;
            }
            if known.insert(it.id) {
                ask.push(it.id);
            }
            flow.progress.processed.fetch_add(it.len as u64, Ordering::Relaxed);
        }
        if ask.is_empty() {
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
            let (off, len) = q.offsets[&id];
            q.novel_chunks += 1;
            q.novel_bytes += len as u64;
            flow.progress.novel_bytes.fetch_add(len as u64, Ordering::Relaxed);
            list.push((off, len, id));
        }
        if !list.is_empty() && novel_tx.send(list).is_err() {
            break;
        }
    }
    drop(novel_tx);
    // Drain so that the chunker never blocks on a full channel after an error.
    for _ in chunk_rx.iter() {}
    q
}

/// Reads the novel chunks back by offset, compresses them (where the plan says, in groups of
/// [`COMPRESS_GROUP`] across the cores) and frames them into packs of the plan's size.
fn stage_pack(pfile: &std::fs::File, path: &Path, plan: &Plan, flow: &Flow, novel_rx: mpsc::Receiver<Vec<(u64, u32, Digest)>>, pack_tx: mpsc::SyncSender<Vec<u8>>) {
    let codec = if plan.level.is_some() { Codec::Zstd } else { Codec::None };
    let mut cur: Option<PackWriter<Vec<u8>>> = None;
    let mut sampler = Sampler::default();
    for list in novel_rx.iter() {
        for group in list.chunks(COMPRESS_GROUP) {
            if flow.aborted() {
                return;
            }
            let mut read = Vec::with_capacity(group.len());
            for &(off, len, id) in group {
                let mut data = vec![0u8; len as usize];
                if let Err(e) = pfile.read_exact_at(&mut data, off) {
                    return flow.fail(ClientError::Io(format!("{}: {e}", path.display())));
                }
                read.push((id, data));
            }
            let frames = match plan.level {
                Some(level) => compress_group(read, level, &mut sampler),
                None => read.into_iter().map(|(id, d)| (id, d, false)).collect(),
            };
            for (id, data, compressed) in frames {
                let w = match &mut cur {
                    Some(w) => w,
                    None => cur.insert(PackWriter::with_codec(Vec::with_capacity(plan.pack_target + (1 << 20)), plan.alg, codec).expect("alg")),
                };
                w.add_frame(&id, &data, compressed).expect("chunk sizes are within the pack limit");
                flow.stored.fetch_add(data.len() as u64, Ordering::Relaxed);
                if compressed {
                    flow.compressed.fetch_add(1, Ordering::Relaxed);
                }
                if w.len() as usize >= plan.pack_target || w.count() >= plan.pack_chunks {
                    let p = cur.take().unwrap().finish().expect("in memory");
                    if pack_tx.send(p).is_err() {
                        return;
                    }
                }
            }
        }
    }
    if let Some(w) = cur.take() {
        let _ = pack_tx.send(w.finish().expect("in memory"));
    }
}

/// Novel chunks compressed together, across the cores (rayon); at most this many chunks'
/// data (each at most the profile's MAX) are held at once.
const COMPRESS_GROUP: usize = 256;
/// Chunks tried first in a group after a group where none compressed.
const SAMPLE: usize = 16;

/// The per-file rule that keeps incompressible data cheap: after a group of chunks none of
/// which compressed (saving 1/16), the next group tries its first [`SAMPLE`] chunks only, and
/// the rest of it only if one of those compressed. Compressible data is tried chunk by chunk.
#[derive(Default)]
struct Sampler {
    incompressible: bool,
}

/// `(id, stored data, compressed)` for each chunk of a group: the compressed frame where it
/// saves at least 1/16, else the raw chunk.
fn compress_group(read: Vec<(Digest, Vec<u8>)>, level: i32, sampler: &mut Sampler) -> Vec<(Digest, Vec<u8>, bool)> {
    use rayon::prelude::*;
    let n = read.len();
    let try_n = if sampler.incompressible { SAMPLE.min(n) } else { n };
    let run = |items: Vec<(Digest, Vec<u8>)>| -> Vec<(Digest, Vec<u8>, bool)> {
        items
            .into_par_iter()
            .map_init(
                || (Compressor::new(level), Vec::new()),
                |(c, z), (id, raw)| {
                    if c.compress(&raw, z) {
                        (id, std::mem::take(z), true)
                    } else {
                        (id, raw, false)
                    }
                },
            )
            .collect()
    };
    let mut read = read;
    let rest = read.split_off(try_n);
    let mut out = run(read);
    let any = out.iter().any(|f| f.2);
    if any || !sampler.incompressible {
        out.extend(run(rest));
    } else {
        out.extend(rest.into_iter().map(|(id, d)| (id, d, false)));
    }
    sampler.incompressible = !out.iter().any(|f| f.2);
    out
}

/// One uploader: sends packs until the pack stage is done (after a failure it drains them).
fn stage_upload(client: &Client, flow: &Flow, pack_rx: &Mutex<mpsc::Receiver<Vec<u8>>>) {
    loop {
        let p = match pack_rx.lock().unwrap_or_else(|p| p.into_inner()).recv() {
            Ok(p) => p,
            Err(_) => return,
        };
        if flow.aborted() {
            continue;
        }
        match client.upload(&p) {
            Ok(_) => flow.uploaded(p.len() as u64),
            Err(e) => flow.fail(e),
        }
    }
}

/// Commits the sealed recipe: a delta against the base when there is one (a few bytes per
/// unchanged run), else the whole recipe. If chunks went missing meanwhile (collected, or a
/// racing delete) they are sent again ([`resend_missing`]); if the base version went
/// (deleted meanwhile), the whole recipe is sent.
fn stage_commit(client: &Client, name: &str, path: &Path, plan: &Plan, recipe: &Recipe, offsets: &HashMap<Digest, (u64, u32)>, flow: &Flow) -> R<Committed> {
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
                resend_missing(client, path, plan, offsets, &ids, flow)?;
            }
            Err(e) => return Err(e),
        }
    }
}

/// Reads the chunks a commit named missing back from the file and uploads them in packs.
fn resend_missing(client: &Client, path: &Path, plan: &Plan, offsets: &HashMap<Digest, (u64, u32)>, ids: &[Digest], flow: &Flow) -> R<()> {
    let io_err = |e: io::Error| ClientError::Io(format!("{}: {e}", path.display()));
    let alg = plan.alg;
    let pfile = std::fs::File::open(path).map_err(io_err)?;
    let mut w = PackWriter::new(Vec::new(), alg).expect("alg");
    let mut data = Vec::new();
    for id in ids {
        let &(off, len) = offsets
            .get(id)
            .ok_or_else(|| ClientError::Protocol(format!("the store asks for chunk {} that the file lacks", hex(id))))?;
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
                let latest = match client.recipe(name, None) {
                    Err(ClientError::Verify(_)) => None,
                    r => r?,
                };
                if let Some((v, r)) = latest {
                    if before.is_none_or(|b| v > b) && r.digest.is_some() && r.digest == digest {
                        return Ok(Version {
                            name: name.to_string(),
                            version: v,
                            bytes: r.total_bytes(),
                            chunks: r.entries.len() as u64,
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
    let (v, recipe) = client.recipe(name, version)?.ok_or_else(|| ClientError::Http {
        status: 404,
        code: "not_found".into(),
        message: match version {
            Some(v) => format!("no version {v} of '{name}' in namespace '{}'", client.namespace()),
            None => format!("no file '{name}' in namespace '{}'", client.namespace()),
        },
    })?;
    progress.total.store(recipe.total_bytes(), Ordering::Relaxed);
    // Verified chunks in recipe order are the file once the recipe's digest is its chunk list's.
    let got = FileDigest::of(&recipe);
    if got.is_none() || got != recipe.digest {
        return Err(ClientError::Verify(format!("the store's recipe of '{name}' does not match its digest")));
    }
    let mut body: Box<dyn Read> = Box::new(client.download(name, v, 0)?);
    let mut buf = Vec::new();
    let mut pos = 0u64;
    // After a failed read the body is asked again from `pos`, the end of the verified chunks (a
    // Range request: no verified byte is read twice), at most `client.retries` times a pull.
    let mut fails = 0u32;
    let mut wait = client.backoff;
    for (i, e) in recipe.entries.iter().enumerate() {
        buf.resize(e.size as usize, 0);
        while let Err(err) = body.read_exact(&mut buf) {
            if fails >= client.retries {
                return Err(pull_failed(client, name, v, pos, i, recipe.entries.len(), fails, err));
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
        progress.processed.store(pos, Ordering::Relaxed);
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
        chunks: recipe.entries.len() as u64,
        digest: got.map(|d| hex(&d)).unwrap_or_default(),
        seconds: t0.elapsed().as_secs_f64(),
    })
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
