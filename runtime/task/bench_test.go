package task_test

import (
	"fmt"
	"testing"

	"github.com/harness-edge/harness-edge/internal/taskgen"
	"github.com/harness-edge/harness-edge/runtime/task"
)

// BenchmarkParse measures task.Parse at four sizes, up to MaxFileSize (the largest task file
// taken), of YAML and of JSON (the same task as the harness stores it, indented); the time per
// byte should not grow with the size.
func BenchmarkParse(b *testing.B) {
	for _, size := range []int{64 << 10, 256 << 10, 1 << 20, task.MaxFileSize} {
		b.Run(fmt.Sprintf("yaml/%dKiB", size>>10), func(b *testing.B) { benchParse(b, "big.yaml", taskgen.Big(size)) })
		data, err := taskgen.BigJSON(size)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("json/%dKiB", size>>10), func(b *testing.B) { benchParse(b, "big.json", data) })
	}
}

func benchParse(b *testing.B, name string, data []byte) {
	if _, err := task.Parse(name, data); err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := task.Parse(name, data); err != nil {
			b.Fatal(err)
		}
	}
}
