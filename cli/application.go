package cli

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

// Row formats of ApplicationCLI (APPLICATIONS_PATTERN,
// APPLICATION_ATTEMPTS_PATTERN, CONTAINER_PATTERN).
const (
	applicationsPattern = "%30s\t%20s\t%20s\t%10s\t%10s\t%18s\t%18s\t%15s\t%35s\n"
	attemptsPattern     = "%30s\t%20s\t%35s\t%35s\n"
	containersPattern   = "%30s\t%20s\t%20s\t%20s\t%20s\t%20s\t%35s\n"
)

// allAppStates is YarnApplicationState.values(), in declaration order (an
// EnumSet prints in that order).
func allAppStates() []yarnpb.YarnApplicationStateProto {
	return []yarnpb.YarnApplicationStateProto{
		yarnpb.YarnApplicationStateProto_NEW, yarnpb.YarnApplicationStateProto_NEW_SAVING,
		yarnpb.YarnApplicationStateProto_SUBMITTED, yarnpb.YarnApplicationStateProto_ACCEPTED,
		yarnpb.YarnApplicationStateProto_RUNNING, yarnpb.YarnApplicationStateProto_FINISHED,
		yarnpb.YarnApplicationStateProto_FAILED, yarnpb.YarnApplicationStateProto_KILLED,
	}
}

func validAppStates() string {
	names := []string{"ALL"}
	for _, s := range allAppStates() {
		names = append(names, appState(s))
	}
	return "The valid application state can be one of the following: " + strings.Join(names, ",")
}

// applicationOptions are the options of "yarn application" that Knit
// implements; the yarn-service ones (launch, flex, upgrade, ...) are left
// out.
func applicationOptions() []option {
	return []option{
		{name: "status", hasArg: true, argName: "Application Name or ID", desc: "Prints the status of the application. If app ID is provided, it prints the generic YARN application status. If name is provided, it prints the application specific status based on app's own implementation, and -appTypes option must be specified unless it is the default yarn-service type."},
		{name: "list", desc: "List applications. Supports optional use of -appTypes to filter applications based on application type, -appStates to filter applications based on application state and -appTags to filter applications based on application tag."},
		{name: "movetoqueue", hasArg: true, argName: "Application ID", desc: "Moves the application to a different queue. Deprecated command. Use 'changeQueue' instead."},
		{name: "queue", hasArg: true, argName: "Queue Name", desc: "Works with the movetoqueue command to specify which queue to move an application to."},
		{name: "help", desc: "Displays help for all commands."},
		{name: "appTypes", hasArg: true, multi: true, sep: ",", argName: "Types", desc: "Works with -list to filter applications based on input comma-separated list of application types."},
		{name: "appStates", hasArg: true, multi: true, sep: ",", argName: "States", desc: "Works with -list to filter applications based on input comma-separated list of application states. " + validAppStates()},
		{name: "appTags", hasArg: true, multi: true, sep: ",", argName: "Tags", desc: "Works with -list to filter applications based on input comma-separated list of application tags."},
		{name: "appId", hasArg: true, argName: "Application ID", desc: "Specify Application Id to be operated"},
		{name: "updatePriority", hasArg: true, argName: "Priority", desc: "update priority of an application. ApplicationId can be passed using 'appId' option."},
		{name: "changeQueue", hasArg: true, argName: "Queue Name", desc: "Moves application to a new queue. ApplicationId can be passed using 'appId' option. 'movetoqueue' command is deprecated, this new command 'changeQueue' performs same functionality."},
		{name: "kill", hasArg: true, multi: true, sep: " ", argName: "Application ID", desc: "Kills the application. Set of applications can be provided separated with space"},
	}
}

func attemptOptions() []option {
	return []option{
		{name: "status", hasArg: true, argName: "Application Attempt ID", desc: "Prints the status of the application attempt."},
		{name: "list", hasArg: true, argName: "Application ID", desc: "List application attempts for application."},
		{name: "fail", hasArg: true, argName: "Application Attempt ID", desc: "Fails application attempt."},
		{name: "help", desc: "Displays help for all commands."},
	}
}

func containerOptions() []option {
	return []option{
		{name: "status", hasArg: true, argName: "Container ID", desc: "Prints the status of the container."},
		{name: "list", hasArg: true, argName: "Application Name or Attempt ID", desc: "List containers for application attempt when application attempt ID is provided."},
		{name: "help", desc: "Displays help for all commands."},
	}
}

