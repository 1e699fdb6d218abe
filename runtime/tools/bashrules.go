package tools

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultBashDeny are refused whatever a task's rules say: commands no unattended agent should
// run. The task's own deny rules add to them.
var DefaultBashDeny = []string{
	"sudo", "sudo *", "su", "su *", "doas *",
	"rm -rf /", "rm -rf /*", "rm -rf ~", "rm -rf ~/*", "rm -fr /", "rm -fr /*",
	"mkfs*", "shutdown*", "reboot*", "poweroff*", "halt",
}

// checkBash applies bash's rules to a command line. The line is split into its simple commands
// (at unquoted ; & | newlines and parentheses); leading VAR=value assignments are dropped and
// blanks collapsed. Every simple command must match an allow rule (when there are any) and no
// deny rule. Command and process substitution hide commands from the rules, so with allow rules
// they are refused. The rules are a guard rail against mistakes, not a sandbox: an allowed
// interpreter (bash, python, ...) can run anything.
func checkBash(line string, allow, deny []string) error {
	cmds, hidden, err := simpleCommands(line)
	if err != nil {
		return fmt.Errorf("bash: %v", err)
	}
	if hidden != "" && len(allow) > 0 {
		return fmt.Errorf("bash: %s hides commands from the allow rules; write the commands out", hidden)
	}
	deny = append(slices.Clip(DefaultBashDeny), deny...)
	for _, c := range cmds {
		for _, d := range deny {
			if wildcard(d, c) {
				return fmt.Errorf("bash: %q is denied (rule %q)", c, d)
			}
		}
		if len(allow) == 0 {
			continue
		}
		ok := false
		for _, a := range allow {
			if wildcard(a, c) {
				ok = true
				break
			}
		}
		if !ok {
			return fmt.Errorf("bash: %q matches no allow rule %q", c, allow)
		}
	}
	return nil
}

// simpleCommands splits a command line into its simple commands. hidden names a command or
// process substitution when the line has one.
func simpleCommands(line string) (cmds []string, hidden string, err error) {
	var cur strings.Builder
	flush := func() {
		if c := normalise(cur.String()); c != "" {
			cmds = append(cmds, c)
		}
		cur.Reset()
	}
	quote := byte(0)
	for i := 0; i < len(line); i++ {
		c := line[i]
		switch {
		case c == '\\' && quote != '\'' && i+1 < len(line):
			cur.WriteByte(c)
			cur.WriteByte(line[i+1])
			i++
			continue
		case quote == '\'':
			if c == '\'' {
				quote = 0
			}
		case c == '`':
			hidden = "command substitution (`...`)"
		case c == '$' && i+1 < len(line) && line[i+1] == '(':
			hidden = "command substitution ($(...))"
		case quote == '"':
			if c == '"' {
				quote = 0
			}
		case c == '\'' || c == '"':
			quote = c
		case (c == '<' || c == '>') && i+1 < len(line) && line[i+1] == '(':
			hidden = "process substitution"
		case c == ';' || c == '&' || c == '|' || c == '\n' || c == '(' || c == ')':
			flush()
			continue
		}
		cur.WriteByte(c)
	}
	if quote != 0 {
		return nil, "", fmt.Errorf("unterminated %c quote", quote)
	}
	flush()
	return cmds, hidden, nil
}

// normalise collapses blanks and drops leading VAR=value assignments.
func normalise(c string) string {
	f := strings.Fields(c)
	for len(f) > 0 && isAssignment(f[0]) {
		f = f[1:]
	}
	return strings.Join(f, " ")
}

func isAssignment(w string) bool {
	i := strings.IndexByte(w, '=')
	if i <= 0 {
		return false
	}
	for j := 0; j < i; j++ {
		c := w[j]
		if !(c == '_' || c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || j > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}

// wildcard matches s against a pattern in which '*' matches any run of characters (including
// none) and everything else matches itself.
func wildcard(pattern, s string) bool {
	parts := strings.Split(pattern, "*")
	if len(parts) == 1 {
		return pattern == s
	}
	if !strings.HasPrefix(s, parts[0]) {
		return false
	}
	s = s[len(parts[0]):]
	for _, p := range parts[1 : len(parts)-1] {
		i := strings.Index(s, p)
		if i < 0 {
			return false
		}
		s = s[i+len(p):]
	}
	return strings.HasSuffix(s, parts[len(parts)-1])
}
