// The cutpoint store as a Cloudflare Worker: protocol v1 (native/store/PROTOCOL.md) over R2
// (packs, recipes: the S3 backend's key layout) and one Durable Object per namespace (the
// index, the version numbers; `namespace.js`). This module does the I/O and the HTTP; every
// body is parsed and checked by cutpoint-core compiled to wasm (`edge/wasm`): pack verification
// (re-hashing every chunk, bounded decompression), id lists, recipes, deltas, names, ranges.
import wasmModule from '../pkg/cutpoint_edge_wasm_bg.wasm';
import * as core from '../pkg/cutpoint_edge_wasm.js';
import { countingEnv, packKey, partKey, recipePrefix, versionKey } from './namespace.js';

export { Namespace } from './namespace.js';
export { Uploads } from './uploads.js';
import { RENEW_MS } from './uploads.js';

// The wasm memory, for the bench (bench/harness/edge.mjs reads its size through the inspector).
globalThis.cutpointWasmMemory = core.initSync({ module: wasmModule }).memory;

const MiB = 1 << 20;
// The platform's request body limit is 100 MB (Free and Pro plans): every limit stays below it.
const LIMITS = {
  max_pack_bytes: 32 * MiB,
  max_recipe_bytes: 16 * MiB,
  max_query_ids: 16384,
  max_chunk_bytes: 64 * MiB,
  max_pack_chunks: 65536,
  max_uploads_per_token: 16,
  max_batch_files: core.maxBatchFiles(),
  max_commit_entries: 33554432,
};
const FEATURES = ['zstd', 'parts', 'batch', 'part-delta'];

/** A positive integer variable (a test's small limit), or the default. */
function intVar(v, dflt) {
  if (v === undefined || v === '') return dflt;
  if (!/^[1-9][0-9]{0,14}$/.test(String(v))) throw new Error(`bad limit '${v}' (a positive integer)`);
  return Number(v);
}
const VERSION = '0.1.0';

// ---- answers -------------------------------------------------------------------------------

class Refusal extends Error {
  constructor(status, code, message, extra = {}, headers = {}) {
    super(message);
    this.status = status;
    this.code = code;
    this.extra = extra;
    this.headers = headers;
  }
}

const CODES = { 400: 'bad_request', 401: 'unauthorized', 403: 'forbidden', 404: 'not_found', 409: 'missing_chunks',
  411: 'bad_request', 413: 'too_large', 416: 'range_not_satisfiable', 500: 'internal', 503: 'busy' };

/** A core error (`"413 message"`) as the refusal it stands for. */
function fromCore(e) {
  const m = /^(\d{3}) ([\s\S]*)$/.exec(e?.message ?? '');
  if (!m) return e;
  const status = Number(m[1]);
  return new Refusal(status, CODES[status] ?? 'internal', m[2]);
}

function core1(f) {
  try {
    return f();
  } catch (e) {
    throw fromCore(e);
  }
}

function json(status, body, headers = {}) {
  return new Response(JSON.stringify(body), { status, headers: { 'content-type': 'application/json', ...headers } });
}

let internalSeq = 0;
function errorResponse(e) {
  if (e instanceof Refusal) {
    return json(e.status, { error: e.message, code: e.code, ...e.extra }, e.headers);
  }
  // The namespace's Durable Object is building its index from the bucket, a step a request.
  const busy = /^cutpoint-busy: ([\s\S]*)$/.exec(e?.message ?? '');
  if (busy) return json(503, { error: busy[1], code: 'busy' }, { 'retry-after': '2' });
  const n = ++internalSeq;
  console.error(`internal error #${n}:`, e?.stack ?? e);
  return json(500, { error: `internal error #${n}`, code: 'internal' });
}

// ---- configuration: tokens, origins, hosts --------------------------------------------------

/** The grants of a tokens file (`<blake3 hex of token> <namespace> <r|rw>` a line), by hash. */
function parseTokens(text) {
  const grants = new Map();
  text.split('\n').forEach((line, i) => {
    const l = line.split('#')[0].trim();
    if (!l) return;
    const f = l.split(/\s+/);
    if (f.length !== 3 || !/^[0-9a-fA-F]{64}$/.test(f[0]) || !['r', 'rw'].includes(f[2])) {
      throw new Error(`CUTPOINT_TOKENS line ${i + 1}: expected '<token hash> <namespace> <r|rw>'`);
    }
    core.validateNamespace(f[1]);
    grants.set(f[0].toLowerCase(), { ns: f[1], scope: f[2] });
  });
  return grants;
}

