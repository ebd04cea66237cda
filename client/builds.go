package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
)

// BuildStatus returns a build's status and steps.
func (c *Client) BuildStatus(ctx context.Context, buildID string) (Build, error) {
	var b Build
	if err := c.do(ctx, http.MethodGet, c.endpoint("/api/builds/%s/status", buildID), nil, &b); err != nil {
		return Build{}, fmt.Errorf("get build %s: %w", buildID, err)
	}
	return b, nil
}

// Logs copies the build's log so far to w.
func (c *Client) Logs(ctx context.Context, buildID string, w io.Writer) error {
	return c.copyLogs(ctx, c.endpoint("/api/builds/%s/logs", buildID), buildID, w)
}

// FollowLogs copies the build's log to w as it is written and returns once the build has ended
// and the platform closed the stream, or when ctx ends (with ctx's error).
func (c *Client) FollowLogs(ctx context.Context, buildID string, w io.Writer) error {
	return c.copyLogs(ctx, c.endpoint("/api/builds/%s/logs", buildID)+"?follow=1", buildID, w)
}

func (c *Client) copyLogs(ctx context.Context, target, buildID string, w io.Writer) error {
	req, err := c.newRequest(ctx, http.MethodGet, target, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Accept", "text/plain")
	resp, err := c.send(req)
	if err != nil {
		return fmt.Errorf("read log of build %s: %w", buildID, err)
	}
	defer resp.Body.Close() //nolint:errcheck // read-only body
	if _, err := io.Copy(w, resp.Body); err != nil {
		if ctxErr := context.Cause(ctx); ctxErr != nil {
			return fmt.Errorf("read log of build %s: %w", buildID, ctxErr)
		}
		return fmt.Errorf("read log of build %s: %w: %w", buildID, ErrStreamCut, err)
	}
	return nil
}
