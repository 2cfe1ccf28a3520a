;; A plugin that attacks the host at the WebAssembly level when the step
;; input holds a marker ("!u", "!s", ...); any other step gets
;; {"output":"ok"}, so that other tasks can be served alongside an attack.
;;
;;   !u unreachable           !s unbounded recursion (stack overflow)
;;   !g grow memory to the limit, touching all of it, then trap
;;   !l loop forever          !o store far out of bounds
;;   !d divide by zero        !x proc_exit(7)
;;   !m loop forever writing memory
;;   !t call a function that calls itself twice, 60 deep: no loop, 2^60 calls
;;
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "input" (func $input (param i32 i32) (result i32)))
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "proc_exit" (func $proc_exit (param i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "{\"output\":\"ok\"}")

  (func (export "agentrt_abi_version") (result i32) (i32.const 1))

  ;; $marker returns the byte after the first '!' of the input, or 0.
  (func $marker (result i32)
    (local $i i32) (local $end i32)
    (local.set $end (i32.add (i32.const 1024)
      (call $input (i32.const 1024) (i32.const 64000))))
    (local.set $i (i32.const 1024))
    (block $done
      (loop $scan
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (if (i32.eq (i32.load8_u (local.get $i)) (i32.const 33)) ;; '!'
          (then (return (i32.load8_u (i32.add (local.get $i) (i32.const 1))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const 0))

  (func $recurse (param $n i32) (result i32)
    (i32.add (call $recurse (i32.add (local.get $n) (i32.const 1))) (i32.const 1)))

  (func $tree (param $n i32) (result i32)
    (if (result i32) (i32.eqz (local.get $n))
      (then (i32.const 1))
      (else (i32.add (call $tree (i32.sub (local.get $n) (i32.const 1)))
                     (call $tree (i32.sub (local.get $n) (i32.const 1)))))))

  (func (export "agentrt_on_step") (result i32)
    (local $m i32) (local $p i32)
    (local.set $m (call $marker))
    (if (i32.eq (local.get $m) (i32.const 117)) (then unreachable))              ;; u
    (if (i32.eq (local.get $m) (i32.const 115))                                   ;; s
      (then (return (call $recurse (i32.const 0)))))
    (if (i32.eq (local.get $m) (i32.const 103))                                   ;; g
      (then
        (block $full
          (loop $grow
            (local.set $p (memory.grow (i32.const 16)))
            (br_if $full (i32.eq (local.get $p) (i32.const -1)))
            ;; touch every 4 KiB of the new pages, so that they really take memory
            (local.set $p (i32.mul (local.get $p) (i32.const 65536)))
            (block $touched
              (loop $touch
                (br_if $touched (i32.ge_u (local.get $p) (i32.mul (memory.size) (i32.const 65536))))
                (i32.store (local.get $p) (i32.const 1))
                (local.set $p (i32.add (local.get $p) (i32.const 4096)))
                (br $touch)))
            (br $grow)))
        unreachable))
    (if (i32.eq (local.get $m) (i32.const 108))                                   ;; l
      (then (loop $forever (br $forever))))
    (if (i32.eq (local.get $m) (i32.const 109))                                   ;; m
      (then (loop $scribble
        (memory.fill (i32.const 4096) (local.get $p) (i32.const 60000))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))
        (br $scribble))))
    (if (i32.eq (local.get $m) (i32.const 116))                                   ;; t
      (then (return (call $tree (i32.const 60)))))
    (if (i32.eq (local.get $m) (i32.const 111))                                   ;; o
      (then (i32.store (i32.const 0x7ffffff0) (i32.const 1))))
    (if (i32.eq (local.get $m) (i32.const 100))                                   ;; d
      (then (drop (i32.div_u (i32.const 1) (i32.sub (local.get $m) (i32.const 100))))))
    (if (i32.eq (local.get $m) (i32.const 120))                                   ;; x
      (then (call $proc_exit (i32.const 7))))
    (drop (call $set_result (i32.const 16) (i32.const 15)))
    (i32.const 0)))
