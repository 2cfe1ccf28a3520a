;; A plugin that grows its funcref table, declared with no maximum as Go's
;; linker declares it, at every step: by 1,000 entries, then by 0xfffffff0
;; (what killed the server: 8 bytes of host heap per entry), then by 2^27.
;; It answers {"output":"YNN"}-like: Y where table.grow grew the table, N
;; where it returned -1.
;;
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (table $t 1 funcref)
  (data (i32.const 16) "{\"output\":\"???\"}")

  (func (export "agentrt_abi_version") (result i32) (i32.const 1))

  (func $grew (param $r i32) (result i32)
    (if (result i32) (i32.eq (local.get $r) (i32.const -1))
      (then (i32.const 78))     ;; N
      (else (i32.const 89))))   ;; Y

  (func (export "agentrt_on_step") (result i32)
    (i32.store8 (i32.const 27) (call $grew (table.grow $t (ref.null func) (i32.const 1000))))
    (i32.store8 (i32.const 28) (call $grew (table.grow $t (ref.null func) (i32.const 0xfffffff0))))
    (i32.store8 (i32.const 29) (call $grew (table.grow $t (ref.null func) (i32.const 0x8000000))))
    (drop (call $set_result (i32.const 16) (i32.const 16)))
    (i32.const 0)))
