// Package httptls turns a spec's tls block (v1alpha1.TLSConfig) into the
// HTTP client an https call uses. Load reads the Secrets and ConfigMaps the
// block names into Material, with errors that name the field, through the
// reader it is given: Objects, which watches each object read (so a block
// called every check interval costs no request to the API server, and a
// rotated Secret is used at the next call), or a live reader. Transports
// builds one *http.Transport per distinct Material and keeps each while it
// is used, so connections are reused between calls and a rotated Secret,
// whose content differs, gets a transport of its own on the next call,
// without a restart. Http gate checks, hooks and pod calls all go through
// Default. Every transport here dials through the egress guard
// (internal/egress), which refuses loopback, link-local, metadata and the
// operator's own addresses unless --egress-allow opens them.
package httptls
