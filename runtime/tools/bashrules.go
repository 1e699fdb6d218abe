package tools

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
	"sync"

	"mvdan.cc/sh/v3/expand"
	"mvdan.cc/sh/v3/syntax"
)

// DefaultBashDeny are refused whatever a task's rules say: commands no unattended agent should
// run. The task's own deny rules add to them. They are matched against each command as it
// runs once paths, quotes and wrappers are resolved (/usr/bin/sudo, "sudo", env sudo, nice sudo,
// sh -c 'sudo ...' are all sudo).
var DefaultBashDeny = []string{
	"sudo", "sudo *", "su", "su *", "doas", "doas *", "pkexec*", "run0*",
	"rm -rf /", "rm -rf /*", "rm -rf ~", "rm -rf ~/*", "rm -fr /", "rm -fr /*",
	"mkfs*", "shutdown*", "reboot*", "poweroff*", "halt",
}

// maxBashDepth bounds how deep sh -c, eval and wrappers nest inside one another.
const maxBashDepth = 8

// checkBash applies bash's rules to a command line. The line is parsed with a real shell
// parser, and every simple command in it (in pipelines, lists, subshells, functions, command
// and process substitutions, and the code that sh -c, bash -c and eval are given) is checked:
// it must match an allow rule (when there are any) and no deny rule. A command is matched as
// bash would run it: quotes and escapes removed, leading VAR=value assignments dropped, the
// program's path cut to its name, and, for a wrapper (env, nice, timeout, xargs, sudo, ...),
// the command it runs checked in turn. With allow rules, what cannot be read without running
// it is refused: a command name from a variable or a glob, eval or sh -c of a computed string,
// arithmetic on variables (bash evaluates their contents, substitutions included).
//
// The rules are a guard rail against mistakes, not a sandbox: an allowed interpreter (python,
// make, a script in the workspace) can run anything.
func checkBash(line string, allow, deny []string) error {
	c := &bashChecker{allow: allow, deny: append(slices.Clip(DefaultBashDeny), deny...)}
	if err := c.script(line, 0); err != nil {
		return fmt.Errorf("bash: %v", err)
	}
	return nil
}

type bashChecker struct {
	allow, deny []string
}

func (c *bashChecker) strict() bool { return len(c.allow) > 0 }

// opaque is the error for what the rules cannot see through.
func (c *bashChecker) opaque(what string) error {
	return fmt.Errorf("%s cannot be checked against the allow rules without running it; write the command out", what)
}

func (c *bashChecker) script(src string, depth int) error {
	if depth > maxBashDepth {
		return fmt.Errorf("commands nest more than %d deep", maxBashDepth)
	}
	f, err := syntax.NewParser(syntax.Variant(syntax.LangBash)).Parse(strings.NewReader(src), "")
	if err != nil {
		return err
	}
	return c.node(f, depth)
}

// node checks every command under n.
func (c *bashChecker) node(n syntax.Node, depth int) error {
	var err error
	syntax.Walk(n, func(n syntax.Node) bool {
		if err != nil {
			return false
		}
		switch n := n.(type) {
		case *syntax.CallExpr:
			err = c.call(n, depth)
		case *syntax.DeclClause, *syntax.LetClause, *syntax.ArithmCmd, *syntax.TestClause:
			err = c.clause(n)
		case *syntax.ArithmExp:
			err = c.arithm("$((...))", n.X)
		case *syntax.ParamExp:
			err = c.param(n)
		case *syntax.Assign:
			err = c.arithm("an array subscript", n.Index)
		case *syntax.ForClause:
			if cl, ok := n.Loop.(*syntax.CStyleLoop); ok {
				for _, x := range []syntax.ArithmExpr{cl.Init, cl.Cond, cl.Post} {
					if err = c.arithm("for ((...))", x); err != nil {
						break
					}
				}
			}
		}
		return err == nil
	})
	return err
}

