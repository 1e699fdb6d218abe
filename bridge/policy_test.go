package bridge_test

import (
	"testing"

	"github.com/harness-edge/harness-edge/bridge"
)

// A chain with the default policy writes its next keyframe after exactly DefaultMaxReplay
// deltas, on every native backend: the store relies on the number to start its encoder over
// before that keyframe.
func TestTheDefaultReplayBoundIsDefaultMaxReplay(t *testing.T) {
	engines, _ := bridge.Available()
	for _, e := range engines {
		if e.Backend() == bridge.BackendFallback {
			continue // keyframes only: no replay bound
		}
		t.Run(string(e.Backend()), func(t *testing.T) {
			c, err := e.NewChain(bridge.ChainPolicy{})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			// A large state that grows a little: the delta-bytes budget never forces a keyframe.
			state := make([]byte, 64<<10, 128<<10)
			for i := range bridge.DefaultMaxReplay + 2 {
				state = append(state, byte(i), byte(i>>8), 'x')
				info, _, err := c.Append(state, 0, 0)
				if err != nil {
					t.Fatal(err)
				}
				want := bridge.KindDelta
				if i == 0 || i == bridge.DefaultMaxReplay+1 {
					want = bridge.KindKeyframe
				}
				if info.Kind != want {
					t.Fatalf("record %d is kind %d, want %d", info.Seq, info.Kind, want)
				}
			}
		})
	}
}
