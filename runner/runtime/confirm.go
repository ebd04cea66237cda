package runtime

import (
	"context"

	"svc/runner/tools"
)

// confirming is a tool of svc/tools marked "requiresConfirmation": every call waits for the
// user's approval.
type confirming struct{ tools.Tool }

// NeedsApproval implements tools.Approver.
func (c confirming) NeedsApproval(context.Context, tools.Call) (*tools.ApprovalRequest, error) {
	name := c.Spec().Name
	return &tools.ApprovalRequest{Endpoint: name, Method: "CALL", Reason: "tool " + name + " asks for confirmation before each call (requiresConfirmation)"}, nil
}