// clause checks a builtin that the parser gives its own node (declare, let, ((...)), [[...]])
// as the command it is.
func (c *bashChecker) clause(n syntax.Node) error {
	var text strings.Builder
	_ = syntax.NewPrinter(syntax.Minify(true)).Print(&text, n)
	cmd := strings.Join(strings.Fields(text.String()), " ")
	switch n := n.(type) {
	case *syntax.LetClause:
		for _, x := range n.Exprs {
			if err := c.arithm("let", x); err != nil {
				return err
			}
		}
	case *syntax.ArithmCmd:
		if err := c.arithm("((...))", n.X); err != nil {
			return err
		}
	case *syntax.TestClause:
		var err error
		syntax.Walk(n.X, func(m syntax.Node) bool {
			if b, ok := m.(*syntax.BinaryTest); ok && err == nil && b.Op >= syntax.TsEql && b.Op <= syntax.TsGtr {
				for _, side := range []syntax.TestExpr{b.X, b.Y} {
					if w, ok := side.(*syntax.Word); ok && !isNumber(w.Lit()) && c.strict() {
						err = c.opaque("an arithmetic comparison of variables in [[ ]]")
					}
				}
			}
			return err == nil
		})
		if err != nil {
			return err
		}
	}
	return c.match(cmd)
}

var number = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^-?(0[xX][0-9a-fA-F]+|[0-9]+(#[0-9a-zA-Z@_]+)?)$`)
})

func isNumber(s string) bool { return number().MatchString(s) }

// arithm refuses, with allow rules, arithmetic that names variables: bash evaluates a variable's
// contents as an expression, and an array subscript in them runs its command substitutions.
func (c *bashChecker) arithm(what string, x syntax.ArithmExpr) error {
	if x == nil || !c.strict() {
		return nil
	}
	var err error
	syntax.Walk(x, func(n syntax.Node) bool {
		switch n := n.(type) {
		case *syntax.Word:
			if !isNumber(n.Lit()) {
				err = c.opaque("arithmetic on variables in " + what)
			}
			return false
		case *syntax.ParamExp:
			err = c.opaque("arithmetic on variables in " + what)
		}
		return err == nil
	})
	return err
}

// param refuses, with allow rules, the expansions that evaluate a variable's contents.
func (c *bashChecker) param(p *syntax.ParamExp) error {
	if !c.strict() {
		return nil
	}
	switch {
	case p.Excl:
		return c.opaque("an indirect expansion ${!...}")
	case p.Exp != nil && p.Exp.Op == syntax.OtherParamOps:
		return c.opaque("a ${...@op} expansion")
	}
	if err := c.arithm("a subscript", p.Index); err != nil {
		return err
	}
	if p.Slice != nil {
		if err := c.arithm("a substring expansion", p.Slice.Offset); err != nil {
			return err
		}
		return c.arithm("a substring expansion", p.Slice.Length)
	}
	return nil
}

