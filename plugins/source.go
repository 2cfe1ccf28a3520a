// Package plugins holds the kit's own source: the Go/TinyGo kit (go/), the
// ABI package (abi/) and the Rust crate (rust/), so that the agentrt binary
// carries the kit it was built with and "agentrt new" writes it into a
// project, which then builds from the binary alone, offline. Plugins do not
// import this package; the agentrt command does.
//
// The kit embeds itself, rather than the agentrt command embedding a
// generated copy of it, because go:embed cannot reach into another module:
// here the embedded files are the kit's own, at the version of the kit the
// agentrt binary is built with (the one its host code shares the ABI
// package with), whether it is built in a checkout (which replaces this
// module with plugins/) or by "go install" from module zips. No copy can go
// stale and no generation step has to run first.
package plugins

import "embed"

// Source is the kit's source: every file a plugin project needs, laid
// out as in this module, and the Go tests (which go:embed cannot leave
// out, and "agentrt new" does not write). It adds about 500 KB to a binary
// that imports it (agentrt); a plugin, which imports go/ or abi/, links
// none of it.
//
// A file added to one of these directories is embedded with it; a new
// directory must be added here: TestSourceIsTheWholeKit fails until it is.
//
//go:embed go.mod abi/*.go abi/secretform/*.go go/*.go go/agenttest/*.go go/http/*.go go/internal/harness/*.go
//go:embed rust/Cargo.toml rust/src
var Source embed.FS
