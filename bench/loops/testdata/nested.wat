;; A step handler with two loops, one inside the other: the outer turns 3
;; times and the inner 4 times for each of those, 12 in all. It answers
;; {"output":"ok"}. Built by the test with wat2wasm.
(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"output\":\"ok\"}")
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32)
    (local $i i32) (local $j i32)
    (local.set $i (i32.const 3))
    (loop $outer
      (local.set $j (i32.const 4))
      (loop $inner
        (local.set $j (i32.sub (local.get $j) (i32.const 1)))
        (br_if $inner (local.get $j)))
      (local.set $i (i32.sub (local.get $i) (i32.const 1)))
      (br_if $outer (local.get $i)))
    (drop (call $set_result (i32.const 16) (i32.const 15)))
    (i32.const 0)))
