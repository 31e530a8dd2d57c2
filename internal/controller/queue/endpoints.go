package queue

import (
	"fmt"
	"net"
	"net/url"
	"strings"
)

// EndpointAllowList is the cluster admin's list of SQS endpoints that a
// Queue's connection Secret may set (AWS_ENDPOINT_URL_SQS), from
// --sqs-allowed-endpoints. The manager signs and sends requests from its own
// network position to whatever endpoint a Queue names, and copies the
// answers' errors into status; an endpoint that no entry allows is refused
// before anything is sent to it. The zero list allows none. The manager's
// own endpoint (--sqs-endpoint, or the SDK's chain) is not subject to it.
//
// An entry is http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH]. An
// endpoint is allowed when it is an http or https URL with a host and
// without user info, query, fragment, or "." or ".." path segments, and one
// entry matches it:
//   - the same scheme;
//   - the same host, compared without regard to case; names are not
//     resolved and there are no wildcards, so "sqs.example.com" allows
//     neither "a.sqs.example.com" nor its IP address;
//   - the same port, where an omitted port is the scheme's default (80 for
//     http, 443 for https); the entry's port "*" allows every port;
//   - the entry's path, without a trailing "/", is empty or equals the
//     endpoint's path or a prefix of it that ends at a "/": "/sqs" allows
//     "/sqs" and "/sqs/eu", not "/sqsx".
type EndpointAllowList struct {
	entries []allowedEndpoint
}

type allowedEndpoint struct {
	scheme, host string
	port         string // "*" for any
	path         string // without a trailing "/"
}

// ParseEndpointAllowList parses the entries of --sqs-allowed-endpoints. An
// entry that is not of the documented form is an error, so that a typo
// never silently allows nothing (or more than meant).
func ParseEndpointAllowList(entries []string) (EndpointAllowList, error) {
	var l EndpointAllowList
	for _, raw := range entries {
		e, err := parseAllowedEndpoint(raw)
		if err != nil {
			return EndpointAllowList{}, fmt.Errorf("--sqs-allowed-endpoints entry %q: %w", raw, err)
		}
		l.entries = append(l.entries, e)
	}
	return l, nil
}

func parseAllowedEndpoint(raw string) (allowedEndpoint, error) {
	scheme, rest, ok := strings.Cut(raw, "://")
	scheme = strings.ToLower(scheme)
	if !ok || (scheme != "http" && scheme != "https") {
		return allowedEndpoint{}, fmt.Errorf("want http://HOST[:PORT][/PATH] or https://HOST[:PORT][/PATH]")
	}
	if strings.ContainsAny(rest, "@?#") {
		return allowedEndpoint{}, fmt.Errorf("user info, a query or a fragment has no place in an allowed endpoint")
	}
	hostport, path := rest, ""
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		hostport, path = rest[:i], rest[i:]
	}
	e := allowedEndpoint{scheme: scheme}
	if strings.HasSuffix(hostport, ":*") {
		e.host, e.port = strings.TrimSuffix(hostport, ":*"), "*"
	} else {
		// "*" is no valid port for url.Parse, hence the split above.
		u, err := url.Parse(scheme + "://" + hostport)
		if err != nil {
			return allowedEndpoint{}, err
		}
		e.host, e.port = u.Host, u.Port()
	}
	// Bracketed IPv6 hosts lose their brackets, as url.URL.Hostname does.
	if h, _, err := net.SplitHostPort(e.host); err == nil {
		e.host = h
	}
	e.host = strings.ToLower(strings.TrimSuffix(strings.TrimPrefix(e.host, "["), "]"))
	if e.host == "" || strings.ContainsAny(e.host, "*/") {
		return allowedEndpoint{}, fmt.Errorf("want a host, without wildcards")
	}
	if e.port == "" {
		e.port = defaultPort(scheme)
	}
	// Compared with the endpoint's decoded path.
	path, err := url.PathUnescape(path)
	if err != nil {
		return allowedEndpoint{}, err
	}
	if hasDotSegment(path) {
		return allowedEndpoint{}, fmt.Errorf("the path may not hold . or .. segments")
	}
	e.path = strings.TrimSuffix(path, "/")
	return e, nil
}

// Allows says whether a Queue may send its SQS calls to endpoint.
func (l EndpointAllowList) Allows(endpoint string) bool {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return false
	}
	scheme := strings.ToLower(u.Scheme)
	if scheme != "http" && scheme != "https" || hasDotSegment(u.Path) {
		return false
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = defaultPort(scheme)
	}
	for _, e := range l.entries {
		if e.scheme == scheme && e.host == host && (e.port == "*" || e.port == port) && pathWithin(u.Path, e.path) {
			return true
		}
	}
	return false
}

func defaultPort(scheme string) string {
	if scheme == "https" {
		return "443"
	}
	return "80"
}

// pathWithin says whether path is prefix, or below it at a "/" boundary.
func pathWithin(path, prefix string) bool {
	return prefix == "" || path == prefix || strings.HasPrefix(path, prefix+"/")
}

func hasDotSegment(path string) bool {
	for _, seg := range strings.Split(path, "/") {
		if seg == "." || seg == ".." {
			return true
		}
	}
	return false
}
