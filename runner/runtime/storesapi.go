package runtime

import (
	"errors"
	"io"
	"net/http"
	"strconv"

	"svc/runner/access"
	"svc/runner/stores"
)

// The store routes (CONTRACT §7): the records of the agent's stores, for the application's
// backend. They take the runtime's credentials and are not partitioned by scope.

// storeRoutes serve the records of the agent's stores (spec 4.5).
type storeRoutes struct{ records *stores.Records }

// list serves GET /stores/{store}?limit=: the newest records first.
func (st storeRoutes) list(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	q := stores.Query{}
	if v := r.URL.Query().Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			return invalid("limit", "must be a whole number from 1 to %d, got %q", stores.MaxLimit, v)
		}
		q.Limit = n
	}
	recs, err := st.records.Query(r.Context(), r.PathValue("store"), q)
	if err != nil {
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"items": stores.Items(recs)})
	return nil
}

// get serves GET /stores/{store}/{key}.
func (st storeRoutes) get(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	rec, err := st.records.Get(r.Context(), r.PathValue("store"), r.PathValue("key"))
	if err != nil {
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, stores.ItemOf(rec))
	return nil
}

// put serves PUT /stores/{store}/{key}: the body is the entity's fields, which must
// render that key.
func (st storeRoutes) put(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, stores.MaxValueBytes+1))
	if err != nil {
		return invalid("body", "is over %d bytes or could not be read", stores.MaxValueBytes)
	}
	rec, err := st.records.Put(r.Context(), r.PathValue("store"), r.PathValue("key"), body, stores.Trace{})
	if err != nil {
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, stores.ItemOf(rec))
	return nil
}

// delete serves DELETE /stores/{store}/{key}: {key, deleted}, as the delete tool.
func (st storeRoutes) delete(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	key := r.PathValue("key")
	deleted, err := st.records.Delete(r.Context(), r.PathValue("store"), key)
	if err != nil {
		return storeErr(err)
	}
	writeJSON(w, http.StatusOK, map[string]any{"key": key, "deleted": deleted})
	return nil
}

// storeErr is the answer to a store error: 404 for an unknown store or key, 400 naming the
// field for bad input, 503 saying why for a database of the agent's own that does not open (its
// url not set: the message names the variable and how to set it).
func storeErr(err error) error {
	var fe *stores.FieldError
	switch {
	case errors.Is(err, stores.ErrUnavailable):
		return &APIError{Code: CodeStoreDown, Message: err.Error()}
	case errors.Is(err, stores.ErrUnknownStore), errors.Is(err, stores.ErrNotFound):
		return &APIError{Code: CodeNotFound, Message: err.Error()}
	case errors.As(err, &fe):
		return &APIError{Code: CodeInvalidRequest, Field: fe.Field, Message: err.Error()}
	case errors.Is(err, stores.ErrInvalid):
		return &APIError{Code: CodeInvalidRequest, Message: err.Error()}
	}
	return err
}
