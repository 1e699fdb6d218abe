// Package sysinfo reads what a small device has to spare (memory, CPU load, temperature, disk,
// the disk's fsync latency) through gopsutil, for the daemon's resource governor, `doctor` and
// `bench`.
package sysinfo

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/shirou/gopsutil/v4/disk"
	"github.com/shirou/gopsutil/v4/load"
	"github.com/shirou/gopsutil/v4/mem"
	"github.com/shirou/gopsutil/v4/process"
	"github.com/shirou/gopsutil/v4/sensors"
)

// Machine is a snapshot of the machine. Figures a platform cannot give are zero, and Notes
// say why.
type Machine struct {
	CPUs           int      `json:"cpus"`
	Load1          float64  `json:"load1"`
	MemTotal       uint64   `json:"memTotalBytes"`
	MemAvailable   uint64   `json:"memAvailableBytes"`
	MaxTempCelsius float64  `json:"maxTempCelsius,omitempty"`
	TempSensor     string   `json:"tempSensor,omitempty"`
	Notes          []string `json:"notes,omitempty"`
}

// Read takes a snapshot of the machine.
func Read() Machine {
	m := Machine{CPUs: runtime.NumCPU()}
	if v, err := mem.VirtualMemory(); err == nil {
		m.MemTotal, m.MemAvailable = v.Total, v.Available
	} else {
		m.Notes = append(m.Notes, "memory: "+err.Error())
	}
	if l, err := load.Avg(); err == nil {
		m.Load1 = l.Load1
	} else {
		m.Notes = append(m.Notes, "load: "+err.Error())
	}
	temps, err := sensors.SensorsTemperatures()
	for _, t := range temps {
		if t.Temperature > m.MaxTempCelsius && t.Temperature < 200 {
			m.MaxTempCelsius, m.TempSensor = t.Temperature, t.SensorKey
		}
	}
	if m.TempSensor == "" {
		why := "no temperature sensor found"
		if err != nil {
			why += ": " + err.Error()
		}
		m.Notes = append(m.Notes, why)
	}
	return m
}

// Limits are the governor's limits; zero turns a limit off.
type Limits struct {
	// MinMemAvailable is the memory that must be available to start a step.
	MinMemAvailable uint64
	// MaxLoadPerCPU is the highest 1-minute load average per CPU at which a step starts.
	MaxLoadPerCPU float64
	// MaxTempCelsius is the highest sensor temperature at which a step starts (ignored where
	// the machine has no sensors).
	MaxTempCelsius float64
}

// Governor checks the machine against its limits before each step (runtime.Governor).
type Governor struct {
	Limits Limits
	// Read takes the snapshot (default: Read); tests replace it.
	Read func() Machine
}

// Check returns "" when the machine is within the limits, else why not.
func (g *Governor) Check() string {
	read := g.Read
	if read == nil {
		read = Read
	}
	m := read()
	var over []string
	l := g.Limits
	if l.MinMemAvailable > 0 && m.MemTotal > 0 && m.MemAvailable < l.MinMemAvailable {
		over = append(over, fmt.Sprintf("available memory %s is below the %s limit", FormatBytes(m.MemAvailable), FormatBytes(l.MinMemAvailable)))
	}
	if l.MaxLoadPerCPU > 0 && m.CPUs > 0 && m.Load1/float64(m.CPUs) > l.MaxLoadPerCPU {
		over = append(over, fmt.Sprintf("load %.2f on %d CPUs is above %.2f per CPU", m.Load1, m.CPUs, l.MaxLoadPerCPU))
	}
	if l.MaxTempCelsius > 0 && m.TempSensor != "" && m.MaxTempCelsius > l.MaxTempCelsius {
		over = append(over, fmt.Sprintf("%s at %.0f °C is above the %.0f °C limit", m.TempSensor, m.MaxTempCelsius, l.MaxTempCelsius))
	}
	return strings.Join(over, "; ")
}

// Self is this process's resident memory and CPU time so far.
func Self() (rss uint64, cpu time.Duration, err error) { return Of(os.Getpid()) }

// Of is a process's resident memory and CPU time so far.
func Of(pid int) (rss uint64, cpu time.Duration, err error) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0, 0, err
	}
	mi, err := p.MemoryInfo()
	if err != nil {
		return 0, 0, err
	}
	t, err := p.Times()
	if err != nil {
		return 0, 0, err
	}
	return mi.RSS, time.Duration((t.User + t.System) * float64(time.Second)), nil
}

// DiskFree is the space free to an unprivileged user on the file system that holds dir (or
// its nearest existing parent).
func DiskFree(dir string) (free, total uint64, err error) {
	d := existing(dir)
	u, err := disk.Usage(d)
	if err != nil {
		return 0, 0, err
	}
	return u.Free, u.Total, nil
}

func existing(dir string) string {
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil || d == filepath.Dir(d) {
			return d
		}
	}
}

// FsyncLatency writes and fsyncs a 4 KiB block n times in a scratch file in dir (or its nearest
// existing parent) and returns the sorted latencies: what each durable checkpoint pays the disk.
func FsyncLatency(dir string, n int) ([]time.Duration, error) {
	f, err := os.CreateTemp(existing(dir), ".fsync-probe-*")
	if err != nil {
		return nil, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	block := make([]byte, 4096)
	out := make([]time.Duration, 0, n)
	for i := range n {
		block[0] = byte(i)
		t0 := time.Now()
		if _, err := f.WriteAt(block, int64(i%16)*4096); err != nil {
			return nil, err
		}
		if err := f.Sync(); err != nil {
			return nil, err
		}
		out = append(out, time.Since(t0))
	}
	slices.Sort(out)
	return out, nil
}

// ParseBytes reads a size like 256MB, 1.5GiB, 512k or 1048576.
func ParseBytes(s string) (uint64, error) {
	t := strings.ToUpper(strings.TrimSpace(s))
	mult := uint64(1)
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"GIB", 1 << 30}, {"MIB", 1 << 20}, {"KIB", 1 << 10}, {"GB", 1e9}, {"MB", 1e6}, {"KB", 1e3}, {"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}, {"B", 1}} {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	v, err := strconv.ParseFloat(t, 64)
	if err != nil || v < 0 {
		return 0, fmt.Errorf("%q is not a size (write it like 256MB, 1GiB or 512k)", s)
	}
	return uint64(v * float64(mult)), nil
}

// FormatBytes writes a size for people: 1.5 GiB, 230 MiB, 12 KiB, 512 B.
func FormatBytes(b uint64) string {
	switch {
	case b >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(b)/(1<<30))
	case b >= 1<<20:
		return fmt.Sprintf("%.0f MiB", float64(b)/(1<<20))
	case b >= 1<<10:
		return fmt.Sprintf("%.0f KiB", float64(b)/(1<<10))
	}
	return fmt.Sprintf("%d B", b)
}
