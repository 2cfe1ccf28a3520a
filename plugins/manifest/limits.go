package manifest

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/big"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// A limit is a size (bytes), a duration or a count, by its Go type in
// Limits: *int64, *time.Duration or *int.
type limitKind int

const (
	sizeKind limitKind = iota
	durationKind
	countKind
)

// valueRange is the values a limit may take: bytes, nanoseconds or a
// count, from min to max.
type valueRange struct{ min, max int64 }

// kindRange is each kind's range, the one its flag of agentrt run
// accepts: sizes up to 2^62 bytes, durations that do not overflow,
// counts that fit an int64. (The flags accept negative durations;
// a manifest does not.)
var kindRange = map[limitKind]valueRange{
	sizeKind:     {0, 1 << 62},
	durationKind: {0, math.MaxInt64},
	countKind:    {0, math.MaxInt64},
}

// limitRange is the range of the limits whose range is narrower than
// their kind's: as agentrt run checks them, or where agentrt would read
// a value out of it as something else. schema.json states the same
// bounds for editors (TestSchemaAgreesWithManifestAndLimits holds them
// together).
var limitRange = map[string]valueRange{
	// runtime.Load takes a timeout of 0 for its default.
	"call_timeout": {1, math.MaxInt64},
	// The flag's range; memory is counted in whole 64 KiB pages.
	"memory":            {64 << 10, 4 << 30},
	"max_host_calls":    {1, math.MaxInt64},
	"max_table_entries": {1, math.MaxUint32},
	// runtime.NewLimiter runs one instance at once for fewer than 1.
	"max_instances": {1, math.MaxInt64},
	// agentrt reads 0 as its default, which may be more than the
	// operator's: a manifest asks for 1 or more.
	"max_background_steps": {1, math.MaxInt64},
	// A request with no time at all could not be sent.
	"http_timeout": {1, math.MaxInt64},
}

// limitSpec is how one field of Limits is read.
type limitSpec struct {
	name  string // in the manifest: the field's json tag
	field int    // index in Limits
	kind  limitKind
	valueRange
}

// limitSpecs are the fields of Limits, in order.
var limitSpecs = func() []limitSpec {
	var specs []limitSpec
	t := reflect.TypeFor[Limits]()
	for i := range t.NumField() {
		f := t.Field(i)
		s := limitSpec{name: f.Tag.Get("json"), field: i}
		switch f.Type.Elem() {
		case reflect.TypeFor[time.Duration]():
			s.kind = durationKind
		case reflect.TypeFor[int64]():
			s.kind = sizeKind
		case reflect.TypeFor[int]():
			s.kind = countKind
		default:
			panic("manifest: Limits." + f.Name + " is not a size, a duration or a count")
		}
		s.valueRange = kindRange[s.kind]
		if r, ok := limitRange[s.name]; ok {
			s.valueRange = r
		}
		specs = append(specs, s)
	}
	return specs
}()

// limitSpecOf is the spec of the limit named name.
func limitSpecOf(name string) (limitSpec, bool) {
	for _, s := range limitSpecs {
		if s.name == name {
			return s, true
		}
	}
	return limitSpec{}, false
}

// The forms of sizes and durations written as strings: the patterns of
// schema.json's $defs (TestSchemaAgreesWithManifestAndLimits). Go's
// time.ParseDuration reads more ("-1s", ".5s"); a manifest does not.
var (
	sizePattern     = regexp.MustCompile(`^[0-9]+(B|KB|MB|GB|KiB|MiB|GiB)?$`)
	durationPattern = regexp.MustCompile(`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|μs|ms|s|m|h))+)$`)
)

// sizeUnits are the units of sizes, as agentrt run's flags take them.
var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}

// errRange marks a value of the right form but too large for an int64.
var errRange = errors.New("out of range")

// parse reads the limit's value v (as the document holds it) and checks
// it is in range. Its errors say what is wanted and what v is.
func (s limitSpec) parse(v any) (int64, error) {
	n, err := s.read(v)
	switch {
	case err != nil && !errors.Is(err, errRange):
		return 0, fmt.Errorf("want %s, got %s", s.formText(), describe(v))
	case err != nil || n < s.min || n > s.max:
		return 0, fmt.Errorf("want %s, got %s", s.rangeText(n < s.min), describe(v))
	}
	return n, nil
}

