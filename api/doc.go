// Package api is the platform HTTP API of svc (CONTRACT §3): tokens, agents, sources, source
// versions, API keys, secrets, deploy settings, commit statuses and runtime tokens, plus /health,
// /metrics and the OpenAPI description at /api/openapi.json.
//
// Why it is shaped this way:
//
//   - Every route is one Route value in one table (routes.go). The table is what gin serves and
//     what the OpenAPI document is generated from, and it carries the least token kind each route
//     needs (spec table 2.4), so authorization is declared, never hand-coded per handler, and a
//     test keeps the document and the router in step.
//   - Handlers are methods on *API (which holds the dependencies) with the shape parse → call the
//     domain (package registry, builder, agent) → write. They return an error; one wrapper turns
//     it into the {"error":{"code","message"}} envelope using the one catalog in errors.go.
//     Anything the catalog does not know becomes a 500 INTERNAL with a generic message and is
//     logged here, so no backend error text, token or secret reaches a client by accident.
//   - Authentication reads only pk_ automation tokens. An ak_ agent key or a runtime JWT is a
//     401 on every platform route: those credentials exist for the runtime, never for control.
//     A token bound to an agent may act on that agent only (403 otherwise), and an agent that
//     does not exist is a 404 only after the binding check, so a bound token cannot probe for
//     other agents.
//   - Request bodies are bounded (MaxBodyBytes, 413) before any handler runs and JSON is decoded
//     strictly (unknown fields and wrong types are 400s naming the field), because a platform
//     API that silently ignores a misspelt field deploys the wrong thing.
//   - Logs carry the request id, route template, status, latency and token id; never a token
//     value, a secret value or a body.
package api
