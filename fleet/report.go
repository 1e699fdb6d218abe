package fleet

import (
	"context"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/harness-edge/harness-edge/bridge"
	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/statefmt"
)

// DeviceReport is one device's part of the fleet's morning report: its last heartbeat, how far
// its replication lags, and the report `harness-edge report` gives on the device, built from
// the states its replicated records rebuild.
type DeviceReport struct {
	Device string `json:"device"`
	// Heartbeat is the device's last heartbeat (nil: none reached the hub); SeenAgo how long
	// before the report was read it did.
	Heartbeat *Heartbeat    `json:"heartbeat,omitempty"`
	SeenAgo   time.Duration `json:"seenAgo,omitempty"`
	// MaxLag is the largest replication lag among its harnesses.
	MaxLag time.Duration   `json:"maxLag"`
	Report *control.Report `json:"report"`
}

// Report is the morning report across the fleet.
type Report struct {
	ReadAt  time.Time      `json:"readAt"`
	Devices []DeviceReport `json:"devices"`
}

// BuildReport builds the morning report of every device over the last `since` (0: everything):
// each top-level harness rebuilt from its replicated records with engine (nil: the default), as
// `fleet show` does, and fed to the same report entries `harness-edge report` makes. A harness
// whose records do not rebuild is listed as damaged. Stored bytes are those of the replicated
// records from each keyframe to its head (sub-agents' included); the store's size on disk is
// not known here (0).
func BuildReport(ctx context.Context, js jetstream.JetStream, engine bridge.Engine, since time.Duration) (*Report, error) {
	f, err := List(ctx, js)
	if err != nil {
		return nil, err
	}
	out := &Report{ReadAt: f.ReadAt, Devices: []DeviceReport{}}
	byName := map[string]int{}
	device := func(name string) *DeviceReport {
		i, ok := byName[name]
		if !ok {
			r := &control.Report{Until: f.ReadAt, Counts: map[statefmt.Status]int{}, Harnesses: []control.ReportEntry{}, Waiting: []control.WaitingGate{}}
			if since > 0 {
				r.Since = f.ReadAt.Add(-since)
			}
			i = len(out.Devices)
			byName[name] = i
			out.Devices = append(out.Devices, DeviceReport{Device: name, Report: r})
		}
		return &out.Devices[i]
	}
	for _, d := range f.Devices {
		dr := device(d.Name)
		hb := d.Heartbeat
		dr.Heartbeat, dr.SeenAgo = &hb, d.SeenAgo
	}
	for _, u := range f.Unreadable {
		if u.Harness != "" {
			r := device(u.Device).Report
			r.Damaged = append(r.Damaged, control.DamagedHarness{ID: u.Harness, Reason: u.Error})
		}
	}
	for _, h := range f.Harnesses {
		dr := device(h.Device)
		dr.MaxLag = max(dr.MaxLag, h.Lag)
		if h.Entry.ParentHarnessID != "" {
			continue // counted in their parent
		}
		r := dr.Report
		s, err := Show(ctx, js, engine, h.Device, h.Entry.ID)
		if err != nil {
			if ctx.Err() != nil {
				return nil, err
			}
			r.Damaged = append(r.Damaged, control.DamagedHarness{ID: h.Entry.ID, Reason: err.Error()})
			continue
		}
		st := s.State
		states := []*statefmt.HarnessState{st}
		var subs []*statefmt.HarnessState
		stored := s.ChainBytes
		for _, id := range st.SubAgentIDs {
			if sub, err := Show(ctx, js, engine, h.Device, id); err == nil {
				subs = append(subs, sub.State)
				stored += sub.ChainBytes
			}
		}
		if st.Status == statefmt.StatusPaused {
			for _, x := range append(states, subs...) {
				for _, g := range x.Gates {
					if g.Status == statefmt.GatePending {
						r.Waiting = append(r.Waiting, control.WaitingGate{HarnessID: x.HarnessID, Gate: g.ID, Kind: g.Kind, StepID: g.StepID, Since: g.CreatedAt, Why: g.Reason})
					}
				}
			}
		}
		if st.UpdatedAt.Before(r.Since) {
			continue
		}
		re := control.EntryOf(st, subs)
		re.StoredBytes = stored
		r.Add(re)
	}
	for _, d := range out.Devices {
		d.Report.Sort()
	}
	return out, nil
}
