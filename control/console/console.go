// Package console is the daemon's web console: a phone-sized page served at "/" of the HTTP
// API's address, its HTML, CSS and JavaScript embedded in the binary, that does everything
// through the HTTP API itself.
//
// A person signs in with the API's bearer token through a form; the console then keeps a
// session in an HttpOnly, SameSite=Strict cookie (Secure over TLS). A request that carries
// the session's cookie and no Authorization header is passed to the API as if it carried the
// token, after these checks on every request that changes state (any method but GET and
// HEAD): the session's CSRF token in the X-CSRF-Token header (compared in constant time), and
// the browser's own word on where the request comes from (Sec-Fetch-Site same-origin, or an
// Origin of this host). A request with an Authorization header is passed on untouched: the
// API checks its token as before.
package console

import (
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

//go:embed assets
var assets embed.FS

// CookieName is the session cookie's name; CSRFHeader the header that carries a session's
// CSRF token on a request that changes state.
const (
	CookieName = "harness_edge_session"
	CSRFHeader = "X-CSRF-Token"
)

// Defaults for Options.
const (
	// DefaultSessionTTL is how long a sign-in lasts.
	DefaultSessionTTL = 12 * time.Hour
	// DefaultMaxSessions is how many sessions are kept at once; signing in beyond it ends the
	// oldest.
	DefaultMaxSessions = 32
	// maxLoginBody bounds a sign-in form (a 64-character token and little else).
	maxLoginBody = 4096
)

// Options configure the console.
type Options struct {
	// SessionTTL is how long a sign-in lasts (default DefaultSessionTTL).
	SessionTTL time.Duration
	// MaxSessions bounds the sessions kept at once (default DefaultMaxSessions).
	MaxSessions int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Handler serves the console in front of api, the HTTP API that takes token as its bearer
// token: the console's pages and sign-in itself, everything else through api (see the
// package comment).
func Handler(api http.Handler, token string, o Options) http.Handler {
	if o.SessionTTL <= 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.MaxSessions <= 0 {
		o.MaxSessions = DefaultMaxSessions
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	static, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embedded tree is fixed at build time
	}
	c := &console{api: api, token: []byte(token), o: o, sessions: map[[32]byte]*session{}, static: http.FileServerFS(static)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /{$}", c.page)
	mux.HandleFunc("GET /console/{file}", c.asset)
	mux.HandleFunc("POST /console/login", c.login)
	mux.HandleFunc("POST /console/logout", c.logout)
	mux.HandleFunc("GET /console/session", c.sessionInfo)
	mux.HandleFunc("/", c.toAPI)
	return mux
}

type console struct {
	api    http.Handler
	token  []byte
	o      Options
	static http.Handler

	mu       sync.Mutex
	sessions map[[32]byte]*session
}

// session is one sign-in. It is found by the SHA-256 of its cookie's value, so a lookup's
// time says nothing about the values the daemon holds.
type session struct {
	csrf    string
	created time.Time
	expires time.Time
}

// securityHeaders keep the console's pages out of frames (a hidden Approve button under a
// visitor's click) and its scripts to its own.
func securityHeaders(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	// With no-referrer a browser sends "Origin: null" on the page's own form posts.
	h.Set("Referrer-Policy", "same-origin")
}

func (c *console) page(w http.ResponseWriter, r *http.Request) {
	securityHeaders(w)
	w.Header().Set("Cache-Control", "no-store")
	b, err := assets.ReadFile("assets/index.html")
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(b)
}

func (c *console) asset(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("file")
	switch name {
	case "login", "logout", "session":
		writeError(w, http.StatusMethodNotAllowed, fmt.Errorf("%s %s: see docs/console.md", r.Method, r.URL.Path))
		return
	}
	if _, err := fs.Stat(assets, "assets/"+name); err != nil || name == "index.html" {
		writeError(w, http.StatusNotFound, fmt.Errorf("the console has no file %q", name))
		return
	}
	securityHeaders(w)
	r2 := r.Clone(r.Context())
	r2.URL.Path = "/" + name
	c.static.ServeHTTP(w, r2)
}

func writeError(w http.ResponseWriter, code int, err error) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
}

func (c *console) lookup(r *http.Request) (key [32]byte, s *session) {
	ck, err := r.Cookie(CookieName)
	if err != nil || ck.Value == "" {
		return key, nil
	}
	key = sha256.Sum256([]byte(ck.Value))
	c.mu.Lock()
	defer c.mu.Unlock()
	s = c.sessions[key]
	if s != nil && !c.o.Now().Before(s.expires) {
		delete(c.sessions, key)
		return key, nil
	}
	return key, s
}

// sameOrigin is the browser's word that r comes from a page of this host: Sec-Fetch-Site
// when the browser sends it, else Origin when it sends that. A request with neither (not a
// browser's) passes on its CSRF token alone.
func sameOrigin(r *http.Request) error {
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" {
		return fmt.Errorf("the request comes from another site (Sec-Fetch-Site: %s)", site)
	}
	if o := r.Header.Get("Origin"); o != "" {
		u, err := url.Parse(o)
		if o == "null" || err != nil || u.Host != r.Host {
			return fmt.Errorf("the request comes from another origin (Origin: %s, this host: %s)", o, r.Host)
		}
	}
	return nil
}

// overTLS says whether the browser reached the daemon over TLS: directly, or through a proxy
// that says so (X-Forwarded-Proto: https). A client that lies gets only a stricter cookie.
func overTLS(r *http.Request) bool {
	return r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
}

func randomHex() string {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b)
}

