#!/usr/bin/env node
// The Worker's CPU per MiB ingested, in the part that is the edge store's own: the core's pack
// verification in wasm (edge/pkg, the module the Worker runs) over a 32 MiB pack of random 8 KiB
// chunks, fed in 64 KiB pieces as a request body arrives, in V8 (the engine of workerd too).
// R2's and the Durable Object's costs are the platform's and are not in this number.
//   node edge/bench.mjs [MiB]
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { blake3 } from 'hash-wasm';
import * as core from './pkg/cutpoint_edge_wasm.js';

core.initSync({ module: new WebAssembly.Module(readFileSync(new URL('./pkg/cutpoint_edge_wasm_bg.wasm', import.meta.url))) });
const mib = Number(process.argv[2] ?? 32);

async function pack(n) {
  const header = Buffer.alloc(16);
  header.write('CPPACK\x00\x01', 0, 'latin1');
  header[8] = 1;
  const parts = [header];
  const ids = [];
  for (let i = 0; i < n; i++) {
    const c = randomBytes(8192);
    const id = Buffer.from(await blake3(c), 'hex');
    ids.push(id);
    const head = Buffer.alloc(36);
    head.writeUInt32LE(c.length, 0);
    id.copy(head, 4);
    parts.push(head, c);
  }
  const end = Buffer.alloc(36);
  end.writeBigUInt64LE(BigInt(n), 4);
  parts.push(end);
  return { body: Buffer.concat(parts), ids: Buffer.concat(ids) };
}

const { body, ids } = await pack((mib << 20) / 8192);
const runs = [];
for (let r = 0; r < 5; r++) {
  const g = new core.Ingest(64 << 20, 65536);
  const t = process.cpuUsage();
  let out = 0;
  for (let at = 0; at < body.length; at += 65536) out += g.push(body.subarray(at, at + 65536)).length;
  out += g.finish().length;
  g.packId();
  g.frames();
  const u = process.cpuUsage(t);
  if (out !== body.length) throw new Error('the stored pack is not the upload');
  g.free();
  runs.push((u.user + u.system) / 1000 / (body.length / 2 ** 20));
}
runs.sort((a, b) => a - b);
const q = ids.subarray(0, 16384 * 32);
const t = process.cpuUsage();
for (let r = 0; r < 20; r++) core.checkIds(q, 16384);
const u = process.cpuUsage(t);
console.log(JSON.stringify({
  pack_mib: mib,
  ingest_cpu_ms_per_mib_median: +runs[2].toFixed(2),
  ingest_cpu_ms_per_mib_best: +runs[0].toFixed(2),
  id_list_check_cpu_ms_per_1000_ids: +((u.user + u.system) / 1000 / 20 / (q.length / 32 / 1000)).toFixed(4),
}));
