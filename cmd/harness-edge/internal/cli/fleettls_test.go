//go:build !nohub

package cli

import (
	"bufio"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"

	"github.com/harness-edge/harness-edge/fleet"
	"github.com/harness-edge/harness-edge/internal/reexec"
	"github.com/harness-edge/harness-edge/statefmt"
)

// envNATSConf makes the test binary a nats-server process run from the configuration file it
// names, as `nats-server -c FILE` runs it.
const envNATSConf = "HARNESS_EDGE_CLI_NATS_CONF"

func init() {
	conf := os.Getenv(envNATSConf)
	if conf == "" {
		return
	}
	opts, err := server.ProcessConfigFile(conf)
	if err == nil {
		opts.NoSigs = true
		var s *server.Server
		if s, err = server.NewServer(opts); err == nil {
			s.ConfigureLogger()
			go s.Start()
			if !s.ReadyForConnections(30 * time.Second) {
				err = fmt.Errorf("nats-server did not start")
			} else {
				fmt.Println(s.ClientURL())
				select {} // until killed
			}
		}
	}
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}

// startNATSServer writes conf to dir/nats-server.conf and runs a nats-server from it in a
// child process; it returns the server's client URL. The process is killed at the end.
func startNATSServer(t *testing.T, dir, conf string) string {
	t.Helper()
	path := filepath.Join(dir, "nats-server.conf")
	if err := os.WriteFile(path, []byte(conf), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := reexec.Command(envNATSConf, path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd.Stderr = &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		if sc.Scan() {
			line <- sc.Text()
		}
	}()
	select {
	case u := <-line:
		return u
	case <-time.After(30 * time.Second):
		t.Fatalf("nats-server did not start:\n%s", logs.String())
		return ""
	}
}

// pki is a certificate authority made for a test, and the files it wrote.
type pki struct {
	dir  string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	CA   string // the CA's certificate (PEM file)
}

func newPKI(t *testing.T, dir, name string) *pki {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{dir: dir, cert: cert, key: key, CA: filepath.Join(dir, name+"-ca.pem")}
	writePEM(t, p.CA, "CERTIFICATE", der)
	return p
}

// issue signs a certificate for name (for the server: for 127.0.0.1) and writes it and its
// key; it returns the two files.
func (p *pki) issue(t *testing.T, name string, server bool) (certFile, keyFile string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, err := rand.Int(rand.Reader, big.NewInt(1<<62))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: name},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.cert, &key.PublicKey, p.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile = filepath.Join(p.dir, name+".pem"), filepath.Join(p.dir, name+"-key.pem")
	writePEM(t, certFile, "CERTIFICATE", der)
	writePEM(t, keyFile, "EC PRIVATE KEY", kder)
	return certFile, keyFile
}

func writePEM(t *testing.T, path, kind string, der []byte) {
	t.Helper()
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: kind, Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
}

