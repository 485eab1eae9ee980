package api

import (
	"bytes"
	"io"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/monitor"
)

// ManagedBody names the anthropic-sdk-go param type that defines a Managed
// Agents body; those bodies are read field by field (obj) and refuse what
// no parser read.
type ManagedBody string

// RawBody is a body taken as bytes (a file's content).
type RawBody struct{}

// requestBodies is every route that reads a request body, and what it
// reads: the Go type decodeJSON decodes into, a ManagedBody or a RawBody.
// Every other route but GET refuses a body (noBody), so nothing a client
// sends is silently ignored; and a test walks every field of every body
// here and fails on one that neither works nor is refused.
var requestBodies = map[string]any{
	"POST /v1/tenants":                               createTenantRequest{},
	"POST /v1/keys":                                  createKeyRequest{},
	"POST /v1/sandboxes":                             createSandboxRequest{},
	"POST /v1/sandboxes/{id}/exec":                   execRequest{},
	"PUT /v1/sandboxes/{id}/files/{path...}":         RawBody{},
	"POST /v1/sandboxes/{id}/events":                 monitor.EventInput{}, // or {"events": [EventInput…]}
	"POST /v1/objects/definitions":                   classDefJSON{},
	"PUT /v1/objects/definitions/{class}/bundle":     RawBody{}, // a tar(.gz) of the app
	"POST /v1/objects/{class}/{id}/call":             callObjectRequest{},
	"POST /v1/objects/{class}/{id}/alarms":           setAlarmRequest{},
	"POST /v1/files":                                 RawBody{}, // multipart: file, expires_in_seconds
	"POST /v1/tasks":                                 createTaskRequest{},
	"POST /v1/tickets":                               createTicketRequest{},
	"POST /v1/tickets/{id}/results":                  submitResultRequest{},
	"POST /v1/webhooks":                              createWebhookRequest{},
	"POST /v1/environments/{id}/work/{work_id}":      workUpdateRequest{},
	"POST /v1/environments/{id}/work/{work_id}/stop": workStopRequest{},
	"POST /v1/agents":                                ManagedBody("BetaAgentNewParams"),
	"POST /v1/agents/{id}":                           ManagedBody("BetaAgentUpdateParams"),
	"POST /v1/environments":                          ManagedBody("BetaEnvironmentNewParams"),
	"POST /v1/environments/{id}":                     ManagedBody("BetaEnvironmentUpdateParams"),
	"POST /v1/deployments":                           ManagedBody("BetaDeploymentNewParams"),
	"POST /v1/deployments/{id}":                      ManagedBody("BetaDeploymentUpdateParams"),
	"POST /v1/sessions":                              ManagedBody("BetaSessionNewParams"),
	"POST /v1/sessions/{id}":                         ManagedBody("BetaSessionUpdateParams"),
	"POST /v1/sessions/{id}/events":                  ManagedBody("BetaSessionEventSendParams"),
	"POST /v1/sessions/{id}/fork":                    eventRef{},
	"POST /v1/sessions/{id}/rewind":                  eventRef{},
	"POST /v1/sessions/{id}/resources":               ManagedBody("BetaSessionResourceAddParams"),
	"POST /v1/sessions/{id}/resources/{rid}":         ManagedBody("BetaSessionResourceUpdateParams"),
	"POST /v1/vaults":                                ManagedBody("BetaVaultNewParams"),
	"POST /v1/vaults/{id}":                           ManagedBody("BetaVaultUpdateParams"),
	"POST /v1/vaults/{id}/credentials":               ManagedBody("BetaVaultCredentialNewParams"),
	"POST /v1/vaults/{id}/credentials/{cid}":         ManagedBody("BetaVaultCredentialUpdateParams"),
	"POST /v1/memory_stores":                         ManagedBody("BetaMemoryStoreNewParams"),
	"POST /v1/memory_stores/{id}":                    ManagedBody("BetaMemoryStoreUpdateParams"),
	"POST /v1/memory_stores/{id}/memories":           ManagedBody("BetaMemoryStoreMemoryNewParams"),
	"POST /v1/memory_stores/{id}/memories/{mid}":     ManagedBody("BetaMemoryStoreMemoryUpdateParams"),
	"POST /v1/skills":                                RawBody{}, // multipart (BetaSkillNewParams): managed_skills_test.go
	"POST /v1/skills/{id}/versions":                  RawBody{}, // multipart (BetaSkillVersionNewParams)
}

// RequestBodies returns a copy of requestBodies, keyed by route pattern.
func RequestBodies() map[string]any {
	out := make(map[string]any, len(requestBodies))
	for k, v := range requestBodies {
		out[k] = v
	}
	return out
}

// takesBody reports whether the route reads a body (GET and HEAD never do).
func takesBody(pattern string) bool {
	_, ok := requestBodies[pattern]
	return ok
}

// noBody wraps a handler of a route that takes no body: an empty body or
// an empty JSON object (what SDKs send for a call without parameters) is
// fine, anything else is refused instead of ignored.
func (s *Server) noBody(pattern string, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if e := asTooLarge(err); e != nil {
			s.writeError(w, r, e)
			return
		}
		if t := bytes.TrimSpace(b); len(t) > 0 && !bytes.Equal(bytes.Join(bytes.Fields(t), nil), []byte("{}")) {
			s.writeError(w, r, BadRequest("%s takes no request body; got %d bytes", strings.TrimSpace(pattern), len(b)))
			return
		}
		r.Body = io.NopCloser(bytes.NewReader(nil))
		h(w, r)
	}
}
