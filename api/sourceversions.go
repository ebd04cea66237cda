package api

import (
	"errors"
	"io/fs"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"

	"svc/agent"
	"svc/builder"
	"svc/bundle"
	"svc/errcode"
)

type sourceFilesRequest struct {
	Files map[string]string `json:"files" doc:"the source tree: slash path to file text"`
}

type sourceVersionResponse struct {
	SourceVersionID string    `json:"sourceVersionId"`
	Digest          string    `json:"digest" doc:"sha256: of the canonical tree; the same files give the same digest"`
	Size            int64     `json:"size" doc:"bytes of the stored archive"`
	CreatedAt       time.Time `json:"createdAt"`
}

// createSourceVersion: POST /api/agents/{id}/source-versions, a tar.gz (Content-Type
// application/gzip) or JSON {files}.
func (a *API) createSourceVersion(c *gin.Context) error {
	// 1. Read the tree from whichever form the body has.
	tree, err := readSourceTree(c)
	if err != nil {
		return err
	}
	// 2. Validate, digest and store it: every problem at once, 400 INVALID_SOURCE.
	sv, err := builder.Ingest(c.Request.Context(), a.sourceVersions, agentOf(c).ID, actor(c), tree)
	switch {
	case errors.Is(err, builder.ErrUnloadable):
		return &Error{Code: errcode.InvalidSource, Message: "the source tree cannot be loaded", Cause: err}
	case err != nil:
		var se *bundle.SourceError
		if errors.As(err, &se) {
			return sourceTreeError(err)
		}
		return err
	}
	return writeJSON(c, http.StatusCreated, sourceVersionResponse{SourceVersionID: sv.ID, Digest: sv.Digest, Size: sv.Size, CreatedAt: sv.CreatedAt})
}

// readSourceTree reads the request body as a tar.gz or as JSON {files} into a tree.
func readSourceTree(c *gin.Context) (fs.FS, error) {
	mt, err := mediaType(c)
	if err != nil {
		return nil, err
	}
	switch mt {
	case "application/gzip", "application/x-gzip", "application/x-tar+gzip":
		if c.Request.Body == nil || c.Request.Body == http.NoBody {
			return nil, Errorf(errcode.InvalidRequest, "the request body is empty; send a tar.gz of the source tree")
		}
		tree, err := bundle.ReadTarGz(c.Request.Body, bundle.Limits{})
		if err != nil {
			return nil, sourceTreeError(err)
		}
		return tree, nil
	case "", "application/json":
		var req sourceFilesRequest
		if err := bindJSON(c, &req); err != nil {
			return nil, err
		}
		if len(req.Files) == 0 {
			return nil, InvalidField("files", "is required and must hold at least one file")
		}
		tree, err := bundle.FromFiles(req.Files, bundle.Limits{})
		if err != nil {
			return nil, sourceTreeError(err)
		}
		return tree, nil
	}
	return nil, Errorf(errcode.UnsupportedMediaType, "Content-Type must be application/gzip (a tar.gz of the tree) or application/json ({\"files\": {...}}), not %s", mt)
}

// sourceTreeError maps an error reading a tree: a body over the limit stays a 413, a problem with
// one path is INVALID_SOURCE naming it, and an unreadable archive is INVALID_REQUEST.
func sourceTreeError(err error) error {
	var maxBytes *http.MaxBytesError
	var se *bundle.SourceError
	switch {
	case errors.As(err, &maxBytes):
		return err
	case errors.As(err, &se):
		p := agent.Problem{File: se.Path, Message: se.Message}
		return &Error{Code: errcode.InvalidSource, Message: "the source tree has 1 problem: " + p.String(), Problems: []agent.Problem{p}, Cause: err}
	}
	return &Error{Code: errcode.InvalidRequest, Message: "the request body is not a readable tar.gz archive", Cause: err}
}
