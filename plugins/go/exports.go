//lint:file-ignore U1000 these functions are called by the host, through go:wasmexport

package agent

import "github.com/agentrt/agentrt/plugins/abi"

// The ABI's exports (plugins/ABI.md). The kit defines all of them and
// reports through agentrt_handlers which handlers are registered.

//go:wasmexport agentrt_abi_version
func exportABIVersion() int32 { return abi.Version }

//go:wasmexport agentrt_handlers
func exportHandlers() int32 { return handlers() }

//go:wasmexport agentrt_on_step
func exportOnStep() int32 { return onStep() }

//go:wasmexport agentrt_on_task
func exportOnTask() int32 { return onTask() }

//go:wasmexport agentrt_on_artifact
func exportOnArtifact() int32 { return onArtifact() }

//go:wasmexport agentrt_on_download
func exportOnDownload() int32 { return onDownload() }
