package client_test

import (
	"context"
	"reflect"
	"slices"
	"testing"

	"github.com/kira-scheduler/kira/api"
	"github.com/kira-scheduler/kira/client"
)

// methods names the Client method that calls each route of the API.
var methods = map[string]string{
	"GET /v1/status":                     "Status",
	"GET /v1/jobs":                       "Jobs",
	"GET /v1/jobs/{job}":                 "Job",
	"GET /v1/jobs/{job}/definition":      "Definition", // and DefinitionYAML
	"PUT /v1/jobs/{job}":                 "PutJob",     // and PutJobConfig
	"DELETE /v1/jobs/{job}":              "DeleteJob",
	"GET /v1/jobs/{job}/executions":      "Executions",
	"GET /v1/jobs/{job}/executions/{id}": "Execution",
	"POST /v1/jobs/{job}/trigger":        "Trigger",
	"DELETE /v1/jobs/{job}/trigger/{id}": "CancelRun",
	"POST /v1/jobs/{job}/pause":          "Pause",
	"POST /v1/jobs/{job}/resume":         "Resume",
	"PUT /v1/catalog":                    "PutCatalog",
	"GET /v1/timeline":                   "Timeline",
	"GET /v1/health":                     "Health",
	"GET /v1/members":                    "Members",
}

// Every route of api.Routes() has a Client method, named in methods; a
// route added to the API without one fails here, and
// TestAnswersMatchTheServer proves each method calls its route.
func TestEveryRouteHasAMethod(t *testing.T) {
	typ := reflect.TypeFor[*client.Client]()
	routes := api.Routes()
	for _, r := range routes {
		name, ok := methods[r]
		if !ok {
			t.Errorf("route %s has no Client method: add one, and name it in methods", r)
			continue
		}
		if m, ok := typ.MethodByName(name); !ok || m.Type.NumIn() < 2 || m.Type.In(1) != reflect.TypeFor[context.Context]() {
			t.Errorf("route %s: Client has no method %s taking ctx first", r, name)
		}
	}
	for r := range methods {
		if !slices.Contains(routes, r) {
			t.Errorf("methods names %s, which the API does not serve", r)
		}
	}
}
