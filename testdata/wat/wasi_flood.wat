;; A plugin that makes WASI calls whose cost grows with a number it chooses,
;; when the step input holds a marker ("!w", "!v", ...); any other step gets
;; {"output":"ok"}. An attack's output is "errno N", N what the call
;; returned (a call stopped by the call timeout returns nothing).
;;
;;   !w fd_write to stdout of 1024 iovecs, each naming the same 100 MiB of
;;      newlines (100 GiB in all)
;;   !v fd_write of 1025 empty iovecs        !z fd_write of 16 M empty iovecs
;;   !i fd_read of stdin into 16 M iovecs
;;   !r random_get of 960 MiB (under a memory limit of 1 GiB)
;;   !p path_filestat_get of a path of 200 MiB (in memory never touched)
;;
;; Built by the tests with wat2wasm.
(module
  (import "agentrt_v1" "input" (func $input (param i32 i32) (result i32)))
  (import "agentrt_v1" "set_result" (func $set_result (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_write" (func $fd_write (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "fd_read" (func $fd_read (param i32 i32 i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "random_get" (func $random_get (param i32 i32) (result i32)))
  (import "wasi_snapshot_preview1" "path_filestat_get"
    (func $path_filestat_get (param i32 i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 2)
  (data (i32.const 16) "{\"output\":\"ok\"}")
  (data (i32.const 48) "{\"output\":\"errno ")

  (func (export "agentrt_abi_version") (result i32) (i32.const 1))

  ;; $marker returns the byte after the first '!' of the input, or 0.
  (func $marker (result i32)
    (local $i i32) (local $end i32)
    (local.set $end (i32.add (i32.const 1024)
      (call $input (i32.const 1024) (i32.const 60000))))
    (local.set $i (i32.const 1024))
    (block $done
      (loop $scan
        (br_if $done (i32.ge_u (local.get $i) (local.get $end)))
        (if (i32.eq (i32.load8_u (local.get $i)) (i32.const 33)) ;; '!'
          (then (return (i32.load8_u (i32.add (local.get $i) (i32.const 1))))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $scan)))
    (i32.const 0))

  ;; $iovecs writes n iovecs {buf, len} at 0x10000.
  (func $iovecs (param $n i32) (param $buf i32) (param $len i32)
    (local $i i32)
    (block $done
      (loop $next
        (br_if $done (i32.ge_u (local.get $i) (local.get $n)))
        (i32.store (i32.add (i32.const 0x10000) (i32.shl (local.get $i) (i32.const 3))) (local.get $buf))
        (i32.store (i32.add (i32.const 0x10004) (i32.shl (local.get $i) (i32.const 3))) (local.get $len))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $next))))

  ;; $errno sets the result {"output":"errno N"} and returns 0.
  (func $errno (param $e i32) (result i32)
    (local $p i32)
    (local.set $p (i32.const 65)) ;; after "{\"output\":\"errno "
    (if (i32.ge_u (local.get $e) (i32.const 10))
      (then
        (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.div_u (local.get $e) (i32.const 10))))
        (local.set $p (i32.add (local.get $p) (i32.const 1)))))
    (i32.store8 (local.get $p) (i32.add (i32.const 48) (i32.rem_u (local.get $e) (i32.const 10))))
    (i32.store16 (i32.add (local.get $p) (i32.const 1)) (i32.const 0x7d22)) ;; "}
    (drop (call $set_result (i32.const 48) (i32.sub (i32.add (local.get $p) (i32.const 3)) (i32.const 48))))
    (i32.const 0))

  (func (export "agentrt_on_step") (result i32)
    (local $m i32)
    (local.set $m (call $marker))
    (if (i32.eq (local.get $m) (i32.const 119)) ;; 'w'
      (then
        (drop (memory.grow (i32.const 1900))) ;; 16 MiB + 100 MiB fit
        (memory.fill (i32.const 0x1000000) (i32.const 10) (i32.const 0x6400000))
        (call $iovecs (i32.const 1024) (i32.const 0x1000000) (i32.const 0x6400000))
        (return (call $errno
          (call $fd_write (i32.const 1) (i32.const 0x10000) (i32.const 1024) (i32.const 8))))))
    (if (i32.eq (local.get $m) (i32.const 118)) ;; 'v'
      (then
        (return (call $errno
          (call $fd_write (i32.const 1) (i32.const 0x10000) (i32.const 1025) (i32.const 8))))))
    (if (i32.eq (local.get $m) (i32.const 122)) ;; 'z'
      (then
        (drop (memory.grow (i32.const 2100))) ;; 16 M iovecs of 8 bytes fit
        (return (call $errno
          (call $fd_write (i32.const 1) (i32.const 0x10000) (i32.const 0x1000000) (i32.const 8))))))
    (if (i32.eq (local.get $m) (i32.const 105)) ;; 'i'
      (then
        (drop (memory.grow (i32.const 2100)))
        (return (call $errno
          (call $fd_read (i32.const 0) (i32.const 0x10000) (i32.const 0x1000000) (i32.const 8))))))
    (if (i32.eq (local.get $m) (i32.const 114)) ;; 'r'
      (then
        (drop (memory.grow (i32.const 15400))) ;; 960 MiB fit
        (return (call $errno
          (call $random_get (i32.const 0x10000) (i32.const 0x3c000000))))))
    (if (i32.eq (local.get $m) (i32.const 112)) ;; 'p'
      (then
        (drop (memory.grow (i32.const 3300))) ;; 200 MiB fit
        (return (call $errno
          (call $path_filestat_get (i32.const 3) (i32.const 0) (i32.const 0x10000) (i32.const 0xc800000) (i32.const 256))))))
    (drop (call $set_result (i32.const 16) (i32.const 15)))
    (i32.const 0)))
