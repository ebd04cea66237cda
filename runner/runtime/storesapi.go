package runtime

import (
	"errors"
	"fmt"
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

// limit reads the limit query parameter of a store route: 0 when absent.
func limit(r *http.Request) (int, error) {
	v := r.URL.Query().Get("limit")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > stores.MaxLimit {
		return 0, invalid("limit", "must be a whole number from 1 to %d, got %q", stores.MaxLimit, v)
	}
	return n, nil
}

// list serves GET /stores/{store}?limit=: the newest records first.
func (st storeRoutes) list(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	n, err := limit(r)
	if err != nil {
		return err
	}
	recs, err := st.records.Query(r.Context(), r.PathValue("store"), stores.Query{Limit: n})
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

// history serves GET /stores/{store}/{key}/history?limit=: the key's current version and the
// earlier ones its store keeps (history.versions), newest first, at most limit (default
// stores.DefaultLimit), each with its trace {session_id, tool_call_id, at} on a store with
// "trace": true, as the history tool shows them. 404 for a key without a record.
func (st storeRoutes) history(w http.ResponseWriter, r *http.Request, who access.Identity) error {
	n, err := limit(r)
	if err != nil {
		return err
	}
	if n == 0 {
		n = stores.DefaultLimit
	}
	store, key := r.PathValue("store"), r.PathValue("key")
	recs, err := st.records.History(r.Context(), store, key)
	if err != nil {
		return storeErr(err)
	}
	if len(recs) == 0 {
		return storeErr(fmt.Errorf("%w: no record %q in store %s", stores.ErrNotFound, key, store))
	}
	writeJSON(w, http.StatusOK, stores.HistoryOf(key, recs[:min(n, len(recs))]))
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
