package client

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// What New sets Client.MaxRetries and Client.MaxRetryWait to.
const (
	DefaultMaxRetries   = 5
	DefaultMaxRetryWait = 30 * time.Second
)

// defaultBackoff is the first wait before a retry when the refusal's
// Retry-After cannot be read: it doubles with each retry, up to
// MaxRetryWait.
const defaultBackoff = time.Second

// minJitter is the least spread added to a wait: a Retry-After of 0
// still does not bring a storm of clients back at one instant.
const minJitter = 200 * time.Millisecond

// Retries: a server too busy for a request answers 503 (Service
// Unavailable) or 429 (Too Many Requests) with a Retry-After header, and
// the client sends the request again after that long (see
// Client.MaxRetries). agentrt answers so only when nothing of the request
// was done: a step refused because MaxTaskWaiters requests already wait
// for its task is not recorded (protocol/tasklock.go, taken before the
// step is looked up), nor is one refused for a full instance queue
// (the step's running mark is undone) or an upload refused for
// --max-uploads (before its body is read) or for its busy task (its
// staged bytes are discarded). The one 503 with Retry-After that follows
// a recorded step is a step interrupted by the server's shutdown: its
// failure is recorded on the step, and the answer names it (step_id,
// code "interrupted"); such an answer is never retried. A 503 or 429
// without Retry-After is not retried either: the server did not say
// that waiting helps (agentrt's 429 is a task that used up a budget).

// exchange sends the request newReq makes through hc, and again while
// its answer is a refusal worth retrying (retryWait) and again allows it
// (nil: notRecorded). It returns the first answer that is a 2xx or 3xx,
// its body for the caller to read and close; any other is an *Error, its
// body read and closed. newReq is called once for each sending, and must
// give a request with a fresh body each time. ctx bounds the waits: when
// it ends during one, the refusal is returned wrapped with ctx's error.
func (c *Client) exchange(ctx context.Context, hc *http.Client, newReq func() (*http.Request, error), again func(e *Error) bool) (*http.Response, error) {
	if again == nil {
		again = notRecorded
	}
	for retries := 0; ; retries++ {
		req, err := newReq()
		if err != nil {
			return nil, err
		}
		res, err := hc.Do(req)
		if err != nil {
			return nil, err
		}
		if res.StatusCode >= 200 && res.StatusCode <= 399 {
			return res, nil
		}
		e := errorOf(res)
		res.Body.Close()
		e.Retries = retries
		wait, ok := c.retryWait(e, res.Header, retries)
		if !ok || !again(e) {
			return nil, e
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("%w while waiting %s to send the request again: %w", ctx.Err(), wait.Round(time.Millisecond), e)
		case <-c.after(wait):
		}
	}
}

// retryWait says whether a request refused with e, whose answer's
// headers are h, after it was sent again retries times, may be sent once
// more, and how long to wait first: its Retry-After (or when that cannot
// be read, a backoff doubling from defaultBackoff) with jitter added, so
// that the clients of a storm do not all come back at one instant. It
// sets e.RetryAfter.
func (c *Client) retryWait(e *Error, h http.Header, retries int) (time.Duration, bool) {
	values := h.Values("Retry-After")
	if len(values) == 0 {
		return 0, false
	}
	base, readable := parseRetryAfter(values[0], c.clockNow())
	if readable {
		e.RetryAfter = base
	}
	switch {
	case e.StatusCode != http.StatusServiceUnavailable && e.StatusCode != http.StatusTooManyRequests,
		retries >= c.MaxRetries:
		return 0, false
	case !readable:
		base = min(defaultBackoff<<min(retries, 16), c.MaxRetryWait)
	case base > c.MaxRetryWait:
		return 0, false // the server's error says why, rather than a wait too long
	}
	return min(base+jitter(base), c.MaxRetryWait), true
}

// notRecorded reports whether a refusal says that nothing of its request
// was recorded, so that sending it again cannot do it twice: one that
// names a step (agentrt's step interrupted by a shutdown, recorded as
// failed) or says "interrupted" did record something. Requests that may
// be done twice (a cancel) do not ask.
func notRecorded(e *Error) bool {
	return e.StepID == "" && e.Code != "interrupted"
}

// jitter is a random spread to add to a wait of d: up to half of it, and
// up to minJitter at least.
func jitter(d time.Duration) time.Duration {
	return time.Duration(rand.Int64N(int64(max(d/2, minJitter)) + 1))
}

// parseRetryAfter reads a Retry-After header's value, delay-seconds or an
// HTTP date (RFC 9110, 10.2.3), as a wait from now; a date past is a wait
// of 0. It reports false for a value that is neither.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v != "" && strings.Trim(v, "0123456789") == "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n > math.MaxInt64/int64(time.Second) {
			return time.Duration(math.MaxInt64), true // longer than anyone waits
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// after is the clock retries wait on: time.After, unless a test set
// another.
func (c *Client) after(d time.Duration) <-chan time.Time {
	if c.afterFunc != nil {
		return c.afterFunc(d)
	}
	return time.After(d)
}

// clockNow is the time Retry-After dates are read against: time.Now,
// unless a test set another.
func (c *Client) clockNow() time.Time {
	if c.nowFunc != nil {
		return c.nowFunc()
	}
	return time.Now()
}