let configCache;
async function config(env) {
  if (configCache) return configCache;
  let tokensText = env.CUTPOINT_TOKENS ?? '';
  if (env.CUTPOINT_TOKENS_KEY) {
    const o = await env.BUCKET.get(env.CUTPOINT_TOKENS_KEY);
    tokensText += '\n' + (o ? await o.text() : '');
  }
  const grants = parseTokens(tokensText);
  const open = grants.size === 0;
  const origins = (env.CUTPOINT_CORS_ORIGINS ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  const hosts = (env.CUTPOINT_ALLOWED_HOSTS ?? '').split(',').map((s) => s.trim().toLowerCase()).filter(Boolean);
  // Limits below the defaults (tests: a small recipe limit commits a few MiB in parts).
  LIMITS.max_recipe_bytes = Math.min(intVar(env.CUTPOINT_MAX_RECIPE_BYTES, LIMITS.max_recipe_bytes), 16 * MiB);
  LIMITS.max_uploads_per_token = intVar(env.CUTPOINT_MAX_UPLOADS_PER_TOKEN, LIMITS.max_uploads_per_token);
  configCache = {
    grants,
    open,
    // An open store must be asked for (`npm run edge` does): a deploy without tokens refuses.
    openAllowed: env.CUTPOINT_OPEN === '1',
    anyOrigin: !open && origins.length === 0,
    origins,
    anyHost: !open && hosts.length === 0,
    hosts,
  };
  return configCache;
}

function hostAllowed(cfg, host) {
  if (cfg.anyHost) return true;
  const name = (host ?? '').replace(/:\d+$/, '').replace(/^\[|\]$/g, '').toLowerCase();
  if (name === 'localhost' || name.endsWith('.localhost') || name === '::1' || /^127\.\d+\.\d+\.\d+$/.test(name)) return true;
  return cfg.hosts.includes(name);
}

const originAllowed = (cfg, o) => cfg.anyOrigin || cfg.origins.includes(o.trim().toLowerCase());

function corsHeaders(cfg, origin) {
  if (!origin || !originAllowed(cfg, origin)) return {};
  return {
    'access-control-allow-origin': cfg.anyOrigin ? '*' : origin,
    'access-control-expose-headers': 'etag,content-range,content-length,accept-ranges,x-cutpoint-version',
    ...(cfg.anyOrigin ? {} : { vary: 'origin' }),
  };
}

/** 401/403 unless the request's token grants `scope` on `ns`. */
function authorize(cfg, req, ns, scope) {
  if (cfg.open) {
    if (!cfg.openAllowed) {
      throw new Refusal(401, 'unauthorized', 'this store has no tokens (set CUTPOINT_TOKENS, see edge/README.md)');
    }
    return;
  }
  const h = req.headers.get('authorization') ?? '';
  const m = /^bearer +(.*)$/i.exec(h.trim());
  if (!m || !m[1].trim()) throw new Refusal(401, 'unauthorized', 'a bearer token is needed');
  const g = cfg.grants.get(core.tokenHash(m[1].trim()));
  if (!g) throw new Refusal(401, 'unauthorized', 'unknown token');
  if (g.ns !== ns) throw new Refusal(403, 'forbidden', `this token is not for namespace '${ns}'`);
  if (scope === 'rw' && g.scope !== 'rw') throw new Refusal(403, 'forbidden', 'this token may only read');
}

// ---- bodies -------------------------------------------------------------------------------

/** 413 at once when `Content-Length` says the body is over `max`. */
function checkLength(req, max, what) {
  const cl = req.headers.get('content-length');
  if (cl !== null && Number(cl) > max) {
    throw new Refusal(413, 'too_large', `the ${what} is larger than this store's limit of ${max} bytes`);
  }
  return cl === null ? null : Number(cl);
}

/** The whole body, at most `max` bytes (413 past it, having read no more than that). */
async function readBody(req, max, what) {
  checkLength(req, max, what);
  if (!req.body) return new Uint8Array(0);
  const parts = [];
  let n = 0;
  for await (const p of req.body) {
    n += p.byteLength;
    if (n > max) throw new Refusal(413, 'too_large', `the ${what} is larger than this store's limit of ${max} bytes`);
    parts.push(p);
  }
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.byteLength;
  }
  return out;
}

const stub = (env, ns) => env.NS.get(env.NS.idFromName(ns));

function unwrap(r) {
  if (r && r.refused) {
    const { status, code, error, ...extra } = r.refused;
    throw new Refusal(status, code, error, extra, status === 503 ? { 'retry-after': '2' } : {});
  }
  return r;
}


function randomHex() {
  return Array.from(crypto.getRandomValues(new Uint8Array(12)), (x) => x.toString(16).padStart(2, '0')).join('');
}

// ---- requests -----------------------------------------------------------------------------

/**
 * Runs `f` (a pack upload, a commit, a batch, a part) holding one of the `max_uploads_per_token`
 * slots of the request's `Authorization` header (the empty header on an open store), counted by
 * that header's `Uploads` Durable Object across every isolate; over the limit: 503 `busy` with
 * `Retry-After: 2` at once, the body unread, as `cutpoint serve` answers. The slot's lease is
 * renewed while `f` runs and given back at its end (a killed request's lease runs out).
 */
async function withSlot(req, env, f) {
  const u = env.UPLOADS.get(env.UPLOADS.idFromName(`auth ${core.tokenHash(req.headers.get('authorization') ?? '')}`));
  const lease = await u.take(LIMITS.max_uploads_per_token);
  if (lease === null) {
    throw new Refusal(503, 'busy', `this token has ${LIMITS.max_uploads_per_token} uploads in progress (the store's limit `
      + 'per token); try again shortly', {}, { 'retry-after': '2' });
  }
  const timer = setInterval(() => u.renew(lease).catch(() => {}), RENEW_MS);
  try {
    return await f();
  } finally {
    clearInterval(timer);
    await u.release(lease).catch(() => {});
  }
}

async function query(req, env, ns) {
  const body = await readBody(req, LIMITS.max_query_ids * 32, 'query');
  core1(() => core.checkIds(body, LIMITS.max_query_ids));
  const missing = await stub(env, ns).query(body);
  return new Response(missing, { headers: { 'content-type': 'application/octet-stream' } });
}

/**
 * A pack upload, streamed: each piece of the body goes through the core's `PackIngest` (every
 * chunk re-hashed, compressed frames decompressed within their bound) and the stored (framed)
 * pack it writes is held (up to 16 MiB) or goes on to R2 as it comes under a temporary key (the
 * pack's id, its key, is known only at its end; the object is then copied under it). The pack is
 * in R2 under `ns/<ns>/packs/..` before it is indexed. A refused pack leaves nothing: nothing was
 * put, or the temporary object's put fails with the stream (and it is deleted in any case).
 */
