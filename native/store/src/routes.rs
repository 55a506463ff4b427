//! The HTTP API, protocol v1 (documented request by request in `native/store/PROTOCOL.md`).
//! Each handler parses, authorises, calls one [`Store`] function on a blocking thread, and
//! maps the result to a status; every error is JSON `{"error": ..., "code": ...}`.

use crate::access::Access;
use crate::auth::{authorize, Scope, Tokens};
use crate::error::{Result, StoreError};
use crate::range::parse_range;
use crate::store::{Store, Stored};
use axum::body::Body;
use axum::extract::rejection::{PathRejection, QueryRejection};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use cutpoint_core::protocol::name::encode_segment;
use cutpoint_core::protocol::batch::{self, MAX_BATCH_FILES};
use cutpoint_core::protocol::query::{decode_ids, encode_ids, MAX_QUERY_IDS};
use futures::StreamExt;
use serde::Deserialize;
use std::sync::Arc;
use tower_http::cors::{AllowOrigin, AllowPrivateNetwork, CorsLayer};

pub struct AppState {
    pub store: Store,
    /// `None`: open (no tokens file).
    pub tokens: Option<Tokens>,
    /// How a request body must keep sending (slow clients are cut).
    pub pace: Pace,
    /// Pack uploads and commits in progress, overall and per token.
    pub uploads: Arc<Slots>,
}

/// How a request body must keep sending: something at least every `idle`, and, once `idle`
/// has passed since it started, at least `min_rate` bytes a second on average (0: no floor).
#[derive(Clone, Copy, Debug)]
pub struct Pace {
    pub idle: std::time::Duration,
    pub min_rate: u64,
}

impl Pace {
    /// How long the body may now wait for its next bytes, having sent `sent` bytes since
    /// `start`; `None`: it is already below the rate floor. The floor: by `idle + sent / min_rate`
    /// seconds after the start, more must have come.
    fn wait(&self, start: tokio::time::Instant, sent: u64) -> Option<std::time::Duration> {
        if self.min_rate == 0 {
            return Some(self.idle);
        }
        let due = self.idle + std::time::Duration::from_secs_f64(sent as f64 / self.min_rate as f64);
        let left = due.checked_sub(start.elapsed())?;
        Some(left.min(self.idle))
    }
}

/// A request body as a stream of bytes that fails once it has sent nothing for `pace.idle`, or
/// falls below `pace.min_rate` (a client trickling a byte every few seconds is cut as soon as its
/// average falls below the floor, not left to hold the request for hours).
fn idle_limited(body: Body, pace: Pace) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    let start = tokio::time::Instant::now();
    futures::stream::unfold(Some((body.into_data_stream(), 0u64)), move |st| async move {
        let (mut s, sent) = st?;
        let slow = |m: String| Some((Err(std::io::Error::new(std::io::ErrorKind::TimedOut, m)), None));
        let too_slow = || {
            slow(format!(
                "the request body is too slow: {sent} bytes in {:.1} s (this store cuts bodies slower than {} bytes/s)",
                start.elapsed().as_secs_f64(),
                pace.min_rate
            ))
        };
        let Some(wait) = pace.wait(start, sent) else { return too_slow() };
        match tokio::time::timeout(wait, s.next()).await {
            Err(_) if wait < pace.idle => too_slow(),
            Err(_) => slow(format!("the request body sent nothing for {:.1} s", pace.idle.as_secs_f64())),
            Ok(None) => None,
            Ok(Some(Ok(b))) => {
                let n = sent + b.len() as u64;
                Some((Ok(b), Some((s, n))))
            }
            Ok(Some(Err(e))) => Some((Err(std::io::Error::other(e)), None)),
        }
    })
}

/// Concurrent pack uploads and commits, overall and per token: one over either limit is
/// refused at once with 503 and `Retry-After` (their bodies are not read), so slow uploads
/// cannot take every thread, socket and buffer of the store.
pub struct Slots {
    pub max: usize,
    pub per_token: usize,
    held: std::sync::Mutex<(usize, std::collections::HashMap<String, usize>)>,
}

/// A slot held until dropped (the end of the request).
pub struct Slot {
    slots: Arc<Slots>,
    key: String,
}

impl Slots {
    pub fn new(max: usize, per_token: usize) -> Arc<Slots> {
        Arc::new(Slots {
            max,
            per_token,
            held: Default::default(),
        })
    }

    /// A slot for a request with this Authorization header (`""`: none).
    pub fn take(self: &Arc<Self>, key: &str) -> Result<Slot> {
        let mut g = self.held.lock().unwrap_or_else(|p| p.into_inner());
        if g.0 >= self.max {
            return Err(StoreError::Busy(format!(
                "this store is taking {} uploads already (its limit); try again shortly",
                self.max
            )));
        }
        let n = g.1.entry(key.to_string()).or_insert(0);
        if *n >= self.per_token {
            return Err(StoreError::Busy(format!(
                "this token has {} uploads in progress (the store's limit per token); try again shortly",
                self.per_token
            )));
        }
        *n += 1;
        g.0 += 1;
        Ok(Slot {
            slots: self.clone(),
            key: key.to_string(),
        })
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut g = self.slots.held.lock().unwrap_or_else(|p| p.into_inner());
        g.0 -= 1;
        if let Some(n) = g.1.get_mut(&self.key) {
            *n -= 1;
            if *n == 0 {
                g.1.remove(&self.key);
            }
        }
    }
}

fn upload_slot(st: &AppState, h: &HeaderMap) -> Result<Slot> {
    let key = h.get(header::AUTHORIZATION).and_then(|v| v.to_str().ok()).unwrap_or("");
    st.uploads.take(key)
}

/// What the task gathering an upload's body hands to the blocking thread that ingests it.
enum BodyMsg {
    Data(Vec<Bytes>),
    Err(std::io::Error),
    End,
}

