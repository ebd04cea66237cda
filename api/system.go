package api

import (
	"context"
	"net/http"
	"time"

	"svc/errcode"

	"github.com/gin-gonic/gin"
)

// healthTimeout bounds the database ping of /health.
const healthTimeout = 2 * time.Second

type healthResponse struct {
	Status string `json:"status" enum:"ok"`
}

// health: GET /health answers ok when the database answers; 503 UNAVAILABLE otherwise.
func (a *API) health(c *gin.Context) error {
	ctx, cancel := context.WithTimeout(c.Request.Context(), healthTimeout)
	defer cancel()
	if err := a.deps.Stores.Ping(ctx); err != nil {
		a.logger(ctx).WarnContext(ctx, "health check failed", "error", err.Error())
		return Errorf(errcode.Unavailable, "the database does not answer")
	}
	return writeJSON(c, http.StatusOK, healthResponse{Status: "ok"})
}

// serveMetrics: GET /metrics in the Prometheus text format.
func (a *API) serveMetrics(c *gin.Context) error {
	a.metricsHandler.ServeHTTP(c.Writer, c.Request)
	return nil
}

// serveOpenAPI: GET /api/openapi.json, generated from the registered routes.
func (a *API) serveOpenAPI(c *gin.Context) error {
	return writeJSON(c, http.StatusOK, a.OpenAPI())
}
