// Package etcdclient is how a Kira process reaches etcd: endpoints, TLS and
// authentication, named as etcdctl names them, and what a refusal means.
//
// Every Kira command that talks to etcd takes the same settings, from flags
// or the environment (KIRA_ETCD_*), so a secret never has to be on a
// command line: the password comes from --password-file or
// KIRA_ETCD_PASSWORD. TLS is configured by etcd's own client/pkg/transport.
//
// A client etcd refuses (no permission on the cluster's keys, wrong
// credentials, a certificate it does not trust or that does not verify) is
// told apart from an etcd that is merely unreachable: Check returns an
// error wrapping ErrRefused, which no retry will cure, and names the cause.
package etcdclient

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	"go.etcd.io/etcd/client/pkg/v3/transport"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

// The environment variables each setting is also read from.
const (
	EnvEndpoints = "KIRA_ETCD_ENDPOINTS"
	EnvCACert    = "KIRA_ETCD_CACERT"
	EnvCert      = "KIRA_ETCD_CERT"
	EnvKey       = "KIRA_ETCD_KEY"
	EnvUser      = "KIRA_ETCD_USER"
	EnvPassword  = "KIRA_ETCD_PASSWORD"
	// EnvPasswordFile names a file whose first line is the password.
	EnvPasswordFile = "KIRA_ETCD_PASSWORD_FILE"
)

// DefaultDialTimeout bounds connecting to an endpoint.
const DefaultDialTimeout = 5 * time.Second

// Config says how to reach etcd.
type Config struct {
	Endpoints []string
	// CACert verifies the servers' certificates (--cacert); Cert and Key
	// are this client's (--cert, --key), for etcd's --client-cert-auth.
	CACert, Cert, Key string
	// User is "name" or "name:password" (--user). Password (--password,
	// or KIRA_ETCD_PASSWORD) or PasswordFile (--password-file, whose first
	// line is the password) give the password when User has none.
	User, Password, PasswordFile string
	// DialTimeout defaults to DefaultDialTimeout.
	DialTimeout time.Duration
}

// SplitList splits a comma-separated list, dropping empty items.
func SplitList(s string) []string {
	var out []string
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}

// TLS reports whether the client speaks TLS to etcd.
func (c Config) TLS() bool { return c.CACert != "" || c.Cert != "" || c.Key != "" }

// ClientConfig is the clientv3 configuration for c. Its errors name the
// flag at fault.
func (c Config) ClientConfig() (clientv3.Config, error) {
	cfg := clientv3.Config{Endpoints: c.Endpoints, DialTimeout: c.DialTimeout, Logger: zap.NewNop()}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if len(c.Endpoints) == 0 {
		return cfg, errors.New("etcd: no endpoints: give --etcd or " + EnvEndpoints)
	}
	if c.TLS() {
		if (c.Cert == "") != (c.Key == "") {
			return cfg, errors.New("etcd: --cert and --key go together")
		}
		for _, ep := range c.Endpoints {
			if u, err := url.Parse(ep); err != nil || u.Scheme != "https" {
				return cfg, fmt.Errorf("etcd: endpoint %q is not https://, but TLS is configured (--cacert, --cert, --key): it would be reached without TLS", ep)
			}
		}
		info := transport.TLSInfo{CertFile: c.Cert, KeyFile: c.Key, TrustedCAFile: c.CACert}
		tc, err := info.ClientConfig()
		if err != nil {
			return cfg, fmt.Errorf("etcd: TLS (--cacert %q, --cert %q, --key %q): %w", c.CACert, c.Cert, c.Key, err)
		}
		cfg.TLS = tc
	}
	user, password, err := c.credentials()
	if err != nil {
		return cfg, err
	}
	cfg.Username, cfg.Password = user, password
	return cfg, nil
}

// credentials resolves the user and password as etcdctl does.
func (c Config) credentials() (user, password string, err error) {
	if c.User == "" {
		if c.Password != "" || c.PasswordFile != "" {
			return "", "", errors.New("etcd: a password without --user")
		}
		return "", "", nil
	}
	user, password, inline := strings.Cut(c.User, ":")
	switch {
	case user == "":
		return "", "", errors.New("etcd: --user has no user name")
	case inline:
		return user, password, nil
	case c.PasswordFile != "":
		data, err := os.ReadFile(c.PasswordFile)
		if err != nil {
			return "", "", fmt.Errorf("etcd: --password-file: %w", err)
		}
		first, _, _ := strings.Cut(string(data), "\n")
		return user, strings.TrimRight(first, "\r"), nil
	case c.Password != "":
		return user, c.Password, nil
	}
	return "", "", fmt.Errorf("etcd: --user %s has no password: give --password-file, %s or --user %s:PASSWORD", user, EnvPassword, user)
}

