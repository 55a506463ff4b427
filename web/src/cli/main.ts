#!/usr/bin/env node
// `cutpoint-js`: the library's command line for Node (`bin/cutpoint-js` or `npx --no-install
// cutpoint-js` in the clone after `npm run setup`) and Deno (`deno run -A web/dist/web/src/cli/main.js`). Subcommands `push`, `pull`, `ls`, `chunk`,
// `stats`, with the native `cutpoint`'s flags and `--json` fields where they overlap, a progress
// bar on a terminal, and its exit codes: 0 success; 1 an input could not be read or written, or
// a store request failed; 2 bad usage or options; 3 restored data did not verify.
import process from 'node:process'
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'
import { init } from '../runtime.js'
import { Fail, failOf } from './common.js'
import * as push from './push.js'
import * as pull from './pull.js'
import * as ls from './ls.js'
import { chunkFlags, runChunk, runStats, statsFlags } from './chunk.js'

const SYNOPSES: Record<string, string> = {
  push: `  push FILE... [--name N] [--rapid CRITERION] [--profile P] [--threads N] [--hash blake3|sha256]
               [--pack-size 8m] [--uploads 2] [--compression auto|off|max] [--json]
                                                            push files (or - with --name): only novel chunks travel
`,
  pull: `  pull NAME [-o OUT|-] [--version V] [--force] [--json]       restore a version, verified
`,
  ls: `  ls [NAME] [--json]                                          names and versions in the namespace
`,
  chunk: `  chunk FILE [--profile P] [--threads N] [--hash H] [--format text|jsonl]
                                                              print the chunks (offset, length, fingerprint)
`,
  stats: `  stats FILE... [--profile P] [--threads N] [--hash H] [--json]
                                                              chunks, sizes, dedup across the files, throughput
`,
}

const STORE_OPTIONS = `store options: --store URL ($CUTPOINT_STORE, default http://127.0.0.1:7373), --ns NS ($CUTPOINT_NS,
default 'default'), --token T ($CUTPOINT_TOKEN), --timeout SECS ($CUTPOINT_TIMEOUT, default 60: a request
with no progress for this long is given up), --retries N ($CUTPOINT_RETRIES, default 3: safe requests
are tried again with backoff, a pull resuming where its verified bytes end; then exit 1)
`

const USAGE = `usage: cutpoint-js <command> [options]     (cutpoint-js --version; cutpoint-js <command> --help)

${Object.values(SYNOPSES).join('')}
${STORE_OPTIONS}`

/** One command's help. */
function usageOf(cmd: string): string {
  const store = cmd === 'push' || cmd === 'pull' || cmd === 'ls'
  return `usage: cutpoint-js ${SYNOPSES[cmd].trimStart()}${store ? `\n${STORE_OPTIONS}` : ''}`
}

/** This package's version (web/package.json, four levels above dist/web/src/cli/main.js). */
function version(): string {
  try {
    return JSON.parse(readFileSync(new URL('../../../../package.json', import.meta.url), 'utf8')).version
  } catch {
    return 'unknown'
  }
}

/**
 * A closed pipe downstream (`cutpoint-js chunk FILE | head`) ends the command quietly, as the
 * native CLI does: it is not an error of ours.
 */
function quietOnClosedPipe() {
  for (const s of [process.stdout, process.stderr]) {
    s.on('error', (e: any) => {
      if (e?.code === 'EPIPE') process.exit(process.exitCode ?? 0)
      throw e
    })
  }
}

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
    if (cmd === 'help' && rest[0] && commands[rest[0]]) process.stdout.write(usageOf(rest[0]))
    else process.stdout.write(USAGE)
    return cmd ? 0 : 2
  }
  if (cmd === '--version' || cmd === '-V') {
    process.stdout.write(`cutpoint-js ${version()}\n`)
    return 0
  }
  const c = commands[cmd]
  try {
    if (!c) throw new Fail(2, `unknown command '${cmd}'\n${USAGE}`)
    let parsed: { values: Record<string, any>; positionals: string[] }
    try {
      parsed = parseArgs({ args: rest, options: { ...c.flags, help: { type: 'boolean', short: 'h' } }, allowPositionals: true, strict: true }) as any
    } catch (e: any) {
      throw new Fail(2, `${e?.message ?? String(e)}\n${usageOf(cmd)}`)
    }
    if (parsed.values.help) {
      process.stdout.write(usageOf(cmd))
      return 0
    }
    delete parsed.values.help
    await init()
    await c.run(parsed.values, parsed.positionals)
    return 0
  } catch (e) {
    const f = failOf(e)
    process.stderr.write(`cutpoint-js: ${f.message}\n`)
    return f.code
  }
}

quietOnClosedPipe()
main(process.argv.slice(2)).then((code) => {
  process.exitCode = code
  // Deno keeps running while workers are open; everything is closed by now.
  if ((globalThis as any).Deno) process.exit(code)
})
