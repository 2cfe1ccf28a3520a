;; A plugin whose table declares four billion entries as its minimum: an
;; instance would take 32 GB of host heap. Refused at load.
;;
;; Built by the tests with wat2wasm.
(module
  (memory (export "memory") 1)
  (table 4000000000 funcref)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0)))
