package cli

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

func (r *runner) attempt(args []string) (int, error) {
	return r.statusOrList("applicationattempt", attemptOptions(), args, r.attemptStatus, r.listAttempts, "fail", r.failAttempt)
}

// statusOrList runs the commands yarn parses alike: -status and -list, each
// alone, an optional extra option, and -help. Anything else prints the usage
// with "Invalid Command Usage" and still exits 0, as yarn does.
func (r *runner) statusOrList(title string, opts []option, args []string, status, list func(string) (int, error), extra string, extraFn func(string) (int, error)) (int, error) {
	p, code, ok, err := r.parseCommand(title, opts, args)
	if !ok {
		return code, err
	}
	for _, sole := range []struct {
		name string
		fn   func(string) (int, error)
	}{{"status", status}, {"list", list}} {
		if !p.has(sole.name) {
			continue
		}
		if p.hasOtherThan(sole.name) {
			printHelp(r.out, title, opts)
			return exitFailure, nil
		}
		return sole.fn(p.value(sole.name))
	}
	switch {
	case extra != "" && p.has(extra):
		return extraFn(p.value(extra))
	case p.has("help"):
		printHelp(r.out, title, opts)
		return exitOK, nil
	default:
		fmt.Fprintln(r.errOut, "Invalid Command Usage : ")
		printHelp(r.out, title, opts)
		return exitOK, nil
	}
}

func parseAttemptID(s string) (apps.AttemptID, error) {
	id, err := yarnid.ParseAttemptID(s)
	if err != nil {
		return id, yarnerr.IllegalArgument.New("Invalid AppAttemptId: " + s)
	}
	return id, nil
}

func (r *runner) listAttempts(s string) (int, error) {
	id, err := parseAppID(s)
	if err != nil {
		return 0, err
	}
	resp, err := r.rm().GetApplicationAttempts(r.ctx, &yarnpb.GetApplicationAttemptsRequestProto{ApplicationId: id.Proto()})
	if err != nil {
		return 0, err
	}
	list := resp.GetApplicationAttempts()
	fmt.Fprintf(r.out, "Total number of application attempts :%d\n", len(list))
	fmt.Fprintf(r.out, attemptsPattern, "ApplicationAttempt-Id", "State", "AM-Container-Id", "Tracking-URL")
	for _, a := range list {
		am := "N/A"
		if a.AmContainerId != nil {
			am = containerIDString(a.AmContainerId)
		}
		fmt.Fprintf(r.out, attemptsPattern, attemptIDString(a.ApplicationAttemptId), attemptState(a.GetYarnApplicationAttemptState()), am, jstr(a.TrackingUrl))
	}
	return exitOK, nil
}