/// Bytes gathered before the blocking thread is woken.
const BODY_BATCH: usize = 1 << 20;
/// Batches queued for the blocking thread (see `BodyReader` for all that a body holds).
const BODY_AHEAD: usize = 2;

/// A request body as a blocking `Read`, for a handler that runs on a blocking thread.
///
/// A task gathers the body's frames into batches of at least [`BODY_BATCH`] bytes (or up to
/// the end) and hands over one batch at a time: a client that sends small frames costs one
/// wake-up of the blocking thread per MiB, not per frame. Chromium uploads in frames of about
/// 40 KiB (27,000 socket reads per GiB against 2,900 for the native client), and a bridge
/// that woke the reader for each one cost the store a futex round trip per frame.
/// The frames are not copied; at most `BODY_AHEAD + 2` batches (about 4 MiB) are held per body:
/// those queued, the one being gathered or sent, and the one the reader is taking.
struct BodyReader {
    rx: tokio::sync::mpsc::Receiver<BodyMsg>,
    cur: std::collections::VecDeque<Bytes>,
    end: bool,
    /// An error taken by [`BodyReader::first`], given after the bytes before it.
    err: Option<std::io::Error>,
}

impl BodyReader {
    fn new(body: Body, pace: Pace) -> Self {
        let (tx, rx) = tokio::sync::mpsc::channel(BODY_AHEAD);
        tokio::spawn(async move {
            let mut s = std::pin::pin!(idle_limited(body, pace));
            let mut batch = Vec::new();
            let mut n = 0;
            loop {
                // The reader gone (it stopped early: an error, a pack over the limit): the
                // body is let go now, not when the client next sends something.
                let next = tokio::select! {
                    _ = tx.closed() => return,
                    frame = s.next() => frame,
                };
                let last = match next {
                    Some(Ok(b)) => {
                        n += b.len();
                        batch.push(b);
                        if n >= BODY_BATCH {
                            n = 0;
                            if tx.send(BodyMsg::Data(std::mem::take(&mut batch))).await.is_err() {
                                return;
                            }
                        }
                        continue;
                    }
                    Some(Err(e)) => BodyMsg::Err(e),
                    None => BodyMsg::End,
                };
                // The bytes gathered so far, then the end or the error.
                if !batch.is_empty() && tx.send(BodyMsg::Data(std::mem::take(&mut batch))).await.is_err() {
                    return;
                }
                let _ = tx.send(last).await;
                return;
            }
        });
        BodyReader {
            rx,
            cur: Default::default(),
            end: false,
            err: None,
        }
    }

    /// Waits (without a thread) for the first batch, the end or an error: a body that is slow
    /// to start holds no blocking thread meanwhile.
    async fn first(&mut self) {
        match self.rx.recv().await {
            Some(BodyMsg::Data(v)) => self.cur.extend(v),
            Some(BodyMsg::End) => self.end = true,
            Some(BodyMsg::Err(e)) => self.err = Some(e),
            None => {}
        }
    }
}

impl std::io::Read for BodyReader {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if buf.is_empty() {
            return Ok(0);
        }
        loop {
            if let Some(b) = self.cur.front_mut() {
                let n = b.len().min(buf.len());
                buf[..n].copy_from_slice(&b[..n]);
                if n == b.len() {
                    self.cur.pop_front();
                } else {
                    *b = b.slice(n..);
                }
                if n > 0 {
                    return Ok(n);
                }
                continue;
            }
            if let Some(e) = self.err.take() {
                return Err(e);
            }
            if self.end {
                return Ok(0);
            }
            match self.rx.blocking_recv() {
                Some(BodyMsg::Data(v)) => self.cur.extend(v),
                Some(BodyMsg::End) => self.end = true,
                Some(BodyMsg::Err(e)) => return Err(e),
                // The gathering task ended without the body's end (the server is shutting down).
                None => return Err(std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "the request body was cut off")),
            }
        }
    }
}

type St = State<Arc<AppState>>;

/// The `Retry-After` of a 503 (a busy store: uploads at their limit, a gc holding a namespace).
const RETRY_AFTER_SECS: &str = "2";

impl IntoResponse for StoreError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = (status, Json(self.to_json())).into_response();
        if let StoreError::Range { len } = self {
            if let Ok(v) = HeaderValue::from_str(&format!("bytes */{len}")) {
                r.headers_mut().insert(header::CONTENT_RANGE, v);
            }
        }
        if status == StatusCode::SERVICE_UNAVAILABLE {
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static(RETRY_AFTER_SECS));
        }
        r
    }
}

fn auth(st: &AppState, h: &HeaderMap, ns: &str, need: Scope) -> Result<()> {
    crate::store::check_ns(ns)?;
    let a = match h.get(header::AUTHORIZATION) {
        None => None,
        Some(v) => Some(v.to_str().map_err(|_| StoreError::Unauthorized("the Authorization header is not text".into()))?),
    };
    authorize(st.tokens.as_ref(), a, ns, need)
}

async fn blocking<T: Send + 'static>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T> {
    tokio::task::spawn_blocking(f).await.map_err(|e| StoreError::Internal(format!("task failed: {e}")))?
}

fn path<T>(p: std::result::Result<Path<T>, PathRejection>) -> Result<T> {
    p.map(|Path(t)| t).map_err(|e| StoreError::BadRequest(format!("bad path: {e}")))
}

/// 413 at once for a body whose `Content-Length` is over `limit` (before any of it is read).
fn refuse_announced(h: &HeaderMap, limit: u64, what: &str) -> Result<()> {
    match content_length(h) {
        Some(n) if n > limit => Err(StoreError::TooLarge(format!(
            "the {what} is larger than this store's limit of {limit} bytes (Content-Length {n})"
        ))),
        _ => Ok(()),
    }
}