// waitFleetStatus runs `fleet ls --json` (with args) until DEVICE/ID has status want.
func waitFleetStatus(t *testing.T, harness string, want statefmt.Status, args ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		code, out, stderr := run(t, append([]string{"fleet", "ls", "--json"}, args...)...)
		var f fleet.Fleet
		if code == ExitOK && json.Unmarshal([]byte(out), &f) == nil {
			for _, h := range f.Harnesses {
				if h.Device+"/"+h.Entry.ID == harness && h.Entry.Status == want {
					return
				}
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("fleet ls: exit %d, want %s %s:\n%s%s", code, harness, want, out, stderr)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestFleetOverMutualTLS runs a nats-server with JetStream that speaks only TLS and verifies
// its clients' certificates (verify: true), with certificates from a CA made here: a daemon
// joined with --nats tls://… --nats-ca --nats-cert --nats-key replicates its harness, and
// `fleet ls` and `fleet approve` work with the same flags. A client that does not trust the
// CA, one without a client certificate, one whose certificate another CA signed and one on
// nats:// are refused with an error that says what to give, and a daemon without a client
// certificate runs its harness offline and logs why it cannot reach NATS; the flags' mistakes
// are usage errors that name the flag and the file.
func TestFleetOverMutualTLS(t *testing.T) {
	dir := t.TempDir()
	ca := newPKI(t, filepath.Join(dir, "pki"), "fleet")
	srvCert, srvKey := ca.issue(t, "server", true)
	devCert, devKey := ca.issue(t, "pi1", false)
	opCert, opKey := ca.issue(t, "operator", false)
	url := startNATSServer(t, dir, fmt.Sprintf(`listen: 127.0.0.1:-1
jetstream { store_dir: %q }
tls {
  cert_file: %q
  key_file: %q
  ca_file: %q
  verify: true
  timeout: 5
}
`, filepath.Join(dir, "js"), srvCert, srvKey, ca.CA))
	if !strings.HasPrefix(url, "tls://127.0.0.1:") {
		t.Fatalf("the server's URL is %q", url)
	}
	db, ws := filepath.Join(dir, "pi1"), filepath.Join(dir, "ws")
	startDaemon(t, db, "--nats", url, "--nats-ca", ca.CA, "--nats-cert", devCert, "--nats-key", devKey, "--device", "pi1")
	if code, out, stderr := run(t, "--store", db, "submit", writeTask(t, dir, "job.yaml", daemonTask("job", ws, 2, "5ms", true))); code != ExitOK {
		t.Fatalf("submit: exit %d: %s%s", code, out, stderr)
	}
	op := []string{"--nats", url, "--nats-ca", ca.CA, "--nats-cert", opCert, "--nats-key", opKey}
	waitFleetStatus(t, "pi1/job", statefmt.StatusPaused, op...)
	code, out, stderr := run(t, append([]string{"fleet", "approve", "pi1/job", "g1"}, op...)...)
	if code != ExitOK || out != "pi1/job: gate g1 before step s1 approved; the device's daemon resumes it\n" {
		t.Fatalf("fleet approve over TLS: exit %d: %q %s", code, out, stderr)
	}
	waitFleetStatus(t, "pi1/job", statefmt.StatusCompleted, op...)
	if st := waitStatus(t, db, "job", statefmt.StatusCompleted); st.Status != statefmt.StatusCompleted {
		t.Fatalf("on the device: %s", st.Status)
	}

	other := newPKI(t, filepath.Join(dir, "other"), "other")
	strangerCert, strangerKey := other.issue(t, "stranger", false)
	notPEM := writeTask(t, dir, "not-a-cert.txt", "hello\n")
	missing := filepath.Join(dir, "nothing.pem")
	for _, c := range []struct {
		name string
		args []string
		code int
		want []string
	}{
		{"no CA", []string{"--nats", url, "--nats-cert", opCert, "--nats-key", opKey}, ExitError,
			[]string{"NATS at " + url, "certificate signed by unknown authority", "give the fleet's CA with --nats-ca FILE"}},
		{"no client certificate", []string{"--nats", url, "--nats-ca", ca.CA}, ExitError,
			[]string{"NATS at " + url, "give a client certificate with --nats-cert FILE --nats-key FILE"}},
		{"a certificate of another CA", []string{"--nats", url, "--nats-ca", ca.CA, "--nats-cert", strangerCert, "--nats-key", strangerKey}, ExitError,
			[]string{"NATS at " + url, "the server refused the client certificate --nats-cert " + strangerCert}},
		{"nats:// to a TLS server (the client turns TLS on, and does not trust the CA)", []string{"--nats", strings.Replace(url, "tls://", "nats://", 1)}, ExitError,
			[]string{"certificate signed by unknown authority", "give the fleet's CA with --nats-ca FILE"}},
		{"the CA of another fleet", []string{"--nats", url, "--nats-ca", other.CA, "--nats-cert", opCert, "--nats-key", opKey}, ExitError,
			[]string{"not signed by the CA in --nats-ca " + other.CA}},
		{"a certificate without its key", []string{"--nats", url, "--nats-ca", ca.CA, "--nats-cert", opCert}, ExitUsage,
			[]string{"--nats-cert " + opCert + ": a client certificate needs its private key: give --nats-key FILE too"}},
		{"a key without its certificate", []string{"--nats", url, "--nats-ca", ca.CA, "--nats-key", opKey}, ExitUsage,
			[]string{"--nats-key " + opKey + ": a private key needs its client certificate"}},
		{"a missing CA file", []string{"--nats", url, "--nats-ca", missing}, ExitUsage,
			[]string{"--nats-ca " + missing + ": cannot read it: no such file or directory"}},
		{"a CA file that holds no certificate", []string{"--nats", url, "--nats-ca", notPEM}, ExitUsage,
			[]string{"--nats-ca " + notPEM + ": holds no PEM certificate"}},
		{"a key that is not the certificate's", []string{"--nats", url, "--nats-ca", ca.CA, "--nats-cert", opCert, "--nats-key", devKey}, ExitUsage,
			[]string{"--nats-cert " + opCert + ": with --nats-key " + devKey, "private key does not match public key"}},
		{"a missing credentials file", []string{"--nats", url, "--nats-creds", missing}, ExitUsage,
			[]string{"--nats-creds " + missing + ": cannot read it"}},
	} {
		start := time.Now()
		code, out, stderr := run(t, append([]string{"fleet", "ls", "--timeout", "5s"}, c.args...)...)
		t.Logf("%s: exit %d: %s", c.name, code, strings.TrimSpace(stderr))
		for _, w := range c.want {
			if !strings.Contains(stderr, w) {
				t.Errorf("%s: stderr lacks %q", c.name, w)
			}
		}
		if code != c.code || out != "" {
			t.Errorf("%s: exit %d (want %d), %s: %q %s", c.name, code, c.code, time.Since(start).Round(time.Millisecond), out, stderr)
		}
	}
	// A daemon the server refuses (no client certificate) works offline and says why.
	offline := filepath.Join(dir, "pi3")
	d := startDaemon(t, offline, "--nats", url, "--nats-ca", ca.CA, "--device", "pi3")
	if code, out, stderr := run(t, "--store", offline, "submit", writeTask(t, dir, "solo.yaml", daemonTask("solo", filepath.Join(dir, "ws3"), 2, "5ms", false))); code != ExitOK {
		t.Fatalf("submit offline: exit %d: %s%s", code, out, stderr)
	}
	waitStatus(t, offline, "solo", statefmt.StatusCompleted)
	for _, w := range []string{"fleet: cannot reach NATS; the device works offline and keeps trying", "give a client certificate with --nats-cert FILE --nats-key FILE"} {
		if !strings.Contains(d.log.String(), w) {
			t.Errorf("the refused daemon's log lacks %q:\n%s", w, d.log)
		}
	}

	// serve checks the same files before it starts, and the TLS flags need --nats.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--nats", url, "--nats-ca", missing, "--device", "pi2"}, "--nats-ca " + missing + ": cannot read it"},
		{[]string{"--nats", url, "--nats-ca", ca.CA, "--nats-cert", devCert, "--device", "pi2"}, "--nats-cert " + devCert + ": a client certificate needs its private key"},
		{[]string{"--nats-ca", ca.CA}, "need --nats URL"},
	} {
		code, _, stderr := run(t, append([]string{"--store", filepath.Join(dir, "pi2"), "serve"}, c.args...)...)
		if code != ExitUsage || !strings.Contains(stderr, c.want) {
			t.Errorf("serve %v: exit %d (want %d): %s", c.args, code, ExitUsage, stderr)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "pi2")); !os.IsNotExist(err) {
		t.Errorf("a refused serve made its store: %v", err)
	}
}
