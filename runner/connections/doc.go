// Package connections runs the connection tool "request" (CONTRACT §7): HTTP calls from the
// model to the APIs an agent declares under svc/connections, under the endpoint rules of their
// policy.json and access.json.
package connections