/// Reads a whole (small) body, at most `limit` bytes (413 over it, at once if its
/// `Content-Length` says so).
async fn body_bytes(h: &HeaderMap, body: Body, pace: Pace, limit: usize, what: &str) -> Result<Vec<u8>> {
    refuse_announced(h, limit as u64, what)?;
    let mut s = std::pin::pin!(idle_limited(body, pace));
    let mut out = Vec::new();
    while let Some(b) = s.next().await {
        let b = b.map_err(|e| StoreError::BadRequest(format!("reading the {what}: {e}")))?;
        if out.len() + b.len() > limit {
            return Err(StoreError::TooLarge(format!("the {what} is larger than the limit of {limit} bytes")));
        }
        out.extend_from_slice(&b);
    }
    Ok(out)
}

fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?.to_str().ok()?.parse().ok()
}

#[derive(Deserialize)]
struct VersionQ {
    version: Option<u64>,
    /// `GET recipes/{name}?parts=1`: the stored text with its part lines.
    parts: Option<u8>,
}

#[derive(Deserialize)]
struct GcQ {
    grace: Option<u64>,
}

fn query_param<T>(q: std::result::Result<Query<T>, QueryRejection>) -> Result<T> {
    q.map(|Query(t)| t).map_err(|e| StoreError::BadRequest(format!("bad query string: {e}")))
}

/// What this store takes beyond revision 1 (`GET /v1`): `zstd-group` only where uploads of
/// codec 2 are taken (`Store::groups`).
fn features(store: &Store) -> Vec<&'static str> {
    let mut f = vec!["zstd", "zstd-group", "parts", "batch", "part-delta"];
    if !store.groups {
        f.retain(|&x| x != "zstd-group");
    }
    f
}

async fn info(State(st): St) -> Response {
    Json(serde_json::json!({
        "service": "cutpoint",
        "protocol": 1,
        "revision": 2,
        "version": env!("CARGO_PKG_VERSION"),
        "auth": if st.tokens.is_some() { "tokens" } else { "open" },
        "features": features(&st.store),
        "limits": {
            "max_pack_bytes": st.store.limits.max_pack,
            "max_recipe_bytes": st.store.limits.max_recipe,
            "max_query_ids": MAX_QUERY_IDS,
            "max_chunk_bytes": cutpoint_core::protocol::pack::MAX_CHUNK,
            "max_pack_chunks": st.store.limits.max_pack_chunks,
            "max_uploads_per_token": st.uploads.per_token,
            "max_batch_files": MAX_BATCH_FILES,
            "max_commit_entries": st.store.limits.max_commit_entries,
        },
    }))
    .into_response()
}

async fn query(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let b = body_bytes(&h, body, st.pace, MAX_QUERY_IDS * 32, "query").await?;
    let ids = decode_ids(&b, MAX_QUERY_IDS)?;
    let st2 = st.clone();
    let missing = blocking(move || st2.store.query(&ns, &ids)).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], encode_ids(&missing)).into_response())
}

async fn upload(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Write)?;
    refuse_announced(&h, st.store.limits.max_pack, "pack")?;
    let slot = upload_slot(&st, &h)?;
    let mut reader = BodyReader::new(body, st.pace);
    reader.first().await;
    let st2 = st.clone();
    let rep = blocking(move || st2.store.ingest(&ns, reader)).await?;
    drop(slot);
    Ok(Json(rep).into_response())
}

async fn list(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let st2 = st.clone();
    let files = blocking(move || st2.store.list(&ns)).await?;
    Ok(Json(serde_json::json!({ "files": files })).into_response())
}

async fn commit(State(st): St, p: std::result::Result<Path<(String, String)>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let (ns, name) = path(p)?;
    auth(&st, &h, &ns, Scope::Write)?;
    refuse_announced(&h, st.store.limits.max_recipe, "recipe")?;
    let slot = upload_slot(&st, &h)?;
    let b = body_bytes(&h, body, st.pace, st.store.limits.max_recipe as usize, "recipe").await?;
    let st2 = st.clone();
    let v = blocking(move || st2.store.commit(&ns, &name, &b)).await?;
    drop(slot);
    Ok((StatusCode::CREATED, Json(v)).into_response())
}

/// `POST /v1/ns/{ns}/commits`: a batch of commits (PROTOCOL.md §4.14). Framing errors: 400,
/// nothing committed; over `max_recipe_bytes` or `max_batch_files`: 413. Otherwise 200 with
/// one result per file, in body order.
async fn commits(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Write)?;
    refuse_announced(&h, st.store.limits.max_recipe, "batch")?;
    let slot = upload_slot(&st, &h)?;
    let b = body_bytes(&h, body, st.pace, st.store.limits.max_recipe as usize, "batch").await?;
    let files = batch::parse(&b, MAX_BATCH_FILES).map_err(|e| match e {
        batch::BatchError::TooMany(_) => StoreError::TooLarge(e.to_string()),
        batch::BatchError::Malformed(_) => StoreError::BadRequest(e.to_string()),
    })?;
    let st2 = st.clone();
    let (files, results) = blocking(move || {
        let r = st2.store.commit_batch(&ns, &files, &b)?;
        Ok((files, r))
    })
    .await?;
    drop(slot);
    let results: Vec<serde_json::Value> = files
        .into_iter()
        .zip(results)
        .map(|((name, _), r)| match r {
            Ok(v) => {
                let mut j = serde_json::to_value(&v).unwrap_or_default();
                j["status"] = 201.into();
                j
            }
            Err(e) => {
                let mut j = e.to_json();
                j["name"] = name.into();
                j["status"] = e.status().into();
                j
            }
        })
        .collect();
    Ok(Json(serde_json::json!({ "results": results })).into_response())
}