// dangerousEnv are assignments that make an allowed program run something else.
var dangerousEnv = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(LD_[A-Z_]+|BASH_ENV|ENV|BASH_FUNC_.*|PROMPT_COMMAND|PS4|SHELLOPTS|BASHOPTS|IFS)$`)
})

// call checks one simple command.
func (c *bashChecker) call(ce *syntax.CallExpr, depth int) error {
	if c.strict() {
		for _, a := range ce.Assigns {
			if a.Name != nil && dangerousEnv().MatchString(a.Name.Value) {
				return c.opaque("setting " + a.Name.Value)
			}
		}
	}
	if len(ce.Args) == 0 {
		return nil // only assignments (their values are walked on their own)
	}
	var argv []word
	for _, w := range ce.Args {
		ws, err := c.words(w)
		if err != nil {
			return err
		}
		argv = append(argv, ws...)
	}
	return c.command(argv, depth)
}

// word is one argument: its text as bash would pass it when static, its source otherwise.
type word struct {
	text   string
	static bool
}

// words expands a word's braces and removes its quotes. A word with an expansion or a
// substitution is not static; its source text stands for it (the expansion cannot add
// commands: the substitutions in it are checked where they are).
func (c *bashChecker) words(w *syntax.Word) ([]word, error) {
	if !staticWord(w) {
		var src strings.Builder
		_ = syntax.NewPrinter().Print(&src, w)
		return []word{{text: src.String()}}, nil
	}
	cp := &syntax.Word{Parts: slices.Clone(w.Parts)}
	syntax.SplitBraces(cp)
	var out []word
	for f, err := range expand.BracesSeq(nil, cp) {
		if err != nil {
			return nil, c.opaque("a brace expansion this large")
		}
		s, err := literal(f)
		if err != nil {
			return nil, err
		}
		out = append(out, word{text: s, static: !hasGlob(f)})
	}
	return out, nil
}

// literal is a static word's text with its quotes and escapes removed.
func literal(w *syntax.Word) (string, error) {
	var b strings.Builder
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok {
			for i := 0; i < len(l.Value); i++ {
				switch {
				case l.Value[i] != '\\' || i+1 == len(l.Value):
					b.WriteByte(l.Value[i])
				case l.Value[i+1] == '\n': // a line continuation
					i++
				default:
					b.WriteByte(l.Value[i+1])
					i++
				}
			}
			continue
		}
		s, err := expand.Literal(nil, &syntax.Word{Parts: []syntax.WordPart{p}})
		if err != nil {
			return "", err
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// staticWord says whether a word is only literal text and quotes.
func staticWord(w *syntax.Word) bool {
	for _, p := range w.Parts {
		switch p := p.(type) {
		case *syntax.Lit, *syntax.SglQuoted:
		case *syntax.DblQuoted:
			for _, q := range p.Parts {
				if _, ok := q.(*syntax.Lit); !ok {
					return false
				}
			}
		default:
			return false
		}
	}
	return true
}

// hasGlob says whether an unquoted part of a word holds a pattern character (the word may
// expand to file names).
func hasGlob(w *syntax.Word) bool {
	for _, p := range w.Parts {
		if l, ok := p.(*syntax.Lit); ok && strings.ContainsAny(l.Value, "*?[") {
			return true
		}
	}
	return false
}

// command checks a command given as its words, then the command it runs when it is a wrapper.
func (c *bashChecker) command(argv []word, depth int) error {
	if depth > maxBashDepth {
		return fmt.Errorf("commands nest more than %d deep", maxBashDepth)
	}
	if len(argv) == 0 {
		return nil
	}
	name := argv[0]
	if !name.static {
		if c.strict() {
			return c.opaque(fmt.Sprintf("a command name computed at run time (%s)", name.text))
		}
		return c.match(join(argv)) // the deny rules still see what they can
	}
	base := path.Base(name.text)
	resolved := append([]word{{text: base, static: true}}, argv[1:]...)
	if err := c.match(join(resolved)); err != nil {
		return err
	}
	args := argv[1:]
	if positionalWrappers[base] {
		// These take values the rules do not parse exactly: the deny rules see every tail.
		for i := range args {
			if args[i].static {
				tail := append([]word{{text: path.Base(args[i].text), static: true}}, args[i+1:]...)
				if err := c.denied(join(tail)); err != nil {
					return err
				}
			}
		}
	}
	switch base {
	case "env":
		return c.wrapped(skipOptions(args, "uCSP", "S"), depth, "env -S")
	case "command":
		if len(args) > 0 && (args[0].text == "-v" || args[0].text == "-V") {
			return nil // only looks the name up
		}
		return c.wrapped(skipOptions(args, "", ""), depth, "")
	case "nice", "ionice", "chrt", "taskset", "stdbuf", "setsid", "nohup", "time",
		"exec", "builtin", "chroot", "unbuffer", "flock", "doas", "sudo", "pkexec", "run0", "watch", "strace", "ltrace":
		return c.wrapped(skipOptions(args, "nNcpsoeiguUCDhrtTwlEd", ""), depth, "")
	case "timeout":
		rest := skipOptions(args, "sk", "")
		if len(rest) > 0 {
			rest = rest[1:] // the duration
		}
		return c.wrapped(rest, depth, "")
	case "xargs", "parallel", "find":
		if base == "find" {
			return c.findExec(args, depth)
		}
		return c.wrapped(skipOptions(args, "ILnPdEsa", ""), depth, "")
	case "su":
		for i, a := range args {
			if (a.text == "-c" || a.text == "--command") && i+1 < len(args) {
				return c.code(args[i+1], depth)
			}
		}
	case "sh", "bash", "dash", "zsh", "ksh", "mksh", "ash", "busybox":
		if base == "busybox" && len(args) > 0 {
			return c.command(args, depth+1)
		}
		for i := 0; i < len(args); i++ {
			a := args[i].text
			switch {
			case a == "-o" || a == "+o" || a == "-O" || a == "+O" || a == "--rcfile" || a == "--init-file":
				i++ // the option's value
			case strings.HasPrefix(a, "--"):
			case len(a) > 1 && (a[0] == '-' || a[0] == '+'):
				if strings.ContainsRune(a[1:], 'c') {
					if i+1 < len(args) {
						return c.code(args[i+1], depth)
					}
					return nil
				}
			default:
				return nil // a script file or stdin: an allowed interpreter can run anything
			}
		}
	case "eval", "trap":
		var parts []string
		for _, a := range args {
			if !a.static {
				if c.strict() {
					return c.opaque(base + " of a computed string")
				}
				return nil
			}
			parts = append(parts, a.text)
		}
		if base == "trap" && len(parts) > 0 {
			parts = parts[:1]
		}
		return c.script(strings.Join(parts, " "), depth+1)
	}
	return nil
}

// code checks a string that a shell runs as a script (sh -c, su -c).
func (c *bashChecker) code(w word, depth int) error {
	if !w.static {
		if c.strict() {
			return c.opaque("sh -c of a computed string")
		}
		return nil
	}
	return c.script(w.text, depth+1)
}

// findExec checks the commands that find's -exec, -execdir, -ok and -okdir run.
func (c *bashChecker) findExec(args []word, depth int) error {
	for i := 0; i < len(args); i++ {
		switch args[i].text {
		case "-exec", "-execdir", "-ok", "-okdir":
			j := i + 1
			for j < len(args) && args[j].text != ";" && args[j].text != "+" {
				j++
			}
			if err := c.command(args[i+1:j], depth+1); err != nil {
				return err
			}
			i = j
		}
	}
	return nil
}

// wrapped checks the command a wrapper runs.
func (c *bashChecker) wrapped(rest []word, depth int, opaqueOpt string) error {
	if rest == nil && opaqueOpt != "" {
		if c.strict() {
			return c.opaque(opaqueOpt)
		}
		return nil
	}
	for len(rest) > 0 && rest[0].static && isAssignment(rest[0].text) {
		rest = rest[1:]
	}
	return c.command(rest, depth+1)
}

// skipOptions drops a wrapper's options: withArg lists the short options that take a value
// (as the next word when not joined). An option in refuse makes it return nil: the wrapper
// does something the rules cannot follow.
func skipOptions(args []word, withArg, refuse string) []word {
	for i := 0; i < len(args); i++ {
		a := args[i].text
		switch {
		case a == "--":
			return args[i+1:]
		case strings.HasPrefix(a, "--"):
			if strings.HasPrefix(a, "--split-string") {
				return nil
			}
			continue
		case len(a) > 1 && a[0] == '-' && !isNumber(a):
			if refuse != "" && strings.ContainsAny(a[1:2], refuse) {
				return nil
			}
			if len(a) == 2 && strings.ContainsRune(withArg, rune(a[1])) {
				i++
			}
			continue
		case len(a) > 1 && a[0] == '-': // nice -10
			continue
		}
		return args[i:]
	}
	return []word{}
}

func join(ws []word) string {
	s := make([]string, len(ws))
	for i, w := range ws {
		s[i] = w.text
	}
	return strings.Join(strings.Fields(strings.Join(s, " ")), " ")
}

// positionalWrappers run a command after values the rules do not parse exactly.
var positionalWrappers = map[string]bool{"taskset": true, "chrt": true, "ionice": true, "flock": true,
	"watch": true, "timeout": true, "xargs": true, "parallel": true, "strace": true, "ltrace": true, "chroot": true}

// denied checks one command against the deny rules.
func (c *bashChecker) denied(cmd string) error {
	for _, d := range c.deny {
		if wildcard(d, cmd) {
			return fmt.Errorf("%q is denied (rule %q)", cmd, d)
		}
	}
	return nil
}

// match checks one command against the deny rules and then the allow rules.
func (c *bashChecker) match(cmd string) error {
	if err := c.denied(cmd); err != nil {
		return err
	}
	if !c.strict() {
		return nil
	}
	for _, a := range c.allow {
		if wildcard(a, cmd) {
			return nil
		}
	}
	return fmt.Errorf("%q matches no allow rule %q", cmd, c.allow)
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
