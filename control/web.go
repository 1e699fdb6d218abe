package control

import (
	"net/http"

	"github.com/harness-edge/harness-edge/control/console"
)

// webHandler is everything the daemon serves on its HTTP address: the web console at "/"
// (its sign-in turns a session cookie into the token for the requests below it), GET
// /metrics, and the API.
func webHandler(api API, token string, live *liveCounters, metricsPublic bool) http.Handler {
	return console.Handler(withMetrics(Handler(api, token), api, live, token, metricsPublic), token, console.Options{})
}
