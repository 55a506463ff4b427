#!/usr/bin/env node
// `npm run edge`: the edge store (edge/src/worker.js) in the real Workers runtime (workerd,
// through miniflare), on 127.0.0.1, with its R2 bucket and Durable Objects persisted in a
// directory. Prints the store's URL in its first lines; stops on SIGINT/SIGTERM.
//
//   node edge/dev.mjs [--port N] [--dir DIR] [--tokens FILE] [--cors-origin ORIGIN]... [--instances N]
//
// --port 0 (the default 8788 otherwise) picks a free port. Without --tokens the store is open
// (CUTPOINT_OPEN=1), as `cutpoint serve` without --tokens, and answers loopback host names only.
// --instances N runs N copies of the Worker (separate isolates, each on its own free port,
// printed one a line after the first) bound to the same R2 bucket and the same Durable Object
// namespace, as the platform runs many isolates of one Worker over one bucket.
import { Miniflare } from 'miniflare';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

/** A positive size: digits, optionally followed by k or m (KiB, MiB), as `cutpoint serve` takes it. */
function bytesArg(a, v) {
  const m = /^([1-9][0-9]*)([kKmM]?)$/.exec(v);
  if (!m) throw new Error(`${a} takes a positive number (k, m: KiB, MiB)`);
  return Number(m[1]) * ({ '': 1, k: 1024, m: 1 << 20 })[m[2].toLowerCase()];
}

/** Whole seconds, at least `least` (`--gc-lease`, `--gc-settle`, as `cutpoint serve` takes them). */
function secondsArg(a, v, least) {
  if (!/^[0-9]{1,6}$/.test(v) || Number(v) < least) throw new Error(`${a} takes whole seconds, at least ${least}`);
  return Number(v);
}