async fn delete(
    State(st): St,
    p: std::result::Result<Path<(String, String)>, PathRejection>,
    q: std::result::Result<Query<VersionQ>, QueryRejection>,
    h: HeaderMap,
) -> Result<Response> {
    let (ns, name) = path(p)?;
    let v = query_param(q)?.version;
    auth(&st, &h, &ns, Scope::Write)?;
    let st2 = st.clone();
    let n = blocking(move || st2.store.delete(&ns, &name, v)).await?;
    Ok(Json(serde_json::json!({ "deleted": n })).into_response())
}

async fn recipe(
    State(st): St,
    p: std::result::Result<Path<(String, String)>, PathRejection>,
    q: std::result::Result<Query<VersionQ>, QueryRejection>,
    h: HeaderMap,
) -> Result<Response> {
    let (ns, name) = path(p)?;
    let q = query_param(q)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let st2 = st.clone();
    let ns2 = ns.clone();
    let (row, r) = blocking(move || st2.store.stored(&ns2, &name, q.version)).await?;
    let headers = [
        (header::CONTENT_TYPE, "text/plain; charset=utf-8".to_string()),
        (header::HeaderName::from_static("x-cutpoint-version"), row.version.to_string()),
    ];
    match r {
        Stored::Parts(r) if q.parts != Some(1) => {
            // Expanded for the clients that know no parts: streamed, one part at a time.
            let body = Body::from_stream(expand_stream(st.clone(), ns, r));
            Ok((headers, body).into_response())
        }
        r => Ok((headers, r.text()).into_response()),
    }
}

/// The expanded text of a recipe with part lines: its header, each chunk line, each part's
/// chunk lines (a part read on a blocking thread when the connection asks for it), its `end`.
fn expand_stream(st: Arc<AppState>, ns: String, r: cutpoint_core::protocol::part::PartRecipe) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    use cutpoint_core::protocol::part::Line;
    let r = Arc::new(r);
    // States: 0 = header, 1..=lines = the line before, lines + 1 = the end line.
    futures::stream::unfold(Some(0usize), move |at| {
        let (st, ns, r) = (st.clone(), ns.clone(), r.clone());
        async move {
            let at = at?;
            let n = r.lines.len();
            if at == 0 {
                let mut s = format!("cutpoint-recipe 1\nprofile {}\nhash {}\n", r.profile, r.hash.name());
                if let Some(d) = &r.digest {
                    s.push_str(&format!("digest {}\n", cutpoint_core::hex(d)));
                }
                return Some((Ok(Bytes::from(s)), Some(1)));
            }
            if at > n + 1 {
                return None;
            }
            if at == n + 1 {
                return Some((Ok(Bytes::from(format!("end {} {}\n", r.count, r.bytes))), Some(n + 2)));
            }
            let step = tokio::task::spawn_blocking(move || -> Result<(String, usize)> {
                let mut s = String::new();
                let mut i = at - 1;
                while i < n && s.len() < 256 << 10 {
                    match &r.lines[i] {
                        Line::Chunk(e) => e.write_line(&mut s),
                        Line::Part { id, .. } => {
                            let b = st.store.part_text(&ns, id)?;
                            let p = cutpoint_core::protocol::part::Part::parse(&b).map_err(|e| StoreError::Damaged(format!("a stored part is damaged: {e}")))?;
                            for e in &p.entries {
                                e.write_line(&mut s);
                            }
                        }
                    }
                    i += 1;
                }
                Ok((s, i + 1))
            })
            .await;
            match step {
                Ok(Ok((s, next))) => Some((Ok(Bytes::from(s)), Some(next))),
                Ok(Err(e)) => Some((Err(std::io::Error::other(e.to_string())), None)),
                Err(e) => Some((Err(std::io::Error::other(format!("recipe task failed: {e}"))), None)),
            }
        }
    })
}

/// `POST parts`: stores a recipe part (at most `--max-recipe` bytes).
async fn put_part(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Write)?;
    refuse_announced(&h, st.store.limits.max_recipe, "part")?;
    let slot = upload_slot(&st, &h)?;
    let b = body_bytes(&h, body, st.pace, st.store.limits.max_recipe as usize, "part").await?;
    let st2 = st.clone();
    let rep = blocking(move || st2.store.put_part(&ns, &b)).await?;
    drop(slot);
    Ok(Json(rep).into_response())
}

/// `POST parts/query`: the part ids the namespace lacks.
async fn query_parts(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap, body: Body) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let b = body_bytes(&h, body, st.pace, MAX_QUERY_IDS * 32, "query").await?;
    let ids = decode_ids(&b, MAX_QUERY_IDS)?;
    let st2 = st.clone();
    let missing = blocking(move || st2.store.query_parts(&ns, &ids)).await?;
    Ok(([(header::CONTENT_TYPE, "application/octet-stream")], encode_ids(&missing)).into_response())
}

/// `GET parts/{id}`: a part's text.
async fn get_part(State(st): St, p: std::result::Result<Path<(String, String)>, PathRejection>, h: HeaderMap) -> Result<Response> {
    let (ns, id) = path(p)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let id = cutpoint_core::rapid::recipe::parse_hex(&id)
        .filter(|d| cutpoint_core::hex(d) == id)
        .ok_or_else(|| StoreError::BadRequest("a part id is 64 lower-case hex digits".into()))?;
    let st2 = st.clone();
    let b = blocking(move || st2.store.part_text(&ns, &id)).await?;
    Ok(([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], b).into_response())
}