async function uploadPack(req, env, ns) {
  const len = checkLength(req, LIMITS.max_pack_bytes, 'pack');
  if (len === null) {
    throw new Refusal(411, 'bad_request', 'this store needs a Content-Length on a pack upload (no chunked bodies)');
  }
  const ns1 = stub(env, ns);
  const have = await ns1.alg();
  const ingest = new core.Ingest(LIMITS.max_chunk_bytes, LIMITS.max_pack_chunks);
  // A pack of up to 16 MiB is held whole (48 MiB at most in the isolate at once) and put once
  // under its id; a bigger one, or when that much is held, goes to a temporary object as it
  // comes and is copied under its id at its end (the id is known only then).
  const inMemory = len <= MEMORY_ONE && memoryHeld + len <= MEMORY_TOTAL;
  const tmp = inMemory ? null : `ns/${ns}/tmp/${randomHex()}`;
  if (inMemory) memoryHeld += len;
  try {
    const sink = inMemory ? memorySink(len) : r2Sink(env, tmp, len);
    await streamPack(req, ingest, sink, have);
    const id = ingest.packId();
    const chunks = ingest.frameCount();
    const report = { pack: null, chunks, stored: 0, duplicates: chunks, stored_bytes: 0 };
    if (chunks === 0) return json(200, report);
    const key = packKey(ns, id);
    await ns1.intend(ns, key); // a crash before its index rows: the namespace's next start indexes it
    if (inMemory) {
      await env.BUCKET.put(key, sink.buf);
    } else {
      const spooled = await env.BUCKET.get(tmp);
      await env.BUCKET.put(key, spooled.body);
    }
    const r = unwrap(await ns1.addPack(ns, id, len, ingest.alg(), ingest.frames()));
    // A pack whose chunks were all indexed already stays, indexed with no chunk rows, until a gc
    // past its grace deletes it (PROTOCOL.md §6: another node of the bucket may be indexing the
    // same pack, as `cutpoint serve --data s3://` leaves it).
    return json(200, { ...report, pack: id, stored: r.added, duplicates: chunks - r.added, stored_bytes: r.addedBytes });
  } finally {
    ingest.free();
    if (inMemory) memoryHeld -= len;
    else await env.BUCKET.delete(tmp);
  }
}

const WRITE_BYTES = 1 << 20;
const MEMORY_ONE = 16 * MiB;
const MEMORY_TOTAL = 48 * MiB;
let memoryHeld = 0;

function concat(parts, n) {
  const out = new Uint8Array(n);
  let at = 0;
  for (const p of parts) {
    out.set(p, at);
    at += p.length;
  }
  return out;
}

/** Where the stored pack's bytes go: R2 through a FixedLengthStream, or memory. */
function r2Sink(env, key, len) {
  const { readable, writable } = new FixedLengthStream(len);
  const put = env.BUCKET.put(key, readable);
  const w = writable.getWriter();
  return {
    write: (b) => w.write(b),
    close: async () => {
      await w.close();
      await put;
    },
    abort: async (e) => {
      await w.abort(e).catch(() => {});
      await put.catch(() => {});
    },
  };
}

function memorySink(len) {
  const buf = new Uint8Array(len);
  let at = 0;
  return {
    buf,
    write: async (b) => {
      if (at + b.length > len) throw new Refusal(400, 'bad_request', 'pack: more bytes than its Content-Length');
      buf.set(b, at);
      at += b.length;
    },
    close: async () => {},
    abort: async () => {},
  };
}

const READ_BYTES = 256 << 10;

/**
 * A request body in pieces of at least 256 KiB (the last may be shorter): the runtime hands a
 * body over in pieces of a few KiB, and each piece cost a promise, a call into the wasm and a
 * copy each way; workerd's `readAtLeast` (a BYOB read) gathers them first. A piece is valid
 * until the next is asked for (its buffer is reused). Elsewhere: the body's own pieces.
 */
async function* bodyPieces(body) {
  if (!body) return;
  let reader;
  try {
    reader = body.getReader({ mode: 'byob' });
  } catch {
    reader = null;
  }
  if (!reader || typeof reader.readAtLeast !== 'function') {
    if (reader) reader.releaseLock();
    yield* body;
    return;
  }
  let buf = new ArrayBuffer(READ_BYTES);
  for (;;) {
    const { value, done } = await reader.readAtLeast(READ_BYTES, new Uint8Array(buf));
    if (value && value.byteLength) {
      yield value;
      buf = value.buffer;
    }
    if (done || !value || value.byteLength < READ_BYTES) {
      if (done) return;
      // The stream ended inside this read: the next one says so.
      const end = await reader.read(new Uint8Array(buf));
      if (end.done) return;
      if (end.value.byteLength) yield end.value;
      buf = end.value.buffer;
    }
  }
}

/** Reads the upload through `ingest` into `sink` (writes of ~1 MiB: one a frame would cost a round trip each). */
async function streamPack(req, ingest, sink, have) {
  let held = [];
  let heldBytes = 0;
  const pass = async (out, last) => {
    if (out.length) {
      held.push(out);
      heldBytes += out.length;
    }
    if (heldBytes >= WRITE_BYTES || (last && heldBytes > 0)) {
      const buf = held.length === 1 ? held[0] : concat(held, heldBytes);
      held = [];
      heldBytes = 0;
      await sink.write(buf);
    }
  };
  try {
    let checked = false;
    for await (const piece of bodyPieces(req.body)) {
      const out = core1(() => ingest.push(piece));
      if (!checked && ingest.alg()) {
        checked = true;
        if (have && ingest.alg() !== have) {
          throw new Refusal(400, 'bad_request', `namespace uses ${have} fingerprints; this pack uses ${ingest.alg()}`);
        }
      }
      await pass(out, false);
    }
    await pass(core1(() => ingest.finish()), true);
    await sink.close();
  } catch (e) {
    await sink.abort(e);
    throw e;
  }
}

