;; A plugin importing a function the host does not provide: refused at load.
(module
  (import "env" "open_socket" (func (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0)))
