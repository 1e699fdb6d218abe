//go:build !nohub

package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/jwt/v2"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nkeys"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/statefmt"
)

// docUser is a user of the worked example in docs/fleet.md, as its `nsc add user` says.
type docUser struct {
	name          string
	pub, sub      []string
	allowResponse bool
}

// docUsers reads the `nsc add user` commands of docs/fleet.md: the test's accounts are the
// documented ones, word for word.
func docUsers(t *testing.T) map[string]docUser {
	t.Helper()
	b, err := os.ReadFile("../../../../docs/fleet.md")
	if err != nil {
		t.Fatal(err)
	}
	text := strings.ReplaceAll(string(b), "\\\n", " ")
	users := map[string]docUser{}
	word := regexp.MustCompile(`'[^']*'|\S+`)
	for _, line := range strings.Split(text, "\n") {
		if !strings.HasPrefix(line, "nsc add user ") {
			continue
		}
		words := word.FindAllString(line, -1)
		var u docUser
		for i := 3; i < len(words); i++ {
			arg := func() string {
				i++
				if i == len(words) {
					t.Fatalf("docs/fleet.md: %s: %s wants a value", line, words[i-1])
				}
				return strings.Trim(words[i], "'")
			}
			switch words[i] {
			case "--account":
				arg()
			case "--name":
				u.name = arg()
			case "--allow-pub":
				u.pub = append(u.pub, strings.Split(arg(), ",")...)
			case "--allow-sub":
				u.sub = append(u.sub, strings.Split(arg(), ",")...)
			case "--allow-pub-response":
				u.allowResponse = true
			default:
				t.Fatalf("docs/fleet.md: %s: the test does not know %s", line, words[i])
			}
		}
		users[u.name] = u
	}
	for _, n := range []string{"pi1", "pi2", "pi3", "watch", "ops"} {
		if _, ok := users[n]; !ok {
			t.Fatalf("docs/fleet.md has no `nsc add user --name %s` (it has %d users)", n, len(users))
		}
	}
	return users
}

// operatorMode makes an operator, a system account and the account FLEET (JetStream on) as
// the documented `nsc add operator/account` do, and a .creds file in dir for each user; it
// returns the server's configuration for them (`nsc generate config --mem-resolver`).
func operatorMode(t *testing.T, dir string, users map[string]docUser) (conf string, creds map[string]string) {
	t.Helper()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	op, err := nkeys.CreateOperator()
	must(err)
	opPub, err := op.PublicKey()
	must(err)
	oc := jwt.NewOperatorClaims(opPub)
	oc.Name = "fleet"
	account := func(name string, js bool) (nkeys.KeyPair, string, string) {
		kp, err := nkeys.CreateAccount()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		ac := jwt.NewAccountClaims(pub)
		ac.Name = name
		if js {
			ac.Limits.JetStreamLimits = jwt.JetStreamLimits{MemoryStorage: -1, DiskStorage: -1, Streams: -1, Consumer: -1}
		}
		tok, err := ac.Encode(op)
		must(err)
		return kp, pub, tok
	}
	_, sysPub, sysJWT := account("SYS", false)
	oc.SystemAccount = sysPub
	opJWT, err := oc.Encode(op)
	must(err)
	acc, accPub, accJWT := account("FLEET", true)
	creds = map[string]string{}
	for name, u := range users {
		kp, err := nkeys.CreateUser()
		must(err)
		pub, err := kp.PublicKey()
		must(err)
		seed, err := kp.Seed()
		must(err)
		uc := jwt.NewUserClaims(pub)
		uc.Name = name
		uc.Pub.Allow.Add(u.pub...)
		uc.Sub.Allow.Add(u.sub...)
		if u.allowResponse {
			uc.Resp = &jwt.ResponsePermission{MaxMsgs: 1}
		}
		tok, err := uc.Encode(acc)
		must(err)
		b, err := jwt.FormatUserConfig(tok, seed)
		must(err)
		creds[name] = filepath.Join(dir, name+".creds")
		must(os.WriteFile(creds[name], b, 0o600))
	}
	conf = fmt.Sprintf("operator: %q\nsystem_account: %s\nresolver: MEMORY\nresolver_preload: {\n  %s: %q\n  %s: %q\n}\n",
		opJWT, sysPub, sysPub, sysJWT, accPub, accJWT)
	return conf, creds
}

