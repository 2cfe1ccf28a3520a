;; The smallest valid plugin: every step's result is {"output":"ok","is_last":true}.
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 16) "{\"output\":\"ok\",\"is_last\":true}")
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32)
    (drop (call $set_result (i32.const 16) (i32.const 30)))
    (i32.const 0)))
