package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.yaml.in/yaml/v3"

	"github.com/harness-edge/harness-edge/control"
	"github.com/harness-edge/harness-edge/runtime/task"
)

// `harness-edge loop -- AGENT ARGS...` is the Ralph loop in one line: it writes the task file a
// person would write for it (one command agent, the objective as its prompt, no plan) and runs
// that like `run`. The task is the single source of truth: --print-task prints exactly what is
// run, and `run` and `submit` accept it as it is.

// loopAgentName is the agent's name in a loop's task.
const loopAgentName = "ralph"

// loopTaskName names a loop's task in errors (their line numbers are those of --print-task).
const loopTaskName = "the loop's task (see --print-task)"

// defaultPromptFile is read when neither --prompt nor --prompt-file is given.
const defaultPromptFile = "PROMPT.md"

// loopOptions are the flags of `loop` (and of `submit --loop`).
type loopOptions struct {
	id, promise, prompt, promptFile, workspace string
	maxIterations, autonomy                    int
	budgetUSD                                  float64
	iterationTimeout                           time.Duration
	env                                        []string
}

func (o *loopOptions) addFlags(f *pflag.FlagSet) {
	f.StringVar(&o.id, "id", "", "the harness id (default: generated)")
	f.StringVar(&o.promise, "promise", "", "the completion promise: the loop ends at the iteration whose final output keeps it (default: none, the first iteration that exits 0 ends it)")
	f.IntVar(&o.maxIterations, "max-iterations", 0, fmt.Sprintf("iterations before the loop fails (default %d)", task.DefaultMaxIterations))
	f.StringVar(&o.prompt, "prompt", "", "the objective, given on every iteration")
	f.StringVar(&o.promptFile, "prompt-file", "", "read the objective from FILE (- for standard input; default "+defaultPromptFile+" in the workspace)")
	f.StringVar(&o.workspace, "workspace", "", "the directory the agent works in (default: the current directory)")
	f.Float64Var(&o.budgetUSD, "budget-usd", 0, "a cost budget in US dollars, counted from what the agent reports (Claude Code's total_cost_usd); at autonomy 1-3 a human decides when it is spent, above the loop fails")
	f.IntVar(&o.autonomy, "autonomy", 0, fmt.Sprintf("autonomy 1..5: where human gates stop the loop (default %d)", task.DefaultAutonomy))
	f.DurationVar(&o.iterationTimeout, "iteration-timeout", 0, fmt.Sprintf("stop an iteration that runs longer (default %v)", task.DefaultIterationTimeout))
	f.StringArrayVar(&o.env, "env", nil, "pass this variable of the environment to the agent (repeatable; e.g. ANTHROPIC_API_KEY)")
}

// loopFile is a loop's task file: the fields of a task it sets, in the order a person writes them.
type loopFile struct {
	ID        string               `yaml:"id,omitempty"`
	Prompt    string               `yaml:"prompt"`
	Agent     string               `yaml:"agent"`
	Autonomy  int                  `yaml:"autonomy,omitempty"`
	Workspace string               `yaml:"workspace"`
	Budget    *loopBudget          `yaml:"budget,omitempty"`
	Agents    map[string]loopAgent `yaml:"agents"`
}

type loopBudget struct {
	CostUSD float64 `yaml:"costUSD"`
}

type loopAgent struct {
	Driver            string   `yaml:"driver"`
	Command           []string `yaml:"command,flow"`
	Env               []string `yaml:"env,omitempty,flow"`
	CompletionPromise string   `yaml:"completionPromise,omitempty"`
	MaxIterations     int      `yaml:"maxIterations,omitempty"`
	IterationTimeout  string   `yaml:"iterationTimeout,omitempty"`
}

// taskFile builds the loop's task file around the agent command. It reads the prompt (from
// --prompt, --prompt-file or the workspace's PROMPT.md) and checks the flags; it does not check
// the task itself: task.ParseAt does, as for any task file.
func (o *loopOptions) taskFile(agentCmd []string, stdin io.Reader) ([]byte, error) {
	if len(agentCmd) == 0 || agentCmd[0] == "" {
		return nil, usageError{errors.New("no agent command: give it after --, e.g. `harness-edge loop --promise DONE -- claude -p`")}
	}
	ws := o.workspace
	if ws == "" {
		ws = "."
	}
	ws, err := filepath.Abs(ws)
	if err != nil {
		return nil, fmt.Errorf("--workspace: %w", err)
	}
	if fi, err := os.Stat(ws); err != nil || !fi.IsDir() {
		return nil, usageError{fmt.Errorf("--workspace %s: not a directory", ws)}
	}
	prompt, err := o.readPrompt(ws, stdin)
	if err != nil {
		return nil, err
	}
	switch {
	case o.maxIterations < 0:
		return nil, usageError{fmt.Errorf("--max-iterations %d: give a positive number", o.maxIterations)}
	case o.autonomy < 0 || o.autonomy > 5:
		return nil, usageError{fmt.Errorf("--autonomy %d: give 1 to 5", o.autonomy)}
	case o.iterationTimeout < 0:
		return nil, usageError{fmt.Errorf("--iteration-timeout %v: give a positive duration", o.iterationTimeout)}
	case o.budgetUSD < 0 || o.budgetUSD > 1e9 || math.IsNaN(o.budgetUSD):
		return nil, usageError{fmt.Errorf("--budget-usd %v: give an amount of US dollars (0: unlimited)", o.budgetUSD)}
	case strings.ContainsAny(o.promise, "\n\r"):
		return nil, usageError{errors.New("--promise: one line of text")}
	}
	a := loopAgent{Driver: "command", Command: agentCmd, Env: o.env, CompletionPromise: strings.TrimSpace(o.promise), MaxIterations: o.maxIterations}
	if o.iterationTimeout > 0 {
		a.IterationTimeout = o.iterationTimeout.String()
	}
	f := loopFile{ID: o.id, Prompt: prompt, Agent: loopAgentName, Autonomy: o.autonomy, Workspace: ws, Agents: map[string]loopAgent{loopAgentName: a}}
	if o.budgetUSD > 0 {
		f.Budget = &loopBudget{CostUSD: o.budgetUSD}
	}
	var b bytes.Buffer
	b.WriteString("# A Ralph loop: the command agent runs the prompt, iteration after iteration, until it\n# keeps its completion promise (`harness-edge loop --print-task`).\n")
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(f); err != nil {
		return nil, err
	}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	// The prompt is written into the task file (indented, or quoted and escaped), which is a
	// task file like any other: run and submit take it only within their size limit.
	if b.Len() > task.MaxFileSize {
		return nil, usageError{fmt.Errorf("the prompt (%d bytes) makes the loop's task file %d bytes, over the %d MiB (%d bytes) a task file may be: shorten the prompt", len(prompt), b.Len(), task.MaxFileSize>>20, task.MaxFileSize)}
	}
	return b.Bytes(), nil
}

