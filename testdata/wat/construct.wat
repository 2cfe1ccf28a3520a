;; A plugin that calls host functions while it is constructed: from its
;; start function and from _initialize, before any handler runs. Its step
;; handler answers what each of those ten calls returned, one character
;; each: "6" for -6 (not allowed), "0" for 0, "Y" for a length (input).
;; Every call must have been refused: a call's construction must reach
;; nothing, whatever the handler call that follows.
;;
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "input" (func $input (param i32 i32) (result i32)))
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (import "agentrt_v1" "log" (func $log (param i32 i32 i32) (result i32)))
  (import "agentrt_v1" "workspace_write" (func $workspace_write (param i32 i32 i32 i32) (result i32)))
  (import "agentrt_v1" "artifact_create" (func $artifact_create (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (data (i32.const 0) "{\"output\":\"constructed\"}")
  (data (i32.const 64) "init.txt")
  (data (i32.const 96) "{\"file_name\":\"init.txt\"}")
  (data (i32.const 256) "{\"output\":\"??????????\"}")

  ;; $mark writes what a host call returned at $at.
  (func $mark (param $at i32) (param $code i32)
    (i32.store8 (local.get $at)
      (if (result i32) (i32.lt_s (local.get $code) (i32.const 0))
        (then (i32.sub (i32.const 48) (local.get $code)))
        (else (if (result i32) (i32.eqz (local.get $code)) (then (i32.const 48)) (else (i32.const 89)))))))

  (func $attack (param $at i32)
    (call $mark (local.get $at) (call $set_result (i32.const 0) (i32.const 24)))
    (call $mark (i32.add (local.get $at) (i32.const 1)) (call $log (i32.const 1) (i32.const 0) (i32.const 24)))
    (call $mark (i32.add (local.get $at) (i32.const 2))
      (call $workspace_write (i32.const 64) (i32.const 8) (i32.const 0) (i32.const 24)))
    (call $mark (i32.add (local.get $at) (i32.const 3))
      (call $artifact_create (i32.const 96) (i32.const 24) (i32.const 0) (i32.const 24) (i32.const 0)))
    (call $mark (i32.add (local.get $at) (i32.const 4)) (call $input (i32.const 1024) (i32.const 1024))))

  (func $start (call $attack (i32.const 267)))
  (start $start)
  (func (export "_initialize") (call $attack (i32.const 272)))

  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32)
    (drop (call $set_result (i32.const 256) (i32.const 23)))
    (i32.const 0)))
