package analysis

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/echelon-operator/echelon/api/v1alpha1"
	"github.com/echelon-operator/echelon/internal/httptls"
)

// DefaultHTTPStatus is the status an http check expects when the spec sets none.
const DefaultHTTPStatus = 200

// MaxHTTPBodyBytes bounds the answer an http check reads: a health endpoint
// answers a few KiB; a larger answer is refused rather than held in memory.
const MaxHTTPBodyBytes = 1 << 20

// HTTPAnswer is what an http check's GET brought back.
type HTTPAnswer struct {
	Status int
	Body   []byte
}

// HTTPRequest is an http check's request, its URL expanded.
type HTTPRequest struct {
	URL     string
	Headers map[string]string
	// BearerToken, Username and Password are the credentials, as for
	// Prometheus: the token wins.
	BearerToken, Username, Password string
	Timeout                         time.Duration
	// TLS is the check's tls block, read; nil trusts the system's
	// authorities.
	TLS *httptls.Material
}

// HTTPGetter sends an http check's GET.
type HTTPGetter interface {
	Get(ctx context.Context, req HTTPRequest) (HTTPAnswer, error)
}

// NewHTTPGetter returns a getter over client, which should have no timeout
// of its own: each request carries one.
func NewHTTPGetter(client *http.Client) HTTPGetter { return httpGetter{client: client} }

type httpGetter struct{ client *http.Client }

// Get sends the request, bounded by its timeout, and reads at most
// MaxHTTPBodyBytes of the answer.
func (g httpGetter) Get(ctx context.Context, r HTTPRequest) (HTTPAnswer, error) {
	timeout := r.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, r.URL, nil)
	if err != nil {
		return HTTPAnswer{}, fmt.Errorf("GET %s: %w", r.URL, err)
	}
	for name, value := range r.Headers {
		req.Header.Set(name, value)
	}
	switch {
	case r.BearerToken != "":
		req.Header.Set("Authorization", "Bearer "+r.BearerToken)
	case r.Username != "":
		req.SetBasicAuth(r.Username, r.Password)
	}
	client, err := httptls.Default.Client(g.client, r.TLS, nil)
	if err != nil {
		return HTTPAnswer{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil && errors.Is(err, context.DeadlineExceeded) {
			return HTTPAnswer{}, fmt.Errorf("GET %s: no answer within the timeout of %s", r.URL, timeout)
		}
		return HTTPAnswer{}, fmt.Errorf("GET %s: %w", r.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPBodyBytes+1))
	if err != nil {
		return HTTPAnswer{}, fmt.Errorf("GET %s: reading the answer: %w", r.URL, err)
	}
	if len(body) > MaxHTTPBodyBytes {
		return HTTPAnswer{}, fmt.Errorf("GET %s: the answer is larger than the limit of %d MiB", r.URL, MaxHTTPBodyBytes>>20)
	}
	return HTTPAnswer{Status: resp.StatusCode, Body: body}, nil
}

