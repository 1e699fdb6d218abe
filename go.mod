module github.com/harness-edge/harness-edge

go 1.26

require (
	github.com/cespare/xxhash/v2 v2.3.0
	github.com/ebitengine/purego v0.11.3
	github.com/leanovate/gopter v0.2.11
	github.com/spf13/cobra v1.10.1
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/pflag v1.0.9 // indirect
)
