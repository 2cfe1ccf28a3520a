package httpapi

import (
	_ "embed"
	"net/http"
	"strconv"

	"github.com/julienschmidt/httprouter"

	"github.com/agentrt/agentrt/protocol"
)

// OpenAPI is the specification the server serves at /ap/v1/openapi.json
// (and under each /agents/NAME): the Agent Protocol's openapi.yml as JSON,
// with everything agentrt adds marked "x-agentrt-addition": true. It is
// the file openapi.json beside this one, held to the routes the server
// registers by openapi_test.go: every route is in it, every path in it is
// served.
//
//go:embed openapi.json
var OpenAPI []byte

// handleOpenAPI serves GET /ap/v1/openapi.json.
func (s *Server) handleOpenAPI(w http.ResponseWriter, r *http.Request, _ httprouter.Params, _ *protocol.Agent) error {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(OpenAPI)))
	paced := s.answerWriter(w)
	defer paced.finish()
	paced.WriteHeader(http.StatusOK)
	paced.Write(OpenAPI)
	return nil
}
