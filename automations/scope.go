package automations

import "errors"

// ErrNoOwner is a credential that can own no automation: no scope claim, no verified user, and
// not trusted.
var ErrNoOwner = errors.New("automations: the credential has no owner scope")

// OwnerScope is the owner scope of the automations a caller sees and saves (CONTRACT §9, spec
// 5.6), "" being the agent-level scope:
//   - a credential with a scope claim owns its claim's scope;
//   - else one with a verified user (browser session, IdP token, runtime token with a user id)
//     owns that user id's scope;
//   - else a trusted credential owns the agent-level scope, or the scope_id it names.
//
// Only a trusted credential may name a scope_id; from another, a requested scope_id other than
// its own is a *FieldError naming scope_id. A credential matching no case is ErrNoOwner.
func OwnerScope(claim, userID string, trusted bool, requested string) (string, error) {
	var own string
	switch {
	case claim != "":
		own = claim
	case userID != "":
		own = userID
	case trusted:
		return requested, nil
	default:
		return "", ErrNoOwner
	}
	if requested != "" && requested != own {
		return "", fieldErr("scope_id", "%q is not the caller's scope %q: only a trusted credential may name another", requested, own)
	}
	return own, nil
}

// Decision is what to do with one fire given the overlap policy.
type Decision int

// The decisions of Decide.
const (
	Fire  Decision = iota + 1 // start the run now
	Skip                      // drop the fire
	Queue                     // hold the fire until the previous run ends, then start it
)

// String is the decision's name: fire, skip or queue.
func (d Decision) String() string {
	switch d {
	case Fire:
		return "fire"
	case Skip:
		return "skip"
	case Queue:
		return "queue"
	}
	return "unknown"
}

// Decide applies the overlap policy to a fire: with no previous run still running it fires;
// otherwise skip (also the default for "") drops it, queue holds it, allow fires alongside.
// An unknown policy is treated as skip (Validate refuses it).
func Decide(policy Overlap, previousRunning bool) Decision {
	if !previousRunning {
		return Fire
	}
	switch policy {
	case OverlapQueue:
		return Queue
	case OverlapAllow:
		return Fire
	}
	return Skip
}