// parseCommand parses args and handles what every ApplicationCLI title
// handles the same way: a missing argument and stray tokens print the usage
// and fail. ok false means the command is over with code.
func (r *runner) parseCommand(title string, opts []option, args []string) (p *parsed, code int, ok bool, err error) {
	p, err = parseArgs(opts, args)
	if err != nil {
		if _, missing := err.(errMissingArgument); missing {
			fmt.Fprintln(r.out, "Missing argument for options")
			printHelp(r.out, title, opts)
			return nil, exitFailure, false, nil
		}
		return nil, 0, false, err
	}
	if len(p.rest) != 0 {
		printHelp(r.out, title, opts)
		return nil, exitFailure, false, nil
	}
	return p, 0, true, nil
}

func (r *runner) application(args []string) (int, error) {
	const title = "application"
	opts := applicationOptions()
	p, code, ok, err := r.parseCommand(title, opts, args)
	if !ok {
		return code, err
	}
	usage := func(code int) (int, error) {
		printHelp(r.out, title, opts)
		return code, nil
	}
	switch {
	case p.has("status"):
		if p.hasOtherThan("status", "appTypes") {
			return usage(exitFailure)
		}
		return r.applicationStatus(p.value("status"))
	case p.has("list"):
		return r.listApplications(p)
	case p.has("kill"):
		if p.hasOtherThan("kill") {
			return usage(exitFailure)
		}
		return r.kill(p.values["kill"])
	case p.has("movetoqueue"):
		if !p.has("queue") {
			return usage(exitFailure)
		}
		return r.move(p.value("movetoqueue"), p.value("queue"))
	case p.has("help"):
		return usage(exitOK)
	case p.has("updatePriority"):
		if !p.has("appId") {
			return usage(exitFailure)
		}
		return r.updatePriority(p.value("appId"), p.value("updatePriority"))
	case p.has("changeQueue"):
		if !p.has("appId") {
			return usage(exitFailure)
		}
		return r.move(p.value("appId"), p.value("changeQueue"))
	default:
		// yarn says so on stderr and still exits 0.
		fmt.Fprintln(r.errOut, "Invalid Command Usage : ")
		return usage(exitOK)
	}
}

func parseAppID(s string) (apps.ApplicationID, error) {
	id, err := yarnid.ParseApplicationID(s)
	if err != nil {
		return id, yarnerr.IllegalArgument.New("Invalid ApplicationId: " + s)
	}
	return id, nil
}

func (r *runner) report(id apps.ApplicationID) (*yarnpb.ApplicationReportProto, error) {
	resp, err := r.rm().GetApplicationReport(r.ctx, &yarnpb.GetApplicationReportRequestProto{ApplicationId: id.Proto()})
	if err != nil {
		return nil, err
	}
	return resp.GetApplicationReport(), nil
}

