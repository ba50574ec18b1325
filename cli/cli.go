// Package cli holds the yarn-style commands of the knit CLI — application,
// applicationattempt, container, node and queue, speaking
// ApplicationClientProtocol to a ResourceManager over Hadoop RPC, and
// rmadmin, speaking ResourceManagerAdministrationProtocol to its admin port —
// and prints what Hadoop 3.4's yarn command prints (ApplicationCLI, NodeCLI,
// QueueCLI, RMAdminCLI), so scripts written against yarn's output keep
// working.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// DefaultRMAddress is yarn-default.xml's yarn.resourcemanager.address
// (0.0.0.0 is the RM's bind address; clients dial the local host).
const DefaultRMAddress = "0.0.0.0:8032"

// DefaultRMAdminAddress is yarn-default.xml's
// yarn.resourcemanager.admin.address.
const DefaultRMAdminAddress = "0.0.0.0:8033"

// Caller is the part of *ipc.Client the commands use.
type Caller interface {
	Call(ctx context.Context, method string, req, resp proto.Message) error
	Close() error
}

// Config tells Run where the ResourceManager is and who is asking.
type Config struct {
	// RMAddress is host:port of the RM's client service.
	RMAddress string
	// AdminAddress is host:port of the RM's admin service, which rmadmin
	// calls.
	AdminAddress string
	// User is the SIMPLE-auth user the calls run as.
	User string
	// ConfDir is the client's Hadoop configuration folder, which
	// -refreshQueues reports on; empty for none.
	ConfDir string
	// Dial opens a connection for protocol
	// (yarnrpc.ApplicationClientProtocolName or
	// yarnrpc.ResourceManagerAdministrationProtocolName); nil means ipc.Dial.
	Dial func(ctx context.Context, addr, protocol, user string) (Caller, error)
}

// Exit codes. yarn's commands return -1 for the failures they report
// themselves (the JVM turns it into 255); an exception they do not catch
// escapes main and the JVM exits with 1.
const (
	exitOK        = 0
	exitFailure   = -1
	exitException = 1
)

// Run runs one command, args[0] being application (or app),
// applicationattempt, container, node, queue or rmadmin, and returns its
// exit code.
func Run(ctx context.Context, args []string, out, errOut io.Writer, cfg Config) int {
	if len(args) == 0 {
		fmt.Fprintln(errOut, "usage: knit application|applicationattempt|container|node|queue|rmadmin [options]")
		return exitFailure
	}
	r := &runner{ctx: ctx, out: out, errOut: errOut, cfg: cfg}
	defer r.close()
	var code int
	var err error
	switch strings.ToLower(args[0]) {
	case "application", "app":
		code, err = r.application(args[1:])
	case "applicationattempt":
		code, err = r.attempt(args[1:])
	case "container":
		code, err = r.container(args[1:])
	case "node":
		code, err = r.node(args[1:])
	case "queue":
		code, err = r.queue(args[1:])
	case "rmadmin":
		// RMAdminCLI reports every failure itself.
		return r.rmadmin(args[1:])
	default:
		fmt.Fprintf(errOut, "Unknown command: %s\n", args[0])
		return exitFailure
	}
	if err != nil {
		// What the JVM prints for an exception escaping main (the stack
		// trace aside).
		fmt.Fprintf(errOut, "Exception in thread \"main\" %s\n", javaException(err))
		return exitException
	}
	return code
}

// runner carries one command's streams and its lazily opened connections:
// usage errors never dial.
type runner struct {
	ctx         context.Context
	out, errOut io.Writer
	cfg         Config
	client      Caller // ApplicationClientProtocol
	admin       Caller // ResourceManagerAdministrationProtocol
	// extra are the connections to each RM of HA commands.
	extra []*Caller
}

func (r *runner) close() {
	for _, c := range []Caller{r.client, r.admin} {
		if c != nil {
			_ = c.Close()
		}
	}
	for _, c := range r.extra {
		if *c != nil {
			_ = (*c).Close()
		}
	}
}