function args(argv) {
  const o = { port: 8788, dir: resolve('.cutpoint-edge'), tokens: null, origins: [], instances: 1 };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const v = () => {
      if (i + 1 >= argv.length) throw new Error(`${a} needs a value`);
      return argv[++i];
    };
    if (a === '--port') o.port = Number(v());
    else if (a === '--dir') o.dir = resolve(v());
    else if (a === '--tokens') o.tokens = readFileSync(v(), 'utf8');
    else if (a === '--cors-origin') o.origins.push(v());
    else if (a === '--test-fault') o.fault = v();
    else if (a === '--max-recipe') o.maxRecipe = bytesArg(a, v());
    else if (a === '--max-uploads-per-token') o.maxUploadsPerToken = bytesArg(a, v());
    else if (a === '--inspector-port') o.inspectorPort = Number(v());
    else if (a === '--test-reindex-step') o.reindexStep = bytesArg(a, v());
    else if (a === '--test-count-r2') o.countR2 = true;
    else if (a === '--gc-lease') o.gcLease = secondsArg(a, v(), 1);
    else if (a === '--gc-settle') o.gcSettle = secondsArg(a, v(), 0);
    else if (a === '--instances') {
      o.instances = Number(v());
      if (!Number.isInteger(o.instances) || o.instances < 1 || o.instances > 8) throw new Error('--instances takes 1 to 8');
    }
    else if (a === '-h' || a === '--help') {
      console.log('usage: npm run edge -- [--port N] [--dir DIR] [--tokens FILE] [--cors-origin ORIGIN]... [--instances N] '
        + '[--max-recipe BYTES] [--max-uploads-per-token N] [--gc-lease SECONDS] [--gc-settle SECONDS]');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

/**
 * The Miniflare options of the edge store over `dir` (the tests use this too). `instances` > 1:
 * that many Workers `edge-1`.. (the first on `port`, the others on direct sockets of free ports),
 * one R2 bucket, the Durable Object class of `edge-1` bound in each.
 */
export function edgeOptions({ port = 0, dir, tokens = null, origins = [], instances = 1, fault = null, maxRecipe = null,
  maxUploadsPerToken = null, inspectorPort = null, reindexStep = null, gcLease = null, gcSettle = null, countR2 = false }) {
  const wasm = join(here, 'pkg', 'cutpoint_edge_wasm_bg.wasm');
  if (!existsSync(wasm)) throw new Error('edge/pkg is missing: run `bash scripts/build-edge.sh` (or npm run setup)');
  mkdirSync(dir, { recursive: true });
  const bindings = { CUTPOINT_CORS_ORIGINS: origins.join(',') };
  if (tokens) bindings.CUTPOINT_TOKENS = tokens;
  else bindings.CUTPOINT_OPEN = '1';
  // Tests only (--test-fault): 'pack-unindexed' or 'recipe-unrowed' stops a request between its
  // R2 put and its index row, as a crash there would (tests/js/edge.test.ts, the reconcile);
  // 'gc-during-commit' makes a commit see another node's gc between its check and its put.
  if (fault) bindings.CUTPOINT_TEST_FAULT = fault;
  // Limits below the defaults (`max_recipe_bytes`: 16 MiB at most), as `cutpoint serve --max-recipe`.
  if (maxRecipe) bindings.CUTPOINT_MAX_RECIPE_BYTES = String(maxRecipe);
  if (maxUploadsPerToken) bindings.CUTPOINT_MAX_UPLOADS_PER_TOKEN = String(maxUploadsPerToken);
  // Tests only: a namespace's index is built from the bucket in steps of this many objects.
  if (reindexStep) bindings.CUTPOINT_TEST_REINDEX_STEP = String(reindexStep);
  // Tests only: R2 calls counted by method, read (and reset by POST) at GET /v1/test/r2-ops.
  if (countR2) bindings.CUTPOINT_TEST_COUNT_R2 = '1';
  // PROTOCOL.md §6 (several nodes): the gc lock's lease (default 120 s) and settle time (5 s).
  if (gcLease !== null) bindings.CUTPOINT_GC_LEASE = String(gcLease);
  if (gcSettle !== null) bindings.CUTPOINT_GC_SETTLE = String(gcSettle);
  const worker = {
    modules: true,
    scriptPath: join(here, 'src', 'worker.js'),
    modulesRoot: here,
    modulesRules: [{ type: 'ESModule', include: ['**/*.js'] }, { type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    r2Buckets: { BUCKET: 'cutpoint' },
    durableObjects: { NS: { className: 'Namespace', useSQLite: true }, UPLOADS: { className: 'Uploads', useSQLite: true } },
    bindings,
  };
  const shared = { host: '127.0.0.1', port, r2Persist: join(dir, 'r2'), durableObjectsPersist: join(dir, 'do'),
    ...(inspectorPort === null ? {} : { inspectorPort }) };
  if (instances === 1) return { ...shared, ...worker };
  return {
    ...shared,
    workers: Array.from({ length: instances }, (_, i) => ({
      ...worker,
      name: `edge-${i + 1}`,
      ...(i === 0 ? {} : {
        durableObjects: {
          NS: { className: 'Namespace', scriptName: 'edge-1', useSQLite: true },
          UPLOADS: { className: 'Uploads', scriptName: 'edge-1', useSQLite: true },
        },
        unsafeDirectSockets: [{ host: '127.0.0.1', port: 0 }],
      }),
    })),
  };
}

/**
 * The R2 bucket of a stopped edge store's state directory, opened in this process (tests copy
 * objects between it and an S3 bucket key for key); `dispose()` when done.
 */
export async function openBucket(dir) {
  const mf = new Miniflare(edgeOptions({ dir }));
  await mf.ready;
  return { bucket: await mf.getR2Bucket('BUCKET'), dispose: () => mf.dispose() };
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  let o;
  try {
    o = args(process.argv.slice(2));
  } catch (e) {
    console.error(`edge: ${e.message}`);
    process.exit(2);
  }
  const mf = new Miniflare(edgeOptions(o));
  const url = await mf.ready;
  console.log(`cutpoint edge store (workerd via miniflare) at ${url.origin}`);
  for (let i = 2; i <= o.instances; i++) {
    console.log(`instance ${i} (same R2 bucket and Durable Objects) at ${(await mf.unsafeGetDirectURL(`edge-${i}`)).origin}`);
  }
  console.log(`state (R2 bucket, Durable Objects) in ${o.dir}`);
  console.log(o.tokens ? 'tokens: from the --tokens file' : 'open store: no tokens (loopback host names only)');
  const stop = async () => {
    await mf.dispose();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
