// The bandwidth limits in WebAssembly: a tiny module with `copy` (bulk-memory memory.copy) and
// `read` (a v128.load + xor loop, two accumulators), compiled from this text with binaryen
// (npm `binaryen`, already a devDependency for wasm-opt) at bench time; never committed.
import binaryen from 'binaryen'

const text = `(module
 (memory (export "mem") 1 65536)
 (func (export "copy") (param i32 i32 i32) (memory.copy (local.get 0) (local.get 1) (local.get 2)))
 (func (export "read") (param $p i32) (param $n i32) (result i64) (local $e i32) (local $a v128) (local $b v128)
   (local.set $e (i32.add (local.get $p) (local.get $n)))
   (block $out (loop $l
     (br_if $out (i32.ge_u (local.get $p) (local.get $e)))
     (local.set $a (v128.xor (local.get $a) (v128.load (local.get $p))))
     (local.set $b (v128.xor (local.get $b) (v128.load offset=16 (local.get $p))))
     (local.set $p (i32.add (local.get $p) (i32.const 32)))
     (br $l)))
   (i64x2.extract_lane 0 (v128.xor (local.get $a) (local.get $b)))))`

/** The module's bytes. */
export function limitsWasm() {
  const m = binaryen.parseText(text)
  m.setFeatures(binaryen.Features.All)
  if (!m.validate()) throw new Error('limits module does not validate')
  m.optimize()
  const bin = m.emitBinary()
  m.dispose()
  return bin
}
