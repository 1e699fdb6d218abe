package command

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
	"time"

	"github.com/harness-edge/harness-edge/runtime/agent"
	"github.com/harness-edge/harness-edge/runtime/inbox"
	"github.com/harness-edge/harness-edge/statefmt/event"
)

// Messages from a human reach the next iteration's prompt exactly once. Before an iteration,
// the driver takes what waits (the store's inbox, filled by `harness-edge tell`, and the
// workspace's inbox file) into the loop state, which is checkpointed before the iteration
// starts; only then are the taken messages removed. An iteration cut short runs again with the
// same messages (they are in the loop state); a message whose removal a crash prevented is
// known by name (Taken) or by content (InboxFileHash) and not taken twice. The messages leave
// the loop state once their iteration counted.

// takeMessages adds what waits for the harness to st.Messages, and returns a function that
// removes it from where it waited (called once st is durable); it reports whether it emptied the
// workspace's inbox file.
func (a *Agent) takeMessages(sc *agent.StepContext, st *loopState) (remove func() (emptied bool)) {
	var taken []string
	if sc.InboxDir != "" {
		var keep []string
		for _, name := range st.Taken { // taken before; still there only if a crash kept its removal from happening
			if inbox.Exists(sc.InboxDir, sc.HarnessID, name) {
				keep = append(keep, name)
			}
		}
		pending, err := inbox.Pending(sc.InboxDir, sc.HarnessID)
		if err != nil {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("the inbox does not read: %v", err)})
		}
		for _, m := range pending {
			if !contains(keep, m.Name) {
				st.Messages = append(st.Messages, m)
				taken = append(taken, m.Name)
			}
		}
		st.Taken = append(keep, taken...)
	}
	var fileText string
	if name := a.cfg.Inbox; name != "" {
		text, err := readInboxFile(sc.Workspace, name)
		switch {
		case err != nil:
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("inbox file %s: %v; left as it is", name, err)})
		case strings.TrimSpace(text) == "":
			st.InboxFileHash = "" // emptied: what was taken from it is gone
		case hashString(text) == st.InboxFileHash:
			fileText = text // taken before a crash kept it from being emptied: empty it now
		default:
			fileText = text
			st.InboxFileHash = hashString(text)
			st.Messages = append(st.Messages, inbox.Message{Name: "file-" + st.InboxFileHash, Time: sc.Clock.Now().UTC(),
				Text: strings.TrimSpace(text), From: "inbox file " + name})
		}
	}
	return func() bool {
		if err := inbox.Remove(sc.InboxDir, sc.HarnessID, st.Taken); err != nil && sc.InboxDir != "" {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("taken messages were not removed from the inbox (they will not be taken again): %v", err)})
		}
		if fileText == "" {
			return false
		}
		if err := emptyInboxFile(sc.Workspace, a.cfg.Inbox, fileText); err != nil {
			sc.Emit(event.Event{Type: event.Warning, Message: fmt.Sprintf("inbox file %s was not emptied: %v", a.cfg.Inbox, err)})
			return false
		}
		return true
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// readInboxFile reads the workspace's inbox file through the workspace root (a link cannot
// make it read outside); a missing file is empty.
func readInboxFile(workspace, name string) (string, error) {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return "", nil // no workspace yet: no inbox file either
	}
	defer root.Close()
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, inbox.MaxBytes+1))
	if err != nil {
		return "", err
	}
	text := string(data)
	if err := inbox.Check(text); err != nil && strings.TrimSpace(text) != "" {
		return "", err
	}
	return text, nil
}

// emptyInboxFile empties the inbox file if it still holds what was taken (text written since is
// left for the next iteration).
func emptyInboxFile(workspace, name, taken string) error {
	root, err := os.OpenRoot(workspace)
	if err != nil {
		return err
	}
	defer root.Close()
	now, err := readInboxFile(workspace, name)
	if err != nil || now != taken {
		return err
	}
	f, err := root.OpenFile(name, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return err
	}
	return f.Close()
}

// messagesPrompt is how the messages appear in the prompt: each marked as from the human.
func messagesPrompt(msgs []inbox.Message) string {
	var b strings.Builder
	for _, m := range msgs {
		via := ""
		if m.From != "" && m.From != "human" {
			via = ", through the " + m.From
		}
		fmt.Fprintf(&b, "\n[Message from the human%s, %s]\n%s\n", via, m.Time.UTC().Format(time.RFC3339), strings.TrimSpace(m.Text))
	}
	return b.String()
}
