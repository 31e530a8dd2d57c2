package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"

	"github.com/tend-dev/tend/internal/fence"
)

const (
	// keepAliveTime is how long a connection may idle before the client
	// pings etcd to find out whether it is still there. etcd sends GOAWAY to
	// a client that pings more often than every 5 s
	// (--grpc-keepalive-min-time).
	keepAliveTime = 30 * time.Second
	// keepAliveTimeout is how long the client waits for the answer to a ping
	// before it drops the connection.
	keepAliveTimeout = 10 * time.Second
)

// Config says how to reach one etcd cluster.
type Config struct {
	// Endpoints are client URLs of members, such as
	// "https://etcd-0.etcd.ns.svc:2379". Calls that any member can answer
	// go to them in turn; calls about one member go to that member's own
	// advertised client URL (see Status and MoveLeader). All must have the
	// same scheme.
	Endpoints []string
	// TLS is required for https:// endpoints and refused for http:// ones,
	// so that a plaintext endpoint cannot slip into a TLS configuration.
	// Set Certificates for etcd's --client-cert-auth.
	TLS *tls.Config
	// Username and Password, both or neither, authenticate to etcd when
	// its auth is enabled. New fetches a token with them.
	Username, Password string
	// Logger receives the etcd client's own logs; nil discards them.
	Logger *zap.Logger
	// Dial, when set, opens the connections, to every endpoint and member
	// URL, in place of a plain TCP dial of addr ("host:port"). TLS still
	// checks the URL's host name, so Dial may connect to an address found
	// elsewhere, such as a pod's IP, without weakening it.
	Dial func(ctx context.Context, addr string) (net.Conn, error)
	// Gate, when set, is passed by every RPC that may change the cluster,
	// on every connection of the client, before it is sent: every RPC but
	// the reads (see reads), so member changes, leadership moves, user and
	// auth changes, and compaction, defragmentation and alarm changes
	// alike. In the manager it is the check that this process still holds
	// its leader-election Lease (manager.GateOf). A refused call returns
	// the Gate's error, wrapped, and sends nothing. Nil lets every call
	// through: the agents, which a Job runs, lead nothing.
	Gate fence.Gate
}

// String shows the Config without its password.
func (c Config) String() string {
	password := ""
	if c.Password != "" {
		password = "<redacted>"
	}
	return fmt.Sprintf("{Endpoints: %v, TLS: %t, Username: %q, Password: %s}", c.Endpoints, c.TLS != nil, c.Username, password)
}

// GoString is String, for the %#v verb.
func (c Config) GoString() string { return "etcd.Config" + c.String() }

// Client calls one etcd cluster. It is safe for concurrent use. Every call
// needs a deadline on its context and returns when it passes, at the latest.
type Client struct {
	cli *clientv3.Client
	// scheme is the endpoints' scheme, http or https.
	scheme string
	// fallback records the attempts of calls that carry no recorder: the
	// authentication of New, made on the client's own context.
	fallback *attempts
	// gate is Config.Gate: nil, or passed by every RPC but the reads.
	gate fence.Gate
}

// New returns a client for cfg. It checks cfg and sends nothing, unless
// cfg has credentials: then it authenticates, within ctx's deadline. The
// first call connects. Close the client when done.
func New(ctx context.Context, cfg Config) (*Client, error) {
	const op = "connecting to etcd"
	deadline, ok := ctx.Deadline()
	if !ok {
		return nil, fmt.Errorf("%s: %w", op, ErrNoDeadline)
	}
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	// clientv3 authenticates on a context of its own, which DialTimeout
	// bounds; it makes the caller's deadline that context's.
	timeout := time.Until(deadline)
	if timeout <= 0 {
		return nil, fmt.Errorf("%s: %w", op, context.DeadlineExceeded)
	}
	logger := cfg.Logger
	if logger == nil {
		logger = zap.NewNop()
	}
	c := &Client{fallback: &attempts{}, scheme: "http", gate: cfg.Gate}
	var tlsConfig *tls.Config
	if cfg.TLS != nil {
		c.scheme, tlsConfig = "https", cfg.TLS.Clone()
	}
	var dialOptions []grpc.DialOption
	if c.gate != nil {
		dialOptions = append(dialOptions, grpc.WithChainUnaryInterceptor(c.gateUnary), grpc.WithChainStreamInterceptor(c.gateStream))
	}
	dialOptions = append(dialOptions,
		grpc.WithChainUnaryInterceptor(c.recordUnary),
		grpc.WithChainStreamInterceptor(c.recordStream),
	)
	if cfg.Dial != nil {
		dialOptions = append(dialOptions, grpc.WithContextDialer(cfg.Dial))
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:            cfg.Endpoints,
		TLS:                  tlsConfig,
		Username:             cfg.Username,
		Password:             cfg.Password,
		DialTimeout:          timeout,
		DialKeepAliveTime:    keepAliveTime,
		DialKeepAliveTimeout: keepAliveTimeout,
		// No AutoSyncInterval: the endpoints stay the ones given.
		DialOptions: dialOptions,
		Logger:      logger,
	})
	if err != nil {
		return nil, wrap(ctx, op, err, c.fallback.get())
	}
	c.cli = cli
	return c, nil
}

