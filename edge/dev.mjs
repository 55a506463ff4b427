#!/usr/bin/env node
// `npm run edge`: the edge store (edge/src/worker.js) in the real Workers runtime (workerd,
// through miniflare), on 127.0.0.1, with its R2 bucket and Durable Objects persisted in a
// directory. Prints the store's URL in its first lines; stops on SIGINT/SIGTERM.
//
//   node edge/dev.mjs [--port N] [--dir DIR] [--tokens FILE] [--cors-origin ORIGIN]...
//
// --port 0 (the default 8788 otherwise) picks a free port. Without --tokens the store is open
// (CUTPOINT_OPEN=1), as `cutpoint serve` without --tokens, and answers loopback host names only.
import { Miniflare } from 'miniflare';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));

function args(argv) {
  const o = { port: 8788, dir: resolve('.cutpoint-edge'), tokens: null, origins: [] };
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
    else if (a === '-h' || a === '--help') {
      console.log('usage: npm run edge -- [--port N] [--dir DIR] [--tokens FILE] [--cors-origin ORIGIN]...');
      process.exit(0);
    } else throw new Error(`unknown argument ${a}`);
  }
  return o;
}

/** The Miniflare options of the edge store over `dir` (the tests use this too). */
export function edgeOptions({ port = 0, dir, tokens = null, origins = [] }) {
  const wasm = join(here, 'pkg', 'cutpoint_edge_wasm_bg.wasm');
  if (!existsSync(wasm)) throw new Error('edge/pkg is missing: run `bash scripts/build-edge.sh` (or npm run setup)');
  mkdirSync(dir, { recursive: true });
  const bindings = { CUTPOINT_CORS_ORIGINS: origins.join(',') };
  if (tokens) bindings.CUTPOINT_TOKENS = tokens;
  else bindings.CUTPOINT_OPEN = '1';
  return {
    host: '127.0.0.1',
    port,
    modules: true,
    scriptPath: join(here, 'src', 'worker.js'),
    modulesRoot: here,
    modulesRules: [{ type: 'ESModule', include: ['**/*.js'] }, { type: 'CompiledWasm', include: ['**/*.wasm'] }],
    compatibilityDate: '2025-09-01',
    r2Buckets: { BUCKET: 'cutpoint' },
    durableObjects: { NS: { className: 'Namespace', useSQLite: true } },
    r2Persist: join(dir, 'r2'),
    durableObjectsPersist: join(dir, 'do'),
    bindings,
  };
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
  console.log(`state (R2 bucket, Durable Objects) in ${o.dir}`);
  console.log(o.tokens ? 'tokens: from the --tokens file' : 'open store: no tokens (loopback host names only)');
  const stop = async () => {
    await mf.dispose();
    process.exit(0);
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}