// New connects to etcd, with opts added to the gRPC dial options (an
// interceptor, say). Connecting is lazy: use Check for an answer.
func New(c Config, opts ...grpc.DialOption) (*clientv3.Client, error) {
	cfg, err := c.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.DialOptions = append(cfg.DialOptions, opts...)
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: %w", err)
	}
	return cli, nil
}

// ErrRefused is wrapped by the errors of a client that etcd refuses: a
// retry will not cure them.
var ErrRefused = errors.New("etcd refused this client")

// Check reads the cluster's root key through cli, within timeout, and
// explains a failure: a refusal (ErrRefused) names the cause and the fix; an
// unreachable etcd is returned as it is, for the caller to retry.
func Check(ctx context.Context, cli *clientv3.Client, c Config, prefix string, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_, err := cli.Get(ctx, prefix, clientv3.WithPrefix(), clientv3.WithCountOnly())
	if err == nil {
		return nil
	}
	return Explain(c, prefix, err)
}

// Explain turns an error of a request under prefix into one that says why
// etcd refused it, wrapping ErrRefused, when it was a refusal; otherwise
// it returns err.
func Explain(c Config, prefix string, err error) error {
	user, _, _ := strings.Cut(c.User, ":")
	who := "this client"
	if user != "" {
		who = "user " + user
	} else if c.Cert != "" {
		who = "the user named by the common name of --cert " + c.Cert
	}
	switch {
	case is(err, rpctypes.ErrPermissionDenied):
		return fmt.Errorf("%w: %s has no read/write permission on %s (grant it the role in docs/security.md): %v", ErrRefused, who, prefix, err)
	case is(err, rpctypes.ErrAuthFailed):
		return fmt.Errorf("%w: authentication of %s failed (check --user and its password): %v", ErrRefused, who, err)
	case is(err, rpctypes.ErrUserEmpty), is(err, rpctypes.ErrInvalidAuthToken):
		return fmt.Errorf("%w: etcd requires authentication: give --user with a password, or a client certificate (--cert, --key) whose common name is a user: %v", ErrRefused, err)
	}
	if c.TLS() {
		if terr := diagnoseTLS(c); terr != nil {
			return fmt.Errorf("%w: %v", ErrRefused, terr)
		}
	}
	return err
}

// is reports whether err is etcd's error target, however it reached us: as
// the client's typed error, or as a gRPC status from a dial that carries
// only its description.
func is(err, target error) bool {
	return errors.Is(err, target) || rpctypes.ErrorDesc(err) == target.Error() || strings.HasSuffix(err.Error(), target.Error())
}

// diagnoseTLS opens a TLS connection to each endpoint as the client would,
// and returns what went wrong with the first that fails: its certificate
// does not verify against --cacert, or it refuses this client's
// certificate. Nil means every endpoint accepted the handshake (or could not
// be reached at all, which is not a TLS problem).
func diagnoseTLS(c Config) error {
	cfg, err := c.ClientConfig()
	if err != nil {
		return err
	}
	for _, ep := range c.Endpoints {
		u, err := url.Parse(ep)
		if err != nil {
			continue
		}
		tc := cfg.TLS.Clone()
		if tc.ServerName == "" {
			tc.ServerName = u.Hostname()
		}
		d := &net.Dialer{Timeout: 2 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", u.Host, tc)
		var opErr *net.OpError
		if errors.As(err, &opErr) && opErr.Op == "dial" {
			continue // unreachable, not refused
		}
		if err != nil {
			return fmt.Errorf("TLS to %s failed: %v (check --cacert, --cert and --key)", ep, err)
		}
		// With TLS 1.3 a server that refuses the client's certificate says
		// so after the handshake: wait briefly for its alert.
		conn.SetReadDeadline(time.Now().Add(500 * time.Millisecond))
		_, err = conn.Read(make([]byte, 1))
		conn.Close()
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) && strings.Contains(err.Error(), "tls:") {
			return fmt.Errorf("etcd at %s refused this client's certificate: %v (check --cert and --key against etcd's --trusted-ca-file)", ep, err)
		}
	}
	return nil
}

// Args are the command-line flags that give a child process (a kira run
// started by kira bench) these settings, less the password, which Env
// passes instead.
func (c Config) Args() []string {
	args := []string{"--etcd", strings.Join(c.Endpoints, ",")}
	user, _, _ := strings.Cut(c.User, ":") // the password goes by Env, never on a command line
	for _, f := range [][2]string{{"--cacert", c.CACert}, {"--cert", c.Cert}, {"--key", c.Key}, {"--user", user}, {"--password-file", c.PasswordFile}} {
		if f[1] != "" {
			args = append(args, f[0], f[1])
		}
	}
	return args
}

// Env is the environment that gives a child process the password, if any.
func (c Config) Env() []string {
	if _, password, inline := strings.Cut(c.User, ":"); inline {
		return []string{EnvPassword + "=" + password}
	}
	if c.Password != "" {
		return []string{EnvPassword + "=" + c.Password}
	}
	return nil
}
