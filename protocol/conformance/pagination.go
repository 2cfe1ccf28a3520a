package conformance

import (
	"fmt"
	"net/url"
	"slices"
)

var paginationChecks = []Check{{
	ID: "pagination.envelope", Group: "pagination", Level: LevelSpec,
	Asserts: "list-tasks, list-steps and list-artifacts answer an object: the items under tasks/steps/artifacts and a pagination of four integers",
	run:     checkEnvelope,
}, {
	ID: "pagination.page-size-one", Group: "pagination", Level: LevelSpec,
	Asserts: "list-tasks?page_size=1&current_page=1 answers 200 application/json: a pagination object, page_size 1, exactly one task",
	Official: []string{
		"Tasks / Get all the tasks with Pagination: Response status code is 200",
		"Tasks / Get all the tasks with Pagination: Content-Type is present",
		"Tasks / Get all the tasks with Pagination: Content-Type is application/json",
		"Tasks / Get all the tasks with Pagination: Pagination is set",
		"Tasks / Get all the tasks with Pagination: Page size is 1",
		"Tasks / Get all the tasks with Pagination: Items is an array with one item",
		"Tasks / Get all the tasks with Pagination: Response length respects page_size",
	},
	run: checkPageSizeOne,
}, {
	ID: "pagination.defaults", Group: "pagination", Level: LevelSpec,
	Asserts: "without current_page and page_size, each list answers page 1 of size 10 (the specification's defaults), at most 10 items",
	run:     checkPageDefaults,
}, {
	ID: "pagination.counts", Group: "pagination", Level: LevelStrict,
	Asserts: "total_pages = ceil(total_items / page_size); each page holds page_size items, the last what is left (tasks, steps and artifacts)",
	run:     checkPageCounts,
}, {
	ID: "pagination.past-end", Group: "pagination", Level: LevelStrict,
	Asserts: "a page past the last answers 200 with an empty list and the same total_items (tasks, steps and artifacts)",
	run:     checkPagePastEnd,
}, {
	ID: "pagination.order", Group: "pagination", Level: LevelStrict,
	Asserts: "tasks and a task's artifacts are listed in creation order, new ones last",
	run:     checkListOrder,
}, {
	ID: "pagination.bad-values", Group: "pagination", Level: LevelStrict,
	Asserts: `a current_page or page_size of 0, -1, "abc" or 1.5 answers a 4xx with a JSON {"message"}, on each list`,
	run:     checkBadPageValues,
}, {
	ID: "pagination.page-size-cap", Group: "pagination", Level: LevelStrict,
	Asserts: "a huge page_size answers 200, as is or lowered to a maximum: the items and total_pages follow the page_size the answer reports",
	run:     checkPageSizeCap,
}}

// list gets a page of a list (path, query included) and checks it is the
// specification's list response, with its items under key, each of the
// item schema.
func (s *session) list(path, key string, item func(object) error) (list, *exchange, error) {
	ex, err := s.do(get(path))
	if err != nil {
		return list{}, ex, err
	}
	o, err := ex.wantObject("a list of " + key)
	if err != nil {
		return list{}, ex, err
	}
	l, err := listShape(o, key, item)
	if err != nil {
		return list{}, ex, ex.failf("want a list of %s with a pagination (%v)", key, err)
	}
	return l, ex, nil
}

// page is the query of a page.
func page(number, size int) string {
	return fmt.Sprintf("?current_page=%d&page_size=%d", number, size)
}

// listed is one of the protocol's three lists, of a task made for a
// check where the list is a task's.
type listed struct {
	name string // "tasks", "steps", "artifacts": the key of its items
	path string
	item func(object) error
}