async fn restore(
    method: Method,
    State(st): St,
    p: std::result::Result<Path<(String, String)>, PathRejection>,
    q: std::result::Result<Query<VersionQ>, QueryRejection>,
    h: HeaderMap,
) -> Result<Response> {
    let (ns, name) = path(p)?;
    let v = query_param(q)?.version;
    auth(&st, &h, &ns, Scope::Read)?;
    let st2 = st.clone();
    let (ns2, name2) = (ns.clone(), name.clone());
    let (row, r) = blocking(move || st2.store.stored(&ns2, &name2, v)).await?;
    let len = r.total_bytes();
    let etag = format!("\"{}\"", row.digest);
    if let Some(inm) = h.get(header::IF_NONE_MATCH).and_then(|v| v.to_str().ok()) {
        if inm.split(',').any(|t| t.trim() == etag || t.trim() == "*") {
            return Ok((StatusCode::NOT_MODIFIED, [(header::ETAG, etag)]).into_response());
        }
    }
    let mut range = parse_range(h.get(header::RANGE).map(|v| v.as_bytes()), len)?;
    if let (Some(_), Some(ir)) = (&range, h.get(header::IF_RANGE).and_then(|v| v.to_str().ok())) {
        if ir.trim() != etag {
            range = None;
        }
    }
    let (status, rg) = match range {
        Some(rg) => (StatusCode::PARTIAL_CONTENT, rg),
        None => (StatusCode::OK, 0..len),
    };
    let leaf = name.rsplit('/').next().unwrap_or(&name).replace(['"', '\\'], "_");
    let mut resp = Response::builder()
        .status(status)
        .header(header::CONTENT_TYPE, "application/octet-stream")
        .header(header::CONTENT_LENGTH, rg.end - rg.start)
        .header(header::ACCEPT_RANGES, "bytes")
        .header(header::ETAG, &etag)
        .header("x-cutpoint-version", row.version)
        .header(
            header::CONTENT_DISPOSITION,
            format!("attachment; filename*=UTF-8''{}", encode_segment(&leaf)),
        );
    if status == StatusCode::PARTIAL_CONTENT {
        resp = resp.header(header::CONTENT_RANGE, format!("bytes {}-{}/{len}", rg.start, rg.end - 1));
    }
    if method == Method::HEAD || rg.start == rg.end {
        return resp.body(Body::empty()).map_err(StoreError::internal);
    }
    let cursor = st.store.restore_stored(&ns, r, rg);
    resp.body(Body::from_stream(restore_stream(st.clone(), cursor))).map_err(StoreError::internal)
}

/// A restore's body: each piece is read on a blocking thread when the connection asks for
/// the next one, so a client that does not read holds no thread and at most one piece (a
/// client that reads nothing for `--send-timeout` is cut by the connection, see `serve`).
/// An error ends the body with it (the client sees a cut response, never wrong bytes).
/// A restore's body: steps of up to one piece (`Store::restore_piece`: 128 KiB locally, 2 MiB
/// from a bucket), each several runs of chunks read, decompressed and verified on the blocking
/// pool. The next step is made only when the body is polled for it, so a client that stops
/// reading holds one step of memory and no thread.
fn restore_stream(st: Arc<AppState>, cursor: crate::store::RestoreCursor) -> impl futures::Stream<Item = std::io::Result<Bytes>> + Send {
    futures::stream::unfold(Some(cursor), move |c| {
        let st = st.clone();
        async move {
            let mut c = c?;
            let step = tokio::task::spawn_blocking(move || {
                let piece = Store::restore_piece(&c);
                let r = st.store.restore_step(&mut c, piece);
                (r, c)
            })
            .await;
            match step {
                Ok((Ok(Some(b)), c)) => Some((Ok(b), Some(c))),
                Ok((Ok(None), _)) => None,
                Ok((Err(e), _)) => Some((Err(std::io::Error::other(e.to_string())), None)),
                Err(e) => Some((Err(std::io::Error::other(format!("restore task failed: {e}"))), None)),
            }
        }
    })
}

async fn gc(
    State(st): St,
    p: std::result::Result<Path<String>, PathRejection>,
    q: std::result::Result<Query<GcQ>, QueryRejection>,
    h: HeaderMap,
) -> Result<Response> {
    let ns = path(p)?;
    let grace = query_param(q)?.grace.unwrap_or(3600);
    auth(&st, &h, &ns, Scope::Write)?;
    let st2 = st.clone();
    let rep = blocking(move || st2.store.gc(&ns, grace)).await?;
    Ok(Json(rep).into_response())
}

async fn check(State(st): St, p: std::result::Result<Path<String>, PathRejection>, h: HeaderMap) -> Result<Response> {
    let ns = path(p)?;
    auth(&st, &h, &ns, Scope::Read)?;
    let st2 = st.clone();
    let rep = blocking(move || st2.store.check(&ns)).await?;
    Ok(Json(rep).into_response())
}

async fn not_found() -> StoreError {
    StoreError::NotFound("no such route (the API is under /v1; see PROTOCOL.md)".into())
}

/// Refuses, before any handler runs, a request whose `Host` the store does not answer to (DNS
/// rebinding) or whose `Origin` is not allowed (a web page the user did not name): 403, nothing
/// done, and no CORS headers (see [`crate::access`]).
async fn guard(State(access): State<Arc<Access>>, req: Request, next: Next) -> Response {
    // `CUTPOINT_LOG_REQUESTS=1`: one line per request on stderr (method and path), for
    // counting a client's requests.
    static LOG: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    if *LOG.get_or_init(|| std::env::var_os("CUTPOINT_LOG_REQUESTS").is_some_and(|v| v == "1")) {
        eprintln!("cutpoint serve: request {} {}", req.method(), req.uri().path());
    }
    let host = req.headers().get(header::HOST).map(|h| h.to_str().unwrap_or("\u{fffd}").to_string());
    let host = host.or_else(|| req.uri().authority().map(|a| a.to_string()));
    if let Some(h) = host {
        if !access.host_allowed(&h) {
            return StoreError::Forbidden(format!(
                "this store does not answer to the host name '{h}' (it answers to loopback addresses, localhost \
                 and names given with --allowed-host; other names are refused against DNS rebinding)"
            ))
            .into_response();
        }
    }
    if let Some(o) = req.headers().get(header::ORIGIN) {
        let o = o.to_str().unwrap_or("\u{fffd}");
        if !access.origin_allowed(o) {
            return StoreError::Forbidden(format!(
                "web pages of {o} may not call this store (start it with --cors-origin {o} to allow them)"
            ))
            .into_response();
        }
    }
    next.run(req).await
}