func (c *console) login(w http.ResponseWriter, r *http.Request) {
	r.Body = http.MaxBytesReader(w, r.Body, maxLoginBody)
	if err := sameOrigin(r); err != nil {
		writeError(w, http.StatusForbidden, fmt.Errorf("sign-in refused: %w", err))
		return
	}
	if err := r.ParseForm(); err != nil {
		writeError(w, http.StatusBadRequest, fmt.Errorf("sign-in: the form is not one the console sends: %v", err))
		return
	}
	got := strings.TrimSpace(r.PostForm.Get("token"))
	if len(c.token) == 0 || subtle.ConstantTimeCompare([]byte(got), c.token) != 1 {
		http.Redirect(w, r, "/?signin=wrong", http.StatusSeeOther)
		return
	}
	value, now := randomHex(), c.o.Now()
	key := sha256.Sum256([]byte(value))
	c.mu.Lock()
	for k, s := range c.sessions {
		if !now.Before(s.expires) {
			delete(c.sessions, k)
		}
	}
	for len(c.sessions) >= c.o.MaxSessions {
		var oldest [32]byte
		var at time.Time
		for k, s := range c.sessions {
			if at.IsZero() || s.created.Before(at) {
				oldest, at = k, s.created
			}
		}
		delete(c.sessions, oldest)
	}
	c.sessions[key] = &session{csrf: randomHex(), created: now, expires: now.Add(c.o.SessionTTL)}
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: value, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: overTLS(r), MaxAge: int(c.o.SessionTTL / time.Second)})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// checkUnsafe checks a state-changing request made with session s.
func checkUnsafe(r *http.Request, s *session) error {
	if err := sameOrigin(r); err != nil {
		return err
	}
	got := r.Header.Get(CSRFHeader)
	if got == "" {
		return fmt.Errorf("the request has no %s header (the console sends its session's)", CSRFHeader)
	}
	if subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
		return fmt.Errorf("the request's %s is not this session's", CSRFHeader)
	}
	return nil
}

func (c *console) logout(w http.ResponseWriter, r *http.Request) {
	key, s := c.lookup(r)
	if s == nil {
		writeError(w, http.StatusUnauthorized, errors.New("not signed in"))
		return
	}
	if err := checkUnsafe(r, s); err != nil {
		writeError(w, http.StatusForbidden, fmt.Errorf("sign-out refused: %w", err))
		return
	}
	c.mu.Lock()
	delete(c.sessions, key)
	c.mu.Unlock()
	http.SetCookie(w, &http.Cookie{Name: CookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: overTLS(r), MaxAge: -1})
	w.WriteHeader(http.StatusNoContent)
}

// SessionInfo is GET /console/session: the session's CSRF token and when it ends.
type SessionInfo struct {
	CSRF    string    `json:"csrf"`
	Expires time.Time `json:"expires"`
}

func (c *console) sessionInfo(w http.ResponseWriter, r *http.Request) {
	_, s := c.lookup(r)
	w.Header().Set("Cache-Control", "no-store")
	if s == nil {
		writeError(w, http.StatusUnauthorized, errors.New("not signed in: sign in with the token in http.token in the store directory"))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(SessionInfo{CSRF: s.csrf, Expires: s.expires})
}

// toAPI passes a request to the API: as it is when it carries an Authorization header or no
// live session, else with the token in place of the cookie, once a state-changing request has
// passed checkUnsafe.
func (c *console) toAPI(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "" {
		c.api.ServeHTTP(w, r)
		return
	}
	_, s := c.lookup(r)
	if s == nil {
		c.api.ServeHTTP(w, r)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		if err := checkUnsafe(r, s); err != nil {
			writeError(w, http.StatusForbidden, fmt.Errorf("%s %s refused: %w", r.Method, r.URL.Path, err))
			return
		}
	}
	r2 := r.Clone(r.Context())
	r2.Header.Set("Authorization", "Bearer "+string(c.token))
	c.api.ServeHTTP(w, r2)
}