// JudgeHTTP judges an http check's answer against its condition:
//
//   - a status other than the expected one fails ("HTTP 503");
//   - without a JSON path, the status is the one sample: hasData true
//     succeeds, compare compares the code;
//   - with a path, the field it selects is judged (see JSONField): a field
//     that is absent or null, or an empty list or object, is "no data".
//
// An error is an answer that cannot be judged (not JSON, a path that goes
// through a string or a number): it counts against errorThreshold.
func JudgeHTTP(chk v1alpha1.HTTPCheck, cond v1alpha1.CheckCondition, ans HTTPAnswer) (Verdict, error) {
	want := int(chk.ExpectedStatus)
	if want == 0 {
		want = DefaultHTTPStatus
	}
	if ans.Status != want {
		return Verdict{Success: false, Value: fmt.Sprintf("HTTP %d (want %d)", ans.Status, want)}, nil
	}
	if chk.JSONPath == "" {
		if cond.Equals != nil {
			v := strconv.Itoa(ans.Status)
			return Verdict{Success: v == *cond.Equals, Value: "HTTP " + v}, nil
		}
		return Judge(cond, []Sample{{Value: float64(ans.Status)}})
	}
	field, found, err := JSONField(ans.Body, chk.JSONPath)
	if err != nil {
		return Verdict{}, err
	}
	if !found || isEmpty(field) {
		if cond.Equals != nil {
			return Verdict{Success: false, Value: "no data"}, nil
		}
		return Judge(cond, nil)
	}
	if cond.Equals != nil {
		s := scalarString(field)
		return Verdict{Success: s == *cond.Equals, Value: quoteValue(s)}, nil
	}
	if cond.HasData != nil {
		return Judge(cond, []Sample{{Value: 1}})
	}
	n, ok := number(field)
	if !ok {
		return Verdict{}, fmt.Errorf("http check: the field at %s is %s, not a number, so it cannot be compared (use equals, or # for a length)", chk.JSONPath, describeJSON(field))
	}
	return Judge(cond, []Sample{{Value: n}})
}

// JSONField selects a field of a JSON document by a dotted path: object
// keys and list indexes ("targets.0.health"), "#" for the length of a list
// or object, and an optional leading "$.". found is false when a key or an
// index is absent; an error when the body is no JSON or the path goes into
// a scalar.
func JSONField(body []byte, path string) (value any, found bool, err error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var doc any
	if err := dec.Decode(&doc); err != nil {
		return nil, false, fmt.Errorf("http check: the answer is not JSON: %v", err)
	}
	path = strings.TrimPrefix(path, "$.")
	if path == "$" {
		return doc, true, nil
	}
	cur := doc
	for i, seg := range strings.Split(path, ".") {
		at := strings.Join(strings.Split(path, ".")[:i+1], ".")
		switch v := cur.(type) {
		case map[string]any:
			if seg == "#" {
				cur = json.Number(strconv.Itoa(len(v)))
				continue
			}
			next, ok := v[seg]
			if !ok {
				return nil, false, nil
			}
			cur = next
		case []any:
			if seg == "#" {
				cur = json.Number(strconv.Itoa(len(v)))
				continue
			}
			idx, err := strconv.Atoi(seg)
			if err != nil || idx < 0 {
				return nil, false, fmt.Errorf("http check: %s: %q is not an index of a list", at, seg)
			}
			if idx >= len(v) {
				return nil, false, nil
			}
			cur = v[idx]
		case nil:
			return nil, false, nil
		default:
			return nil, false, fmt.Errorf("http check: %s: cannot select %q in %s", at, seg, describeJSON(v))
		}
	}
	return cur, true, nil
}

func isEmpty(v any) bool {
	switch v := v.(type) {
	case nil:
		return true
	case []any:
		return len(v) == 0
	case map[string]any:
		return len(v) == 0
	}
	return false
}

// number reads a JSON number, a boolean (1 or 0) or a string holding a
// number (Consul and load balancers print some numbers as strings).
func number(v any) (float64, bool) {
	switch v := v.(type) {
	case json.Number:
		f, err := v.Float64()
		return f, err == nil
	case bool:
		if v {
			return 1, true
		}
		return 0, true
	case string:
		f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		return f, err == nil
	}
	return 0, false
}

// scalarString prints a field for equals: strings as they are, numbers and
// booleans as JSON prints them, lists and objects as compact JSON.
func scalarString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	case bool:
		return strconv.FormatBool(v)
	case nil:
		return "null"
	}
	raw, _ := json.Marshal(v)
	return string(raw)
}

func quoteValue(s string) string {
	if len(s) > 120 {
		s = s[:120] + "..."
	}
	return strconv.Quote(s)
}

func describeJSON(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case string:
		return "a string"
	case json.Number:
		return "a number"
	case bool:
		return "a boolean"
	}
	return "null"
}

// DescribeHTTP is an http check's request for status and Events.
func DescribeHTTP(url string) string { return "GET " + url }
