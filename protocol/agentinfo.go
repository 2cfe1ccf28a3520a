package protocol

import "time"

// AgentInfo describes an agent served: its build, the limits it runs
// under, what it may reach, and whether it is ready. GET /agents and GET
// /agents/NAME serve it as it is marshalled here; any other front end
// describes agents with it too, so that they agree.
type AgentInfo struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Description string `json:"description"`
	// File is the plugin's file.
	File string `json:"file"`
	// SHA256 is the sha256 of the build being served, in hex; "" when none
	// is.
	SHA256     string `json:"sha256"`
	ABIVersion int    `json:"abi_version"`
	// Handlers are the handlers the build defines: "task", "step",
	// "artifact", "download".
	Handlers []string `json:"handlers"`
	// Limits are the limits the agent runs under, named as the manifest
	// names them.
	Limits map[string]any `json:"limits"`
	// ArtifactSchemes are the URI schemes the build serving accepts and may
	// produce; absent when none serves.
	ArtifactSchemes *ArtifactSchemes `json:"artifact_schemes,omitempty"`
	// HTTP is what the build serving may reach with outbound HTTP; absent
	// when none serves.
	HTTP *OutboundHTTP `json:"http,omitempty"`
	// State is "ready" (a build serves), "failed" (none could be loaded)
	// or "removed" (its plugin is gone; its tasks stay readable).
	State string `json:"state"`
	// Error is why the last build failed to load: the agent's only one,
	// or a newer one while the previous build keeps serving.
	Error    string     `json:"error,omitempty"`
	LoadedAt *time.Time `json:"loaded_at"`
	// Tasks is how many tasks the agent has.
	Tasks int `json:"tasks"`
	// Default is whether the agent is also served at the root.
	Default bool `json:"default"`
	// Start is how each call's instance of the build serving starts; nil
	// while none serves.
	Start *StartInfo `json:"start,omitempty"`
}

// StartInfo is how a build's instances start: "snapshot", from a snapshot
// of the state its plugin's initialization left, taken at load; or
// "initialization", running the initialization, for the reason Why.
type StartInfo struct {
	From string `json:"from"`
	Why  string `json:"why,omitempty"`
	// MemoryBytes is the size of the snapshot's memory.
	MemoryBytes uint64 `json:"memory_bytes,omitempty"`
	// Reseeded names the random generators re-seeded in every instance.
	Reseeded []string `json:"reseeded,omitempty"`
	// Cached is whether the snapshot came from the cache on disk.
	Cached bool `json:"cached,omitempty"`
}

// OutboundHTTP is what an agent may reach with outbound HTTP: the
// destinations its manifest asks for (null: it has no capabilities.http),
// those the operator granted it, the hosts whose private addresses it
// may reach, and the secrets the host holds for it, by name and
// destination, never by value.
type OutboundHTTP struct {
	Asked        []string     `json:"asked"`
	Granted      []string     `json:"granted"`
	PrivateHosts []string     `json:"private_hosts"`
	Secrets      []HeldSecret `json:"secrets"`
}

// HeldSecret is a secret the host holds for an agent, and where it may be
// sent.
type HeldSecret struct {
	Name         string   `json:"name"`
	Destinations []string `json:"destinations"`
}