// readPrompt reads the loop's objective.
func (o *loopOptions) readPrompt(ws string, stdin io.Reader) (string, error) {
	if o.prompt != "" && o.promptFile != "" {
		return "", usageError{errors.New("--prompt and --prompt-file: give one of them")}
	}
	var (
		data []byte
		err  error
		src  string
	)
	switch {
	case o.prompt != "":
		data, src = []byte(o.prompt), "--prompt"
	case o.promptFile == "-":
		data, err = io.ReadAll(io.LimitReader(stdin, 1<<20+1))
		src = "--prompt-file - (standard input)"
	case o.promptFile != "":
		data, err = readLimited(o.promptFile, 1<<20+1)
		src = "--prompt-file " + o.promptFile
	default:
		p := filepath.Join(ws, defaultPromptFile)
		data, err = readLimited(p, 1<<20+1)
		src = p
		if errors.Is(err, os.ErrNotExist) {
			return "", usageError{fmt.Errorf("no objective: give --prompt TEXT or --prompt-file FILE, or write %s", p)}
		}
	}
	if err != nil {
		return "", fmt.Errorf("%s: %w", src, err)
	}
	if len(data) > 1<<20 {
		return "", usageError{fmt.Errorf("%s: the prompt is over 1 MiB", src)}
	}
	// A prompt file is read as a task file is: UTF-8 with or without a byte-order mark, or
	// UTF-16 with one.
	if data, err = task.DecodeText(src, "prompt", data); err != nil {
		return "", usageError{err}
	}
	prompt := strings.TrimSpace(string(data))
	if prompt == "" {
		return "", usageError{fmt.Errorf("%s: the prompt is empty", src)}
	}
	return prompt, nil
}

func readLimited(path string, n int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, n))
}

func newLoopCmd(g *globals, stdin io.Reader, stdout io.Writer) *cobra.Command {
	var (
		o         loopOptions
		f         runFlags
		printTask bool
	)
	c := &cobra.Command{
		Use:   "loop [flags] -- AGENT ARGS...",
		Short: "Run a CLI agent in a durable Ralph loop until it keeps its completion promise",
		Long: `Run a CLI agent in a Ralph loop: a fresh process per iteration, given the objective (and, after
the first, the previous iteration's handoff and feedback), until an iteration's final output
keeps the completion promise. It is a durable harness like any other: killed, it goes on with
'harness-edge resume ID'; show, events, pause, stop and the gates treat it the same.

  harness-edge loop --promise DONE --max-iterations 20 --prompt-file PROMPT.md -- claude -p --output-format json

Everything after the first argument that is not a flag (or after --) is the agent's command.
--print-task prints the task file instead of running it ('harness-edge run' accepts it). When a
daemon owns the store, the loop is handed to it. Exit codes as for run.`,
		Args: cobra.ArbitraryArgs,
		RunE: func(_ *cobra.Command, args []string) error {
			data, err := o.taskFile(args, stdin)
			if err != nil {
				return err
			}
			if printTask {
				// Checked as a task file, but not for the agent on this machine's PATH: the
				// file may be meant for another.
				if _, err := task.Parse(loopTaskName, data); err != nil {
					return err
				}
				_, err := stdout.Write(data)
				return err
			}
			t, err := task.ParseAt(loopTaskName, data, ".")
			if err != nil {
				return err
			}
			if dir, err := g.storeDir(); err == nil {
				if c, err := control.Dial(dir); err == nil && c.Owner.Owner == control.OwnerDaemon {
					id, err := c.Submit(context.Background(), control.Submission{Task: data, Name: loopTaskName, Dir: t.Workspace.Path})
					if err != nil {
						return err
					}
					fmt.Fprintf(stdout, "harness %s: queued in the daemon (pid %d); follow it with `harness-edge events %s --follow`\n", id, c.Owner.PID, id)
					return nil
				}
			}
			m, release, err := g.ownManager(f, stdout)
			if err != nil {
				return err
			}
			defer release()
			h, err := m.Create(t)
			if err != nil {
				return err
			}
			return runHarness(m, h, f, stdout)
		},
	}
	c.Flags().SetInterspersed(false)
	o.addFlags(c.Flags())
	c.Flags().BoolVar(&printTask, "print-task", false, "print the loop's task file (YAML) instead of running it")
	c.Flags().BoolVar(&f.json, "json", false, "stream events as JSON lines, then the result")
	c.Flags().BoolVar(&f.progress, "progress", false, "print progress lines even when stdout is not a terminal (a log, a pipe)")
	return c
}
