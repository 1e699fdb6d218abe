// Command fake-openai serves a fake OpenAI-compatible chat-completions API on a loopback port,
// answering like a small model doing examples/openai.yaml's task (openaitest.NotesSession), so
// the openai driver can be tried without a model. Point a real task at llama.cpp's server,
// Ollama or a hosted API instead.
//
//	go run ./examples/fake-openai -addr 127.0.0.1:8089
package main

import (
	"flag"
	"log"
	"net"
	"net/http"

	"github.com/harness-edge/harness-edge/internal/openaitest"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:8089", "address to listen on")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatal(err)
	}
	fake := openaitest.NewHandler()
	fake.Respond = openaitest.NotesSession
	log.Printf("fake OpenAI-compatible API at http://%s/v1", l.Addr())
	log.Fatal(http.Serve(l, fake))
}