// threeLists makes a task with n steps and n uploaded artifacts and
// returns the three lists (tasks, its steps, its artifacts). n tasks are
// made too, so that each list holds at least n items.
func (s *session) threeLists(n int) ([]listed, error) {
	taskID, _, err := s.newSteps(n)
	if err != nil {
		return nil, err
	}
	for i := range n {
		if _, _, err := s.uploadArtifact(taskID, upload{fileName: fmt.Sprintf("item-%d.txt", i+1), data: []byte("item")}); err != nil {
			return nil, setup(err, "upload an artifact to check with")
		}
	}
	for i := 1; i < n; i++ {
		if _, err := s.newTask("a task to list"); err != nil {
			return nil, err
		}
	}
	return []listed{
		{"tasks", "/agent/tasks", taskShape},
		{"steps", taskPath(taskID, "steps"), stepShape},
		{"artifacts", taskPath(taskID, "artifacts"), artifactShape},
	}, nil
}

func checkEnvelope(s *session) error {
	lists, err := s.threeLists(1)
	if err != nil {
		return err
	}
	for _, l := range lists {
		if _, _, err := s.list(l.path, l.name, l.item); err != nil {
			return err
		}
	}
	return nil
}

func checkPageSizeOne(s *session) error {
	if _, err := s.newTask(washingtonInput); err != nil {
		return err
	}
	ex, err := s.do(get("/agent/tasks?page_size=1&current_page=1").withJSONBody(officialPlainTaskBody))
	if err != nil {
		return err
	}
	if ex.header.Get("Content-Type") == "" {
		return ex.failf("want a Content-Type")
	}
	o, err := ex.wantObject("a list of tasks")
	if err != nil {
		return err
	}
	p, ok := o["pagination"].(map[string]any)
	if !ok {
		return ex.failf("want pagination, an object (it is %s)", describeAbsent(o, "pagination"))
	}
	if n := toFloat(p["page_size"]); n != 1 {
		return ex.failf("want pagination.page_size 1")
	}
	tasks, ok := o["tasks"].([]any)
	if !ok || len(tasks) != 1 {
		return ex.failf("want tasks, an array of one task")
	}
	return nil
}

func checkPageDefaults(s *session) error {
	lists, err := s.threeLists(1)
	if err != nil {
		return err
	}
	for _, l := range lists {
		got, ex, err := s.list(l.path, l.name, l.item)
		if err != nil {
			return err
		}
		if got.page.currentPage != 1 || got.page.pageSize != 10 {
			return ex.failf("want current_page 1 and page_size 10, not %d and %d", got.page.currentPage, got.page.pageSize)
		}
		if len(got.items) > 10 {
			return ex.failf("want at most 10 %s, not %d", l.name, len(got.items))
		}
	}
	return nil
}

// ceilDiv is ceil(a / b) for positive b.
func ceilDiv(a, b int) int { return (a + b - 1) / b }

func checkPageCounts(s *session) error {
	lists, err := s.threeLists(3)
	if err != nil {
		return err
	}
	for _, l := range lists {
		for _, size := range []int{1, 2, 3} {
			first, ex, err := s.list(l.path+page(1, size), l.name, l.item)
			if err != nil {
				return err
			}
			total := first.page.totalItems
			if total < 3 {
				return ex.failf("want total_items of at least the 3 %s made, not %d", l.name, total)
			}
			if first.page.pageSize != size || first.page.currentPage != 1 {
				return ex.failf("want page_size %d and current_page 1 as asked, not %d and %d", size, first.page.pageSize, first.page.currentPage)
			}
			if want := ceilDiv(total, size); first.page.totalPages != want {
				return ex.failf("want total_pages ceil(%d / %d) = %d, not %d", total, size, want, first.page.totalPages)
			}
			if len(first.items) != size {
				return ex.failf("want a full first page of %d %s, not %d", size, l.name, len(first.items))
			}
			lastPage := ceilDiv(total, size)
			last, ex, err := s.list(l.path+page(lastPage, size), l.name, l.item)
			if err != nil {
				return err
			}
			if want := total - (lastPage-1)*size; len(last.items) != want || last.page.currentPage != lastPage {
				return ex.failf("want the last page, %d, to hold the %d %s left of %d, not %d", lastPage, want, l.name, total, len(last.items))
			}
		}
	}
	return nil
}

