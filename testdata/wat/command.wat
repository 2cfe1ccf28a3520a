;; A command module (_start, no _initialize): refused at load.
(module
  (memory (export "memory") 1)
  (func (export "_start"))
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0)))
