#!/usr/bin/env node
// `cutpoint-js`: the library's command line for Node (`npx cutpoint-js`) and Deno
// (`deno run -A web/dist/web/src/cli/main.js`). Subcommands `push`, `pull`, `ls`, `chunk`,
// `stats`, with the native `cutpoint`'s flags and `--json` fields where they overlap, a progress
// bar on a terminal, and its exit codes: 0 success; 1 an input could not be read or written, or
// a store request failed; 2 bad usage or options; 3 restored data did not verify.
import process from 'node:process'
import { parseArgs } from 'node:util'
import { init } from '../runtime.js'
import { Fail, failOf } from './common.js'
import * as push from './push.js'
import * as pull from './pull.js'
import * as ls from './ls.js'
import { chunkFlags, runChunk, runStats, statsFlags } from './chunk.js'

const USAGE = `usage: cutpoint-js <command> [options]

  push FILE... [--name N] [--rapid CRITERION] [--profile P] [--threads N] [--hash blake3|sha256]
               [--pack-size 8m] [--uploads 2] [--json]      push files (or - with --name): only novel chunks travel
  pull NAME [-o OUT|-] [--version V] [--force] [--json]       restore a version, verified
  ls [NAME] [--json]                                          names and versions in the namespace
  chunk FILE [--profile P] [--threads N] [--hash H] [--format text|jsonl]
  stats FILE... [--profile P] [--threads N] [--hash H] [--json]

store options: --store URL ($CUTPOINT_STORE, default http://127.0.0.1:7373), --ns NS ($CUTPOINT_NS,
default 'default'), --token T ($CUTPOINT_TOKEN), --timeout SECS ($CUTPOINT_TIMEOUT, default 60: a request
with no progress for this long is given up), --retries N ($CUTPOINT_RETRIES, default 3: safe requests
are tried again with backoff, a pull resuming where its verified bytes end; then exit 1)
`

const commands: Record<string, { flags: any; run: (v: Record<string, any>, args: string[]) => Promise<void> }> = {
  push: { flags: push.flags, run: push.run },
  pull: { flags: pull.flags, run: pull.run },
  ls: { flags: ls.flags, run: ls.run },
  chunk: { flags: chunkFlags, run: runChunk },
  stats: { flags: statsFlags, run: runStats },
}

async function main(argv: string[]): Promise<number> {
  const [cmd, ...rest] = argv
  if (!cmd || cmd === '-h' || cmd === '--help' || cmd === 'help') {
    process.stdout.write(USAGE)
    return cmd ? 0 : 2
  }
  const c = commands[cmd]
  try {
    if (!c) throw new Fail(2, `unknown command '${cmd}'\n${USAGE}`)
    let parsed: { values: Record<string, any>; positionals: string[] }
    try {
      parsed = parseArgs({ args: rest, options: c.flags, allowPositionals: true, strict: true }) as any
    } catch (e: any) {
      throw new Fail(2, e?.message ?? String(e))
    }
    await init()
    await c.run(parsed.values, parsed.positionals)
    return 0
  } catch (e) {
    const f = failOf(e)
    process.stderr.write(`cutpoint-js: ${f.message}\n`)
    return f.code
  }
}

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code
  // Deno keeps running while workers are open; everything is closed by now.
  if ((globalThis as any).Deno) process.exit(code)
})
