package wire

import "testing"

// BenchmarkDecodeResult is what reading a handler's result costs the
// host, for results as plugins set them.
func BenchmarkDecodeResult(b *testing.B) {
	step := []byte(`{"output":"Wrote output.txt","additional_output":{"tokens":312,"files":["output.txt"]},"is_last":true}`)
	task := []byte(`{"steps":[{"name":"Fetch"},{"name":"Summarise","input":"in 3 lines","additional_input":{"lang":"en"}},{"name":"Publish"}]}`)
	artifact := []byte(`{"replace":{"workspace_path":"out/report.pdf"}}`)
	b.Run("step", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := V1.DecodeStepResult(step); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("step/names_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := stepResultFields.Check(step); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("task", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := V1.DecodeTaskResult(task, 256); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("task/names_only", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if err := taskResultFields.Check(task); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("artifact", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := V1.DecodeArtifactResult(artifact); err != nil {
				b.Fatal(err)
			}
		}
	})
}
