;; A plugin whose initialization never ends: refused at load, after the call timeout.
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $forever (br $forever)))
  (func (export "agentrt_abi_version") (result i32) (i32.const 1))
  (func (export "agentrt_on_step") (result i32) (i32.const 0)))
