package manifest

import (
	"fmt"
	"regexp"
	"slices"

	"github.com/agentrt/agentrt/plugins/abi"
)

// A manifest's capabilities: what the agent may reach beyond its sandbox
// (http: the destinations of its outbound requests), and what it says of
// itself to clients (artifact_schemes). The schema refuses any member not
// defined here.

// schemePattern is a URI scheme in lower case (RFC 3986), of at most 32
// bytes: the schema's pattern too.
var schemePattern = regexp.MustCompile(`^[a-z][a-z0-9+.-]{0,31}$`)

// decodeCapabilities reads the capabilities obj, which problem has
// checked.
func decodeCapabilities(doc *document, obj map[string]any) (Capabilities, error) {
	var c Capabilities
	for _, name := range doc.keys([]string{"capabilities"}, obj) {
		loc := []string{"capabilities", name}
		if !slices.Contains(fieldsAt(loc[:1]), name) {
			return c, unknownField(loc)
		}
		if err := problem(loc, obj[name]); err != nil {
			return c, fmt.Errorf("%s: %w", path(loc), err)
		}
		var err error
		switch name {
		case "artifact_schemes":
			c.ArtifactSchemes, err = decodeSchemes(doc, loc, as[map[string]any](obj[name]))
		case "http":
			c.HTTP, err = decodeDestinations(loc, as[[]any](obj[name]))
		}
		if err != nil {
			return c, err
		}
	}
	return c, nil
}

// decodeSchemes reads capabilities.artifact_schemes, at loc.
func decodeSchemes(doc *document, loc []string, schemes map[string]any) (*ArtifactSchemes, error) {
	s := &ArtifactSchemes{}
	for _, list := range doc.keys(loc, schemes) {
		at := append(loc[:2:2], list)
		if !slices.Contains(fieldsAt(loc), list) {
			return s, unknownField(at)
		}
		if err := problem(at, schemes[list]); err != nil {
			return s, fmt.Errorf("%s: %w", path(at), err)
		}
		names := []string{}
		for i, v := range as[[]any](schemes[list]) {
			item := append(at[:3:3], fmt.Sprint(i))
			if err := problem(item, v); err != nil {
				return s, fmt.Errorf("%s: %w", path(item), err)
			}
			names = append(names, as[string](v))
		}
		if list == "input" {
			s.Input = names
		} else {
			s.Output = names
		}
	}
	return s, nil
}

// decodeDestinations reads capabilities.http, at loc.
func decodeDestinations(loc []string, list []any) ([]abi.Destination, error) {
	out := []abi.Destination{}
	for i, v := range list {
		item := append(loc[:2:2], fmt.Sprint(i))
		if err := problem(item, v); err != nil {
			return nil, fmt.Errorf("%s: %w", path(item), err)
		}
		d, _ := abi.ParseDestination(as[string](v)) // problem parsed it
		out = append(out, d)
	}
	return out, nil
}

// capabilityProblem says what is wrong with the value v at loc within
// capabilities, in Parse's words; nil if nothing is.
func capabilityProblem(loc []string, v any) error {
	switch loc[0] {
	case "http":
		return destinationsProblem(loc, v)
	case "artifact_schemes":
	default:
		return nil
	}
	switch len(loc) {
	case 1:
		if _, ok := v.(map[string]any); !ok {
			return fmt.Errorf("want an object of input and output schemes, got %s", describe(v))
		}
	case 2:
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array of URI schemes, got %s", describe(v))
		}
		if len(list) > MaxSchemes {
			return fmt.Errorf("want at most %d schemes, got %d", MaxSchemes, len(list))
		}
		for i, e := range list {
			if slices.Contains(list[:i], e) {
				return fmt.Errorf("want each scheme once, got %s twice", describe(e))
			}
		}
	case 3:
		return schemeProblem(v)
	}
	return nil
}

// destinationsProblem says what is wrong with capabilities.http (loc
// ["http"]) or one of its destinations (["http", "N"]).
func destinationsProblem(loc []string, v any) error {
	if len(loc) == 1 {
		list, ok := v.([]any)
		if !ok {
			return fmt.Errorf("want an array of destinations such as \"https://api.example.com/v1\", got %s", describe(v))
		}
		if len(list) > MaxDestinations {
			return fmt.Errorf("want at most %d destinations, got %d", MaxDestinations, len(list))
		}
		for i, e := range list {
			if slices.Contains(list[:i], e) {
				return fmt.Errorf("want each destination once, got %s twice", describe(e))
			}
		}
		return nil
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("want a destination such as \"https://api.example.com/v1\", got %s", describe(v))
	}
	if _, err := abi.ParseDestination(s); err != nil {
		return fmt.Errorf("%v, got %s", err, describe(v))
	}
	return nil
}

// schemeProblem says what is wrong with v as a URI scheme.
func schemeProblem(v any) error {
	if s, ok := v.(string); !ok || !schemePattern.MatchString(s) {
		return fmt.Errorf("want a URI scheme in lower case, such as \"https\" or \"s3\", got %s", describe(v))
	}
	return nil
}