func checkPagePastEnd(s *session) error {
	lists, err := s.threeLists(1)
	if err != nil {
		return err
	}
	for _, l := range lists {
		first, _, err := s.list(l.path+page(1, 2), l.name, l.item)
		if err != nil {
			return err
		}
		beyond := max(first.page.totalPages, ceilDiv(first.page.totalItems, 2)) + 1
		for _, n := range []int{beyond, beyond + 1000} {
			past, ex, err := s.list(l.path+page(n, 2), l.name, l.item)
			if err != nil {
				return err
			}
			if len(past.items) != 0 {
				return ex.failf("want no %s on page %d, past the last (%d %s in pages of 2)", l.name, n, first.page.totalItems, l.name)
			}
			if past.page.totalItems != first.page.totalItems {
				return ex.failf("want total_items %d, as on page 1, not %d", first.page.totalItems, past.page.totalItems)
			}
		}
	}
	return nil
}

func checkListOrder(s *session) error {
	var made []string
	for i := range 3 {
		id, err := s.newTask(fmt.Sprintf("task %d of 3, to list in order", i+1))
		if err != nil {
			return err
		}
		made = append(made, id)
	}
	first, _, err := s.list("/agent/tasks"+page(1, 1), "tasks", taskShape)
	if err != nil {
		return err
	}
	total := first.page.totalItems
	for i, id := range made {
		n := total - len(made) + 1 + i
		l, ex, err := s.list("/agent/tasks"+page(n, 1), "tasks", taskShape)
		if err != nil {
			return err
		}
		if got := ids(l.items, "task_id"); !slices.Equal(got, []string{id}) {
			return ex.failf("want page %d of %d (page_size 1) to hold task %q, made %d of the last 3", n, total, id, i+1)
		}
	}

	taskID, err := s.newTask("a task to upload artifacts to, in order")
	if err != nil {
		return err
	}
	made = nil
	for i := range 3 {
		art, _, err := s.uploadArtifact(taskID, upload{fileName: fmt.Sprintf("order-%d.txt", i+1), data: []byte("order")})
		if err != nil {
			return setup(err, "upload an artifact to check with")
		}
		made = append(made, art.str("artifact_id"))
	}
	l, ex, err := s.list(taskPath(taskID, "artifacts")+page(1, 100), "artifacts", artifactShape)
	if err != nil {
		return err
	}
	var order []string
	for _, id := range ids(l.items, "artifact_id") {
		if slices.Contains(made, id) {
			order = append(order, id)
		}
	}
	if !slices.Equal(order, made) {
		return ex.failf("want the artifacts uploaded listed in that order: %q", made)
	}
	return nil
}

func checkBadPageValues(s *session) error {
	lists, err := s.threeLists(1)
	if err != nil {
		return err
	}
	for _, l := range lists {
		for _, param := range []string{"current_page", "page_size"} {
			for _, v := range []string{"0", "-1", "abc", "1.5"} {
				ex, err := s.do(get(l.path + "?" + param + "=" + url.QueryEscape(v)))
				if err != nil {
					return err
				}
				if err := ex.wantError("a 4xx", is4xx); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkPageSizeCap(s *session) error {
	if _, err := s.newTask("a task to list"); err != nil {
		return err
	}
	const huge = 1000000
	l, ex, err := s.list("/agent/tasks"+page(1, huge), "tasks", taskShape)
	if err != nil {
		return err
	}
	size := l.page.pageSize
	if size < 1 || size > huge {
		return ex.failf("want page_size %d or a maximum below it, not %d", huge, size)
	}
	if len(l.items) != min(size, l.page.totalItems) {
		return ex.failf("want min(page_size %d, total_items %d) tasks, not %d", size, l.page.totalItems, len(l.items))
	}
	if want := ceilDiv(l.page.totalItems, size); l.page.totalPages != want {
		return ex.failf("want total_pages ceil(%d / %d) = %d, not %d", l.page.totalItems, size, want, l.page.totalPages)
	}
	return nil
}
