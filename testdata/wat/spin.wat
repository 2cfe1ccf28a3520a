;; A step handler that spins a tight loop of 10 million iterations and
;; answers {"output":"ok"}: the cost of guest code under the sandbox's
;; deadline check. Built by the benchmarks with wat2wasm.
(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"output\":\"ok\"}")
  (global $sink (mut i32) (i32.const 0))
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32)
    (local $i i32)
    (local.set $i (i32.const 10000000))
    (loop $spin
      (global.set $sink (i32.add (global.get $sink) (local.get $i)))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $spin (local.get $i)))
    (drop (call $set_result (i32.const 16) (i32.const 15)))
    (i32.const 0)))
