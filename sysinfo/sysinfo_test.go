package sysinfo

import (
	"strings"
	"testing"
)

func TestGovernorNamesEveryLimitItIsOver(t *testing.T) {
	m := Machine{CPUs: 4, Load1: 9, MemTotal: 1 << 30, MemAvailable: 100 << 20, MaxTempCelsius: 91, TempSensor: "cpu_thermal"}
	g := &Governor{Limits: Limits{MinMemAvailable: 256 << 20, MaxLoadPerCPU: 2, MaxTempCelsius: 85}, Read: func() Machine { return m }}
	why := g.Check()
	for _, want := range []string{"available memory 100 MiB is below the 256 MiB limit", "load 9.00 on 4 CPUs is above 2.00 per CPU", "cpu_thermal at 91 °C is above the 85 °C limit"} {
		if !strings.Contains(why, want) {
			t.Errorf("%q lacks %q", why, want)
		}
	}
	m = Machine{CPUs: 4, Load1: 1, MemTotal: 1 << 30, MemAvailable: 900 << 20} // no sensor: the limit does not apply
	if why := g.Check(); why != "" {
		t.Fatalf("within limits, yet: %s", why)
	}
	if why := (&Governor{Read: func() Machine { return Machine{CPUs: 1, Load1: 99} }}).Check(); why != "" {
		t.Fatalf("no limits set, yet: %s", why)
	}
}

func TestReadAndSelfOnThisMachine(t *testing.T) {
	m := Read()
	if m.CPUs < 1 || m.MemTotal == 0 || m.MemAvailable == 0 || m.MemAvailable > m.MemTotal {
		t.Fatalf("%+v", m)
	}
	rss, _, err := Self()
	if err != nil || rss < 1<<20 {
		t.Fatalf("rss %d, %v", rss, err)
	}
	free, total, err := DiskFree(t.TempDir() + "/not/yet/made")
	if err != nil || free == 0 || free > total {
		t.Fatalf("disk %d/%d %v", free, total, err)
	}
	lat, err := FsyncLatency(t.TempDir(), 5)
	if err != nil || len(lat) != 5 || lat[0] <= 0 || lat[0] > lat[4] {
		t.Fatalf("fsync %v %v", lat, err)
	}
}

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]uint64{"256MB": 256e6, "1GiB": 1 << 30, "512k": 512 << 10, "1048576": 1 << 20, " 1.5 GB ": 1.5e9, "64 MiB": 64 << 20} {
		if got, err := ParseBytes(in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MB", "-1MB", "12 parsecs"} {
		if _, err := ParseBytes(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
