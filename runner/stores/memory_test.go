package stores_test

import (
	"testing"

	"svc/runner/stores"
	"svc/runner/stores/storestest"
)

func TestMemory(t *testing.T) {
	storestest.Run(t, func(t *testing.T) storestest.Factory {
		byAgent := map[string]*stores.Memory{}
		return func(agentID string) stores.Backend {
			if byAgent[agentID] == nil {
				byAgent[agentID] = stores.NewMemory()
			}
			return byAgent[agentID]
		}
	})
}
