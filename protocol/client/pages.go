package client

import (
	"context"
	"fmt"
	"net/url"
	"strconv"
)

// Pagination is a list's place in the whole, as a server reports it.
type Pagination struct {
	TotalItems  int `json:"total_items"`
	TotalPages  int `json:"total_pages"`
	CurrentPage int `json:"current_page"`
	PageSize    int `json:"page_size"`
}

// Page asks for one page of a list. A zero field is left out of the
// request, so the server's default applies (page 1; 10 items on agentrt,
// which serves at most 100 a page).
type Page struct {
	Current int // current_page, from 1
	Size    int // page_size
}

// query is the page as a query string ("" or "?current_page=...").
func (p Page) query() string {
	q := url.Values{}
	if p.Current > 0 {
		q.Set("current_page", strconv.Itoa(p.Current))
	}
	if p.Size > 0 {
		q.Set("page_size", strconv.Itoa(p.Size))
	}
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

// AllPageSize is the page size the All methods ask for: agentrt's
// largest. A server that serves fewer a page says so in its pagination,
// and the All methods follow it.
const AllPageSize = 100

// maxPages bounds how many pages an All method reads, so that a server
// whose pagination never ends cannot keep the client reading forever. A
// variable for tests.
var maxPages = 10000

// allPages reads every page of a list through list, from page 1 until a
// page comes back empty or is the last the server counts. A server that
// answers another page than the one asked for is an error: its pages
// would be read twice or skipped.
func allPages[T any](ctx context.Context, list func(ctx context.Context, p Page) ([]T, Pagination, error)) ([]T, error) {
	var all []T
	for n := 1; ; n++ {
		items, p, err := list(ctx, Page{Current: n, Size: AllPageSize})
		if err != nil {
			return nil, err
		}
		all = append(all, items...)
		switch {
		case len(items) == 0, n >= p.TotalPages:
			return all, nil
		case p.CurrentPage != n:
			return nil, fmt.Errorf("the server answered page %d when asked for page %d", p.CurrentPage, n)
		case n >= maxPages:
			return nil, fmt.Errorf("the server's list has more than %d pages", maxPages)
		}
	}
}
