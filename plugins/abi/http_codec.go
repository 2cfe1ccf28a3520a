package abi

import "strconv"

// The HTTP messages in the kit's codec (codec.go): a plugin writes its
// requests and reads its responses without reflection.

// AppendJSON appends r as JSON.
func (r *HTTPRequest) AppendJSON(b []byte) []byte {
	w := objectWriter{b: append(b, '{')}
	w.optional("method", r.Method)
	w.key("url")
	w.b = appendString(w.b, r.URL)
	if len(r.Headers) > 0 {
		w.key("headers")
		w.b = appendHeaders(w.b, r.Headers)
	}
	if r.TimeoutMS != 0 {
		w.key("timeout_ms")
		w.b = strconv.AppendInt(w.b, r.TimeoutMS, 10)
	}
	if r.MaxResponseBytes != 0 {
		w.key("max_response_bytes")
		w.b = strconv.AppendInt(w.b, r.MaxResponseBytes, 10)
	}
	if r.NoRedirects {
		w.key("no_redirects")
		w.b = append(w.b, "true"...)
	}
	return append(w.b, '}')
}

// appendHeaders appends headers as a JSON array of name and value objects.
func appendHeaders(b []byte, headers []HTTPHeader) []byte {
	b = append(b, '[')
	for i, h := range headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendString(b, h.Name)
		b = append(b, `,"value":`...)
		b = appendString(b, h.Value)
		b = append(b, '}')
	}
	return append(b, ']')
}

// DecodeHTTPResponse parses an HTTPResponse (http_response). Unknown
// fields are ignored.
func DecodeHTTPResponse(data []byte) (*HTTPResponse, error) {
	var r HTTPResponse
	s := &scanner{b: data}
	err := s.object(func(key string) error {
		switch key {
		case "status":
			var n int64
			err := into(s, &n, s.integer)
			r.Status = int(n)
			return err
		case "headers":
			if s.null() {
				return nil
			}
			r.Headers = []HTTPHeader{}
			return s.array(func() error {
				var h HTTPHeader
				err := s.object(func(key string) error {
					switch key {
					case "name":
						return into(s, &h.Name, s.str)
					case "value":
						return into(s, &h.Value, s.str)
					}
					return s.skip()
				})
				r.Headers = append(r.Headers, h)
				return err
			})
		case "body_size":
			return into(s, &r.BodySize, s.integer)
		case "url":
			return into(s, &r.URL, s.str)
		}
		return s.skip()
	})
	if err == nil {
		err = s.end()
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}
