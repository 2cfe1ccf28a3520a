// Command sleeper is a Go wasip1 reactor whose one export sleeps: the Go
// runtime sleeps through poll_oneoff, so it shows agentrt's poll_oneoff
// (runtime/wasi.go) serving a real Go guest. runtime/wasi_test.go builds it
// with
//
//	GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o sleeper.wasm ./runtime/testdata/sleeper
package main

import "time"

// sleepMs sleeps for ms milliseconds and returns 0.
//
//go:wasmexport sleep_ms
func sleepMs(ms int32) int32 {
	time.Sleep(time.Duration(ms) * time.Millisecond)
	return 0
}

func main() {}
