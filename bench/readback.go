package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// readBack measures reading a long harness back as a user does, each command a whole process
// of the binary: it runs a task of 1,000 read_file steps on real text (quick: 400) with `run`,
// then times `show --json`, `show`, `ls` and `report` on that store, one after the other in
// rounds, so that each command sees the machine of the same minutes. Their output goes to
// /dev/null, as to a file; one `show --json` is read back first to check it is the whole
// harness.
func readBack(ctx context.Context, o Options, rep *Report) error {
	if o.Binary == "" {
		return nil
	}
	dir, done, err := scratch(o, "readback")
	if err != nil {
		return err
	}
	defer done()
	if dir, err = filepath.Abs(dir); err != nil {
		return err
	}
	ws := filepath.Join(dir, "ws")
	if err := os.Mkdir(ws, 0o700); err != nil {
		return err
	}
	files, lines, source, err := textCorpus(ws, 2<<20)
	if err != nil {
		return err
	}
	steps, rounds := 1000, 10
	if o.Quick {
		steps, rounds = 400, 5
	}
	src, err := e2eTask("readback", ws, files, lines, steps, 7)
	if err != nil {
		return err
	}
	taskFile := filepath.Join(dir, "task.json")
	if err := os.WriteFile(taskFile, src, 0o600); err != nil {
		return err
	}
	db := filepath.Join(dir, "store")
	if out, err := command(o.Binary, "--store", db, "run", taskFile).CombinedOutput(); err != nil {
		return fmt.Errorf("run of %d steps: %v: %s", steps, err, out)
	}
	shown, err := command(o.Binary, "--store", db, "show", "--json", "readback").Output()
	if err != nil {
		return fmt.Errorf("show --json: %w", err)
	}
	var st struct {
		Status string
		Plan   struct{ Steps []struct{ Status string } }
	}
	if err := json.Unmarshal(shown, &st); err != nil || st.Status != "completed" || len(st.Plan.Steps) != steps {
		return fmt.Errorf("show --json of the %d-step harness: status %q, %d steps, %v", steps, st.Status, len(st.Plan.Steps), err)
	}
	cmds := []struct {
		id   string
		args []string
	}{
		{"show_json", []string{"show", "--json", "readback"}},
		{"show", []string{"show", "readback"}},
		{"ls", []string{"ls"}},
		{"report", []string{"report"}},
	}
	times := make([][]time.Duration, len(cmds))
	for range rounds {
		for i, c := range cmds {
			if err := ctx.Err(); err != nil {
				return err
			}
			cmd := command(o.Binary, append([]string{"--store", db}, c.args...)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr // Stdout nil: /dev/null
			t0 := time.Now()
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("%v: %v: %s", c.args, err, stderr.String())
			}
			times[i] = append(times[i], time.Since(t0))
		}
	}
	note := fmt.Sprintf("median of %d, each a whole process on the store of a finished %d-step task (read_file of %s; %d KB of JSON)", rounds, steps, source, len(shown)>>10)
	for i, c := range cmds {
		name := fmt.Sprintf("`%s`, a store of one finished %d-step harness, a whole process, median", joinArgs(c.args), steps)
		v := msf(medianOf(times[i]))
		switch {
		case c.id == "show_json" && o.Emulated == "" && !o.Quick:
			rep.add(atMost("readback_"+c.id, name, v, "ms", 60, false, note+"; timing-sensitive: reported, not enforced"))
		default:
			rep.add(info("readback_"+c.id, name, v, "ms", note))
		}
		note = "the same store and rounds"
	}
	return nil
}

// joinArgs is a command's arguments as typed, the harness's id left out.
func joinArgs(args []string) string {
	if len(args) > 1 && args[len(args)-1] == "readback" {
		args = args[:len(args)-1]
	}
	return strings.Join(args, " ")
}
