// Package tasklist benchmarks GET /ap/v1/agent/tasks as the store grows:
// the first and the last page (page_size 10) with 1,000 tasks stored and
// with 1,000,000, served in-process by the HTTP API over a real store; and,
// on the same data, the queries a page took before tasks kept their
// positions (COUNT(*), then LIMIT/OFFSET), side by side.
//
//	go test ./bench/tasklist -run '^$' -bench . -benchtime 2s
//
// Seeding the big store takes a minute or two; BENCH_LIST_TASKS sets its
// size. Results are in bench/README.md.
package tasklist

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/agentrt/agentrt/protocol"
	"github.com/agentrt/agentrt/protocol/httpapi"
	"github.com/agentrt/agentrt/storage"
	"github.com/google/uuid"
	_ "modernc.org/sqlite"
)

const agent = "bench"

// agents serves one agent over a store.
type agents struct{ a *protocol.Agent }

func (g agents) Agent(string) (*protocol.Agent, error) { return g.a, nil }
func (g agents) List(context.Context) ([]httpapi.AgentInfo, error) {
	return nil, nil
}
func (g agents) Info(context.Context, string) (*httpapi.AgentInfo, error) {
	return nil, protocol.Errorf(protocol.ENOTFOUND, "none")
}

// seeded is a data directory holding n tasks, made once per process.
type seeded struct {
	once sync.Once
	dir  string
	err  error
}

var stores sync.Map // n → *seeded

func seed(b *testing.B, n int) string {
	v, _ := stores.LoadOrStore(n, &seeded{})
	s := v.(*seeded)
	s.once.Do(func() {
		s.dir = filepath.Join(os.TempDir(), fmt.Sprintf("agentrt-tasklist-%d-%d", os.Getpid(), n))
		st, err := storage.Open(context.Background(), s.dir, storage.Config{})
		if err != nil {
			s.err = err
			return
		}
		defer st.Close()
		a := st.Agent(agent)
		start := time.Now()
		work := make(chan int)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for range 64 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range work {
					t := &protocol.Task{TaskID: uuid.Must(uuid.NewV7()).String(), AdditionalInput: []byte(`{"n":` + strconv.Itoa(i) + `}`),
						CreatedAt: time.Now()}
					if err := a.CreateTask(context.Background(), t, nil, nil); err != nil {
						mu.Lock()
						s.err = err
						mu.Unlock()
					}
				}
			}()
		}
		for i := range n {
			work <- i
		}
		close(work)
		wg.Wait()
		b.Logf("seeded %d tasks in %v", n, time.Since(start).Round(time.Second))
	})
	if s.err != nil {
		b.Fatal(s.err)
	}
	return s.dir
}

func sizes() []int {
	big := 1_000_000
	if v, err := strconv.Atoi(os.Getenv("BENCH_LIST_TASKS")); err == nil && v > 0 {
		big = v
	}
	return []int{1000, big}
}

// BenchmarkListTasks is one GET of the first or the last page.
func BenchmarkListTasks(b *testing.B) {
	for _, n := range sizes() {
		dir := seed(b, n)
		st, err := storage.Open(context.Background(), dir, storage.Config{})
		if err != nil {
			b.Fatal(err)
		}
		srv := httpapi.NewServer(agents{protocol.NewAgent(st.Agent(agent), nil, protocol.AgentConfig{Name: agent})},
			httpapi.ServerConfig{Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
		for _, page := range []struct {
			name   string
			number int
		}{{"first", 1}, {"last", (n + 9) / 10}} {
			b.Run(fmt.Sprintf("tasks=%d/page=%s", n, page.name), func(b *testing.B) {
				url := fmt.Sprintf("/ap/v1/agent/tasks?current_page=%d&page_size=10", page.number)
				for range b.N {
					w := httptest.NewRecorder()
					srv.ServeHTTP(w, httptest.NewRequest(http.MethodGet, url, nil))
					if w.Code != 200 {
						b.Fatalf("%s: %d %s", url, w.Code, w.Body)
					}
				}
			})
		}
		st.Close()
	}
}

// BenchmarkListTasksBefore is the same page as the queries before task
// positions made it: a COUNT(*) of the agent's tasks, then the page by
// LIMIT and OFFSET, on the same data (the artifacts' join left out).
func BenchmarkListTasksBefore(b *testing.B) {
	for _, n := range sizes() {
		dir := seed(b, n)
		db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "agentrt.db")+"?mode=ro")
		if err != nil {
			b.Fatal(err)
		}
		for _, page := range []struct {
			name   string
			number int
		}{{"first", 1}, {"last", (n + 9) / 10}} {
			b.Run(fmt.Sprintf("tasks=%d/page=%s", n, page.name), func(b *testing.B) {
				for range b.N {
					var total int
					if err := db.QueryRow(`SELECT COUNT(*) FROM tasks WHERE agent = ?`, agent).Scan(&total); err != nil {
						b.Fatal(err)
					}
					rows, err := db.Query(`SELECT id, input, additional_input, created_at FROM tasks WHERE agent = ? ORDER BY seq LIMIT ? OFFSET ?`,
						agent, 10, (page.number-1)*10)
					if err != nil {
						b.Fatal(err)
					}
					k := 0
					for rows.Next() {
						k++
					}
					rows.Close()
					if k == 0 || total != n {
						b.Fatalf("page %d: %d rows of %d", page.number, k, total)
					}
				}
			})
		}
		db.Close()
	}
}
