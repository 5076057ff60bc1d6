package e2e

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the echelon command line", func() {
	run := func(args ...string) (int, string) {
		cmd := exec.Command(operatorBin, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		err := cmd.Run()
		code := 0
		var exitErr *exec.ExitError
		if errors.As(err, &exitErr) {
			code = exitErr.ExitCode()
		} else {
			Expect(err).NotTo(HaveOccurred())
		}
		return code, stderr.String()
	}

	DescribeTable("rejects a bad flag with one line naming it and exit code 2",
		func(flag, want string) {
			code, stderr := run(flag)
			Expect(code).To(Equal(2))
			Expect(strings.TrimSpace(stderr)).To(Equal("echelon: " + want))
		},
		Entry(nil, "--pod-address=dns", `--pod-address="dns": must be "fqdn" or "ip"`),
		Entry(nil, "--log-format=yaml", `--log-format="yaml": must be json or text`),
		Entry(nil, "--http-port=0", `--http-port=0: must be between 1 and 65535`),
		Entry(nil, "--egress-allow=10.0.0.0/33", `--egress-allow: "10.0.0.0/33" is neither a CIDR, an IP address nor a host name`),
		Entry(nil, "--namespaces=Bad_NS", `--namespaces: "Bad_NS" is not a valid namespace name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`),
	)

	It("fails with one line naming the API server when it cannot be reached", func() {
		kubeconfig := filepath.Join(GinkgoT().TempDir(), "unreachable")
		Expect(os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`), 0o600)).To(Succeed())
		code, stderr := run("--kubeconfig="+kubeconfig, "--http-port=18001")
		Expect(code).To(Equal(1))
		Expect(strings.Count(strings.TrimSpace(stderr), "\n")).To(BeZero(), "one line, no stack trace: %s", stderr)
		Expect(stderr).To(HavePrefix("echelon: cannot reach the kubernetes API server at https://127.0.0.1:1"))
	})
})
