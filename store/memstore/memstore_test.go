package memstore_test

import (
	"testing"

	"github.com/harness-edge/harness-edge/internal/storetest"
	"github.com/harness-edge/harness-edge/store/memstore"
)

var _ storetest.Store = (*memstore.Store)(nil)

// TestMemoryStoreConformance runs the store conformance suite against the in-memory store, each
// case on a new store.
func TestMemoryStoreConformance(t *testing.T) {
	storetest.Run(t, func(*testing.T) storetest.Store { return memstore.New() })
}