// rm is the RM's ApplicationClientProtocol.
func (r *runner) rm() *yarnrpc.ApplicationClientProtocolClient {
	return yarnrpc.NewApplicationClientProtocolClient(lazyConn{r: r, conn: &r.client, addr: r.cfg.RMAddress,
		protocol: yarnrpc.ApplicationClientProtocolName})
}

// rmAdmin is the RM's ResourceManagerAdministrationProtocol.
func (r *runner) rmAdmin() *yarnrpc.ResourceManagerAdministrationProtocolClient {
	return yarnrpc.NewResourceManagerAdministrationProtocolClient(lazyConn{r: r, conn: &r.admin, addr: r.cfg.AdminAddress,
		protocol: yarnrpc.ResourceManagerAdministrationProtocolName})
}

// lazyConn makes the calls of one protocol on *conn, dialing addr first if
// needed, and names the method in the error of a failed call (callError).
type lazyConn struct {
	r              *runner
	conn           *Caller
	addr, protocol string
}

var _ ipc.Invoker = lazyConn{}

func (l lazyConn) Call(ctx context.Context, method string, req, resp proto.Message) error {
	r, conn, addr, protocol := l.r, l.conn, l.addr, l.protocol
	if *conn == nil {
		dial := r.cfg.Dial
		if dial == nil {
			dial = func(ctx context.Context, addr, protocol, user string) (Caller, error) {
				cfg := ipc.ClientConfig{Protocol: protocol, User: user, Errors: yarnerr.FromRemote}
				if len(client.Addresses(addr)) > 1 {
					// RM HA: the RMs in turn, as RMProxy fails over.
					return client.NewCaller(addr, cfg)
				}
				return ipc.Dial(ctx, addr, cfg)
			}
		}
		c, err := dial(ctx, addr, protocol, r.cfg.User)
		if err != nil {
			return fmt.Errorf("connecting to ResourceManager at %s: %w", addr, err)
		}
		*conn = c
	}
	if err := (*conn).Call(ctx, method, req, resp); err != nil {
		return &callError{method: method, err: err}
	}
	return nil
}

// callError is a failed call, named by its method as the commands print it.
type callError struct {
	method string
	err    error
}

func (e *callError) Error() string { return e.method + ": " + e.err.Error() }
func (e *callError) Unwrap() error { return e.err }

// javaException renders err as Throwable.toString: the class and message
// of the exception it carries (the server's, or the CLI's own where yarn's
// Java code throws, such as IllegalArgumentException for a malformed id), an
// IOException for anything else.
func javaException(err error) string {
	var ue errUnrecognized
	if _, ok := yarnerr.Find(err); !ok && errors.As(err, &ue) {
		return yarnerr.UnrecognizedOption.New(ue.Error()).Error()
	}
	return yarnerr.JavaString(err)
}

// ResolveRMAddress returns the address to dial for the RM's client service:
// yarn.resourcemanager.address from hadoopConfDir/yarn-site.xml over
// yarn-default's "${yarn.resourcemanager.hostname}:8032", with the wildcard
// host 0.0.0.0 replaced by 127.0.0.1. A missing directory or file means the
// defaults, as for a YarnConfiguration without yarn-site.xml.
func ResolveRMAddress(hadoopConfDir string) (string, error) {
	return resolveAddress(hadoopConfDir, hadoopconf.KeyRMAddress, DefaultRMAddress)
}

// ResolveRMAdminAddress is ResolveRMAddress for the RM's admin service:
// yarn.resourcemanager.admin.address, port 8033 by default.
func ResolveRMAdminAddress(hadoopConfDir string) (string, error) {
	return resolveAddress(hadoopConfDir, hadoopconf.KeyRMAdminAddress, DefaultRMAdminAddress)
}

// resolveAddress reads key from hadoopConfDir/yarn-site.xml over YARN's
// defaults, as ResolveRMAddress describes.
func resolveAddress(hadoopConfDir, key, def string) (string, error) {
	_, port, err := net.SplitHostPort(def)
	if err != nil {
		return "", fmt.Errorf("default %s: %w", def, err)
	}
	p, err := strconv.Atoi(port)
	if err != nil {
		return "", fmt.Errorf("default %s: %w", def, err)
	}
	addr, _, err := client.ConfAddress(hadoopConfDir, key, p)
	return addr, err
}
