;; A plugin built for an ABI version this host does not serve: refused at load.
(module
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 2))
  (func (export "agentrt_on_step") (result i32) (i32.const 0)))