/// The router: the routes of protocol v1, CORS for the allowed origins, and [`guard`] in front.
pub fn router(state: Arc<AppState>, access: Arc<Access>) -> Router {
    let origin = if access.any_origin() {
        AllowOrigin::any()
    } else {
        AllowOrigin::list(access.origins().iter().filter_map(|o| HeaderValue::from_str(o).ok()))
    };
    // Chromium's private-network preflight is answered like the rest of CORS: only requests of
    // allowed origins get here (guard), and only those get the header.
    let a2 = access.clone();
    let private = AllowPrivateNetwork::predicate(move |o, _| o.to_str().is_ok_and(|o| a2.origin_allowed(o)));
    let cors = CorsLayer::new()
        .allow_origin(origin)
        .allow_private_network(private)
        .allow_methods([Method::GET, Method::HEAD, Method::POST, Method::PUT, Method::DELETE])
        .allow_headers([
            header::AUTHORIZATION,
            header::CONTENT_TYPE,
            header::RANGE,
            header::IF_NONE_MATCH,
            header::IF_RANGE,
        ])
        .expose_headers([
            header::ETAG,
            header::CONTENT_RANGE,
            header::CONTENT_LENGTH,
            header::ACCEPT_RANGES,
            header::HeaderName::from_static("x-cutpoint-version"),
        ])
        .max_age(std::time::Duration::from_secs(600));
    Router::new()
        .route("/v1", get(info))
        .route("/v1/ns/{ns}/query", post(query))
        .route("/v1/ns/{ns}/packs", post(upload))
        .route("/v1/ns/{ns}/files", get(list))
        .route("/v1/ns/{ns}/commits", post(commits))
        .route("/v1/ns/{ns}/files/{name}", get(restore).head(restore).put(commit).delete(delete))
        .route("/v1/ns/{ns}/recipes/{name}", get(recipe))
        .route("/v1/ns/{ns}/parts", post(put_part))
        .route("/v1/ns/{ns}/parts/query", post(query_parts))
        .route("/v1/ns/{ns}/parts/{id}", get(get_part))
        .route("/v1/ns/{ns}/gc", post(gc))
        .route("/v1/ns/{ns}/check", get(check))
        .fallback(not_found)
        .layer(cors)
        .layer(axum::middleware::from_fn_with_state(access, guard))
        .with_state(state)
}

/// Where a server keeps its objects and its index.
#[derive(Clone, Debug)]
pub enum Data {
    /// A directory: objects in `DIR/objects`, the index in `DIR/index.sqlite`.
    Dir(std::path::PathBuf),
    /// An S3-compatible bucket (`s3://BUCKET/PREFIX`); the index is a cache in `cache`
    /// (`cache/index.sqlite`, spool files in `cache/tmp`), rebuilt from the bucket.
    S3 {
        bucket: String,
        prefix: String,
        endpoint: Option<String>,
        cache: std::path::PathBuf,
    },
}

/// Server settings (`cutpoint serve`).
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub data: Data,
    pub listen: std::net::SocketAddr,
    pub tokens: Option<std::path::PathBuf>,
    /// `--cors-origin` values (`*`: any, only with tokens).
    pub cors_origins: Vec<String>,
    /// `--allowed-host` values (`*`: any, only with tokens).
    pub allowed_hosts: Vec<String>,
    pub limits: crate::store::Limits,
    pub reindex: bool,
    /// With a shared bucket: how long a gc holds its lock before reading the recipes.
    pub gc_settle: std::time::Duration,
    /// With a shared bucket: a gc lock not renewed for this long is a dead node's.
    pub gc_lease: std::time::Duration,
    /// A client must send a request's head within this (slowloris).
    pub header_timeout: std::time::Duration,
    /// A request body that sends nothing for this long is cut.
    pub body_idle: std::time::Duration,
    /// A request body slower than this on average (bytes/s, after `body_idle`) is cut; 0: no floor.
    pub min_rate: u64,
    /// A response the client does not read for this long is cut (its connection closed).
    pub send_timeout: std::time::Duration,
    /// Pack uploads and commits at once, overall and per token (503 + Retry-After over it).
    pub max_uploads: usize,
    pub max_uploads_per_token: usize,
    /// Take packs of codec 2 (groups) and list `zstd-group`; `None`: on for a directory, off for
    /// a bucket (which the edge store, refusing groups this revision, may share).
    pub groups: Option<bool>,
}

/// The most a connection buffers (hyper's `max_buf_size`: the response bytes queued for a
/// client that does not read, and the request read buffer).
const CONN_BUF: usize = 128 << 10;

/// A connection whose writes fail once the client has taken nothing for `limit`: a client
/// that stops reading a response is cut (hyper has no write timeout of its own), and what the
/// response held is let go.
struct SendTimeout<T> {
    io: T,
    limit: std::time::Duration,
    stalled: Option<std::pin::Pin<Box<tokio::time::Sleep>>>,
}

impl<T> SendTimeout<T> {
    fn new(io: T, limit: std::time::Duration) -> Self {
        SendTimeout { io, limit, stalled: None }
    }

