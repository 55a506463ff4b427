// One Durable Object per namespace (SQLite storage): the namespace's chunk index, its files'
// versions and the highest version number each name was ever given. Commits of a namespace are
// serialized here (one at a time, `#serial`), so a version number is never given twice; the
// recipe itself is written to R2 create-only (`onlyIf`), the commit point, before its row.
// It answers the existence query. It holds no protocol logic: the Worker has parsed and checked
// every body with the core (wasm) before it calls these methods.
import { DurableObject } from 'cloudflare:workers';

const SCHEMA = `
CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS chunks (id BLOB PRIMARY KEY, pack TEXT NOT NULL, off INTEGER NOT NULL,
  len INTEGER NOT NULL, raw INTEGER NOT NULL) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS packs (id TEXT PRIMARY KEY, size INTEGER NOT NULL, created INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS versions (name TEXT NOT NULL, version INTEGER NOT NULL, bytes INTEGER NOT NULL,
  chunks INTEGER NOT NULL, digest TEXT NOT NULL, created INTEGER NOT NULL, PRIMARY KEY (name, version));
CREATE TABLE IF NOT EXISTS tops (name TEXT PRIMARY KEY, top INTEGER NOT NULL);
`;

const hex = (b) => Array.from(b, (x) => x.toString(16).padStart(2, '0')).join('');
const now = () => Math.floor(Date.now() / 1000);
/** An error answer carried back to the Worker (RPC returns values, the Worker answers them). */
const refuse = (status, code, error, extra = {}) => ({ refused: { status, code, error, ...extra } });

export const recipePrefix = (ns, key) => `ns/${ns}/recipes/${key}/`;
export const versionKey = (ns, key, v) => `${recipePrefix(ns, key)}${String(v).padStart(12, '0')}`;

export class Namespace extends DurableObject {
  constructor(ctx, env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.sql.exec(SCHEMA);
    this.tail = Promise.resolve();
  }