function nameOf(seg) {
  let name;
  try {
    name = decodeURIComponent(seg);
  } catch {
    throw new Refusal(400, 'bad_request', 'the file name is not valid percent-encoded UTF-8');
  }
  core1(() => core.validateName(name));
  return name;
}

function versionParam(url) {
  const v = url.searchParams.get('version');
  if (v === null) return 0;
  if (!/^[0-9]{1,15}$/.test(v) || Number(v) < 1) throw new Refusal(400, 'bad_request', `bad version '${v}'`);
  return Number(v);
}

async function resolve(env, ns, name, version) {
  const row = await stub(env, ns).resolve(name, version);
  if (!row) {
    throw new Refusal(404, 'not_found', version ? `no version ${version} of '${name}'` : `no file '${name}'`);
  }
  return row;
}

async function recipeText(env, ns, name, row) {
  const o = await env.BUCKET.get(versionKey(ns, core.nameKey(name), row.version));
  if (!o) throw new Refusal(500, 'damaged', `the recipe of '${name}' version ${row.version} is missing`);
  return new Uint8Array(await o.arrayBuffer());
}

async function commit(req, env, ns, name) {
  const body = await readBody(req, LIMITS.max_recipe_bytes, 'recipe');
  return json(201, await commitBody(env, ns, name, body, { left: LIMITS.max_commit_entries }));
}

/**
 * One commit (a `PUT files/{name}` body, recipe or delta): its version row, or a Refusal thrown.
 * A recipe with part lines (PROTOCOL.md 4.4, checks 3-7, as `cutpoint serve`'s `commit_parts`):
 * its expanded count is taken from the request's `budget` of `max_commit_entries` (413
 * `too_many_entries` before any part is read), its plain chunks checked (409 `missing_chunks`),
 * each distinct part looked up once (409 `missing_parts`), then the digest computed by the core
 * over the parts read one at a time (400); the Durable Object checks chunks and parts again when
 * it commits, in the namespace's order (after which no gc can take them away).
 */
async function commitBody(env, ns, name, body, budget) {
  const base = core1(() => core.deltaBase(body));
  let c;
  if (base > 0) {
    const row = await stub(env, ns).resolve(name, base);
    if (!row) throw new Refusal(404, 'not_found', `delta: no version ${base} of '${name}' to expand against`);
    const text = await recipeText(env, ns, name, row);
    c = core1(() => core.expandDelta(body, text, LIMITS.max_recipe_bytes));
  } else {
    c = core1(() => core.parseRecipe(body));
  }
  try {
    const meta = { alg: c.alg, digest: c.digest, bytes: c.bytes, count: c.count };
    const parts = c.parts();
    if (parts.length) {
      if (c.count > budget.left) {
        throw new Refusal(413, 'too_many_entries', `recipe: it expands to ${c.count} entries, over the store's `
          + `max_commit_entries of ${LIMITS.max_commit_entries} (in this request); nothing was committed`);
      }
      budget.left -= c.count;
      unwrap(await stub(env, ns).checkChunks(ns, c.alg, c.entries()));
      const missing = await stub(env, ns).partsMissing(ns, parts);
      if (missing.length) {
        throw new Refusal(409, 'missing_parts', `${missing.length} of the recipe's parts are not in namespace '${ns}'; `
          + 'nothing was committed', { missing_parts: missing });
      }
      await walkDigest(env, ns, c);
    }
    return unwrap(await stub(env, ns).commit(ns, name, core.nameKey(name), c.text(), c.entries(), meta, parts));
  } finally {
    c.free();
  }
}

/** The file digest of a recipe with part lines checked by the core, its parts read one at a time. */
async function walkDigest(env, ns, c) {
  const w = c.walk();
  try {
    for (let id; (id = core1(() => w.next())) !== undefined;) {
      const o = await env.BUCKET.get(partKey(ns, id));
      if (!o) {
        throw new Refusal(409, 'missing_parts', `a part of the recipe is no longer in namespace '${ns}'; nothing was committed`,
          { missing_parts: [id] });
      }
      const text = new Uint8Array(await o.arrayBuffer());
      core1(() => w.give(text));
    }
    core1(() => w.finish());
  } finally {
    w.free();
  }
}

/**
 * `POST parts` (PROTOCOL.md 4.11): parsed by the core, stored by the namespace's Durable Object.
 * A part delta (3.8, feature `part-delta`): its base part read from the namespace (409
 * `missing_parts` naming it when the namespace lacks it), expanded by the core (every bound
 * checked before the part is built: 400, 413), then stored exactly as an uploaded part.
 */
async function putPart(req, env, ns) {
  const body = await readBody(req, LIMITS.max_recipe_bytes, 'part');
  let text = body;
  let p;
  if (core.isPartDelta(body)) {
    const base = core1(() => core.partDeltaBase(body));
    const o = await env.BUCKET.get(partKey(ns, base));
    if (!o) {
      throw new Refusal(409, 'missing_parts', `the part delta's base part is not in namespace '${ns}'; nothing was stored`,
        { missing_parts: [base] });
    }
    const baseText = new Uint8Array(await o.arrayBuffer());
    p = core1(() => core.expandPartDelta(body, baseText, base, LIMITS.max_recipe_bytes));
    text = p.text();
  } else {
    p = core1(() => core.parsePart(body));
  }
  try {
    unwrap(await stub(env, ns).putPart(ns, p.id, p.alg, text, p.entries()));
    return json(200, { part: p.id, chunks: p.count, bytes: p.bytes });
  } finally {
    p.free();
  }
}

