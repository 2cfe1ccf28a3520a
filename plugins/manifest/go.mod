module github.com/agentrt/agentrt/plugins/manifest

go 1.26.0

require (
	github.com/agentrt/agentrt/plugins v0.0.0-00010101000000-000000000000
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.3
)

require golang.org/x/text v0.14.0 // indirect

// The ABI package (destinations) is the kit's module, in this checkout.
replace github.com/agentrt/agentrt/plugins => ../
