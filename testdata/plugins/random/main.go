// Command random is a test plugin whose step handler answers what a call
// draws at random, as a JSON object: math/rand's and math/rand/v2's
// top-level functions, crypto/rand, the seed-dependent order of a map's
// iteration, and a value its initialization drew (the same in every call
// from one snapshot). Calls must differ in everything but that.
//
// Built by the tests with Go and TinyGo (-buildmode=c-shared).
package main

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	mrand "math/rand"
	mrand2 "math/rand/v2"
	"strconv"

	agent "github.com/agentrt/agentrt/plugins/go"
)

// drawnAtInit is drawn once per initialization.
var drawnAtInit = mrand2.Uint64()

func init() {
	agent.HandleStep(func(s *agent.Step) (agent.Result, error) {
		b := make([]byte, 16)
		rand.Read(b)
		m := map[int]bool{}
		for i := range 64 {
			m[i] = true
		}
		var order []int
		for k := range m {
			order = append(order, k)
			if len(order) == 8 {
				break
			}
		}
		out, err := json.Marshal(map[string]string{
			"math_rand":    strconv.FormatInt(mrand.Int63(), 10),
			"math_rand_v2": strconv.FormatUint(mrand2.Uint64(), 10),
			"crypto_rand":  hex.EncodeToString(b),
			"map_order":    fmt.Sprint(order),
			"init":         strconv.FormatUint(drawnAtInit, 10),
		})
		return agent.Result{Output: string(out)}, err
	})
}

func main() {}
