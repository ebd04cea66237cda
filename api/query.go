package api

import (
	"slices"
	"strings"

	"github.com/gin-gonic/gin"
)

// QueryParam is one query parameter a route takes (Route.Query).
type QueryParam struct {
	// Name is the parameter's name, matched exactly ("userId").
	Name string
	// Doc is its OpenAPI description.
	Doc string
	// Type is its JSON Schema type in OpenAPI ("integer"); "string" when empty.
	Type string
}

// maxQueryLen bounds a declared query parameter's value: a metadata value is at most 1,024
// characters, and a cursor is far shorter.
const maxQueryLen = 1024

// checkQuery refuses, with 400 naming it, a query parameter of the request that params does not
// declare, one given more than once and one longer than maxQueryLen characters: a misspelt
// filter must never silently list everything. Each route with a Route.Query runs it before its
// handler, so the declared set is both the check and the document.
func checkQuery(c *gin.Context, params []QueryParam) error {
	for k, vs := range c.Request.URL.Query() {
		if !slices.ContainsFunc(params, func(p QueryParam) bool { return p.Name == k }) {
			names := make([]string, len(params))
			for i, p := range params {
				names[i] = p.Name
			}
			return InvalidField(k, "is not a parameter of this route; use %s", strings.Join(names, ", "))
		}
		if len(vs) > 1 {
			return InvalidField(k, "is given %d times; give it once", len(vs))
		}
		if len(vs[0]) > maxQueryLen {
			return InvalidField(k, "is %d characters long; at most %d", len(vs[0]), maxQueryLen)
		}
	}
	return nil
}