/** `POST parts/query` (4.12): the ids the namespace has no part of (its Durable Object's table). */
async function queryParts(req, env, ns) {
  const body = await readBody(req, LIMITS.max_query_ids * 32, 'query');
  core1(() => core.checkIds(body, LIMITS.max_query_ids));
  const missing = await stub(env, ns).queryParts(body);
  return new Response(missing, { headers: { 'content-type': 'application/octet-stream' } });
}

/** `GET parts/{id}` (4.13): the part's text. */
async function getPart(env, ns, id) {
  if (!/^[0-9a-f]{64}$/.test(id)) throw new Refusal(400, 'bad_request', 'a part id is 64 lower-case hex digits');
  const o = await env.BUCKET.get(partKey(ns, id));
  if (!o) throw new Refusal(404, 'not_found', `no part ${id} in namespace '${ns}'`);
  return new Response(o.body, { headers: { 'content-type': 'text/plain; charset=utf-8', 'content-length': String(o.size) } });
}

/** A stored part's text (a restore or an expansion): gone is a damaged store. */
async function partBytes(env, ns, id) {
  const o = await env.BUCKET.get(partKey(ns, id));
  if (!o) throw new Error(`part ${id}, which a recipe names, is not stored`);
  return new Uint8Array(await o.arrayBuffer());
}

/**
 * POST commits (feature `batch`, PROTOCOL.md 4.14): the body framed by the core's batch parser
 * (a framing error: 400, nothing committed), then each file committed as its own `PUT
 * files/{name}` would be, in order, each atomic on its own; one result per file. A store failure
 * (not a refusal) fails the request; the versions before it stand (a client learns of them by
 * `GET files`, as after a lost answer).
 */
async function commits(req, env, ns) {
  const body = await readBody(req, LIMITS.max_recipe_bytes, 'batch');
  const files = core1(() => core.parseBatch(body, LIMITS.max_batch_files));
  const results = [];
  const budget = { left: LIMITS.max_commit_entries };
  for (let k = 0; k < files.length; k += 3) {
    const name = files[k];
    try {
      core1(() => core.validateName(name));
      const row = await commitBody(env, ns, name, body.subarray(files[k + 1], files[k + 2]), budget);
      results.push({ ...row, status: 201 });
    } catch (e) {
      if (!(e instanceof Refusal)) throw e;
      results.push({ error: e.message, code: e.code, ...e.extra, name, status: e.status });
    }
  }
  return json(200, { results });
}

/**
 * GET recipes/{name}: the stored text; a version committed in parts expanded (its parts' chunk
 * lines in place of its part lines, one part read at a time), unless `?parts=1`.
 */
async function getRecipe(env, ns, name, url) {
  const row = await resolve(env, ns, name, versionParam(url));
  const text = await recipeText(env, ns, name, row);
  const headers = { 'content-type': 'text/plain; charset=utf-8', 'x-cutpoint-version': String(row.version) };
  if (url.searchParams.get('parts') === '1' || !core.hasPartLines(text)) {
    return new Response(text, { headers: { ...headers, 'content-length': String(text.length) } });
  }
  const r = core1(() => new core.StoredRecipe(text));
  const enc = new TextEncoder();
  let i = -1;
  let freed = false;
  const free = () => {
    if (!freed) r.free();
    freed = true;
  };
  const body = new ReadableStream({
    cancel: free,
    async pull(ctl) {
      try {
        if (i === -1) ctl.enqueue(enc.encode(r.head()));
        else if (i < r.segments()) {
          const id = r.partId(i);
          if (id === undefined) ctl.enqueue(enc.encode(r.chunkLines(i)));
          else {
            const t = await partBytes(env, ns, id);
            core.storedPart(t, id).free();
            ctl.enqueue(enc.encode(core.partChunkLines(t)));
          }
        } else {
          ctl.enqueue(enc.encode(r.end()));
          ctl.close();
          free();
        }
        i++;
      } catch (e) {
        console.error('recipe expansion stopped:', e?.message ?? e);
        free();
        ctl.error(e);
      }
    },
  });
  return new Response(body, { headers });
}

/** A restore's body: the entries the core's range plan names, each chunk checked by the core. */
async function restoreBody(env, ns, entries, start, end, alg) {
  const [first, skip, last] = core.planRange(entries, start, end);
  const s = stub(env, ns);
  let i = first;
  let sent = 0;
  const want = end - start;
  const BATCH = 1024;
  let locs = [];
  let locAt = first;
  return new ReadableStream({
    async pull(ctl) {
      try {
        if (i >= last || sent >= want) {
          ctl.close();
          return;
        }
        if (i - locAt >= locs.length) {
          locAt = i;
          const n = Math.min(BATCH, last - i);
          const ids = new Uint8Array(n * 32);
          for (let k = 0; k < n; k++) ids.set(entries.subarray((i + k) * 36, (i + k) * 36 + 32), k * 32);
          locs = await s.locate(ids);
        }
        // One R2 read for the run of entries stored back to back in one pack (at most 8 MiB).
        const run = [];
        let span = 0;
        while (i + run.length < last && i + run.length - locAt < locs.length) {
          const l = locs[i + run.length - locAt];
          if (!l) break;
          const len = l[2] & 0x7fffffff;
          if (run.length) {
            const p = run[run.length - 1];
            if (p[0] !== l[0] || p[1] + (p[2] & 0x7fffffff) !== l[1] || span + len > 8 * MiB) break;
          }
          run.push(l);
          span += len;
        }
        if (run.length === 0) throw new Error(`chunk ${i} of the recipe is not in the store`);
        const o = await env.BUCKET.get(packKey(ns, run[0][0]), { range: { offset: run[0][1], length: span } });
        if (!o) throw new Error('a pack the index names is gone');
        const bytes = new Uint8Array(await o.arrayBuffer());
        let at = 0;
        for (const l of run) {
          const len = l[2] & 0x7fffffff;
          const id = entries.subarray(i * 36, i * 36 + 32);
          let raw = core.openFrame(alg, id, bytes.subarray(at, at + len), (l[2] & 0x80000000) !== 0);
          at += len;
          if (i === first && skip > 0) raw = raw.subarray(skip);
          if (raw.length > want - sent) raw = raw.subarray(0, want - sent);
          sent += raw.length;
          i++;
          if (raw.length) ctl.enqueue(raw);
        }
      } catch (e) {
        console.error('restore stopped:', e?.message ?? e);
        ctl.error(e); // the body stops early: the client sees a short body
      }
    },
  });
}