    /// After a write that could not proceed: an error once it has been stalled for `limit`.
    fn stalled(&mut self, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<usize>> {
        let limit = self.limit;
        let sleep = self.stalled.get_or_insert_with(|| Box::pin(tokio::time::sleep(limit)));
        match std::future::Future::poll(sleep.as_mut(), cx) {
            std::task::Poll::Ready(()) => std::task::Poll::Ready(Err(std::io::Error::new(
                std::io::ErrorKind::TimedOut,
                format!("the client read nothing for {:.1} s", limit.as_secs_f64()),
            ))),
            std::task::Poll::Pending => std::task::Poll::Pending,
        }
    }
}

impl<T: tokio::io::AsyncRead + Unpin> tokio::io::AsyncRead for SendTimeout<T> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_read(cx, buf)
    }
}

impl<T: tokio::io::AsyncWrite + Unpin> tokio::io::AsyncWrite for SendTimeout<T> {
    fn poll_write(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>, buf: &[u8]) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.io).poll_write(cx, buf) {
            std::task::Poll::Pending => self.stalled(cx),
            r => {
                self.stalled = None;
                r
            }
        }
    }
    fn poll_write_vectored(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        match std::pin::Pin::new(&mut self.io).poll_write_vectored(cx, bufs) {
            std::task::Poll::Pending => self.stalled(cx),
            r => {
                self.stalled = None;
                r
            }
        }
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        match std::pin::Pin::new(&mut self.io).poll_flush(cx) {
            std::task::Poll::Pending => self.stalled(cx).map_ok(|_| ()),
            r => {
                self.stalled = None;
                r
            }
        }
    }
    fn poll_shutdown(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// glibc's allocator, for a server: blocks under [`MALLOC_MMAP_THRESHOLD`] come from the heap
/// (not a fresh mapping each), and the heap keeps up to [`MALLOC_TRIM_THRESHOLD`] bytes free at
/// its top rather than handing them back at once. A body's buffers (hyper's read buffer, up to
/// ~400 KiB, the 1 MiB batches handed to the ingest) were otherwise given back to the kernel
/// and faulted in again, zeroed, at every receive: 34,000–57,000 page faults for a first push
/// of 1 GiB, 6,800–14,000 with these settings (issue #28). Set once, before the store opens;
/// the `MALLOC_MMAP_THRESHOLD_` and `MALLOC_TRIM_THRESHOLD_` environment variables still win.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn tune_malloc() {
    for (param, env, value) in [
        (libc::M_MMAP_THRESHOLD, "MALLOC_MMAP_THRESHOLD_", MALLOC_MMAP_THRESHOLD),
        (libc::M_TRIM_THRESHOLD, "MALLOC_TRIM_THRESHOLD_", MALLOC_TRIM_THRESHOLD),
    ] {
        if std::env::var_os(env).is_none() {
            // SAFETY: mallopt only sets the allocator's parameters; it runs once, before the store
            // opens and any request is served (glibc takes its arena lock for it).
            unsafe { libc::mallopt(param, value) };
        }
    }
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn tune_malloc() {}

/// See [`tune_malloc`].
pub const MALLOC_MMAP_THRESHOLD: i32 = 8 << 20;
/// See [`tune_malloc`].
/// 16 MiB: a push's buffers are reused below it; more (64 MiB was tried) kept the server's peak
/// during a 32 GiB push at 122.7 MiB against issue #32's 128 MiB bound.
pub const MALLOC_TRIM_THRESHOLD: i32 = 16 << 20;

/// Opens the store and serves until SIGINT/SIGTERM. `ready` gets the bound address (port 0
/// picks a free one), what reconcile found, and who may call the store.
pub async fn serve(
    cfg: ServeConfig,
    ready: impl FnOnce(std::net::SocketAddr, &crate::store::ReconcileReport, &AppState, &Access),
) -> Result<()> {
    tune_malloc();
    let tokens = match &cfg.tokens {
        Some(p) => Some(Tokens::load(p).map_err(StoreError::BadRequest)?),
        None => {
            if !cfg.listen.ip().is_loopback() {
                return Err(StoreError::BadRequest(format!(
                    "refusing to listen on {} without --tokens: an open store listens on loopback only",
                    cfg.listen
                )));
            }
            None
        }
    };
    let access = Arc::new(Access::new(tokens.is_some(), &cfg.cors_origins, &cfg.allowed_hosts, cfg.listen).map_err(StoreError::BadRequest)?);
    let rt = tokio::runtime::Handle::current();
    let c2 = cfg.clone();
    let (store, rep) = blocking(move || match &c2.data {
        Data::Dir(d) => crate::store::Store::open_dir(d, rt, c2.limits.clone(), c2.reindex),
        Data::S3 {
            bucket,
            prefix,
            endpoint,
            cache,
        } => {
            let objects = crate::backend::Objects::s3(bucket, prefix, endpoint.as_deref(), rt)?;
            crate::store::Store::open(objects, &cache.join("index.sqlite"), &cache.join("tmp"), c2.limits.clone(), c2.reindex)
        }
    })
    .await?;
    let mut store = store;
    store.gc_settle = cfg.gc_settle;
    store.gc_lease = cfg.gc_lease;
    store.groups = cfg.groups.unwrap_or_else(|| store.objects.is_local());
    let listener = tokio::net::TcpListener::bind(cfg.listen)
        .await
        .map_err(|e| StoreError::Internal(format!("cannot listen on {}: {e}", cfg.listen)))?; // exit 1, not usage
    let addr = listener.local_addr().map_err(StoreError::internal)?;
    let state = Arc::new(AppState {
        store,
        tokens,
        pace: Pace {
            idle: cfg.body_idle,
            min_rate: cfg.min_rate,
        },
        uploads: Slots::new(cfg.max_uploads, cfg.max_uploads_per_token),
    });
    ready(addr, &rep, &state, &access);
    let app = router(state.clone(), access);
    let mut stop = std::pin::pin!(async {
        let ctrl_c = tokio::signal::ctrl_c();
        #[cfg(unix)]
        {
            let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()).expect("SIGTERM handler");
            tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
        }
        #[cfg(not(unix))]
        {
            let _ = ctrl_c.await;
        }
    });
    // One task per connection: HTTP/1.1 with keep-alive and a timeout on each request's head
    // (axum::serve sets none). On SIGINT/SIGTERM: stop accepting, let the connections finish
    // their requests in flight.
    let conns = tokio_util::task::TaskTracker::new();
    let (closing_tx, closing_rx) = tokio::sync::watch::channel(false);
    loop {
        let sock = tokio::select! {
            r = listener.accept() => match r {
                Ok((s, _)) => s,
                Err(_) => {
                    // Out of file descriptors and the like: back off a moment.
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let svc = hyper_util::service::TowerToHyperService::new(app.clone());
        let header_timeout = cfg.header_timeout;
        let send_timeout = cfg.send_timeout;
        let mut closing = closing_rx.clone();
        conns.spawn(async move {
            let mut b = hyper::server::conn::http1::Builder::new();
            b.timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .keep_alive(true)
                .max_buf_size(CONN_BUF);
            let io = SendTimeout::new(sock, send_timeout);
            let conn = b.serve_connection(hyper_util::rt::TokioIo::new(io), svc);
            let mut conn = std::pin::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = closing.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.await;
                }
            }
        });
    }
    let _ = closing_tx.send(true);
    conns.close();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(30), conns.wait()).await;
    // Every connection finished: the databases folded and compacted. Only space is at stake
    // (a request still in flight after the wait may keep a database busy): a failure is said,
    // not fatal.
    if let Err(e) = blocking(move || state.store.close()).await {
        eprintln!("cutpoint serve: at stop, the databases were not compacted: {e}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// A body of `frames` (an `Err` item ends it with that error), read by a `BodyReader` on a
    /// blocking thread in reads of `step` bytes: the bytes read, then the error if any.
    fn read_all(frames: Vec<std::result::Result<Vec<u8>, &'static str>>, step: usize) -> (Vec<u8>, Option<String>) {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async move {
            let items = frames.into_iter().map(|f| f.map(Bytes::from).map_err(std::io::Error::other));
            let body = Body::from_stream(futures::stream::iter(items));
            let mut r = BodyReader::new(body, pace(5));
            tokio::task::spawn_blocking(move || {
                let mut out = Vec::new();
                let mut buf = vec![0u8; step];
                loop {
                    match r.read(&mut buf) {
                        Ok(0) => return (out, None),
                        Ok(n) => out.extend_from_slice(&buf[..n]),
                        Err(e) => return (out, Some(e.to_string())),
                    }
                }
            })
            .await
            .unwrap()
        })
    }

    fn pace(idle_secs: u64) -> Pace {
        Pace {
            idle: std::time::Duration::from_secs(idle_secs),
            min_rate: 0,
        }
    }

    fn bytes(n: usize, seed: u8) -> Vec<u8> {
        (0..n).map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed)).collect()
    }

    #[test]
    fn a_body_reads_back_whole_whatever_its_frames_and_the_reads() {
        // Frames small and large, empty ones, batches crossing BODY_BATCH; reads of odd sizes.
        let sizes = [0, 1, 40 << 10, 0, 3, BODY_BATCH - 5, 7, BODY_BATCH, 2 * BODY_BATCH + 1, 40 << 10, 1];
        let frames: Vec<Vec<u8>> = sizes.iter().enumerate().map(|(i, &n)| bytes(n, i as u8)).collect();
        let want: Vec<u8> = frames.concat();
        for step in [1usize, 7, 4096, 40 << 10, 3 * BODY_BATCH] {
            if step == 1 {
                // One byte at a time over 5 MiB is slow in debug builds: the first 200 KiB.
                let short: Vec<_> = frames[..4].iter().cloned().map(Ok).collect();
                let (got, err) = read_all(short, step);
                assert_eq!(err, None);
                assert_eq!(got, frames[..4].concat());
                continue;
            }
            let (got, err) = read_all(frames.iter().cloned().map(Ok).collect(), step);
            assert_eq!(err, None, "step {step}");
            assert_eq!(got.len(), want.len(), "step {step}");
            assert!(got == want, "step {step}: the bytes differ");
        }
        let (got, err) = read_all(vec![], 4096);
        assert_eq!((got.len(), err), (0, None));
    }

    #[test]
    fn a_body_that_fails_gives_its_bytes_then_the_error() {
        let a = bytes(100 << 10, 1);
        let b = bytes(3, 2);
        let (got, err) = read_all(vec![Ok(a.clone()), Ok(b.clone()), Err("the client went away")], 4096);
        assert_eq!(got, [a, b].concat());
        let err = err.expect("an error, not an end");
        assert!(err.contains("the client went away"), "{err}");
    }

    #[test]
    fn a_reader_dropped_early_lets_the_body_go() {
        // The blocking side stops after the first read (a pack over the limit): the task that
        // gathers the body ends instead of holding it (the test would hang otherwise).
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        rt.block_on(async {
            let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(1);
            let body = Body::from_stream(tokio_stream_of(rx));
            let mut r = BodyReader::new(body, pace(30));
            tx.send(Ok(Bytes::from(bytes(BODY_BATCH, 3)))).await.unwrap();
            let n = tokio::task::spawn_blocking(move || {
                let mut buf = [0u8; 10];
                let n = r.read(&mut buf).unwrap();
                drop(r);
                n
            })
            .await
            .unwrap();
            assert_eq!(n, 10);
            // The sender sees the body dropped once the task has ended.
            tokio::time::timeout(std::time::Duration::from_secs(10), tx.closed()).await.expect("the body was let go");
        });
    }

    fn tokio_stream_of(mut rx: tokio::sync::mpsc::Receiver<std::io::Result<Bytes>>) -> impl futures::Stream<Item = std::io::Result<Bytes>> {
        futures::stream::poll_fn(move |cx| rx.poll_recv(cx))
    }
}
