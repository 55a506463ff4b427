// One Durable Object per namespace (SQLite storage): the namespace's chunk index, its files'
// versions and the highest version number each name was ever given. Commits of a namespace are
// serialized here (one at a time, `#serial`), so a version number is never given twice; the
// recipe itself is written to R2 create-only (`onlyIf`), the commit point, before its row.
// It answers the existence query. It holds no protocol logic: the Worker has parsed and checked
// every body with the core (wasm) before it calls these methods.
import { DurableObject } from 'cloudflare:workers';
// The core in wasm (initialized by worker.js, the module that loads this one): recipes for gc.
import * as core from '../pkg/cutpoint_edge_wasm.js';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (id BLOB PRIMARY KEY, pack TEXT NOT NULL, off INTEGER NOT NULL,
  len INTEGER NOT NULL, raw INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS versions (name TEXT NOT NULL, version INTEGER NOT NULL, bytes INTEGER NOT NULL,
  chunks INTEGER NOT NULL, digest TEXT NOT NULL, created INTEGER NOT NULL, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS tops (name TEXT PRIMARY KEY, top INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS pending (key TEXT PRIMARY KEY, ns TEXT NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS parts (id BLOB PRIMARY KEY) WITHOUT ROWID;
`;

// The rows 0..?1-1 of a statement over packed parameters (ids back to back in a blob, numbers
// as fixed-width decimals in a blob: substr of a blob is by byte, of a text by character, which
// made it quadratic): one statement for a whole id list, pack or recipe, rather than one per id.
const EACH = 'WITH RECURSIVE i(n) AS (SELECT 0 WHERE ?1 > 0 UNION ALL SELECT n + 1 FROM i WHERE n + 1 < ?1)';
const WIDTH = 16;
/** Numbers (each < 10^16) as one blob of fixed-width ASCII decimals. */
const digits = (xs) => new TextEncoder().encode(xs.map((x) => String(x).padStart(WIDTH, '0')).join(''));
/** SQL for number `k` of the `per` numbers of row n in the blob parameter `?p` (CAST reads it as text). */
const num = (p, per, k) => `CAST(substr(?${p}, (n * ${per} + ${k}) * ${WIDTH} + 1, ${WIDTH}) AS INTEGER)`;

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const unhex = (h) => Uint8Array.from(h.match(/../g), (x) => parseInt(x, 16));
const now = () => Math.floor(Date.now() / 1000);
/** An error answer carried back to the Worker (RPC returns values, the Worker answers them). */
const refuse = (status, code, error, extra = {}) => ({ refused: { status, code, error, ...extra } });

export const recipePrefix = (ns, key) => `ns/${ns}/recipes/${key}/`;
export const versionKey = (ns, key, v) => `${recipePrefix(ns, key)}${String(v).padStart(12, '0')}`;
export const packKey = (ns, id) => `ns/${ns}/packs/${id.slice(0, 2)}/${id}`;
export const partKey = (ns, id) => `ns/${ns}/parts/${id.slice(0, 2)}/${id}`;
const MAX_CHUNK = 64 << 20;
// A step of building an index from the bucket (#reindexStep): packs read, objects listed.
const REINDEX_STEP_BYTES = 256 << 20;
const REINDEX_STEP_OBJECTS = 1000;
const MAX_PACK_CHUNKS = 65536;
// `POST parts/query` is answered from the namespace's `parts` table; at most this many of its
// misses are looked for in the bucket (a part another node of a shared bucket stored), 16 at a time.
const PART_MISSES_CONFIRMED = 64;
// PROTOCOL.md §6 (several nodes over one bucket): a gc's lock object, a lease renewed every third
// of CUTPOINT_GC_LEASE seconds (120 by default), and its epoch, rewritten by every gc.
const gcLockKey = (ns) => `ns/${ns}/gc-lock`;
const gcEpochKey = (ns) => `ns/${ns}/gc-epoch`;
const gcLockBody = () => `gc running, renewed at ${now()} (Unix seconds)\n`;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const randomHex = () => hex(crypto.getRandomValues(new Uint8Array(16)));

/**
 * Tests only (binding CUTPOINT_TEST_COUNT_R2=1: `node edge/dev.mjs --test-count-r2`): `env` with
 * its bucket counting this isolate's R2 calls by method (`GET /v1/test/r2-ops` reads and resets
 * them), so that a test can tell how many R2 operations a request cost. Otherwise `env` itself.
 */
export function countingEnv(env) {
  if (env.CUTPOINT_TEST_COUNT_R2 !== '1') return env;
  const bucket = new Proxy(env.BUCKET, {
    get(t, k) {
      const v = Reflect.get(t, k);
      if (typeof v !== 'function') return v;
      return (...a) => {
        const ops = (globalThis.cutpointR2Ops ??= {});
        ops[k] = (ops[k] ?? 0) + 1;
        return v.apply(t, a);
      };
    },
  });
  return Object.create(env, { BUCKET: { value: bucket } });
}

export class Namespace extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.env = countingEnv(env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    this.tail = Promise.resolve();
    // An object a crash left between its R2 put and its index row (a pack, a recipe) is
    // finished here, when the namespace starts, before any request is taken.
    if (this.sql.exec('SELECT count(*) AS n FROM pending').one().n > 0) {
      ctx.blockConcurrencyWhile(() => this.#reconcile());
    }
    // A namespace whose index was never built from the bucket (a bucket another store wrote):
    // built by the requests, a bounded step each (#ready).
    this.indexed = this.sql.exec("SELECT count(*) AS n FROM meta WHERE k = 'indexed'").one().n > 0 || !ctx.id.name;
    // A namespace indexed before its part ids were kept here: its parts are listed from the
    // bucket (the reindex's last phase, a bounded step a request) before it answers.
    if (this.indexed && ctx.id.name && this.sql.exec("SELECT count(*) AS n FROM meta WHERE k = 'parts'").one().n === 0) {
      ctx.storage.transactionSync(() => {
        this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'reindex', JSON.stringify({ phase: 'parts', cursor: null }));
        this.sql.exec("DELETE FROM meta WHERE k = 'indexed'");
      });
      this.indexed = false;
    }
  }

  /**
   * Every request's first call: while the namespace's index is not yet built from the bucket
   * (its Durable Object started without one: a bucket `cutpoint serve --data s3://` wrote, or
   * Durable Objects lost), one bounded step of building it runs first (#reindexStep, with no
   * other event of this object meanwhile); if more is left, the request is answered 503 `busy`
   * (the Worker adds `Retry-After`), so no request waits for more than one step.
   */
  async #ready() {
    if (this.indexed) return;
    await this.ctx.blockConcurrencyWhile(() => this.#reindexStep(this.ctx.id.name));
    if (!this.indexed) {
      throw new Error(`cutpoint-busy: namespace '${this.ctx.id.name}' is being indexed from its bucket; try again shortly`);
    }
  }

  /**
   * One step of building the index from the bucket, at most REINDEX_STEP_BYTES of packs read or
   * REINDEX_STEP_OBJECTS objects listed, from where the last step stopped (`meta` 'reindex':
   * the phase and the listing's cursor): its algorithm from `ns/<ns>/config`; every pack not
   * indexed yet read back, verified by the core (every chunk re-hashed, its id recomputed from
   * its frames) and indexed (one that does not verify is left out); every recipe object parsed
   * by the core and given its version row; tombstones keep their numbers; every part's id kept
   * (listed, not read: a part is checked when a commit, restore or check reads it). Ends with
   * 'indexed' (and 'parts': this namespace keeps its part ids).
   */
  async #reindexStep(ns) {
    if (this.indexed) return;
    const row = this.sql.exec("SELECT v FROM meta WHERE k = 'reindex'").toArray();
    const st = row.length ? JSON.parse(row[0].v) : { phase: 'config', cursor: null };
    let bytes = 0;
    let objects = 0;
    // Tests (--test-reindex-step N): steps of N objects, so that a small namespace takes several.
    const most = Number(this.env.CUTPOINT_TEST_REINDEX_STEP) || REINDEX_STEP_OBJECTS;
    const save = () => this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'reindex', JSON.stringify(st));
    while (bytes < REINDEX_STEP_BYTES && objects < most) {
      if (st.phase === 'config') {
        const cfg = await this.env.BUCKET.get(`ns/${ns}/config`);
        const m = cfg && /^hash (blake3|sha256)\n?$/.exec(await cfg.text());
        if (m && !this.#alg()) this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'alg', m[1]);
        Object.assign(st, { phase: 'packs', cursor: null });
      } else if (st.phase === 'packs' || st.phase === 'recipes' || st.phase === 'parts') {
        const l = await this.env.BUCKET.list({ prefix: `ns/${ns}/${st.phase}/`, cursor: st.cursor ?? undefined,
          limit: Math.min(most, { packs: 4, recipes: 100, parts: 1000 }[st.phase]) });
        for (const o of l.objects) {
          objects++;
          if (st.phase === 'packs') {
            bytes += o.size;
            await this.#reconcilePack(ns, o.key, false);
          } else if (st.phase === 'recipes') await this.#reindexRecipe(o);
          else this.#addPartKey(o.key);
        }
        if (l.truncated) st.cursor = l.cursor;
        else Object.assign(st, { phase: { packs: 'recipes', recipes: 'parts', parts: 'done' }[st.phase], cursor: null });
      } else {
        this.ctx.storage.transactionSync(() => {
          this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'indexed', '1');
          this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'parts', '1');
          this.sql.exec("DELETE FROM meta WHERE k = 'reindex'");
        });
        this.indexed = true;
        return;
      }
      save();
    }
  }

  /** A recipe object (or a tombstone) found by the reindex: its version row (or its number kept). */
  async #reindexRecipe(o) {
    const m = /^ns\/[^/]+\/recipes\/(.+)\/(\d{12})(\.deleted)?$/.exec(o.key);
    const name = m && core.nameFromKey(m[1]);
    if (!name) return;
    const v = Number(m[2]);
    if (m[3]) {
      this.sql.exec('INSERT INTO tops (name, top) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET top = max(top, excluded.top)', name, v);
      return;
    }
    if (this.sql.exec('SELECT 1 FROM versions WHERE name = ? AND version = ?', name, v).toArray().length) return;
    const b = await this.env.BUCKET.get(o.key);
    if (!b) return;
    let c;
    try {
      c = core.parseRecipe(new Uint8Array(await b.arrayBuffer()));
    } catch (e) {
      console.error(`reindex: the recipe ${o.key} is unreadable (left out):`, e?.message ?? e);
      return;
    }
    try {
      this.#addVersion({ name, version: v, bytes: c.bytes, chunks: c.count, digest: c.digest,
        created: Math.floor(o.uploaded.getTime() / 1000) }, o.key);
    } finally {
      c.free();
    }
  }

  /** Notes that `key` is about to be put in R2 (its indexing removes the note). */
  async intend(ns, key) {
    await this.#ready();
    this.#intend(ns, key);
  }

  #intend(ns, key) {
    this.sql.exec('INSERT OR REPLACE INTO pending (key, ns, created) VALUES (?, ?, ?)', key, ns, now());
  }

  /**
   * The start-up reconcile: each noted object is looked for in R2. A pack there is read back and
   * verified by the core (every chunk re-hashed) and indexed, or deleted when it does not verify;
   * a recipe there whose chunks are all indexed gets its version row (the version a killed
   * commit made durable), else it is deleted (never answered 201, its chunks not all there).
   */
  async #reconcile() {
    for (const p of this.sql.exec('SELECT key, ns FROM pending').toArray()) {
      try {
        if (p.key.startsWith(`ns/${p.ns}/packs/`)) await this.#reconcilePack(p.ns, p.key);
        else await this.#reconcileRecipe(p.ns, p.key);
      } catch (e) {
        console.error(`reconcile of ${p.key} failed (kept for the next start):`, e?.message ?? e);
        continue;
      }
      this.sql.exec('DELETE FROM pending WHERE key = ?', p.key);
    }
  }

  /**
   * A pack in R2 not indexed: verified and indexed; one that does not verify is deleted when
   * `drop` (a crashed upload of this store's), else left out and 'bad' returned.
   */
  async #reconcilePack(ns, key, drop = true) {
    const id = key.split('/').pop();
    if (this.sql.exec('SELECT 1 FROM packs WHERE id = ?', id).toArray().length) return;
    const o = await this.env.BUCKET.get(key);
    if (!o) return;
    const g = new core.Ingest(MAX_CHUNK, MAX_PACK_CHUNKS);
    try {
      let ok = true;
      try {
        for await (const piece of o.body) g.push(piece);
        g.finish();
        ok = g.packId() === id && (!this.#alg() || this.#alg() === g.alg());
      } catch {
        ok = false;
      }
      if (!ok) {
        if (drop) await this.env.BUCKET.delete(key);
        else console.error(`reindex: the pack ${key} does not verify (left out)`);
        return 'bad';
      }
      if (await this.#fixAlg(ns, g.alg(), 'pack')) return;
      // Indexed even when every chunk was indexed already (no rows): gc deletes it past its grace.
      this.#index(key, id, o.size, g.frames());
    } finally {
      g.free();
    }
  }

  async #reconcileRecipe(ns, key) {
    const m = /^ns\/[^/]+\/recipes\/(.+)\/(\d{12})$/.exec(key);
    const name = m && core.nameFromKey(m[1]);
    if (!name) return;
    const v = Number(m[2]);
    if (this.sql.exec('SELECT 1 FROM versions WHERE name = ? AND version = ?', name, v).toArray().length) return;
    const o = await this.env.BUCKET.get(key);
    if (!o) return;
    const text = new Uint8Array(await o.arrayBuffer());
    let c;
    try {
      c = core.parseRecipe(text);
    } catch {
      await this.env.BUCKET.delete(key);
      return;
    }
    try {
      if (this.#check(ns, new Uint8Array(c.entries())) || (await this.#missingParts(ns, c.parts())).length) {
        await this.env.BUCKET.delete(key);
        return;
      }
      this.#addVersion({ name, version: v, bytes: c.bytes, chunks: c.count, digest: c.digest, created: Math.floor(o.uploaded.getTime() / 1000) }, key);
    } finally {
      c.free();
    }
  }

  /** Inserts a version row; the name's highest number becomes at least its number. */
  #addVersion(row, key) {
    this.ctx.storage.transactionSync(() => {
      this.sql.exec('INSERT INTO versions (name, version, bytes, chunks, digest, created) VALUES (?, ?, ?, ?, ?, ?)',
        row.name, row.version, row.bytes, row.chunks, row.digest, row.created);
      this.sql.exec('INSERT INTO tops (name, top) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET top = max(top, excluded.top)',
        row.name, row.version);
      this.sql.exec('DELETE FROM pending WHERE key = ?', key);
    });
  }

  /** Runs `f` after every earlier serialized call of this namespace has finished. */
  #serial(f) {
    const run = this.tail.then(f, f);
    this.tail = run.catch(() => {});
    return run;
  }

  async alg() {
    await this.#ready();
    return this.#alg();
  }

  #alg() {
    const r = this.sql.exec('SELECT v FROM meta WHERE k = ?', 'alg').toArray();
    return r.length ? r[0].v : null;
  }

  /** Fixes the namespace's algorithm (and writes ns/<ns>/config, as cutpoint serve does). */
  async #fixAlg(ns, alg, what) {
    const have = this.#alg();
    if (have && have !== alg) {
      return refuse(400, 'bad_request', `namespace '${ns}' uses ${have} fingerprints; this ${what} uses ${alg}`);
    }
    if (!have) {
      await this.env.BUCKET.put(`ns/${ns}/config`, `hash ${alg}\n`);
      this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'alg', alg);
    }
    return null;
  }

  /** The ids of `body` (32 bytes each) the namespace lacks, in order, each once (one statement). */
  async query(body) {
    await this.#ready();
    const ids = new Uint8Array(body);
    const missing = this.#missing(ids);
    if (missing.length === 0) return missing;
    // Misses: packs other nodes stored since are indexed first (#refreshPacks), then asked again.
    await this.#refreshPacks(this.ctx.id.name ?? '');
    return this.#missing(ids);
  }

  /**
   * `POST parts/query`: the part ids of `body` (32 bytes each) the namespace lacks, in order,
   * each once, answered from its `parts` table (one statement, no R2 read for an id it has).
   * A miss may be a part another node of a shared bucket stored: the first
   * PART_MISSES_CONFIRMED misses are looked for in the bucket (found ones join the table); a
   * miss past them is answered missing, which costs the client one create-only upload of a part
   * that is there (nothing is written; the upload adds its id here).
   */
  async queryParts(body) {
    await this.#ready();
    const ids = new Uint8Array(body);
    const missing = this.#missing(ids, 'parts');
    const n = Math.min(missing.length >> 5, PART_MISSES_CONFIRMED);
    if (n === 0 || !this.ctx.id.name) return missing;
    const gone = new Set(await this.partsMissing(this.ctx.id.name, missing.subarray(0, n * 32)));
    const out = [];
    for (let k = 0; k < missing.length; k += 32) {
      const id = missing.subarray(k, k + 32);
      if (k >= n * 32 || gone.has(hex(id))) out.push(id);
    }
    const r = new Uint8Array(out.length * 32);
    out.forEach((id, i) => r.set(id, i * 32));
    return r;
  }

  /** Keeps the id of the part object `key` (`ns/<ns>/parts/xx/<hex id>`). */
  #addPartKey(key) {
    const id = key.split('/').pop();
    if (/^[0-9a-f]{64}$/.test(id)) this.sql.exec('INSERT OR IGNORE INTO parts (id) VALUES (?)', unhex(id));
  }

  /** The ids of `ids` (32 bytes each) the index (`table`: chunks or parts) lacks, in order, each once (one statement). */
  #missing(ids, table = 'chunks') {
    const out = [];
    const seen = new Set();
    const missing = this.sql.exec(`${EACH} SELECT n FROM i
      WHERE NOT EXISTS (SELECT 1 FROM ${table} WHERE id = substr(?2, n * 32 + 1, 32)) ORDER BY n`, ids.length >> 5, ids);
    for (const [n] of missing.raw()) {
      const id = ids.subarray(n * 32, n * 32 + 32);
      const h = hex(id);
      if (seen.has(h)) continue;
      seen.add(h);
      out.push(id);
    }
    const r = new Uint8Array(out.length * 32);
    out.forEach((id, i) => r.set(id, i * 32));
    return r;
  }

  /**
   * Indexes a pack already stored in R2 (the durability order: stored, then indexed). `frames`:
   * 48 bytes a frame (id, offset u64, stored length u32 with bit 31, raw length u32).
   */
  async addPack(ns, pack, size, alg, frames) {
    await this.#ready();
    return this.#serial(async () => {
      const bad = await this.#fixAlg(ns, alg, 'pack');
      if (bad) return bad;
      // A test of the start-up reconcile (tests/js/edge.test.ts): a crash between the put and this.
      if (this.env.CUTPOINT_TEST_FAULT === 'pack-unindexed') throw new Error('test fault: the pack is in R2, its index rows are not');
      return this.#index(packKey(ns, pack), pack, size, frames);
    });
  }

  /**
   * A pack's index rows (`frames`: 48 bytes a frame: id, offset u64, stored length u32 with bit
   * 31, raw length u32), in one transaction with its pending note `key` removed. In one
   * statement (in frame order: a repeated id keeps its first frame); RETURNING names the rows
   * written, not those an indexed id ignored. A pack none of whose chunks is new keeps its
   * `packs` row with no chunk rows: it is known (never read again by a refresh) and gc deletes
   * it past its grace, as `cutpoint serve` over a bucket does (PROTOCOL.md §6).
   */
  #index(key, pack, size, frames, prelude = () => {}) {
    const existed = this.sql.exec('SELECT 1 FROM packs WHERE id = ?', pack).toArray().length > 0;
    const f = new Uint8Array(frames);
    const dv = new DataView(f.buffer, f.byteOffset, f.byteLength);
    const count = Math.floor(f.length / 48);
    const ids = new Uint8Array(count * 32);
    const nums = [];
    for (let i = 0; i < count; i++) {
      ids.set(f.subarray(i * 48, i * 48 + 32), i * 32);
      nums.push(Number(dv.getBigUint64(i * 48 + 32, true)), dv.getUint32(i * 48 + 40, true), dv.getUint32(i * 48 + 44, true));
    }
    let added = 0;
    let addedBytes = 0;
    this.ctx.storage.transactionSync(() => {
      prelude();
      if (!existed) this.sql.exec('INSERT INTO packs (id, size, created) VALUES (?, ?, ?)', pack, size, now());
      // One statement for the pack's rows (in frame order: a repeated id keeps its first frame);
      // RETURNING names the rows written, not those an indexed id ignored.
      const rows = this.sql.exec(`${EACH} INSERT OR IGNORE INTO chunks (id, pack, off, len, raw)
        SELECT substr(?2, n * 32 + 1, 32), ?4, ${num(3, 3, 0)}, ${num(3, 3, 1)}, ${num(3, 3, 2)} FROM i ORDER BY n
        RETURNING len`, count, ids, digits(nums), pack);
      for (const [len] of rows.raw()) {
        added++;
        addedBytes += len & 0x7fffffff;
      }
      this.sql.exec('DELETE FROM pending WHERE key = ?', key);
    });
    return { added, addedBytes, existed };
  }

  /** Where each id of `body` is: `[pack, offset, stored length with bit 31, raw]` or null. */
  async locate(body) {
    await this.#ready();
    const ids = new Uint8Array(body);
    const found = this.#locate(ids);
    if (!found.includes(null)) return found;
    // A chunk not indexed: maybe in a pack another node stored (a version it committed).
    await this.#refreshPacks(this.ctx.id.name);
    return this.#locate(ids);
  }

  #locate(ids) {
    const rows = this.sql.exec(`${EACH} SELECT c.pack, c.off, c.len, c.raw FROM i
      LEFT JOIN chunks c ON c.id = substr(?2, n * 32 + 1, 32) ORDER BY n`, ids.length >> 5, ids);
    return Array.from(rows.raw(), (r) => (r[0] === null ? null : r));
  }

  /** The highest version number `name` was given: this index's, or the bucket's (a version or a tombstone). */
  async #top(ns, key, name) {
    const t = this.sql.exec('SELECT top FROM tops WHERE name = ?', name).toArray();
    let top = t.length ? t[0].top : 0;
    let cursor;
    do {
      const l = await this.env.BUCKET.list({ prefix: recipePrefix(ns, key), cursor });
      for (const o of l.objects) {
        const v = Number(o.key.slice(recipePrefix(ns, key).length).replace(/\.deleted$/, ''));
        if (Number.isSafeInteger(v) && v > top) top = v;
      }
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
    return top;
  }

  /**
   * Commits a checked recipe (`text` as stored, `entries` 36 bytes each: id, size) as the next
   * version of `name`: every chunk indexed with its length (409 with the missing ids, 400 on a
   * length), then the recipe PUT create-only under the next free number (the commit point),
   * then its row. Returns the version row or `{refused}`.
   */
  async commit(ns, name, key, text, entries, meta, parts = new Uint8Array(0)) {
    await this.#ready();
    return this.#serial(async () => {
      const bad = await this.#fixAlg(ns, meta.alg, 'recipe');
      if (bad) return bad;
      const pre = await this.#commitPrelude(ns, new Uint8Array(entries));
      if (pre.refused) return pre;
      // A recipe with part lines: its parts looked up again here, where no gc runs meanwhile
      // (the Worker checked the digest over them; a gc since may have deleted one).
      const missing = await this.#missingParts(ns, new Uint8Array(parts));
      if (missing.length) {
        return refuse(409, 'missing_parts', `${missing.length} of the recipe's parts are not in namespace '${ns}'; `
          + 'nothing was committed', { missing_parts: missing });
      }
      let v = (await this.#top(ns, key, name)) + 1;
      for (;;) {
        const k = versionKey(ns, key, v);
        this.#intend(ns, k);
        const put = await this.env.BUCKET.put(k, text, { onlyIf: { etagDoesNotMatch: '*' } });
        if (put) break;
        this.sql.exec('DELETE FROM pending WHERE key = ?', k);
        v++; // taken (another node over the same bucket): the next number
      }
      // A test of a stalled commit (tests/js/edge.test.ts): another node's gc ran between this
      // commit's check and its put (a new epoch) and deleted a pack the recipe names.
      if (this.env.CUTPOINT_TEST_FAULT === 'gc-during-commit') await this.#testGcDuringCommit(ns, new Uint8Array(entries));
      const gone = await this.#confirmCommit(ns, name, key, v, new Uint8Array(entries), new Uint8Array(parts), pre.epoch);
      if (gone) return gone;
      // A test of the start-up reconcile: a crash between the commit point and the row.
      if (this.env.CUTPOINT_TEST_FAULT === 'recipe-unrowed') throw new Error('test fault: the recipe is in R2, its row is not');
      const row = { name, version: v, bytes: meta.bytes, chunks: meta.count, digest: meta.digest, created: now() };
      this.#addVersion(row, versionKey(ns, key, v));
      return row;
    });
  }

  /** The gc lock's lease in milliseconds (CUTPOINT_GC_LEASE seconds, 120 by default). */
  #lease() {
    return (Number(this.env.CUTPOINT_GC_LEASE) || 120) * 1000;
  }

  /** Whether a live gc (on any node of the bucket) holds namespace `ns`: its lock younger than the lease. */
  async #gcLockHeld(ns) {
    const o = await this.env.BUCKET.head(gcLockKey(ns));
    return o !== null && Date.now() - o.uploaded.getTime() <= this.#lease();
  }

  /** The namespace's gc epoch (the text of `gc-epoch`, rewritten by every gc), or null. */
  async #gcEpoch(ns) {
    const o = await this.env.BUCKET.get(gcEpochKey(ns));
    return o === null ? null : await o.text();
  }

  /**
   * A commit's (or a part's) check (PROTOCOL.md §6): the gc epoch it belongs to, read first;
   * `{refused}` 503 busy while a gc on any node holds the namespace's lock (a lock past its
   * lease is a dead node's and is ignored); then every entry checked (`#check`: 409, 400).
   * Packs leave the bucket only through a gc, and every gc rewrites the epoch: while the epoch
   * is the one of this index's last refresh, an indexed chunk is stored; a new epoch, or a
   * miss, reads the bucket's listing first (`#refreshPacks`). `{epoch}` when all is there.
   */
  async #commitPrelude(ns, entries, what = 'recipe') {
    const epoch = await this.#gcEpoch(ns);
    if (await this.#gcLockHeld(ns)) {
      return refuse(503, 'busy', `a gc of namespace '${ns}' is running on a node of this bucket; try again shortly`);
    }
    let bad = this.#check(ns, entries, what);
    if (bad || epoch !== this.freshEpoch) {
      await this.#refreshPacksOnce(ns, true); // not a shared run: one that began after the epoch was read
      this.freshEpoch = epoch;
      bad = this.#check(ns, entries, what);
    }
    return bad ?? { epoch };
  }

  /**
   * After a commit's recipe put (PROTOCOL.md §6, "A stalled commit"): if a gc took the lock
   * since the prelude (the lock is held, or the epoch changed), it may have listed the recipes
   * before this put and swept chunks it names. Then: wait for that gc to end (up to a lease),
   * look at the bucket's packs again and check the chunks and parts again; all there, the
   * version stands (null); else it is withdrawn (a tombstone keeps its number, the recipe is
   * deleted) and the refusal returned (409 with what is missing; 503 if the gc still runs).
   */
  async #confirmCommit(ns, name, key, v, entries, parts, epoch) {
    if (!(await this.#gcLockHeld(ns)) && (await this.#gcEpoch(ns)) === epoch) return null;
    const t = Date.now();
    while ((await this.#gcLockHeld(ns)) && Date.now() - t < this.#lease()) await sleep(200);
    const k = versionKey(ns, key, v);
    const withdraw = async () => {
      await this.env.BUCKET.put(`${k}.deleted`, `withdrawn at ${now()} (Unix seconds)\n`);
      await this.env.BUCKET.delete(k);
      this.ctx.storage.transactionSync(() => {
        this.sql.exec('INSERT INTO tops (name, top) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET top = max(top, excluded.top)', name, v);
        this.sql.exec('DELETE FROM pending WHERE key = ?', k);
      });
    };
    if (await this.#gcLockHeld(ns)) {
      await withdraw();
      return refuse(503, 'busy', `a gc of namespace '${ns}' ran while this commit was stalled and is still running; nothing was committed`);
    }
    await this.#refreshPacks(ns, false);
    const bad = this.#check(ns, entries);
    const missing = bad ? [] : await this.#missingParts(ns, parts);
    if (!bad && missing.length === 0) return null;
    await withdraw();
    if (bad) return bad;
    return refuse(409, 'missing_parts', `a gc that ran while this commit was stalled removed ${missing.length} of its parts `
      + `from namespace '${ns}'; nothing was committed`, { missing_parts: missing });
  }

  /**
   * Freshness (PROTOCOL.md §6): the bucket's pack listing against the index. A pack not indexed
   * (another node's upload, a gc's rewrite) is read, verified by the core and indexed, at most
   * REINDEX_STEP_BYTES of such a call when `bounded` (the rest in later calls; until then its
   * chunks are answered missing, and a client sends them again); the rows of an indexed pack no
   * longer in the bucket (another node's gc deleted it) are dropped (when `bounded`, only if it
   * was indexed before the listing began). Concurrent calls share one run (coalesced); `bounded` false (gc, a commit
   * that raced a gc) reads every pack.
   */
  async #refreshPacks(ns, bounded = true) {
    if (!ns) return undefined; // a Durable Object with no namespace name: nothing to list
    if (bounded && this.refreshing) return this.refreshing;
    const run = this.#refreshPacksOnce(ns, bounded);
    if (bounded) this.refreshing = run.finally(() => (this.refreshing = null));
    return run;
  }

  /**
   * One refresh (see #refreshPacks); returns `{ more, bad }`: whether packs were left for a later
   * call (the bound), and the ids of the packs read that do not verify (not indexed).
   */
  async #refreshPacksOnce(ns, bounded, skip = new Set()) {
    const began = now();
    const seen = new Set();
    let bytes = 0;
    let more = false;
    const bad = [];
    let cursor;
    do {
      const l = await this.env.BUCKET.list({ prefix: `ns/${ns}/packs/`, cursor });
      for (const o of l.objects) {
        const id = o.key.split('/').pop();
        seen.add(id);
        if (skip.has(id) || this.sql.exec('SELECT 1 FROM packs WHERE id = ?', id).toArray().length) continue;
        // An upload of this store's between its put and its rows indexes itself (not read twice).
        if (bounded && this.#pendingKey(o.key)) continue;
        if (bounded && bytes >= REINDEX_STEP_BYTES) {
          more = true;
          continue;
        }
        bytes += o.size;
        if ((await this.#reconcilePack(ns, o.key, false)) === 'bad') bad.push(id);
      }
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
    // Unbounded, the caller runs in the namespace's order (no upload or rewrite of this store's
    // is being indexed meanwhile): every pack the listing lacks is gone.
    for (const { id } of this.sql.exec('SELECT id FROM packs WHERE created < ?', bounded ? began : Number.MAX_SAFE_INTEGER).toArray()) {
      if (seen.has(id)) continue;
      this.ctx.storage.transactionSync(() => {
        this.sql.exec('DELETE FROM chunks WHERE pack = ?', id);
        this.sql.exec('DELETE FROM packs WHERE id = ?', id);
      });
    }
    return { more, bad };
  }

  /**
   * `GET check`'s first step (PROTOCOL.md §6, freshness): the index brought up to the bucket
   * (packs another node stored read, verified and indexed, REINDEX_STEP_BYTES a round until none
   * is left; rows of packs gone dropped). Returns the ids of stored packs that do not verify
   * (left unindexed: check names them). Versions are refreshed by `list`.
   */
  async refreshForCheck() {
    await this.#ready();
    const ns = this.ctx.id.name;
    if (!ns) return [];
    const bad = new Set();
    for (;;) {
      const r = await this.#refreshPacksOnce(ns, true, bad); // one that does not verify is read once
      r.bad.forEach((id) => bad.add(id));
      if (!r.more) return [...bad];
    }
  }

  /**
   * Freshness of versions (PROTOCOL.md §6): the recipe objects under `prefix` (a name's, or the
   * namespace's) against the version rows: a recipe another node committed gets its row (parsed
   * by the core), a tombstone keeps its number, a row whose recipe is gone (another node's
   * delete) is dropped.
   */
  async #refreshRecipes(ns, prefix) {
    if (!ns) return;
    const there = new Set();
    let cursor;
    do {
      const l = await this.env.BUCKET.list({ prefix, cursor });
      for (const o of l.objects) {
        there.add(o.key);
        // A commit of this store's between its put and its row writes that row itself.
        if (!this.#pendingKey(o.key)) await this.#reindexRecipe(o);
      }
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
    const rows = prefix === `ns/${ns}/recipes/`
      ? this.sql.exec('SELECT name, version FROM versions').toArray()
      : this.sql.exec('SELECT name, version FROM versions WHERE name = ?', core.nameFromKey(prefix.slice(`ns/${ns}/recipes/`.length, -1))).toArray();
    for (const r of rows) {
      const k = versionKey(ns, core.nameKey(r.name), r.version);
      if (k.startsWith(prefix) && !there.has(k) && !this.#pendingKey(k)) {
        this.sql.exec('DELETE FROM versions WHERE name = ? AND version = ?', r.name, r.version);
      }
    }
  }

  #pendingKey(k) {
    return this.sql.exec('SELECT 1 FROM pending WHERE key = ?', k).toArray().length > 0;
  }

  /** Tests only (`gc-during-commit`): a new gc epoch, and the pack of the first entry's chunk deleted from R2. */
  async #testGcDuringCommit(ns, entries) {
    await this.env.BUCKET.put(gcEpochKey(ns), `${randomHex()}\n`);
    const r = this.sql.exec('SELECT pack FROM chunks WHERE id = ?', entries.subarray(0, 32)).toArray();
    if (r.length) await this.env.BUCKET.delete(packKey(ns, r[0].pack));
  }

  /**
   * The hex ids of `parts` (32 bytes each) with no part object in R2 (a commit's check, one HEAD
   * a part, 16 at a time: a commit must name only parts the bucket holds, whichever node wrote
   * or deleted them). The `parts` table follows what it finds: ids found are kept, ids gone
   * (another node's gc) are dropped, so that `parts/query` answers them missing from then on.
   */
  async partsMissing(ns, parts) {
    await this.#ready();
    return this.#missingParts(ns, new Uint8Array(parts));
  }

  async #missingParts(ns, parts) {
    const ids = [];
    for (let k = 0; k + 32 <= parts.length; k += 32) ids.push(hex(parts.subarray(k, k + 32)));
    const out = [];
    for (let at = 0; at < ids.length; at += 16) {
      const batch = ids.slice(at, at + 16);
      const found = await Promise.all(batch.map((id) => this.env.BUCKET.head(partKey(ns, id))));
      batch.forEach((id, k) => {
        if (!found[k]) out.push(id);
        this.sql.exec(found[k] ? 'INSERT OR IGNORE INTO parts (id) VALUES (?)' : 'DELETE FROM parts WHERE id = ?', unhex(id));
      });
    }
    return out;
  }

  /** A commit's plain chunks checked before its parts are read (not serialized; `commit` checks again). */
  async checkChunks(ns, alg, entries) {
    await this.#ready();
    const have = this.#alg();
    if (have && have !== alg) return refuse(400, 'bad_request', `namespace '${ns}' uses ${have} fingerprints; this recipe uses ${alg}`);
    const bad = this.#check(ns, new Uint8Array(entries));
    if (bad?.refused.status !== 409) return bad;
    await this.#refreshPacks(ns); // missing here: maybe stored by another node since
    return this.#check(ns, new Uint8Array(entries));
  }

  /**
   * `POST parts`: a part (parsed by the Worker's core) stored create-only under its id once
   * every chunk it names is indexed with its length (409/400 as a commit), in the namespace's
   * order, so that no gc runs between the check and the put.
   */
  async putPart(ns, id, alg, body, entries) {
    await this.#ready();
    return this.#serial(async () => {
      const bad = await this.#fixAlg(ns, alg, 'part');
      if (bad) return bad;
      const pre = await this.#commitPrelude(ns, new Uint8Array(entries), 'part');
      if (pre.refused) return pre;
      await this.env.BUCKET.put(partKey(ns, id), body, { onlyIf: { etagDoesNotMatch: '*' } });
      // Stored (now, or already: a create-only put writes nothing over a part): its id is kept.
      this.sql.exec('INSERT OR IGNORE INTO parts (id) VALUES (?)', unhex(id));
      return { part: id };
    });
  }

  /**
   * Whether every entry (`e`: 36 bytes each, id and size) is indexed with its size: null, or the
   * refusal (400 on a size, 409 with the missing ids). One statement: the entries whose chunk is
   * not indexed, or is with another length.
   */
  #check(ns, e, what = 'recipe') {
    const dv = new DataView(e.buffer, e.byteOffset, e.byteLength);
    const count = Math.floor(e.length / 36);
    const sizes = [];
    for (let i = 0; i < count; i++) sizes.push(dv.getUint32(i * 36 + 32, true));
    const missing = [];
    const seen = new Set();
    const odd = this.sql.exec(`${EACH} SELECT n, c.raw FROM i LEFT JOIN chunks c ON c.id = substr(?2, n * 36 + 1, 32)
      WHERE c.raw IS NULL OR c.raw != ${num(3, 1, 0)} ORDER BY n`, count, e, digits(sizes));
    for (const [n, raw] of odd.raw()) {
      const id = e.subarray(n * 36, n * 36 + 32);
      if (raw !== null) {
        return refuse(400, 'bad_request', `${what}: chunk ${hex(id)} is ${raw} bytes in the store, the ${what} says ${sizes[n]}`);
      }
      const h = hex(id);
      if (!seen.has(h)) {
        seen.add(h);
        missing.push(h);
      }
    }
    if (missing.length) {
      return refuse(409, 'missing_chunks',
        `${missing.length} of the ${what}'s chunks are not in namespace '${ns}'; nothing was ${what === 'part' ? 'stored' : 'committed'}`, { missing });
    }
    return null;
  }

  /** The indexed packs, and the index rows of one (check). */
  async packs() {
    await this.#ready();
    return this.sql.exec('SELECT id, size FROM packs ORDER BY id').toArray().map((r) => ({ ...r }));
  }

  async packRows(pack) {
    await this.#ready();
    return this.sql.exec('SELECT id, off, len, raw FROM chunks WHERE pack = ?', pack).toArray()
      .map((r) => [new Uint8Array(r.id), r.off, r.len, r.raw]);
  }

  /** A version's row (`version` 0: the latest), or null. */
  async resolve(name, version) {
    await this.#ready();
    await this.#refreshRecipes(this.ctx.id.name, recipePrefix(this.ctx.id.name, core.nameKey(name)));
    const r = version
      ? this.sql.exec('SELECT * FROM versions WHERE name = ? AND version = ?', name, version).toArray()
      : this.sql.exec('SELECT * FROM versions WHERE name = ? ORDER BY version DESC LIMIT 1', name).toArray();
    return r.length ? { ...r[0] } : null;
  }

  /** Every version, by name (bytewise: SQLite's BINARY collation of UTF-8), then version. */
  async list() {
    await this.#ready();
    await this.#refreshRecipes(this.ctx.id.name, `ns/${this.ctx.id.name}/recipes/`);
    return this.sql.exec('SELECT name, version, bytes, chunks, digest, created FROM versions ORDER BY name, version')
      .toArray().map((r) => ({ ...r }));
  }

  /**
   * GC (POST gc): marks every chunk a stored recipe names, then deletes the packs past `grace`
   * seconds (`null`: spare every pack) with no marked chunk, their index rows with them, and
   * objects no index row names (a pack put before a crash cut its indexing, a temporary upload
   * object) past the grace and at least an hour old. Runs in the namespace's order, so no commit runs meanwhile. A pack
   * with some marked chunks is kept whole (not rewritten yet). A recipe it cannot read stops the
   * sweep (nothing is deleted) with a warning.
   */
  async gc(ns, grace) {
    await this.#ready();
    return this.#serial(() => this.#gcShared(ns, grace));
  }

  /**
   * gc as one node of a shared bucket (PROTOCOL.md §6): the lock `ns/<ns>/gc-lock` taken
   * create-only (one past its lease taken over; a live one: 503 busy), `gc-epoch` rewritten, the
   * lock renewed every third of the lease while this runs, a settle time (CUTPOINT_GC_SETTLE
   * seconds, 5 by default) for commits past their lock check, the index refreshed from the
   * bucket's packs, the sweep, then the lock deleted.
   */
  async #gcShared(ns, grace) {
    const lock = gcLockKey(ns);
    if (!(await this.#takeGcLock(ns))) {
      return refuse(503, 'busy', `another gc of namespace '${ns}' holds ${lock} (a lock not renewed for `
        + `${this.#lease() / 1000} s is taken over)`);
    }
    const renew = setInterval(() => {
      this.env.BUCKET.put(lock, gcLockBody()).catch((e) => console.error(`renewing ${lock} failed:`, e?.message ?? e));
    }, this.#lease() / 3);
    try {
      const epoch = `${randomHex()}\n`;
      await this.env.BUCKET.put(gcEpochKey(ns), epoch);
      const settle = this.env.CUTPOINT_GC_SETTLE;
      await sleep((settle === undefined || settle === '' ? 5 : Number(settle)) * 1000);
      await this.#refreshPacks(ns, false);
      const rep = await this.#gcLocked(ns, grace);
      this.freshEpoch = epoch; // this index is the bucket's as of this gc (see #commitPrelude)
      return rep;
    } finally {
      clearInterval(renew);
      await this.env.BUCKET.delete(lock);
    }
  }

  /** Takes the gc lock: creates it, or takes over one past its lease (a node that died in a gc). */
  async #takeGcLock(ns) {
    const lock = gcLockKey(ns);
    const create = async () => (await this.env.BUCKET.put(lock, gcLockBody(), { onlyIf: { etagDoesNotMatch: '*' } })) !== null;
    if (await create()) return true;
    if (await this.#gcLockHeld(ns)) return false;
    console.error(`taking over ${lock}, not renewed for longer than the lease (a node died during a gc)`);
    await this.env.BUCKET.delete(lock);
    return create();
  }

  /** The sweep of gc, under the lock (see `gc`). */
  async #gcLocked(ns, grace) {
    {
      const rep = { referenced_chunks: 0, packs_deleted: 0, packs_rewritten: 0, chunks_removed: 0, bytes_freed: 0,
        packs_in_grace: 0, parts_deleted: 0, parts_in_grace: 0, warnings: [] };
      const cutoff = grace === null ? -Infinity : now() - grace;
      this.sql.exec('DROP TABLE IF EXISTS live');
      this.sql.exec('CREATE TABLE live (id BLOB PRIMARY KEY) WITHOUT ROWID');
      try {
        const named = new Set();
        // Every recipe in the bucket (other nodes' too), not only this index's versions.
        for await (const key of this.#recipeKeys(ns)) {
          const o = await this.env.BUCKET.get(key);
          if (o === null) continue; // deleted since the listing
          let r;
          try {
            r = new core.StoredRecipe(new Uint8Array(await o.arrayBuffer()));
          } catch {
            rep.warnings.push(`the recipe ${key.slice(`ns/${ns}/`.length)} is unreadable: nothing was swept`);
            return rep;
          }
          try {
            for (let k = 0; k < r.segments(); k++) {
              const id = r.partId(k);
              if (id === undefined) this.#markLive(r.entries(k));
              else named.add(id);
            }
          } finally {
            r.free();
          }
        }
        if (!(await this.#gcParts(ns, named, cutoff, rep))) return rep;
        rep.referenced_chunks = this.sql.exec('SELECT count(*) AS n FROM live').one().n;
        const packs = this.sql.exec('SELECT id, size, created FROM packs').toArray();
        for (const p of packs) {
          if (p.created > cutoff) {
            rep.packs_in_grace++;
            continue;
          }
          const used = this.sql.exec('SELECT count(*) AS n, coalesce(sum(c.len & 2147483647), 0) AS b FROM chunks c JOIN live l ON l.id = c.id WHERE c.pack = ?', p.id).one();
          if (used.n > 0) {
            // As cutpoint serve's gc: a pack whose live frames are under half its bytes is rewritten.
            if (used.b * 2 < p.size) await this.#rewrite(ns, p, rep);
            continue;
          }
          await this.env.BUCKET.delete(`ns/${ns}/packs/${p.id.slice(0, 2)}/${p.id}`);
          this.ctx.storage.transactionSync(() => {
            rep.chunks_removed += this.sql.exec('DELETE FROM chunks WHERE pack = ?', p.id).rowsWritten;
            this.sql.exec('DELETE FROM packs WHERE id = ?', p.id);
          });
          rep.packs_deleted++;
          rep.bytes_freed += p.size;
        }
        // An unindexed object may be an upload between its put and its indexing: at least an hour old.
        const stray = Math.min(cutoff, now() - 3600);
        await this.#sweepStray(ns, `ns/${ns}/packs/`, stray, rep);
        await this.#sweepStray(ns, `ns/${ns}/tmp/`, stray, rep);
        return rep;
      } finally {
        this.sql.exec('DROP TABLE IF EXISTS live');
      }
    }
  }

  /**
   * gc's rewrite of pack `p` to its live frames (the core's `PackRewrite`: each checked against
   * its id, copied as stored): the new pack is put (noted first, as an upload's is), the index
   * rows moved to it and the dead ones dropped in one transaction, then the old object deleted.
   * A frame that does not verify stops this pack's rewrite (a warning; the pack is kept).
   */
  async #rewrite(ns, p, rep) {
    const rows = this.sql.exec('SELECT c.id, c.off, c.len, c.raw FROM chunks c JOIN live l ON l.id = c.id WHERE c.pack = ? ORDER BY c.off', p.id)
      .toArray().map((r) => ({ id: new Uint8Array(r.id), off: r.off, len: r.len, raw: r.raw }));
    const o = await this.env.BUCKET.get(packKey(ns, p.id));
    if (!o) {
      rep.warnings.push(`pack ${p.id} is indexed but not stored: not rewritten`);
      return;
    }
    const bytes = new Uint8Array(await o.arrayBuffer());
    const w = new core.PackRewrite(this.#alg(), rows.some((r) => (r.len & 0x80000000) !== 0));
    let body;
    try {
      for (const r of rows) {
        const len = r.len & 0x7fffffff;
        w.add(r.id, bytes.subarray(r.off, r.off + len), (r.len & 0x80000000) !== 0, r.raw);
      }
      body = w.finish();
    } catch (e) {
      rep.warnings.push(`pack ${p.id}: a live chunk does not verify (${e?.message ?? e}): not rewritten`);
      w.free();
      return;
    }
    const id = w.packId();
    const frames = w.frames();
    w.free();
    const key = packKey(ns, id);
    this.#intend(ns, key);
    await this.env.BUCKET.put(key, body);
    const before = this.sql.exec('SELECT count(*) AS n FROM chunks WHERE pack = ?', p.id).one().n;
    // One transaction: the old pack's rows out, the new one's in.
    this.#index(key, id, body.length, frames, () => {
      this.sql.exec('DELETE FROM chunks WHERE pack = ?', p.id);
      this.sql.exec('DELETE FROM packs WHERE id = ?', p.id);
    });
    if (id !== p.id) await this.env.BUCKET.delete(packKey(ns, p.id));
    rep.packs_rewritten++;
    rep.chunks_removed += before - rows.length;
    rep.bytes_freed += Math.max(0, p.size - body.length);
  }

  /** The keys of the namespace's recipe objects in the bucket (tombstones left out). */
  async *#recipeKeys(ns) {
    let cursor;
    do {
      const l = await this.env.BUCKET.list({ prefix: `ns/${ns}/recipes/`, cursor });
      for (const o of l.objects) if (!o.key.endsWith('.deleted')) yield o.key;
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
  }

  /** Marks the chunks of `entries` (36 bytes each) live for gc. */
  #markLive(entries) {
    this.ctx.storage.transactionSync(() => {
      for (let i = 0; i + 36 <= entries.length; i += 36) {
        this.sql.exec('INSERT OR IGNORE INTO live (id) VALUES (?)', entries.subarray(i, i + 32));
      }
    });
  }

  /**
   * gc's parts (PROTOCOL.md 4.9): a part no stored recipe names (`named`) and written before
   * `cutoff` is deleted; every other part is a root, its chunks marked live (one part read at a
   * time). A part that does not verify stops the sweep (false; a warning), as a recipe does.
   */
  async #gcParts(ns, named, cutoff, rep) {
    let cursor;
    const kept = new Set();
    do {
      const l = await this.env.BUCKET.list({ prefix: `ns/${ns}/parts/`, cursor });
      for (const o of l.objects) {
        const id = o.key.split('/').pop();
        // Whole seconds, as cutpoint serve's rule (a part's time is its second): with `grace=0`,
        // a part written in this very second goes too.
        if (!named.has(id)) {
          if (Math.floor(o.uploaded.getTime() / 1000) <= cutoff) {
            await this.env.BUCKET.delete(o.key);
            this.sql.exec('DELETE FROM parts WHERE id = ?', unhex(id));
            rep.parts_deleted++;
            continue;
          }
          rep.parts_in_grace++;
        }
        kept.add(id);
        this.#addPartKey(o.key);
        const b = await this.env.BUCKET.get(o.key);
        let p;
        try {
          p = core.storedPart(new Uint8Array(await b.arrayBuffer()), id);
        } catch {
          rep.warnings.push(`part ${id} is unreadable: nothing was swept`);
          return false;
        }
        try {
          this.#markLive(p.entries());
        } finally {
          p.free();
        }
      }
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
    // The table now follows the bucket: ids of parts no longer there (another node's gc) dropped.
    for (const [id] of Array.from(this.sql.exec('SELECT id FROM parts').raw())) {
      if (!kept.has(hex(new Uint8Array(id)))) this.sql.exec('DELETE FROM parts WHERE id = ?', id);
    }
    return true;
  }

  /** Deletes the objects under `prefix` past `cutoff` that are no indexed pack. */
  async #sweepStray(ns, prefix, cutoff, rep) {
    let cursor;
    do {
      const l = await this.env.BUCKET.list({ prefix, cursor });
      for (const o of l.objects) {
        const id = o.key.split('/').pop();
        if (o.uploaded.getTime() / 1000 > cutoff) continue;
        if (prefix.endsWith('packs/') && this.sql.exec('SELECT 1 FROM packs WHERE id = ?', id).toArray().length) continue;
        await this.env.BUCKET.delete(o.key);
        rep.bytes_freed += o.size;
      }
      cursor = l.truncated ? l.cursor : undefined;
    } while (cursor);
  }

  /** Deletes version `version` (0: every version) of `name`; a tombstone keeps the latest's number. */
  async delete(ns, name, key, version) {
    await this.#ready();
    return this.#serial(async () => {
      await this.#refreshRecipes(ns, recipePrefix(ns, key));
      const rows = version
        ? this.sql.exec('SELECT version FROM versions WHERE name = ? AND version = ?', name, version).toArray()
        : this.sql.exec('SELECT version FROM versions WHERE name = ?', name).toArray();
      if (rows.length === 0) return 0;
      const top = await this.#top(ns, key, name);
      const vs = rows.map((r) => r.version);
      if (vs.includes(top)) {
        await this.env.BUCKET.put(`${versionKey(ns, key, top)}.deleted`, '');
      }
      await this.env.BUCKET.delete(vs.map((v) => versionKey(ns, key, v)));
      this.ctx.storage.transactionSync(() => {
        for (const v of vs) this.sql.exec('DELETE FROM versions WHERE name = ? AND version = ?', name, v);
        this.sql.exec('INSERT OR REPLACE INTO tops (name, top) VALUES (?, ?)', name, top);
      });
      return vs.length;
    });
  }
}