/**
 * A restore of a version committed in parts: its segments (runs of chunk lines, parts) in
 * order, whole segments outside the range skipped by their bytes, each part read (and checked
 * against its line by the core) only when its turn comes: one part's entries held at a time.
 */
function restoreParts(env, ns, text, start, end, alg) {
  const r = core1(() => new core.StoredRecipe(text));
  const n = r.segments();
  let i = 0;
  let at = 0;
  let inner = null;
  let freed = false;
  const free = () => {
    if (!freed) r.free();
    freed = true;
  };
  return new ReadableStream({
    cancel() {
      inner?.cancel().catch(() => {});
      free();
    },
    async pull(ctl) {
      try {
        for (;;) {
          if (inner) {
            const { value, done } = await inner.read();
            if (!done) {
              ctl.enqueue(value);
              return;
            }
            inner = null;
          }
          if (i >= n || at >= end) {
            free();
            ctl.close();
            return;
          }
          const k = i++;
          const [s0, s1] = [at, at + r.bytes(k)];
          at = s1;
          if (s1 <= start || s1 === s0) continue;
          const id = r.partId(k);
          const entries = id === undefined ? r.entries(k) : r.partEntries(k, alg, await partBytes(env, ns, id));
          inner = (await restoreBody(env, ns, entries, Math.max(start, s0) - s0, Math.min(end, s1) - s0, alg)).getReader();
        }
      } catch (e) {
        console.error('restore stopped:', e?.message ?? e);
        free();
        ctl.error(e); // the body stops early: the client sees a short body
      }
    },
  });
}

async function list(env, ns) {
  return json(200, { files: await stub(env, ns).list() });
}

async function remove(env, ns, name, url) {
  const v = versionParam(url);
  const n = await stub(env, ns).delete(ns, name, core.nameKey(name), v);
  if (n === 0) throw new Refusal(404, 'not_found', v ? `no version ${v} of '${name}'` : `no file '${name}'`);
  return json(200, { deleted: n });
}

/** POST gc[?grace=SECONDS]: a decimal 0..2^64-1, 3600 by default; 2^63 or more spares every pack. */
async function gc(env, ns, url) {
  const g = url.searchParams.get('grace');
  let grace = 3600;
  if (g !== null) {
    if (!/^[0-9]{1,20}$/.test(g) || BigInt(g) >= 2n ** 64n) throw new Refusal(400, 'bad_request', `bad grace '${g}'`);
    grace = BigInt(g) >= 2n ** 63n ? null : Number(g);
  }
  return json(200, unwrap(await stub(env, ns).gc(ns, grace)));
}

const hexOf = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');

/**
 * GET check: the index refreshed from the bucket (packs other nodes stored indexed, packs gone
 * dropped; the versions by `list`), then every indexed pack re-read from R2 and verified by the
 * core (every chunk re-hashed),
 * each index row matched with a frame of its pack; every version's recipe read and parsed by the
 * core, each of its chunks indexed. Problems name objects, never paths.
 */
async function check(env, ns) {
  const s = stub(env, ns);
  const rep = { packs: 0, chunks: 0, versions: 0, parts: 0, problems: [] };
  // First the index brought up to the bucket (what other nodes stored); a stored pack that does
  // not verify is not indexed, and named here.
  for (const id of await s.refreshForCheck()) rep.problems.push(`pack ${id} is stored but does not verify (not indexed)`);
  for (const p of await s.packs()) {
    rep.packs++;
    const o = await env.BUCKET.get(packKey(ns, p.id));
    if (!o) {
      rep.problems.push(`pack ${p.id} is indexed but not stored`);
      continue;
    }
    const g = new core.Ingest(LIMITS.max_chunk_bytes, LIMITS.max_pack_chunks);
    try {
      for await (const piece of o.body) g.push(piece);
      g.finish();
      const f = g.frames();
      const dv = new DataView(f.buffer, f.byteOffset, f.byteLength);
      const frames = new Map();
      for (let i = 0; i + 48 <= f.length; i += 48) {
        frames.set(`${hexOf(f.subarray(i, i + 32))}@${Number(dv.getBigUint64(i + 32, true))}`, dv.getUint32(i + 40, true));
      }
      if (g.packId() !== p.id) rep.problems.push(`pack ${p.id}: its frames name another pack (${g.packId()})`);
      for (const [id, off, len] of await s.packRows(p.id)) {
        rep.chunks++;
        if (frames.get(`${hexOf(id)}@${off}`) !== len) rep.problems.push(`chunk ${hexOf(id)}: no such frame in pack ${p.id}`);
      }
    } catch (e) {
      rep.problems.push(`pack ${p.id} does not verify: ${fromCore(e).message}`);
    } finally {
      g.free();
    }
  }
  for (const v of await s.list()) {
    rep.versions++;
    const o = await env.BUCKET.get(versionKey(ns, core.nameKey(v.name), v.version));
    let r;
    try {
      r = new core.StoredRecipe(new Uint8Array(await o.arrayBuffer()));
    } catch (e) {
      rep.problems.push(`the recipe of '${v.name}' version ${v.version} is unreadable`);
      continue;
    }
    try {
      let missing = 0;
      const parts = [];
      for (let k = 0; k < r.segments(); k++) {
        const id = r.partId(k);
        if (id === undefined) missing += (await unindexed(s, r.entries(k))).missing;
        else parts.push(id);
      }
      if (missing) rep.problems.push(`'${v.name}' version ${v.version}: ${missing} of its chunks are not indexed`);
      const heads = await Promise.all(parts.map((id) => env.BUCKET.head(partKey(ns, id))));
      parts.forEach((id, k) => {
        if (!heads[k]) rep.problems.push(`'${v.name}' version ${v.version}: its part ${id} is not stored`);
      });
    } finally {
      r.free();
    }
  }
  await checkParts(env, ns, s, rep);
  return json(200, rep);
}

