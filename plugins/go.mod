// The plugin kit: the ABI package (abi/) and the Go/TinyGo kit (go/), with
// its test harness (go/agenttest/). A module of its own so that a plugin
// imports it without the host's dependencies or its Go version.
module github.com/agentrt/agentrt/plugins

// The lowest Go the kit needs: //go:wasmexport came with Go 1.24.
// "make test-kit-go" builds and tests the kit with that Go.
go 1.24
