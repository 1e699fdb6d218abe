package harness

import (
	"fmt"
	"strings"
)

// MaxListed is how many step ids (or other items) a message names before it says how many
// more there are: a failed first step of a 1,000-step chain blocks 999 steps, and a status
// line, an event's message or a command's output naming them all would be 10 KB long. The
// full lists stay where they are data: the plan's step statuses, an event's blocked field, a
// retry's result.
const MaxListed = 10

// ListForMessage joins items with sep for a message, naming the first MaxListed of them and
// then "and N more".
func ListForMessage(items []string, sep string) string {
	if len(items) <= MaxListed {
		return strings.Join(items, sep)
	}
	return fmt.Sprintf("%s and %d more", strings.Join(items[:MaxListed], sep), len(items)-MaxListed)
}