/** Of `entries` (36 bytes each), how many are not indexed and how many with another length. */
async function unindexed(s, entries) {
  let missing = 0;
  let odd = 0;
  const dv = new DataView(entries.buffer, entries.byteOffset, entries.byteLength);
  for (let at = 0; at < entries.length; at += 4096 * 36) {
    const piece = entries.subarray(at, Math.min(entries.length, at + 4096 * 36));
    const ids = new Uint8Array((piece.length / 36) * 32);
    for (let k = 0; k * 36 < piece.length; k++) ids.set(piece.subarray(k * 36, k * 36 + 32), k * 32);
    const locs = await s.locate(ids);
    locs.forEach((l, k) => {
      if (!l) missing++;
      else if (l[3] !== dv.getUint32(at + k * 36 + 32, true)) odd++;
    });
  }
  return { missing, odd };
}

/** check's part: every stored part parses, hashes to its name, its chunks indexed with its lengths. */
async function checkParts(env, ns, s, rep) {
  let cursor;
  do {
    const l = await env.BUCKET.list({ prefix: `ns/${ns}/parts/`, cursor });
    for (const o of l.objects) {
      rep.parts++;
      const id = o.key.split('/').pop();
      let p;
      try {
        p = core.storedPart(await partBytes(env, ns, id), id);
      } catch (e) {
        rep.problems.push(`part ${id} does not verify: ${fromCore(e).message}`);
        continue;
      }
      try {
        const u = await unindexed(s, p.entries());
        if (u.missing) rep.problems.push(`part ${id}: ${u.missing} of its chunks are not indexed`);
        if (u.odd) rep.problems.push(`part ${id}: ${u.odd} of its chunks have another length in the index`);
      } finally {
        p.free();
      }
    }
    cursor = l.truncated ? l.cursor : undefined;
  } while (cursor);
}

function info(cfg) {
  return json(200, { service: 'cutpoint', protocol: 1, revision: 2, version: VERSION,
    auth: cfg.open ? 'open' : 'tokens', features: FEATURES, limits: LIMITS });
}

// ---- routing ------------------------------------------------------------------------------

/** The route of a path: its handler by method, the scope it needs; null: 404. */
function route(parts) {
  // parts: the path split at '/', after 'v1'.
  if (parts.length === 0) return { methods: ['GET'], scope: null, kind: 'info' };
  if (parts[0] !== 'ns' || parts.length < 3) return null;
  const [, ns, what, ...rest] = parts;
  if (what === 'query' && rest.length === 0) return { ns, methods: ['POST'], kind: 'query' };
  if (what === 'gc' && rest.length === 0) return { ns, methods: ['POST'], kind: 'gc' };
  if (what === 'check' && rest.length === 0) return { ns, methods: ['GET'], kind: 'check' };
  if (what === 'packs' && rest.length === 0) return { ns, methods: ['POST'], kind: 'packs' };
  if (what === 'commits' && rest.length === 0) return { ns, methods: ['POST'], kind: 'commits' };
  if (what === 'files' && rest.length === 0) return { ns, methods: ['GET'], kind: 'list' };
  if (what === 'files' && rest.length === 1) return { ns, methods: ['GET', 'HEAD', 'PUT', 'DELETE'], kind: 'file', seg: rest[0] };
  if (what === 'recipes' && rest.length === 1) return { ns, methods: ['GET'], kind: 'recipe', seg: rest[0] };
  if (what === 'parts' && rest.length === 0) return { ns, methods: ['POST'], kind: 'parts' };
  if (what === 'parts' && rest.length === 1 && rest[0] === 'query') return { ns, methods: ['POST'], kind: 'partsQuery' };
  if (what === 'parts' && rest.length === 1) return { ns, methods: ['GET'], kind: 'part', seg: rest[0] };
  return null;
}

