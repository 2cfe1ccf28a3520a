package egress

import (
	"bytes"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/agentrt/agentrt/plugins/abi"
)

// What leaves. A secret is filled in only for a destination it is bound
// to, but its value can reach a request by other paths: a server it is
// bound to may answer a redirect whose URL holds it (in any form), or
// the URL it was sent to may (which net/http would send on as Referer),
// and a plugin that got it unscrubbed could write it anywhere. So every
// request, the first and each redirect hop, is checked as the transport
// is about to send it (its URL, as it is and decoded, each header, its
// body) for every form the Scrubber knows of the value of each secret
// the agent holds that is not bound to the request's destination, and
// refused if one is there. No Referer is sent on a redirect.

// sender sends the hops of one request through the agent's transport,
// each checked first.
type sender struct {
	c    *Client
	base http.RoundTripper
	// body is the request's, in the plugin's memory: looked at in
	// place, never copied; found says, by secret, whether it holds one
	// of the secret's forms, once looked at.
	body  []byte
	found map[int]bool
}

// RoundTrip sends req, or refuses it when it holds the value of a
// secret not bound to its destination. The http.Client calls it for one
// hop at a time.
func (s *sender) RoundTrip(req *http.Request) (*http.Response, error) {
	t, err := abi.ParseTarget(req.URL.String())
	if err != nil {
		err = errorf(Refused, "a request to a URL agentrt does not send: %s", err)
	} else {
		err = s.check(req, t)
	}
	if err != nil {
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, sent or not
		}
		return nil, err
	}
	return s.base.RoundTrip(req)
}

// check says why req, to t, may not be sent: it holds a form of the
// value of a secret not bound to t. What it costs: for each secret the
// agent holds that is not bound to t, a scan per form of the URL and the
// headers, and of the body once per request (a redirect that resends it
// is not scanned again); nothing when every secret is bound to t.
func (s *sender) check(req *http.Request, t abi.Target) error {
	var raw, path, query string
	for i, sec := range s.c.policy.Secrets {
		if bound(sec, t) {
			continue
		}
		own := s.c.scrub.secrets[i]
		if raw == "" {
			raw = req.URL.String()
			path, _ = url.PathUnescape(raw)
			query, _ = url.QueryUnescape(raw)
		}
		where := ""
		switch {
		case holdsForm(raw, own.forms), holdsForm(path, own.forms), holdsForm(query, own.forms):
			where = "its URL"
		case req.Body != nil && req.Body != http.NoBody && s.bodyHolds(i, own.formBytes):
			where = "its body"
		default:
			for name, values := range req.Header {
				if holdsForm(name, own.forms) {
					where = "a header's name"
				}
				for _, v := range values {
					if holdsForm(v, own.forms) {
						where = "its header " + name
					}
				}
			}
		}
		if where != "" {
			return &Error{Code: Refused, secret: sec.Name, Message: fmt.Sprintf("the request to %s%s holds, in %s, the value of a secret that is not bound to that destination: agentrt sends a secret only where the operator bound it", t.Origin(), t.Path, where)}
		}
	}
	return nil
}

// bodyHolds reports whether the body holds one of forms, the forms of
// the agent's i-th secret.
func (s *sender) bodyHolds(i int, forms [][]byte) bool {
	if found, ok := s.found[i]; ok {
		return found
	}
	found := false
	for _, f := range forms {
		if bytes.Contains(s.body, f) {
			found = true
			break
		}
	}
	if s.found == nil {
		s.found = map[int]bool{}
	}
	s.found[i] = found
	return found
}

// bound reports whether sec may be sent to t.
func bound(sec Secret, t abi.Target) bool {
	for _, d := range sec.Destinations {
		if d.Allows(t) {
			return true
		}
	}
	return false
}

func holdsForm(v string, forms []string) bool {
	for _, f := range forms {
		if strings.Contains(v, f) {
			return true
		}
	}
	return false
}
