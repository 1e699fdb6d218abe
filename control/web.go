package control

import (
	"net/http"

	"github.com/harness-edge/harness-edge/control/console"
)

// webHandler is everything the daemon serves on its HTTP address: the web console at "/"
// (its sign-in turns a session cookie into the token for the API below it) and the API.
func webHandler(api API, token string) http.Handler {
	return console.Handler(Handler(api, token), token, console.Options{})
}