// read reads v in the limit's form, not checking its range. A value too
// large for an int64 is errRange, with n the int64 nearest to it.
func (s limitSpec) read(v any) (n int64, err error) {
	switch s.kind {
	case sizeKind:
		switch v := v.(type) {
		case json.Number:
			return integer(v)
		case string:
			return sizeOf(v)
		}
	case durationKind:
		if v, ok := v.(string); ok && durationPattern.MatchString(v) {
			d, err := time.ParseDuration(v)
			if err != nil { // the form is right: it overflows
				return math.MaxInt64, errRange
			}
			return int64(d), nil
		}
	case countKind:
		if v, ok := v.(json.Number); ok {
			return integer(v)
		}
	}
	return 0, errors.New("wrong form")
}

// integer is the value of n if n is an integer (1, 1.0 and 1e0 are all
// 1, as JSON Schema has it).
func integer(n json.Number) (int64, error) {
	r, ok := new(big.Rat).SetString(string(n)) // the exponent is bounded (maxExponent)
	if !ok || !r.IsInt() {
		return 0, errors.New("not an integer")
	}
	switch {
	case r.Num().IsInt64():
		return r.Num().Int64(), nil
	case r.Sign() < 0:
		return math.MinInt64, errRange
	}
	return math.MaxInt64, errRange
}

// sizeOf reads a size written as a string: digits, then a unit or none
// (bytes).
func sizeOf(s string) (int64, error) {
	if !sizePattern.MatchString(s) {
		return 0, errors.New("not a size")
	}
	mult := int64(1)
	for _, u := range sizeUnits {
		if strings.HasSuffix(s, u.suffix) {
			s, mult = strings.TrimSuffix(s, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n > math.MaxInt64/mult { // digits only: too many
		return math.MaxInt64, errRange
	}
	return n * mult, nil
}

// formText says what form the limit wants.
func (s limitSpec) formText() string {
	switch s.kind {
	case sizeKind:
		return `a size such as "64MiB" or a number of bytes`
	case durationKind:
		return `a duration such as "10s" or "1m30s"`
	}
	return "an integer"
}

// rangeText says what range the limit wants, of a value below it or
// above it.
func (s limitSpec) rangeText(below bool) string {
	switch k := kindRange[s.kind]; {
	case below && s.kind == durationKind && s.min == 1:
		return "more than 0s"
	case below && s.max == k.max:
		return s.format(s.min) + " or more"
	case !below && s.min == k.min:
		return "at most " + s.format(s.max)
	}
	return "from " + s.format(s.min) + " to " + s.format(s.max)
}

// format writes n as the limit's kind is written: 1m30s, 64KiB, 16.
func (s limitSpec) format(n int64) string {
	switch s.kind {
	case durationKind:
		return time.Duration(n).String()
	case sizeKind:
		for _, u := range []int{2, 1, 0} { // GiB, MiB, KiB
			if m := sizeUnits[u].mult; n != 0 && n%m == 0 {
				return strconv.FormatInt(n/m, 10) + sizeUnits[u].suffix
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// decodeLimits reads the limits obj sets, their names in file order.
func decodeLimits(names []string, obj map[string]any) (Limits, error) {
	var l Limits
	lv := reflect.ValueOf(&l).Elem()
	for _, name := range names {
		loc := []string{"limits", name}
		s, ok := limitSpecOf(name)
		if !ok {
			return Limits{}, unknownField(loc)
		}
		n, err := s.parse(obj[name])
		if err != nil {
			return Limits{}, fmt.Errorf("%s: %w", path(loc), err)
		}
		p := reflect.New(lv.Field(s.field).Type().Elem())
		if p.Elem().OverflowInt(n) { // an int of 32 bits
			return Limits{}, fmt.Errorf("%s: %d is too large for this platform", path(loc), n)
		}
		p.Elem().SetInt(n)
		lv.Field(s.field).Set(p)
	}
	return l, nil
}
