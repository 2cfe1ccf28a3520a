;; A plugin without the required step handler: refused at load.
(module
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1)))
