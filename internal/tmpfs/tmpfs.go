// Package tmpfs mounts small real file systems for the tests that fill a disk.
package tmpfs

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// Mount mounts a tmpfs of size (as mount takes it: "48m") on a fresh directory, readable by
// its owner only, and unmounts it when the test ends. Where mounting needs rights the test does
// not have (not root, or no real kernel), the test is skipped with the reason.
func Mount(t testing.TB, size string) string {
	t.Helper()
	mnt := t.TempDir()
	if err := syscall.Mount("tmpfs", mnt, "tmpfs", 0, "size="+size+",mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here (%v): needs root on a real kernel", err)
	}
	t.Cleanup(func() { _ = syscall.Unmount(mnt, syscall.MNT_DETACH) })
	return mnt
}

// Fill writes a file that leaves about left bytes free on mnt's file system, and returns its
// path: remove it to give the room back.
func Fill(t testing.TB, mnt string, left int64) string {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(mnt, &st); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	if err := os.WriteFile(filler, make([]byte, int64(st.Bavail)*int64(st.Bsize)-left), 0o600); err != nil {
		t.Fatal(err)
	}
	return filler
}

// FillOnce is a shell command that, the first time it runs, writes a file on mnt that leaves
// about left bytes free (0: none, to the last byte it can), and after that does nothing: the step
// of a task that fills the disk once, and runs again on resume without filling it anew. It
// returns the command and the file's path: remove it to give the room back.
func FillOnce(t testing.TB, mnt string, left int64) (command, filler string) {
	filler, marker := filepath.Join(mnt, "filler"), filepath.Join(t.TempDir(), "filled")
	write := fmt.Sprintf("cat /dev/zero > %s 2>/dev/null; true", filler)
	if left > 0 {
		write = fmt.Sprintf("avail=$(df -k --output=avail %s | tail -1); head -c $(( (avail - %d) * 1024 )) /dev/zero > %s",
			mnt, left>>10, filler)
	}
	return fmt.Sprintf("[ -e %[1]s ] || { touch %[1]s; %[2]s; }", marker, write), filler
}

// FillingTask is a three-step script task (YAML) whose middle step runs command (FillOnce's):
// its first step is checkpointed before the disk fills, its last runs once there is room. An
// empty workspace leaves the task's default.
func FillingTask(id, workspace, command string) string {
	ws := ""
	if workspace != "" {
		ws = "workspace: " + workspace + "\n"
	}
	return fmt.Sprintf(`id: %s
agent: A
%sagents:
  A:
    driver: script
    tools: [bash]
    script:
      steps:
        s1: [{output: one}]
        s2: [{tool: bash, args: {command: %q}}, {output: two}]
        s3: [{output: three}]
plan:
  - {id: s1, description: one, agent: A}
  - {id: s2, description: fills the disk, agent: A, dependsOn: [s1]}
  - {id: s3, description: three, agent: A, dependsOn: [s2]}
`, id, ws, command)
}
