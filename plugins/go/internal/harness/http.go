package harness

// HTTPHost is a Host with the outbound HTTP functions (plugins/ABI.md,
// "Outbound HTTP"), over Go byte slices as Host's are.
type HTTPHost interface {
	HTTPRequest(req, body []byte) int32
	HTTPResponse(buf []byte) int32
	HTTPResponseBody(buf []byte) int32
	ArtifactFetch(id, path []byte) int32
}
