;; A plugin whose every call dirties what it can: a mutable global, a byte
;; of the memory its initialization wrote, a byte it did not, and a page it
;; grows the memory by. Its step handler answers what it found before it
;; dirtied them, "g=7 m=7 u=0 n=1 z=0": the global and the byte as
;; _initialize left them (7), the untouched byte zero, the memory one page,
;; and the grown page zero. A call that sees a trace of an earlier one
;; answers an 8 or a 2 somewhere. _initialize prints "constructed" to
;; stdout, which every call's log must show.
;;
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (global $g (mut i32) (i32.const 0))
  (data (i32.const 0) "{\"output\":\"g=? m=? u=? n=? z=?\"}")
  (data (i32.const 64) "constructed\n")
  (data (i32.const 80) "\40\00\00\00\0c\00\00\00") ;; an iovec: 12 bytes at 64

  (func (export "_initialize")
    (global.set $g (i32.const 7))
    (i32.store8 (i32.const 1000) (i32.const 7))
    (drop (call $fd_write (i32.const 1) (i32.const 80) (i32.const 1) (i32.const 96))))

  (func (export "agentrt_abi_version") (result i32) (i32.const 1))

  (func $digit (param $at i32) (param $v i32)
    (i32.store8 (local.get $at) (i32.add (i32.const 48) (local.get $v))))

  (func (export "agentrt_on_step") (result i32)
    (call $digit (i32.const 13) (global.get $g))
    (call $digit (i32.const 17) (i32.load8_u (i32.const 1000)))
    (call $digit (i32.const 21) (i32.load8_u (i32.const 30000)))
    (call $digit (i32.const 25) (memory.size))
    (drop (memory.grow (i32.const 1)))
    (call $digit (i32.const 29) (i32.load8_u (i32.const 65636)))
    (drop (call $set_result (i32.const 0) (i32.const 32)))
    ;; Dirty everything for the next call to find, were it not fresh.
    (global.set $g (i32.const 8))
    (i32.store8 (i32.const 1000) (i32.const 8))
    (i32.store8 (i32.const 30000) (i32.const 8))
    (i32.store8 (i32.const 65636) (i32.const 8))
    (i32.const 0)))
