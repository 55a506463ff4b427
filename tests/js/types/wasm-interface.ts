// Compiled (not run) by tests/js/wasm-types.test.ts: fails when the hand-written interface of the
// wasm module in common/wasm.ts drifts from the .d.ts that wasm-bindgen generates from
// wasm/src/lib.rs (a method renamed, removed, or given other parameter or result types).
import type { WasmModule } from '../../../common/wasm.js'
import type * as Plain from '../../../wasm/pkg-plain/cutpoint_wasm.js'
import type * as Simd128 from '../../../wasm/pkg-simd128/cutpoint_wasm.js'

declare const plain: typeof Plain
declare const simd128: typeof Simd128

// Every export the library uses exists in each generated module with compatible types.
export const plainModule: WasmModule = plain
export const simd128Module: WasmModule = simd128

// The check bites: an interface that says otherwise does not compile.
// @ts-expect-error buildId returns a string
export const drifted: { buildId(): number } = plain
// @ts-expect-error no such export
export const missing: { noSuchExport(): void } = plain