  /** Runs `f` after every earlier serialized call of this namespace has finished. */
  #serial(f) {
    const run = this.tail.then(f, f);
    this.tail = run.catch(() => {});
    return run;
  }

  alg() {
    const r = this.sql.exec('SELECT v FROM meta WHERE k = ?', 'alg').toArray();
    return r.length ? r[0].v : null;
  }

  /** Fixes the namespace's algorithm (and writes ns/<ns>/config, as cutpoint serve does). */
  async #fixAlg(ns, alg, what) {
    const have = this.alg();
    if (have && have !== alg) {
      return refuse(400, 'bad_request', `namespace '${ns}' uses ${have} fingerprints; this ${what} uses ${alg}`);
    }
    if (!have) {
      await this.env.BUCKET.put(`ns/${ns}/config`, `hash ${alg}\n`);
      this.sql.exec('INSERT OR REPLACE INTO meta (k, v) VALUES (?, ?)', 'alg', alg);
    }
    return null;
  }

  /** The ids of `body` (32 bytes each) the namespace lacks, in order, each once. */
  query(body) {
    const ids = new Uint8Array(body);
    const out = [];
    const seen = new Set();
    for (let i = 0; i + 32 <= ids.length; i += 32) {
      const id = ids.subarray(i, i + 32);
      const h = hex(id);
      if (seen.has(h)) continue;
      seen.add(h);
      if (this.sql.exec('SELECT 1 FROM chunks WHERE id = ?', id).toArray().length === 0) out.push(id);
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
    return this.#serial(async () => {
      const bad = await this.#fixAlg(ns, alg, 'pack');
      if (bad) return bad;
      const existed = this.sql.exec('SELECT 1 FROM packs WHERE id = ?', pack).toArray().length > 0;
      const f = new Uint8Array(frames);
      const dv = new DataView(f.buffer, f.byteOffset, f.byteLength);
      let added = 0;
      let addedBytes = 0;
      this.ctx.storage.transactionSync(() => {
        if (!existed) this.sql.exec('INSERT INTO packs (id, size, created) VALUES (?, ?, ?)', pack, size, now());
        for (let i = 0; i + 48 <= f.length; i += 48) {
          const id = f.slice(i, i + 32);
          const off = Number(dv.getBigUint64(i + 32, true));
          const len = dv.getUint32(i + 40, true);
          const raw = dv.getUint32(i + 44, true);
          const c = this.sql.exec(
            'INSERT OR IGNORE INTO chunks (id, pack, off, len, raw) VALUES (?, ?, ?, ?, ?)', id, pack, off, len, raw);
          if (c.rowsWritten > 0) {
            added++;
            addedBytes += len & 0x7fffffff;
          }
        }
        if (added === 0 && !existed) this.sql.exec('DELETE FROM packs WHERE id = ?', pack);
      });
      return { added, addedBytes, existed };
    });
  }

  /** Where each id of `body` is: `[pack, offset, stored length with bit 31, raw]` or null. */
  locate(body) {
    const ids = new Uint8Array(body);
    const out = [];
    for (let i = 0; i + 32 <= ids.length; i += 32) {
      const r = this.sql.exec('SELECT pack, off, len, raw FROM chunks WHERE id = ?', ids.subarray(i, i + 32)).toArray();
      out.push(r.length ? [r[0].pack, r[0].off, r[0].len, r[0].raw] : null);
    }
    return out;
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
  async commit(ns, name, key, text, entries, meta) {
    return this.#serial(async () => {
      const bad = await this.#fixAlg(ns, meta.alg, 'recipe');
      if (bad) return bad;
      const e = new Uint8Array(entries);
      const dv = new DataView(e.buffer, e.byteOffset, e.byteLength);
      const missing = [];
      const seen = new Set();
      for (let i = 0; i + 36 <= e.length; i += 36) {
        const id = e.subarray(i, i + 32);
        const size = dv.getUint32(i + 32, true);
        const r = this.sql.exec('SELECT raw FROM chunks WHERE id = ?', id).toArray();
        if (r.length === 0) {
          const h = hex(id);
          if (!seen.has(h)) {
            seen.add(h);
            missing.push(h);
          }
        } else if (r[0].raw !== size) {
          return refuse(400, 'bad_request', `recipe: chunk ${hex(id)} is ${r[0].raw} bytes in the store, the recipe says ${size}`);
        }
      }
      if (missing.length) {
        return refuse(409, 'missing_chunks',
          `${missing.length} of the recipe's chunks are not in namespace '${ns}'; nothing was committed`, { missing });
      }
      let v = (await this.#top(ns, key, name)) + 1;
      for (;;) {
        const put = await this.env.BUCKET.put(versionKey(ns, key, v), text, { onlyIf: { etagDoesNotMatch: '*' } });
        if (put) break;
        v++; // taken (another node over the same bucket): the next number
      }
      const row = { name, version: v, bytes: meta.bytes, chunks: meta.count, digest: meta.digest, created: now() };
      this.ctx.storage.transactionSync(() => {
        this.sql.exec('INSERT INTO versions (name, version, bytes, chunks, digest, created) VALUES (?, ?, ?, ?, ?, ?)',
          name, v, row.bytes, row.chunks, row.digest, row.created);
        this.sql.exec('INSERT OR REPLACE INTO tops (name, top) VALUES (?, ?)', name, v);
      });
      return row;
    });
  }

  /** A version's row (`version` 0: the latest), or null. */
  resolve(name, version) {
    const r = version
      ? this.sql.exec('SELECT * FROM versions WHERE name = ? AND version = ?', name, version).toArray()
      : this.sql.exec('SELECT * FROM versions WHERE name = ? ORDER BY version DESC LIMIT 1', name).toArray();
    return r.length ? { ...r[0] } : null;
  }

  /** Every version, by name (bytewise: SQLite's BINARY collation of UTF-8), then version. */
  list() {
    return this.sql.exec('SELECT name, version, bytes, chunks, digest, created FROM versions ORDER BY name, version')
      .toArray().map((r) => ({ ...r }));
  }

  /** Deletes version `version` (0: every version) of `name`; a tombstone keeps the latest's number. */
  async delete(ns, name, key, version) {
    return this.#serial(async () => {
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