// Close closes the client's connections.
func (c *Client) Close() error {
	if err := c.cli.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

func (cfg Config) validate() error {
	if len(cfg.Endpoints) == 0 {
		return fmt.Errorf("%w: no endpoints", ErrInvalid)
	}
	scheme := ""
	for _, ep := range cfg.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			return fmt.Errorf("%w: endpoint %q: %w", ErrInvalid, ep, err)
		}
		if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Port() == "" {
			return fmt.Errorf("%w: endpoint %q must be http:// or https:// with a host and a port", ErrInvalid, ep)
		}
		if scheme != "" && u.Scheme != scheme {
			return fmt.Errorf("%w: endpoints mix %s:// and %s://", ErrInvalid, scheme, u.Scheme)
		}
		scheme = u.Scheme
	}
	if scheme == "https" && cfg.TLS == nil {
		return fmt.Errorf("%w: https:// endpoints need a TLS configuration", ErrInvalid)
	}
	if scheme == "http" && cfg.TLS != nil {
		return fmt.Errorf("%w: a TLS configuration with http:// endpoints: the endpoints must be https://", ErrInvalid)
	}
	if (cfg.Username == "") != (cfg.Password == "") {
		return fmt.Errorf("%w: a username needs a password, and a password a username", ErrInvalid)
	}
	return nil
}

// do runs one call, named op for its errors, with a deadline required and
// its attempts recorded.
func (c *Client) do(ctx context.Context, op string, call func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		return fmt.Errorf("%s: %w", op, ErrNoDeadline)
	}
	a := &attempts{}
	err := call(context.WithValue(ctx, attemptsKey{}, a))
	return wrap(ctx, op, err, a.get())
}

// recordUnary runs inside the etcd client's retries, once per attempt.
func (c *Client) recordUnary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	err := invoker(ctx, method, req, reply, cc, opts...)
	attemptsOf(ctx, c.fallback).record(err)
	return err
}

// recordStream runs inside the etcd client's retries, once per attempt to
// open a stream.
func (c *Client) recordStream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	attemptsOf(ctx, c.fallback).record(err)
	return s, err
}

// onMember runs call on a connection to one member's client URL, made for
// the call and closed after it. Its calls fail fast: when the member is down,
// they return its connection error at once rather than wait for it until the
// deadline. A URL of another scheme than the client's endpoints is refused,
// so that a member that advertises http:// never gets a TLS client's token
// in plaintext.
func (c *Client) onMember(ctx context.Context, op, endpoint string, call func(context.Context, *grpc.ClientConn) error) error {
	return c.do(ctx, op, func(ctx context.Context) error {
		if u, err := url.Parse(endpoint); err != nil || u.Scheme != c.scheme {
			return fmt.Errorf("%w: the member's client URL %q is not %s://, as the client's endpoints are", ErrInvalid, endpoint, c.scheme)
		}
		conn, err := c.cli.Dial(endpoint)
		if err != nil {
			return err
		}
		defer conn.Close()
		return call(ctx, conn)
	})
}

// failFast makes a call on one member's connection fail at once when the
// connection cannot be made; the etcd client waits for it by default.
var failFast = grpc.WaitForReady(false)