async function handle(req, env, cfg, url) {
  if (!url.pathname.startsWith('/v1')) throw new Refusal(404, 'not_found', 'no such route');
  const tail = url.pathname.slice(3);
  if (tail !== '' && !tail.startsWith('/')) throw new Refusal(404, 'not_found', 'no such route');
  const parts = tail.split('/').slice(1);
  if (parts.length && parts[parts.length - 1] === '' && parts.length === 1) parts.pop();
  const r = route(parts);
  if (!r) throw new Refusal(404, 'not_found', 'no such route');
  if (!r.methods.includes(req.method)) return new Response(null, { status: 405, headers: { allow: r.methods.join(', ') } });
  if (r.kind === 'info') return info(cfg);
  core1(() => core.validateNamespace(r.ns));
  const write = req.method !== 'GET' && req.method !== 'HEAD' && r.kind !== 'query' && r.kind !== 'partsQuery';
  authorize(cfg, req, r.ns, write ? 'rw' : 'r');
  switch (r.kind) {
    case 'query':
      return query(req, env, r.ns);
    case 'packs':
      return withSlot(req, env, () => uploadPack(req, env, r.ns));
    case 'commits':
      return withSlot(req, env, () => commits(req, env, r.ns));
    case 'list':
      return list(env, r.ns);
    case 'gc':
      return gc(env, r.ns, url);
    case 'check':
      return check(env, r.ns);
    case 'parts':
      return withSlot(req, env, () => putPart(req, env, r.ns));
    case 'partsQuery':
      return queryParts(req, env, r.ns);
    case 'part':
      return getPart(env, r.ns, r.seg);
    case 'recipe':
      return getRecipe(env, r.ns, nameOf(r.seg), url);
    case 'file': {
      const name = nameOf(r.seg);
      if (req.method === 'PUT') return withSlot(req, env, () => commit(req, env, r.ns, name));
      if (req.method === 'DELETE') return remove(env, r.ns, name, url);
      return restoreFile(req, env, r.ns, name, url);
    }
  }
  throw new Refusal(404, 'not_found', 'no such route');
}

async function restoreFile(req, env, ns, name, url) {
  const head = await restoreHead(req, env, ns, name, url);
  if (head.response) return head.response;
  const text = await recipeText(env, ns, name, head.row);
  const alg = await stub(env, ns).alg();
  const body = core.hasPartLines(text)
    ? restoreParts(env, ns, text, head.start, head.end, alg)
    : await restoreBody(env, ns, core1(() => core.recipeEntries(text)), head.start, head.end, alg);
  // A FixedLengthStream, so that the answer carries its Content-Length (PROTOCOL.md 4.6) rather
  // than going chunked; a chunk that does not verify aborts it: the body stops early.
  const fixed = new FixedLengthStream(head.end - head.start);
  body.pipeTo(fixed.writable).catch(() => {});
  return new Response(fixed.readable, { status: head.status, headers: head.headers });
}

async function restoreHead(req, env, ns, name, url) {
  const row = await resolve(env, ns, name, versionParam(url));
  const etag = `"${row.digest}"`;
  const base = {
    etag, 'accept-ranges': 'bytes', 'x-cutpoint-version': String(row.version),
    'content-type': 'application/octet-stream',
    'content-disposition': `attachment; filename*=UTF-8''${encodeURIComponent(name.split('/').pop())}`,
  };
  const inm = req.headers.get('if-none-match');
  if (inm && (inm.trim() === '*' || inm.split(',').some((t) => t.trim() === etag))) {
    return { response: new Response(null, { status: 304, headers: base }) };
  }
  let range = null;
  const rh = req.headers.get('range');
  const ifRange = req.headers.get('if-range');
  if (rh !== null && (ifRange === null || ifRange.trim() === etag)) {
    try {
      range = core.parseRange(rh, row.bytes) ?? null;
    } catch (e) {
      const r = fromCore(e);
      if (r instanceof Refusal) r.headers = { 'content-range': `bytes */${row.bytes}` };
      throw r;
    }
  }
  const [start, end] = range ?? [0, row.bytes];
  const headers = { ...base, 'content-length': String(end - start) };
  if (range) headers['content-range'] = `bytes ${start}-${end - 1}/${row.bytes}`;
  const status = range ? 206 : 200;
  if (req.method === 'HEAD' || end === start) return { response: new Response(null, { status, headers }) };
  return { row, start, end, status, headers };
}

export default {
  async fetch(req, env0) {
    const url = new URL(req.url);
    const env = countingEnv(env0);
    if (env !== env0 && url.pathname === '/v1/test/r2-ops') {
      // Tests only (see countingEnv): this isolate's R2 calls by method since the last reset.
      // Durable Objects run in the Worker's isolate here (one script): their calls are counted too.
      const ops = { ...(globalThis.cutpointR2Ops ?? {}) };
      if (req.method === 'POST') globalThis.cutpointR2Ops = {};
      return json(200, ops);
    }
    let cfg;
    try {
      cfg = await config(env);
    } catch (e) {
      return errorResponse(e);
    }
    const origin = req.headers.get('origin');
    const cors = corsHeaders(cfg, origin);
    const withCors = (res) => {
      if (!Object.keys(cors).length) return res;
      const h = new Headers(res.headers);
      for (const [k, v] of Object.entries(cors)) h.set(k, v);
      return new Response(res.body, { status: res.status, statusText: res.statusText, headers: h });
    };
    try {
      if (!hostAllowed(cfg, req.headers.get('host'))) {
        throw new Refusal(403, 'forbidden', 'this store does not answer to that host name');
      }
      if (origin !== null && !originAllowed(cfg, origin)) {
        throw new Refusal(403, 'forbidden', `web pages of ${origin} may not call this store (set CUTPOINT_CORS_ORIGINS to allow them)`);
      }
      if (req.method === 'OPTIONS' && req.headers.get('access-control-request-method')) {
        const h = {
          ...cors,
          'access-control-allow-methods': 'GET, HEAD, POST, PUT, DELETE, OPTIONS',
          'access-control-allow-headers': 'authorization, content-type, range, if-none-match, if-range',
          'access-control-max-age': '600',
        };
        if (req.headers.get('access-control-request-private-network') === 'true') h['access-control-allow-private-network'] = 'true';
        return new Response(null, { status: 200, headers: h });
      }
      return withCors(await handle(req, env, cfg, url));
    } catch (e) {
      return withCors(errorResponse(e));
    }
  },
};
