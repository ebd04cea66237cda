package access

import (
	"fmt"
	"net/http"
	"strings"
)

// CheckCSRF applies the CSRF rule of CONTRACT §8 to a request authenticated by the session
// cookie: a state-changing request (any method but GET, HEAD and OPTIONS) must carry an Origin
// equal to origin, the agent's "scheme://host[:port]", or an X-Requested-With header (which a
// cross-site form cannot send, and a cross-site script cannot send without a CORS preflight the
// runtime does not grant). Otherwise the error matches ErrCSRF (403 CSRF_REJECTED). Requests
// authenticated by a bearer credential need no check: a browser does not attach those by itself.
func CheckCSRF(r *http.Request, origin string) error {
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return nil
	}
	if r.Header.Get("X-Requested-With") != "" {
		return nil
	}
	got := r.Header.Get("Origin")
	if got != "" && strings.EqualFold(got, origin) {
		return nil
	}
	if got == "" {
		return fmt.Errorf("%w: a %s authenticated by the session cookie needs an Origin header of %s or an X-Requested-With header", ErrCSRF, r.Method, origin)
	}
	return fmt.Errorf("%w: Origin %q is not the agent's %q; send X-Requested-With from a script of another origin", ErrCSRF, got, origin)
}