func (r *runner) attemptStatus(s string) (int, error) {
	id, err := parseAttemptID(s)
	if err != nil {
		return 0, err
	}
	resp, err := r.rm().GetApplicationAttemptReport(r.ctx, &yarnpb.GetApplicationAttemptReportRequestProto{ApplicationAttemptId: id.Proto()})
	switch {
	case errors.Is(err, yarnerr.ApplicationNotFound):
		fmt.Fprintf(r.out, "Application for AppAttempt with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	case errors.Is(err, yarnerr.ApplicationAttemptNotFound):
		fmt.Fprintf(r.out, "Application Attempt with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	case err != nil:
		return 0, err
	}
	a := resp.GetApplicationAttemptReport()
	am := "N/A"
	if a.AmContainerId != nil {
		am = containerIDString(a.AmContainerId)
	}
	var b strings.Builder
	b.WriteString("Application Attempt Report : \n")
	fmt.Fprintf(&b, "\tApplicationAttempt-Id : %s\n", attemptIDString(a.ApplicationAttemptId))
	fmt.Fprintf(&b, "\tState : %s\n", attemptState(a.GetYarnApplicationAttemptState()))
	fmt.Fprintf(&b, "\tAMContainer : %s\n", am)
	fmt.Fprintf(&b, "\tTracking-URL : %s\n", jstr(a.TrackingUrl))
	fmt.Fprintf(&b, "\tRPC Port : %d\n", a.GetRpcPort())
	fmt.Fprintf(&b, "\tAM Host : %s\n", jstr(a.Host))
	fmt.Fprintf(&b, "\tDiagnostics : %s", a.GetDiagnostics())
	fmt.Fprintln(r.out, b.String())
	return exitOK, nil
}

func (r *runner) failAttempt(s string) (int, error) {
	id, err := parseAttemptID(s)
	if err != nil {
		return 0, err
	}
	fmt.Fprintf(r.out, "Failing attempt %s of application %s\n", id, id.App)
	req := &yarnpb.FailApplicationAttemptRequestProto{ApplicationAttemptId: id.Proto()}
	if _, err := r.rm().FailApplicationAttempt(r.ctx, req); err != nil {
		return 0, err
	}
	return exitOK, nil
}

func (r *runner) container(args []string) (int, error) {
	return r.statusOrList("container", containerOptions(), args, r.containerStatus, r.listContainers, "", nil)
}

func (r *runner) listContainers(s string) (int, error) {
	id, err := yarnid.ParseAttemptID(s)
	if err != nil {
		// yarn takes a non-id as a yarn-service name, which Knit does not run.
		fmt.Fprintf(r.errOut, "Application with name '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	}
	resp, err := r.rm().GetContainers(r.ctx, &yarnpb.GetContainersRequestProto{ApplicationAttemptId: id.Proto()})
	if err != nil {
		return 0, err
	}
	list := resp.GetContainers()
	fmt.Fprintf(r.out, "Total number of containers :%d\n", len(list))
	fmt.Fprintf(r.out, containersPattern, "Container-Id", "Start Time", "Finish Time", "State", "Host", "Node Http Address", "LOG-URL")
	for _, c := range list {
		httpAddr := "N/A"
		if c.NodeHttpAddress != nil {
			httpAddr = *c.NodeHttpAddress
		}
		fmt.Fprintf(r.out, containersPattern, containerIDString(c.ContainerId), javaTime(c.GetCreationTime()), javaTime(c.GetFinishTime()),
			containerState(c.GetContainerState()), nodeIDString(c.NodeId), httpAddr, jstr(c.LogUrl))
	}
	return exitOK, nil
}

func (r *runner) containerStatus(s string) (int, error) {
	id, err := yarnid.ParseContainerID(s)
	if err != nil {
		return 0, yarnerr.IllegalArgument.New("Invalid ContainerId: " + s)
	}
	resp, err := r.rm().GetContainerReport(r.ctx, &yarnpb.GetContainerReportRequestProto{ContainerId: id.Proto()})
	switch {
	case errors.Is(err, yarnerr.ApplicationNotFound):
		fmt.Fprintf(r.out, "Application for Container with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	case errors.Is(err, yarnerr.ApplicationAttemptNotFound):
		fmt.Fprintf(r.out, "Application Attempt for Container with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	case errors.Is(err, yarnerr.ContainerNotFound):
		fmt.Fprintf(r.out, "Container with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	case err != nil:
		return 0, err
	}
	c := resp.GetContainerReport()
	httpAddr := "N/A"
	if c.NodeHttpAddress != nil {
		httpAddr = *c.NodeHttpAddress
	}
	var b strings.Builder
	b.WriteString("Container Report : \n")
	fmt.Fprintf(&b, "\tContainer-Id : %s\n", containerIDString(c.ContainerId))
	fmt.Fprintf(&b, "\tStart-Time : %d\n", c.GetCreationTime())
	fmt.Fprintf(&b, "\tFinish-Time : %d\n", c.GetFinishTime())
	fmt.Fprintf(&b, "\tState : %s\n", containerState(c.GetContainerState()))
	fmt.Fprintf(&b, "\tExecution-Type : %s\n", c.GetExecutionType())
	fmt.Fprintf(&b, "\tLOG-URL : %s\n", jstr(c.LogUrl))
	fmt.Fprintf(&b, "\tHost : %s\n", nodeIDString(c.NodeId))
	fmt.Fprintf(&b, "\tNodeHttpAddress : %s\n", httpAddr)
	fmt.Fprintf(&b, "\tDiagnostics : %s", c.GetDiagnosticsInfo())
	fmt.Fprintln(r.out, b.String())
	return exitOK, nil
}

// nodesPattern is NodeCLI's NODES_PATTERN.
const nodesPattern = "%16s\t%15s\t%17s\t%28s\n"

// allNodeStates is NodeState.values() in declaration order.
func allNodeStates() []yarnpb.NodeStateProto {
	return []yarnpb.NodeStateProto{
		yarnpb.NodeStateProto_NS_NEW, yarnpb.NodeStateProto_NS_RUNNING, yarnpb.NodeStateProto_NS_UNHEALTHY,
		yarnpb.NodeStateProto_NS_DECOMMISSIONED, yarnpb.NodeStateProto_NS_LOST, yarnpb.NodeStateProto_NS_REBOOTED,
		yarnpb.NodeStateProto_NS_DECOMMISSIONING, yarnpb.NodeStateProto_NS_SHUTDOWN,
	}
}

func validNodeStates() string {
	var names []string
	for _, s := range allNodeStates() {
		names = append(names, nodeState(s))
	}
	return "The valid node state can be one of the following: " + strings.Join(names, ",") + "."
}

func nodeOptions() []option {
	return []option{
		{name: "help", desc: "Displays help for all commands."},
		{name: "list", desc: "List all running nodes. Supports optional use of -states to filter nodes based on node state, all -all to list all nodes, -showDetails to display more details about each node."},
		{name: "states", hasArg: true, multi: true, sep: ",", argName: "States", desc: "Works with -list to filter nodes based on input comma-separated list of node states. " + validNodeStates()},
		{name: "all", desc: "Works with -list to list all nodes."},
	}
}

func (r *runner) node(args []string) (int, error) {
	const title = "node"
	opts := nodeOptions()
	// NodeCLI accepts -all in any case.
	args = append([]string(nil), args...)
	for i, a := range args {
		if strings.EqualFold(a, "-all") {
			args[i] = "-all"
		}
	}
	p, err := parseArgs(opts, args)
	if err != nil {
		if _, missing := err.(errMissingArgument); missing {
			fmt.Fprintln(r.out, "Missing argument for options")
			printHelp(r.out, title, opts)
			return exitFailure, nil
		}
		return 0, err
	}
	switch {
	case p.has("list"):
		var states []yarnpb.NodeStateProto
		switch {
		case p.has("all"):
			states = allNodeStates()
		case p.has("states"):
			for _, s := range p.values["states"] {
				if strings.TrimSpace(s) == "" {
					continue
				}
				v, ok := yarnpb.NodeStateProto_value["NS_"+strings.ToUpper(strings.TrimSpace(s))]
				if !ok {
					fmt.Fprintf(r.out, "The node state %s is invalid.\n", s)
					fmt.Fprintln(r.out, validNodeStates())
					return exitFailure, nil
				}
				states = append(states, yarnpb.NodeStateProto(v))
			}
		default:
			states = []yarnpb.NodeStateProto{yarnpb.NodeStateProto_NS_RUNNING}
		}
		if len(states) == 0 {
			// YarnClientImpl.getNodeReports asks for every state when given
			// none.
			states = allNodeStates()
		}
		resp, err := r.rm().GetClusterNodes(r.ctx, &yarnpb.GetClusterNodesRequestProto{NodeStates: states})
		if err != nil {
			return 0, err
		}
		nodes := resp.GetNodeReports()
		fmt.Fprintf(r.out, "Total Nodes:%d\n", len(nodes))
		fmt.Fprintf(r.out, nodesPattern, "Node-Id", "Node-State", "Node-Http-Address", "Number-of-Running-Containers")
		for _, n := range nodes {
			fmt.Fprintf(r.out, nodesPattern, nodeIDString(n.NodeId), nodeState(n.GetNodeState()), jstr(n.HttpAddress), strconv.Itoa(int(n.GetNumContainers())))
		}
		return exitOK, nil
	case p.has("help"):
		printHelp(r.out, title, opts)
		return exitOK, nil
	default:
		fmt.Fprintln(r.errOut, "Invalid Command Usage : ")
		printHelp(r.out, title, opts)
		return exitOK, nil
	}
}

func queueOptions() []option {
	return []option{
		{name: "status", hasArg: true, argName: "Queue Name", desc: "List queue information about given queue."},
		{name: "help", desc: "Displays help for all commands."},
	}
}

func (r *runner) queue(args []string) (int, error) {
	const title = "queue"
	opts := queueOptions()
	p, err := parseArgs(opts, args)
	if err != nil {
		if _, missing := err.(errMissingArgument); missing {
			fmt.Fprintln(r.out, "Missing argument for options")
			printHelp(r.out, title, opts)
			return exitFailure, nil
		}
		return 0, err
	}
	switch {
	case p.has("status"):
		if len(args) != 2 {
			printHelp(r.out, title, opts)
			return exitFailure, nil
		}
		return r.queueStatus(p.value("status"))
	case p.has("help"):
		printHelp(r.out, title, opts)
		return exitOK, nil
	default:
		fmt.Fprintln(r.errOut, "Invalid Command Usage : ")
		printHelp(r.out, title, opts)
		return exitFailure, nil
	}
}

func (r *runner) queueStatus(name string) (int, error) {
	req := &yarnpb.GetQueueInfoRequestProto{QueueName: proto.String(name), IncludeApplications: proto.Bool(false),
		IncludeChildQueues: proto.Bool(false), Recursive: proto.Bool(false)}
	resp, err := r.rm().GetQueueInfo(r.ctx, req)
	if err != nil {
		return 0, err
	}
	q := resp.GetQueueInfo()
	if q == nil {
		fmt.Fprintf(r.out, "Cannot get queue from RM by queueName = %s, please check.\n", name)
		return exitFailure, nil
	}
	var b strings.Builder
	b.WriteString("Queue Information : \n")
	fmt.Fprintf(&b, "Queue Name : %s\n", jstr(q.QueueName))
	fmt.Fprintf(&b, "Queue Path : %s\n", jstr(q.QueuePath))
	fmt.Fprintf(&b, "\tState : %s\n", queueState(q.GetState()))
	// QueueInfo capacities are float fractions; Java multiplies in float.
	fmt.Fprintf(&b, "\tCapacity : %s%%\n", twoDecimals(float64(q.GetCapacity()*100)))
	fmt.Fprintf(&b, "\tCurrent Capacity : %s%%\n", twoDecimals(float64(q.GetCurrentCapacity()*100)))
	fmt.Fprintf(&b, "\tMaximum Capacity : %s%%\n", twoDecimals(float64(q.GetMaximumCapacity()*100)))
	fmt.Fprintf(&b, "\tWeight : %s\n", twoDecimals(float64(q.GetWeight())))
	fmt.Fprintf(&b, "\tMaximum Parallel Apps : %d\n", q.GetMaxParallelApps())
	label := q.GetDefaultNodeLabelExpression()
	if strings.TrimSpace(label) == "" {
		label = "<DEFAULT_PARTITION>"
	}
	fmt.Fprintf(&b, "\tDefault Node Label expression : %s\n", label)
	fmt.Fprintf(&b, "\tAccessible Node Labels : %s\n", strings.Join(q.GetAccessibleNodeLabels(), ","))
	if q.PreemptionDisabled != nil {
		fmt.Fprintf(&b, "\tPreemption : %s\n", enabledWord(q.GetPreemptionDisabled()))
	}
	if q.IntraQueuePreemptionDisabled != nil {
		fmt.Fprintf(&b, "\tIntra-queue Preemption : %s\n", enabledWord(q.GetIntraQueuePreemptionDisabled()))
	}
	fmt.Fprint(r.out, b.String())
	return exitOK, nil
}

func enabledWord(disabled bool) string {
	if disabled {
		return "disabled"
	}
	return "enabled"
}
