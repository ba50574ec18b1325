package cli

import (
	"errors"
	"fmt"
	"strings"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/commonrpc"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// forceManual is HAAdmin's flag for a manual transition under automatic
// failover.
const forceManual = "--forcemanual"

// haCommands are RMAdminCLI's HA commands (HAAdmin's), by flag.
var haCommands = map[string]string{
	"-getServiceState":     "<serviceId>",
	"-getAllServiceState":  "",
	"-transitionToActive":  "[--forcemanual] <serviceId>",
	"-transitionToStandby": "[--forcemanual] <serviceId>",
}

// haTargets are the RM ids of the client's yarn-site.xml and each one's
// admin address; an error when RM HA is off, as RMAdminCLI refuses the HA
// commands then.
func (r *runner) haTargets() (ids, addrs []string, err error) {
	port := 8033
	ids, addrs, err = client.ConfRMAddresses(r.cfg.ConfDir, hadoopconf.KeyRMAdminAddress, port)
	if err == nil && ids == nil {
		err = errors.New("Invalid arguments: HA is not enabled")
	}
	return ids, addrs, err
}

// haAdmin runs one HA command and returns its exit code, printing as
// HAAdmin prints.
func (r *runner) haAdmin(cmd string, args []string) int {
	ids, addrs, err := r.haTargets()
	if err != nil {
		return r.reportAdmin(cmd, err)
	}
	target := func(id string) (string, error) {
		for i, x := range ids {
			if x == id {
				return addrs[i], nil
			}
		}
		return "", fmt.Errorf("Invalid HA id %q: the ids are %s", id, strings.Join(ids, ","))
	}
	forced := len(args) > 0 && args[0] == forceManual
	if forced {
		args = args[1:]
	}
	switch cmd {
	case "-getAllServiceState":
		if len(args) != 0 {
			r.rmadminUsage(cmd)
			return exitFailure
		}
		for i := range ids {
			state, err := r.serviceState(addrs[i])
			if err != nil {
				state = "Failed to connect: " + firstLine(err)
			}
			fmt.Fprintf(r.out, "%-50s %-10s\n", addrs[i], state)
		}
		return exitOK
	}
	if len(args) != 1 {
		r.rmadminUsage(cmd)
		return exitFailure
	}
	addr, err := target(args[0])
	if err != nil {
		return r.reportAdmin(cmd, err)
	}
	switch cmd {
	case "-getServiceState":
		state, err := r.serviceState(addr)
		if err != nil {
			return r.reportAdmin(cmd, err)
		}
		fmt.Fprintln(r.out, state)
		return exitOK
	}
	// Knit's RMs always fail over automatically (the Lease).
	if !forced {
		fmt.Fprintf(r.errOut, "Automatic failover is enabled for org.apache.hadoop.yarn.client.RMHAServiceTarget@%s\n"+
			"Refusing to manually manage HA state, since it may cause\n"+
			"a split-brain scenario or other incorrect state.\n"+
			"If you are very sure you know what you are doing, please \n"+
			"specify the --forcemanual flag.\n", args[0])
		return exitFailure
	}
	info := &commonpb.HAStateChangeRequestInfoProto{ReqSource: commonpb.HARequestSource_REQUEST_BY_USER_FORCED.Enum()}
	ha := commonrpc.NewHAServiceProtocolClient(r.haConn(addr))
	if cmd == "-transitionToActive" {
		_, err = ha.TransitionToActive(r.ctx, &commonpb.TransitionToActiveRequestProto{ReqInfo: info})
	} else {
		_, err = ha.TransitionToStandby(r.ctx, &commonpb.TransitionToStandbyRequestProto{ReqInfo: info})
	}
	return r.reportAdmin(cmd, err)
}

// serviceState is HAServiceStatus's state as HAAdmin prints it: "active",
// "standby".
func (r *runner) serviceState(addr string) (string, error) {
	st, err := commonrpc.NewHAServiceProtocolClient(r.haConn(addr)).GetServiceStatus(r.ctx, &commonpb.GetServiceStatusRequestProto{})
	if err != nil {
		return "", err
	}
	return strings.ToLower(st.GetState().String()), nil
}

// haConn is a connection of its own to one RM's HAServiceProtocol, closed
// with the runner.
func (r *runner) haConn(addr string) lazyConn {
	var conn Caller
	r.extra = append(r.extra, &conn)
	return lazyConn{r: r, conn: &conn, addr: addr, protocol: commonrpc.HAServiceProtocolName}
}

func firstLine(err error) string {
	msg := err.Error()
	if e, ok := yarnerr.Find(err); ok {
		msg = e.Message
	}
	first, _, _ := strings.Cut(msg, "\n")
	return first
}
