package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/gin-gonic/gin"

	"svc/errcode"
	"svc/registry"
	"svc/runner/access"
)

// An agent's access settings (CONTRACT §8): the OpenID provider its users sign in with on the
// agent's host, the allow rules and the collaborators. The API validates the document with
// access.ParseSettings, the decoder the runtime uses, and stores it as it was sent; each runtime
// of the agent reads it again within seconds, so a change needs no redeploy.

// getAccess: GET /api/agents/{id}/access. 404 when the agent has no access settings.
func (a *API) getAccess(c *gin.Context) error {
	doc, _, err := a.deps.Stores.Access.Get(c.Request.Context(), agentOf(c).ID)
	if errors.Is(err, registry.ErrNoAccessSettings) {
		return Errorf(errcode.NotFound, "the agent has no access settings: set them with PUT /api/agents/{id}/access")
	}
	if err != nil {
		return err
	}
	c.Data(http.StatusOK, "application/json; charset=utf-8", doc)
	return nil
}

// putAccess: PUT /api/agents/{id}/access. The body is decoded strictly by access.ParseSettings;
// a bad document is INVALID_REQUEST naming the first wrong field (the message lists them all).
func (a *API) putAccess(c *gin.Context) error {
	// 1. Parse: a JSON body, read whole (bounded by the body limit).
	data, err := readJSONBody(c, "the access settings as a JSON object")
	if err != nil {
		return err
	}
	// 2. Validate with the runtime's own decoder.
	settings, err := access.ParseSettings(data)
	if err != nil {
		return accessSettingsError(err)
	}
	// 3. Store the document as sent (compacted), answer the normalized settings.
	doc, err := compactJSON(data)
	if err != nil {
		return Errorf(errcode.InvalidRequest, "the request body is not valid JSON")
	}
	if err := a.deps.Stores.Access.Put(c.Request.Context(), agentOf(c).ID, doc); err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, settings)
}

// accessSettingsError is the INVALID_REQUEST of a refused access settings document: the field
// of the first *access.FieldError, with every problem in the message.
func accessSettingsError(err error) error {
	msg := strings.ReplaceAll(strings.TrimPrefix(err.Error(), "access settings: "), "\n", "; ")
	var fe *access.FieldError
	if errors.As(err, &fe) {
		return &Error{Code: errcode.InvalidRequest, Field: fe.Field, Message: msg}
	}
	return Errorf(errcode.InvalidRequest, "the access settings are not a valid JSON object: %s", msg)
}

// compactJSON is data without insignificant space.
func compactJSON(data []byte) (json.RawMessage, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, data); err != nil {
		return nil, fmt.Errorf("compact JSON: %w", err)
	}
	return buf.Bytes(), nil
}