// TestFleetPermissionsAsDocumented runs a nats-server in operator mode over mutual TLS with the
// accounts of docs/fleet.md's worked example (read from it), three daemons (pi1, pi2, and pi3
// that may adopt) with their devices' credentials files and the two operators' commands: each
// device replicates; a device reads nothing of the other's, cannot subscribe to its subjects
// or replies, cannot forge a record for it, write the fence nor answer its gates; the reading
// operator's ls, show, events and report work and its approve, pause and adopt are refused at
// once with the server's reason; the answering operator's approve works, and so does its
// adoption of a killed device's harness on pi3.
func TestFleetPermissionsAsDocumented(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, filepath.Join(dir, "pki"), "fleet")
	srvCert, srvKey := ca.issue(t, "server", true)
	auth, creds := operatorMode(t, dir, docUsers(t))
	// docs/fleet.md's nats-server.conf, with this test's files.
	url := startNATSServer(t, dir, fmt.Sprintf(`listen: 127.0.0.1:-1
%s
jetstream { store_dir: %q }
max_payload: 8MB
tls {
  cert_file: %q
  key_file: %q
  ca_file: %q
  verify: true
}
`, auth, filepath.Join(dir, "js"), srvCert, srvKey, ca.CA))
	certs := map[string][2]string{}
	for name := range creds {
		c, k := ca.issue(t, name, false)
		certs[name] = [2]string{c, k}
	}
	as := func(user string, args ...string) []string {
		return append(args, "--nats", url, "--nats-ca", ca.CA, "--nats-cert", certs[user][0], "--nats-key", certs[user][1], "--nats-creds", creds[user])
	}
	stores := map[string]string{}
	daemons := map[string]*daemon{}
	for _, dev := range []string{"pi1", "pi2", "pi3"} {
		stores[dev] = filepath.Join(dir, dev)
		d := startDaemon(t, stores[dev], as(dev, "--device", dev)...)
		daemons[dev] = d
		t.Cleanup(func() {
			if t.Failed() {
				t.Logf("%s's daemon:\n%s", dev, d.log)
			}
		})
		if dev == "pi3" {
			continue // it runs nothing of its own
		}
		task := writeTask(t, dir, dev+".yaml", daemonTask("job", filepath.Join(dir, "ws-"+dev), 2, "5ms", true))
		if code, out, stderr := run(t, "--store", stores[dev], "submit", task); code != ExitOK {
			t.Fatalf("submit on %s: exit %d: %s%s", dev, code, out, stderr)
		}
	}

	// The reading operator sees both devices; ls, show, events and report work.
	waitFleetStatus(t, "pi1/job", statefmt.StatusPaused, as("watch")...)
	waitFleetStatus(t, "pi2/job", statefmt.StatusPaused, as("watch")...)
	for _, args := range [][]string{{"fleet", "ls"}, {"fleet", "show", "pi1/job"}, {"fleet", "show", "pi2/job", "--json"},
		{"fleet", "events", "pi1/job"}, {"fleet", "report"}} {
		if code, out, stderr := run(t, as("watch", args...)...); code != ExitOK || out == "" {
			t.Errorf("%v as the reading operator: exit %d: %s%s", args, code, out, stderr)
		}
	}
	// Its approve is refused by the server, at once, with the server's reason.
	refused := func(user string, args []string, want ...string) {
		t.Helper()
		start := time.Now()
		code, out, stderr := run(t, as(user, args...)...)
		took := time.Since(start)
		if code != ExitError || out != "" || took > 5*time.Second {
			t.Errorf("%v as %s: exit %d after %v (want %d, at once): %s%s", args, user, code, took.Round(time.Millisecond), ExitError, out, stderr)
		}
		for _, w := range append(want, "NATS refused it", "the NATS user of --nats-creds "+creds[user]+" may not do this") {
			if !strings.Contains(stderr, w) {
				t.Errorf("%v as %s: stderr lacks %q: %s", args, user, w, stderr)
			}
		}
	}
	refused("watch", []string{"fleet", "approve", "pi1/job", "g1"}, `Permissions Violation for Publish to "he.fleet.pi1.ctl"`)
	refused("watch", []string{"fleet", "pause", "pi2/job"}, `Permissions Violation for Publish to "he.fleet.pi2.ctl"`)
	refused("watch", []string{"fleet", "adopt", "pi2/job", "--to", "pi3"}, `Permissions Violation for Publish to "he.fleet.pi3.ctl"`)

	// A device reads nothing of the fleet, and answers no other device's gate.
	// (A device's credentials in a fleet command are refused their first reply subscription.)
	refused("pi2", []string{"fleet", "ls"}, `Permissions Violation for Subscription to "_INBOX.`)
	refused("pi2", []string{"fleet", "show", "pi1/job"}, `Permissions Violation for Subscription to "_INBOX.`)
	refused("pi1", []string{"fleet", "approve", "pi2/job", "g1"}, `Permissions Violation for Subscription to "_INBOX.`)

	connect := func(user string) (*nats.Conn, jetstream.JetStream, chan error) {
		t.Helper()
		errs := make(chan error, 16)
		o := fleet.Options{URL: url, CA: ca.CA, Cert: certs[user][0], Key: certs[user][1], Creds: creds[user], Refused: func(err error) { errs <- err }}
		if strings.HasPrefix(user, "pi") {
			o.InboxPrefix = fleet.DeviceInbox(user) // as its daemon connects
		}
		nc, err := fleet.Connect(o, false)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(nc.Close)
		js, err := jetstream.New(nc)
		if err != nil {
			t.Fatal(err)
		}
		return nc, js, errs
	}
	expectRefusal := func(errs chan error, want string) {
		t.Helper()
		var seen []string
		for timeout := time.After(5 * time.Second); ; {
			select {
			case err := <-errs:
				if errors.Is(err, nats.ErrPermissionViolation) && strings.Contains(err.Error(), want) {
					return
				}
				seen = append(seen, err.Error())
			case <-timeout:
				t.Errorf("no refusal of %s (refused: %q)", want, seen)
				return
			}
		}
	}
	// pi2 may not listen on pi1's subjects.
	nc2, _, errs2 := connect("pi2")
	sub, err := nc2.SubscribeSync("he.fleet.pi1.>")
	if err != nil {
		t.Fatal(err)
	}
	expectRefusal(errs2, `Permissions Violation for Subscription to "he.fleet.pi1.>"`)
	// Nor on the replies to others: what the reading operator reads, pi1's acknowledgements.
	var eaves []*nats.Subscription
	for _, subj := range []string{"_INBOX.>", fleet.DeviceInbox("pi1") + ".>"} {
		s, err := nc2.SubscribeSync(subj)
		if err != nil {
			t.Fatal(err)
		}
		expectRefusal(errs2, `Permissions Violation for Subscription to "`+subj+`"`)
		eaves = append(eaves, s)
	}
	if code, out, stderr := run(t, as("watch", "fleet", "show", "pi1/job")...); code != ExitOK {
		t.Fatalf("fleet show as watch: exit %d: %s%s", code, out, stderr)
	}
	for _, s := range eaves {
		if m, err := s.NextMsg(200 * time.Millisecond); err == nil {
			t.Errorf("pi2 received %s, an answer to someone else", m.Subject)
		}
	}
	// pi1 may not forge a record, an index entry or a heartbeat for pi2, nor write the fence
	// (it may not adopt): the server refuses the publishes, and the stream stores none of them.
	nc1, js1, errs1 := connect("pi1")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, subj := range []string{fleet.Subject("pi2", "rec", "forged"), fleet.Subject("pi2", "idx", "forged"), "he.fleet.pi2.hb", "$KV." + fleet.FenceBucket + ".forged"} {
		pctx, pcancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := js1.Publish(pctx, subj, []byte("forged"))
		pcancel()
		if err == nil {
			t.Errorf("pi1 published on %s", subj)
		}
		expectRefusal(errs1, `Permissions Violation for Publish to "`+subj+`"`)
	}
	// Nor answer pi2's gates, nor its own through the fleet; and pi2 reads nothing of the fleet.
	for _, dev := range []string{"pi2", "pi1"} {
		rctx, rcancel := context.WithTimeout(ctx, 3*time.Second)
		_, err := fleet.Decide(rctx, nc1, dev, fleet.Request{ID: "forged-" + dev, Harness: "job", Gate: "g1", Approve: true}, time.Second)
		rcancel()
		if err == nil {
			t.Errorf("pi1 approved %s/job", dev)
		}
		expectRefusal(errs1, `Permissions Violation for Publish to "he.fleet.`+dev+`.ctl"`)
	}
	js2, err := jetstream.New(nc2)
	if err != nil {
		t.Fatal(err)
	}
	lctx, lcancel := context.WithTimeout(ctx, 2*time.Second)
	if f, err := fleet.List(lctx, js2); err == nil {
		t.Errorf("pi2 listed the fleet: %+v", f)
	}
	lcancel()
	expectRefusal(errs2, `Permissions Violation for Publish to "$JS.API.STREAM.INFO.HE_FLEET_INDEX"`)
	// A device reads its own records' last message (after a restart), and no other device's.
	own := "$JS.API.DIRECT.GET." + fleet.StreamLog + "." + fleet.Subject("pi2", "rec", "job")
	if m, err := nc2.Request(own, nil, 5*time.Second); err != nil || m.Header.Get("Status") != "" || m.Header.Get(fleet.HeaderSeq) == "" {
		t.Errorf("pi2's direct get of its own last record: %v, %+v", err, m)
	}
	other := "$JS.API.DIRECT.GET." + fleet.StreamLog + "." + fleet.Subject("pi1", "rec", "job")
	if m, err := nc2.Request(other, nil, 2*time.Second); err == nil && m.Header.Get("Status") == "" {
		t.Errorf("pi2 read pi1's last record (%d bytes)", len(m.Data))
	}
	expectRefusal(errs2, `Permissions Violation for Publish to "`+other+`"`)
	_, jsw, _ := connect("watch")
	if recs, err := fleet.Records(ctx, jsw, "pi2", "forged"); err != nil || len(recs) != 0 {
		t.Errorf("the fleet holds %d records of pi2/forged (%v)", len(recs), err)
	}
	if code, _, stderr := run(t, as("watch", "fleet", "show", "pi2/forged")...); code != ExitError || !strings.Contains(stderr, "the fleet holds no harness forged on device pi2") {
		t.Errorf("fleet show pi2/forged: exit %d: %s", code, stderr)
	}
	if m, err := sub.NextMsg(100 * time.Millisecond); err == nil {
		t.Errorf("pi2 received %s on pi1's subjects", m.Subject)
	}

	// The answering operator's approve works; pi1's harness completes.
	code, out, stderr := run(t, as("ops", "fleet", "approve", "pi1/job", "g1")...)
	if code != ExitOK || out != "pi1/job: gate g1 before step s1 approved; the device's daemon resumes it\n" {
		t.Fatalf("fleet approve as ops: exit %d: %q %s", code, out, stderr)
	}
	waitFleetStatus(t, "pi1/job", statefmt.StatusCompleted, as("ops")...)
	waitStatus(t, stores["pi1"], "job", statefmt.StatusCompleted)
	code, out, stderr = run(t, "--store", stores["pi2"], "show", "job", "--json")
	var st struct{ Status statefmt.Status }
	if err := json.Unmarshal([]byte(out), &st); code != ExitOK || err != nil || st.Status != statefmt.StatusPaused {
		t.Errorf("pi2/job: exit %d, status %q (want paused: only ops may answer for pi2, and did not): %v %s", code, st.Status, err, stderr)
	}

	// pi2 dies; ops adopts its harness on pi3, the device that may, and answers its gate there.
	if err := daemons["pi2"].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-daemons["pi2"].exited
	code, out, stderr = run(t, as("ops", "fleet", "adopt", "pi2/job", "--to", "pi3")...)
	if code != ExitOK || !strings.Contains(out, "pi2/job adopted by pi3") || !strings.Contains(out, "pi3/job: waits on gate(s) g1") {
		t.Fatalf("fleet adopt as ops: exit %d: %s%s\npi3's daemon:\n%s", code, out, stderr, daemons["pi3"].log)
	}
	if code, out, stderr := run(t, as("ops", "fleet", "approve", "pi3/job", "g1")...); code != ExitOK {
		t.Fatalf("fleet approve pi3/job as ops: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, stores["pi3"], "job", statefmt.StatusCompleted)
	waitFleetStatus(t, "pi3/job", statefmt.StatusCompleted, as("watch")...)
	// The documented permissions are all the daemons needed: the server refused them nothing.
	for dev, d := range daemons {
		if strings.Contains(d.log.String(), "NATS refused") {
			t.Errorf("the server refused %s's daemon something:\n%s", dev, d.log)
		}
	}
}
