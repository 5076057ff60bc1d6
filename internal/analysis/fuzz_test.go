package analysis

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"text/template"
)

// FuzzExpandQuery holds the expansion to its guarantees for any query and
// variables: it ends, its output is within MaxExpandedQueryBytes, a query
// without {{ is kept as it is, and a query it accepts expands byte for byte
// as text/template, which expanded queries before, expanded it.
func FuzzExpandQuery(f *testing.F) {
	for _, q := range []string{
		`sum(rate(errors_total{namespace="{{ .Namespace }}",pod=~"{{ .Member }}-.*"}[1m]))`,
		`up{group="{{.Group}}",rev="{{.Revision}}"}}`,
		"{{\t.Member\n}}",
		`{{ define "a" }}{{ .Member }}{{ .Member }}{{ end }}{{ template "a" . }}`,
		`{{ range 3 }}x{{ end }}`,
		`{{ .Member }`,
		`{{{{ .Group }}}}`,
		`{{- .Member -}}`,
	} {
		f.Add(q, "ingester-zone-b", "mimir", "ingester", "ingester-zone-b-7d9f")
	}
	f.Add("{{.Member}}{{.Member}}", strings.Repeat("m", MaxExpandedQueryBytes/2), "", "", "")
	f.Fuzz(func(t *testing.T, query, member, namespace, group, revision string) {
		vars := Vars{Member: member, Namespace: namespace, Group: group, Revision: revision}
		got, err := ExpandQuery(query, vars)
		if len(got) > MaxExpandedQueryBytes {
			t.Fatalf("expanded to %d bytes, over the limit", len(got))
		}
		if err != nil {
			if got != "" {
				t.Fatalf("an error %v with output %q", err, got)
			}
			return
		}
		if ValidateQuery(query) != nil {
			t.Fatalf("ExpandQuery accepts %q, ValidateQuery refuses it", query)
		}
		if !strings.Contains(query, "{{") && got != query {
			t.Fatalf("a query without variables changed: %q -> %q", query, got)
		}
		tmpl, err := template.New("query").Option("missingkey=error").Parse(query)
		if err != nil {
			t.Fatalf("accepted %q, which text/template refuses: %v", query, err)
		}
		var want bytes.Buffer
		if err := tmpl.Execute(&want, vars); err != nil {
			t.Fatalf("accepted %q, which text/template cannot expand: %v", query, err)
		}
		if got != want.String() {
			t.Fatalf("ExpandQuery(%q) = %q, text/template gives %q", query, got, want.String())
		}
	})
}

// bodyTransport answers every request with one status and body, counting the
// bytes read from the body.
type bodyTransport struct {
	status int
	body   []byte
	read   *int
}

func (b bodyTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	return &http.Response{
		StatusCode: b.status,
		Header:     http.Header{"Content-Type": []string{"application/json"}},
		Body:       io.NopCloser(countingReader{r: bytes.NewReader(b.body), n: b.read}),
		Request:    r,
	}, nil
}

type countingReader struct {
	r io.Reader
	n *int
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	*c.n += n
	return n, err
}

// FuzzDecodeResponse feeds any answer to the querier as Prometheus's: it must
// not panic, must read no more than the limit (and one byte) of the body, and
// must refuse a body over the limit, naming it.
func FuzzDecodeResponse(f *testing.F) {
	const maxBody = 4 << 10
	for _, body := range []string{
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{"zone":"a"},"value":[1717243200,"0.5"]}]}}`,
		`{"status":"success","data":{"resultType":"scalar","result":[1717243200,"1"]}}`,
		`{"status":"success","data":{"resultType":"matrix","result":[{"metric":{},"values":[[1717243200,"1"]]}]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[null]}}`,
		`{"status":"success","data":{"resultType":"vector","result":[{"metric":{},"histogram":[1717243200,{"count":"1","sum":"1","buckets":[[0,"0","1","1"]]}]}]}}`,
		`{"status":"success","data":{"resultType":"string","result":[1717243200,"x"]}}`,
		`{"status":"error","errorType":"bad_data","error":"parse error"}`,
		`{"status":"success","data":null}`,
		`not json`,
	} {
		f.Add(200, []byte(body))
	}
	f.Add(422, []byte(`{"status":"error","errorType":"bad_data","error":"parse error"}`))
	f.Add(503, []byte("upstream down"))
	f.Add(200, bytes.Repeat([]byte(" "), maxBody+1))
	f.Fuzz(func(t *testing.T, status int, body []byte) {
		if status < 100 || status > 999 {
			status = 200
		}
		read := 0
		q, err := newPrometheus(PrometheusConfig{Address: "http://prometheus.test"}, bodyTransport{status: status, body: body, read: &read}, maxBody)
		if err != nil {
			t.Fatal(err)
		}
		_, err = q.Query(context.Background(), "up", now)
		if read > maxBody+1 {
			t.Fatalf("read %d bytes of the body, over the limit of %d", read, maxBody)
		}
		if len(body) > maxBody && !errors.Is(err, errResponseTooLarge) {
			t.Fatalf("a body of %d bytes: error %v, want the limit's", len(body), err)
		}
	})
}
