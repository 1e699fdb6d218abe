package store_test

import (
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/internal/storetest"
	"github.com/harness-edge/harness-edge/store"
)

var _ storetest.Store = (*store.Store)(nil)

// TestPebbleStoreConformance runs the store conformance suite against the Pebble store, each
// case on a new store in its own directory with the engine Load picks.
func TestPebbleStoreConformance(t *testing.T) {
	e, warnings := bridge.Load()
	for _, w := range warnings {
		t.Logf("engine: %s", w.Message)
	}
	t.Logf("engine backend: %s", e.Backend())
	storetest.Run(t, func(t *testing.T) storetest.Store {
		s := openStore(t, t.TempDir(), e, bridge.ChainPolicy{})
		t.Cleanup(func() {
			if err := s.Close(); err != nil {
				t.Error(err)
			}
		})
		return s
	})
}