func (r *runner) applicationStatus(s string) (int, error) {
	id, err := yarnid.ParseApplicationID(s)
	if err != nil {
		// yarn takes a non-id as the name of a yarn-service application,
		// which Knit does not run: report it as yarn does an unknown name.
		fmt.Fprintf(r.errOut, "Application with name '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	}
	rep, err := r.report(id)
	if errors.Is(err, yarnerr.ApplicationNotFound) {
		fmt.Fprintf(r.out, "Application with id '%s' doesn't exist in RM or Timeline Server.\n", s)
		return exitFailure, nil
	}
	if err != nil {
		return 0, err
	}
	var b strings.Builder
	line := func(k, v string) { fmt.Fprintf(&b, "\t%s : %s\n", k, v) }
	b.WriteString("Application Report : \n")
	line("Application-Id", appIDString(rep.ApplicationId))
	line("Application-Name", jstr(rep.Name))
	line("Application-Type", jstr(rep.ApplicationType))
	line("User", jstr(rep.User))
	line("Queue", jstr(rep.Queue))
	prio := "null"
	if rep.Priority != nil {
		prio = strconv.Itoa(int(rep.Priority.GetPriority()))
	}
	line("Application Priority", prio)
	line("Start-Time", strconv.FormatInt(rep.GetStartTime(), 10))
	line("Finish-Time", strconv.FormatInt(rep.GetFinishTime(), 10))
	line("Progress", percent(rep.GetProgress()))
	line("State", appState(rep.GetYarnApplicationState()))
	line("Final-State", finalStatus(rep.GetFinalApplicationStatus()))
	line("Tracking-URL", jstr(rep.OriginalTrackingUrl))
	line("RPC Port", strconv.Itoa(int(rep.GetRpcPort())))
	line("AM Host", jstr(rep.Host))
	if u := rep.AppResource_Usage; u != nil {
		line("Aggregate Resource Allocation", resourceSeconds(u.ApplicationResourceUsageMap, u.GetMemorySeconds(), u.GetVcoreSeconds()))
		line("Aggregate Resource Preempted", resourceSeconds(u.ApplicationPreemptedResourceUsageMap, u.GetPreemptedMemorySeconds(), u.GetPreemptedVcoreSeconds()))
	} else {
		line("Aggregate Resource Allocation", "N/A")
		line("Aggregate Resource Preempted", "N/A")
	}
	logAgg := "N/A"
	if rep.LogAggregationStatus != nil {
		logAgg = strings.TrimPrefix(rep.GetLogAggregationStatus().String(), "LOG_")
	}
	line("Log Aggregation Status", logAgg)
	line("Diagnostics", rep.GetDiagnostics())
	line("Unmanaged Application", strconv.FormatBool(rep.GetUnmanagedApplication()))
	line("Application Node Label Expression", jstr(rep.AppNodeLabelExpression))
	line("AM container Node Label Expression", jstr(rep.AmNodeLabelExpression))
	for _, t := range rep.GetAppTimeouts() {
		to := t.GetApplicationTimeout()
		fmt.Fprintf(&b, "\tTimeoutType : %s\tExpiryTime : %s\tRemainingTime : %dseconds\n",
			strings.TrimPrefix(t.GetApplicationTimeoutType().String(), "APP_TIMEOUT_"), jstr(to.ExpireTime), to.GetRemainingTime())
	}
	// The report is built in a buffer that println then ends once more.
	fmt.Fprintln(r.out, b.String())
	return exitOK, nil
}

func (r *runner) listApplications(p *parsed) (int, error) {
	var types []string
	for _, t := range p.values["appTypes"] {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(types, strings.ToUpper(t)) {
			types = append(types, strings.ToUpper(t))
		}
	}
	chosen := map[yarnpb.YarnApplicationStateProto]bool{}
	all := false
	for _, s := range p.values["appStates"] {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		if strings.EqualFold(s, "ALL") {
			all = true
			break
		}
		v, ok := yarnpb.YarnApplicationStateProto_value[strings.ToUpper(s)]
		if !ok {
			fmt.Fprintf(r.out, "The application state %s is invalid.\n", s)
			fmt.Fprintln(r.out, validAppStates())
			return exitFailure, nil
		}
		chosen[yarnpb.YarnApplicationStateProto(v)] = true
	}
	if all {
		for _, s := range allAppStates() {
			chosen[s] = true
		}
	} else if len(chosen) == 0 {
		chosen[yarnpb.YarnApplicationStateProto_SUBMITTED] = true
		chosen[yarnpb.YarnApplicationStateProto_ACCEPTED] = true
		chosen[yarnpb.YarnApplicationStateProto_RUNNING] = true
	}
	var states []yarnpb.YarnApplicationStateProto
	var stateNames []string
	for _, s := range allAppStates() {
		if chosen[s] {
			states = append(states, s)
			stateNames = append(stateNames, appState(s))
		}
	}
	var tags []string
	for _, t := range p.values["appTags"] {
		if t = strings.TrimSpace(t); t != "" && !slices.Contains(tags, t) {
			tags = append(tags, t)
		}
	}
	// yarn keeps types and tags in HashSets; sorted is the stable stand-in
	// for their iteration order.
	slices.Sort(types)
	slices.Sort(tags)
	req := &yarnpb.GetApplicationsRequestProto{ApplicationTypes: types, ApplicationStates: states}
	for _, t := range tags {
		// GetApplicationsRequestPBImpl.setApplicationTags lowercases.
		req.ApplicationTags = append(req.ApplicationTags, strings.ToLower(t))
	}
	resp, err := r.rm().GetApplications(r.ctx, req)
	if err != nil {
		return 0, err
	}
	list := resp.GetApplications()
	fmt.Fprintf(r.out, "Total number of applications (application-types: [%s], states: [%s] and tags: [%s]):%d\n",
		strings.Join(types, ", "), strings.Join(stateNames, ", "), strings.Join(tags, ", "), len(list))
	fmt.Fprintf(r.out, applicationsPattern, "Application-Id", "Application-Name", "Application-Type", "User", "Queue", "State", "Final-State", "Progress", "Tracking-URL")
	for _, a := range list {
		fmt.Fprintf(r.out, applicationsPattern, appIDString(a.ApplicationId), jstr(a.Name), jstr(a.ApplicationType),
			jstr(a.User), jstr(a.Queue), appState(a.GetYarnApplicationState()), finalStatus(a.GetFinalApplicationStatus()),
			percent(a.GetProgress()), jstr(a.OriginalTrackingUrl))
	}
	return exitOK, nil
}

func finished(s yarnpb.YarnApplicationStateProto) bool {
	return s == yarnpb.YarnApplicationStateProto_FINISHED || s == yarnpb.YarnApplicationStateProto_KILLED ||
		s == yarnpb.YarnApplicationStateProto_FAILED
}

// killPollInterval is YarnClientImpl's default
// yarn.client.application-client-protocol.poll-interval-ms.
const killPollInterval = 200 * time.Millisecond

// kill kills each application; it succeeds when at least one was found, as
// ApplicationCLI.killApplication(String[]) does.
func (r *runner) kill(ids []string) (int, error) {
	code := exitFailure
	for _, s := range ids {
		id, err := parseAppID(s)
		if err != nil {
			return 0, err
		}
		rep, err := r.report(id)
		if errors.Is(err, yarnerr.ApplicationNotFound) {
			fmt.Fprintf(r.out, "Application with id '%s' doesn't exist in RM.\n", s)
			continue
		}
		if err != nil {
			return 0, err
		}
		code = exitOK
		if finished(rep.GetYarnApplicationState()) {
			fmt.Fprintf(r.out, "Application %s has already finished \n", s)
			continue
		}
		fmt.Fprintf(r.out, "Killing application %s\n", s)
		if err := r.forceKill(id); err != nil {
			return 0, err
		}
	}
	return code, nil
}

// forceKill asks until the RM says the kill is complete, as
// YarnClientImpl.killApplication does.
func (r *runner) forceKill(id apps.ApplicationID) error {
	for {
		resp, err := r.rm().ForceKillApplication(r.ctx, &yarnpb.KillApplicationRequestProto{ApplicationId: id.Proto()})
		if err != nil {
			return err
		}
		if resp.GetIsKillCompleted() {
			return nil
		}
		select {
		case <-r.ctx.Done():
			return fmt.Errorf("waiting for %s to be killed: %w", id, r.ctx.Err())
		case <-time.After(killPollInterval):
		}
	}
}

func (r *runner) move(s, queue string) (int, error) {
	id, err := parseAppID(s)
	if err != nil {
		return 0, err
	}
	rep, err := r.report(id)
	if err != nil {
		return 0, err
	}
	if finished(rep.GetYarnApplicationState()) {
		fmt.Fprintf(r.out, "Application %s has already finished \n", s)
		return exitOK, nil
	}
	fmt.Fprintf(r.out, "Moving application %s to queue %s\n", s, queue)
	req := &yarnpb.MoveApplicationAcrossQueuesRequestProto{ApplicationId: id.Proto(), TargetQueue: proto.String(queue)}
	if _, err := r.rm().MoveApplicationAcrossQueues(r.ctx, req); err != nil {
		return 0, err
	}
	fmt.Fprintln(r.out, "Successfully completed move.")
	return exitOK, nil
}

func (r *runner) updatePriority(s, priority string) (int, error) {
	id, err := parseAppID(s)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseInt(priority, 10, 32)
	if err != nil {
		return 0, yarnerr.NumberFormat.Errorf("For input string: \"%s\"", priority)
	}
	fmt.Fprintf(r.out, "Updating priority of an application %s\n", s)
	req := &yarnpb.UpdateApplicationPriorityRequestProto{ApplicationId: id.Proto(), ApplicationPriority: &yarnpb.PriorityProto{Priority: proto.Int32(int32(n))}}
	resp, err := r.rm().UpdateApplicationPriority(r.ctx, req)
	if err != nil {
		return 0, err
	}
	if resp.ApplicationPriority != nil && resp.ApplicationPriority.GetPriority() == int32(n) {
		fmt.Fprintf(r.out, "Successfully updated the application %s with priority '%s'\n", s, priority)
	} else {
		fmt.Fprintf(r.out, "Updated priority of an application  %s to cluster max priority OR keeping old priority as application is in final states\n", s)
	}
	return exitOK, nil
}
