package cli

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

const listHeader = "                Application-Id\t    Application-Name\t    Application-Type\t      User\t     Queue\t             State\t       Final-State\t       Progress\t                       Tracking-URL\n"

func TestApplicationList(t *testing.T) {
	e := newTestRM(t)

	code, out, _ := e.run("application", "-list")
	wantCode(t, "empty list", code, 0)
	diff(t, "empty list", out, "Total number of applications (application-types: [], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: []):0\n"+listHeader)

	a1 := e.submit("wordcount", "MAPREDUCE", "default", "nightly")
	a2 := e.submit("pi", "SPARK", "b")
	row1 := a1 + "\t           wordcount\t           MAPREDUCE\t     alice\troot.default\t          ACCEPTED\t         UNDEFINED\t             0%\t                                N/A\n"
	row2 := a2 + "\t                  pi\t               SPARK\t     alice\t    root.b\t          ACCEPTED\t         UNDEFINED\t             0%\t                                N/A\n"

	code, out, _ = e.run("application", "-list")
	wantCode(t, "list", code, 0)
	diff(t, "list", out, "Total number of applications (application-types: [], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: []):2\n"+listHeader+row1+row2)

	code, out, _ = e.run("application", "-list", "-appTypes", "spark")
	wantCode(t, "by type", code, 0)
	diff(t, "by type", out, "Total number of applications (application-types: [SPARK], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: []):1\n"+listHeader+row2)

	code, out, _ = e.run("application", "-list", "-appTags", "nightly")
	wantCode(t, "by tag", code, 0)
	diff(t, "by tag", out, "Total number of applications (application-types: [], states: [SUBMITTED, ACCEPTED, RUNNING] and tags: [nightly]):1\n"+listHeader+row1)

	code, out, _ = e.run("application", "-list", "-appStates", "finished,killed")
	wantCode(t, "by state", code, 0)
	diff(t, "by state", out, "Total number of applications (application-types: [], states: [FINISHED, KILLED] and tags: []):0\n"+listHeader)

	code, out, _ = e.run("application", "-list", "-appStates", "ALL", "-appTypes", "MAPREDUCE,SPARK")
	wantCode(t, "all", code, 0)
	diff(t, "all", out, "Total number of applications (application-types: [MAPREDUCE, SPARK], states: [NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED] and tags: []):2\n"+listHeader+row1+row2)

	code, out, _ = e.run("application", "-list", "-appStates", "DONE")
	wantCode(t, "bad state", code, -1)
	diff(t, "bad state", out, "The application state DONE is invalid.\nThe valid application state can be one of the following: ALL,NEW,NEW_SAVING,SUBMITTED,ACCEPTED,RUNNING,FINISHED,FAILED,KILLED\n")
}

// diagRE masks the date the RM puts in diagnostics.
var diagRE = regexp.MustCompile(`\[[A-Z][a-z]{2} [^\]]+\]`)

func TestApplicationStatus(t *testing.T) {
	e := newTestRM(t)
	a1 := e.submit("wordcount", "MAPREDUCE", "default", "nightly")

	code, out, _ := e.run("application", "-status", a1)
	wantCode(t, "status", code, 0)
	diff(t, "status", diagRE.ReplaceAllString(mask(out), "[<date>]"), `Application Report : 
	Application-Id : `+a1+`
	Application-Name : wordcount
	Application-Type : MAPREDUCE
	User : alice
	Queue : root.default
	Application Priority : 0
	Start-Time : <time>
	Finish-Time : <time>
	Progress : 0%
	State : ACCEPTED
	Final-State : UNDEFINED
	Tracking-URL : N/A
	RPC Port : -1
	AM Host : N/A
	Aggregate Resource Allocation : 0 MB-seconds, 0 vcore-seconds
	Aggregate Resource Preempted : 0 MB-seconds, 0 vcore-seconds
	Log Aggregation Status : DISABLED
	Diagnostics : [<date>] Application is Activated, waiting for resources to be assigned for AM. 
	Unmanaged Application : false
	Application Node Label Expression : <Not set>
	AM container Node Label Expression : <DEFAULT_PARTITION>
	TimeoutType : LIFETIME	ExpiryTime : UNLIMITED	RemainingTime : -1seconds

`)

	code, out, _ = e.run("application", "-status", "application_1700000000000_0099")
	wantCode(t, "unknown", code, -1)
	diff(t, "unknown", out, "Application with id 'application_1700000000000_0099' doesn't exist in RM or Timeline Server.\n")
}

func TestApplicationKill(t *testing.T) {
	e := newTestRM(t)
	a1 := e.submit("wordcount", "MAPREDUCE", "default")

	code, out, _ := e.run("application", "-kill", a1)
	wantCode(t, "kill", code, 0)
	diff(t, "kill", out, "Killing application "+a1+"\n")

	code, out, _ = e.run("application", "-list", "-appStates", "KILLED")
	wantCode(t, "killed list", code, 0)
	diff(t, "killed list", out, "Total number of applications (application-types: [], states: [KILLED] and tags: []):1\n"+listHeader+
		a1+"\t           wordcount\t           MAPREDUCE\t     alice\troot.default\t            KILLED\t            KILLED\t             0%\thttp://rm.example:8088/cluster/app/"+a1+"\n")

	code, out, _ = e.run("application", "-kill", a1)
	wantCode(t, "kill again", code, 0)
	diff(t, "kill again", out, "Application "+a1+" has already finished \n")

	// An unknown id is reported and skipped; the exit code is yarn's -1
	// only when no id was found.
	code, out, _ = e.run("application", "-kill", "application_1700000000000_0099")
	wantCode(t, "kill unknown", code, -1)
	diff(t, "kill unknown", out, "Application with id 'application_1700000000000_0099' doesn't exist in RM.\n")

	a2 := e.submit("pi", "SPARK", "b")
	code, out, _ = e.run("application", "-kill", "application_1700000000000_0099", a2)
	wantCode(t, "kill several", code, 0)
	diff(t, "kill several", out, "Application with id 'application_1700000000000_0099' doesn't exist in RM.\nKilling application "+a2+"\n")

	code, _, errOut := e.run("application", "-kill", "bogus")
	wantCode(t, "kill malformed", code, 1)
	diff(t, "kill malformed", errOut, "Exception in thread \"main\" java.lang.IllegalArgumentException: Invalid ApplicationId: bogus\n")
}

func TestApplicationMoveAndPriority(t *testing.T) {
	e := newTestRM(t)
	a1 := e.submit("wordcount", "MAPREDUCE", "default")

	code, out, _ := e.run("application", "-movetoqueue", a1, "-queue", "b")
	wantCode(t, "move", code, 0)
	diff(t, "move", out, "Moving application "+a1+" to queue b\nSuccessfully completed move.\n")

	code, out, _ = e.run("application", "-appId", a1, "-changeQueue", "default")
	wantCode(t, "changeQueue", code, 0)
	diff(t, "changeQueue", out, "Moving application "+a1+" to queue default\nSuccessfully completed move.\n")

	code, out, _ = e.run("application", "-list")
	wantCode(t, "list after move", code, 0)
	if !strings.Contains(out, "\troot.default\t") {
		t.Errorf("list after move does not show root.default:\n%s", out)
	}

	code, out, errOut := e.run("application", "-movetoqueue", a1, "-queue", "nope")
	wantCode(t, "move to unknown queue", code, 1)
	diff(t, "move to unknown queue out", out, "Moving application "+a1+" to queue nope\n")
	if !strings.HasPrefix(errOut, "Exception in thread \"main\" org.apache.hadoop.yarn.exceptions.YarnException: ") {
		t.Errorf("move to unknown queue stderr = %q", errOut)
	}

	code, out, _ = e.run("application", "-updatePriority", "3", "-appId", a1)
	wantCode(t, "priority", code, 0)
	diff(t, "priority", out, "Updating priority of an application "+a1+"\nSuccessfully updated the application "+a1+" with priority '3'\n")

	// Above yarn.cluster.max-application-priority (10 here) the RM lowers it.
	code, out, _ = e.run("application", "-updatePriority", "50", "-appId", a1)
	wantCode(t, "priority capped", code, 0)
	diff(t, "priority capped", out, "Updating priority of an application "+a1+"\nUpdated priority of an application  "+a1+" to cluster max priority OR keeping old priority as application is in final states\n")

	if _, out, _ := e.run("application", "-status", a1); !strings.Contains(out, "\tApplication Priority : 10\n") {
		t.Errorf("status after priority update:\n%s", out)
	}

	if code, _, _ := e.run("application", "-kill", a1); code != 0 {
		t.Fatalf("kill: %d", code)
	}
	code, out, _ = e.run("application", "-movetoqueue", a1, "-queue", "b")
	wantCode(t, "move finished", code, 0)
	diff(t, "move finished", out, "Application "+a1+" has already finished \n")
}

func TestAttemptsAndContainers(t *testing.T) {
	e := newTestRM(t)
	a1 := e.submit("wordcount", "MAPREDUCE", "default")
	att := strings.Replace(a1, "application_", "appattempt_", 1) + "_000001"

	code, out, _ := e.run("applicationattempt", "-list", a1)
	wantCode(t, "attempts", code, 0)
	diff(t, "attempts", out, "Total number of application attempts :1\n"+
		"         ApplicationAttempt-Id\t               State\t                    AM-Container-Id\t                       Tracking-URL\n"+
		att+"\t           SCHEDULED\t                                N/A\thttp://rm.example:8088/proxy/"+a1+"/\n")

	code, out, _ = e.run("applicationattempt", "-status", att)
	wantCode(t, "attempt status", code, 0)
	diff(t, "attempt status", diagRE.ReplaceAllString(out, "[<date>]"), "Application Attempt Report : \n\tApplicationAttempt-Id : "+att+"\n\tState : SCHEDULED\n\tAMContainer : N/A\n"+
		"\tTracking-URL : http://rm.example:8088/proxy/"+a1+"/\n\tRPC Port : -1\n\tAM Host : N/A\n\tDiagnostics : [<date>] Application is Activated, waiting for resources to be assigned for AM. \n")

	missing := strings.TrimSuffix(att, "1") + "7"
	code, out, _ = e.run("applicationattempt", "-status", missing)
	wantCode(t, "attempt unknown", code, -1)
	diff(t, "attempt unknown", out, "Application Attempt with id '"+missing+"' doesn't exist in RM or Timeline Server.\n")

	code, out, _ = e.run("container", "-list", att)
	wantCode(t, "containers", code, 0)
	diff(t, "containers", out, "Total number of containers :0\n"+
		"                  Container-Id\t          Start Time\t         Finish Time\t               State\t                Host\t   Node Http Address\t                            LOG-URL\n")

	cid := strings.Replace(att, "appattempt_", "container_", 1)
	cid = cid[:len(cid)-len("000001")] + "01_000001"
	code, out, _ = e.run("container", "-status", cid)
	wantCode(t, "container unknown", code, -1)
	diff(t, "container unknown", out, "Container with id '"+cid+"' doesn't exist in RM or Timeline Server.\n")
}

func TestNodeList(t *testing.T) {
	e := newTestRM(t)
	header := "         Node-Id\t     Node-State\tNode-Http-Address\tNumber-of-Running-Containers\n"
	n1 := "      node1:8041\t        RUNNING\t       node1:8042\t                           1\n"
	n2 := "      node2:8041\t      UNHEALTHY\t       node2:8042\t                           0\n"

	code, out, _ := e.run("node", "-list")
	wantCode(t, "running", code, 0)
	diff(t, "running", out, "Total Nodes:1\n"+header+n1)

	code, out, _ = e.run("node", "-list", "-ALL")
	wantCode(t, "all", code, 0)
	diff(t, "all", out, "Total Nodes:2\n"+header+n1+n2)

	code, out, _ = e.run("node", "-list", "-states", "unhealthy")
	wantCode(t, "unhealthy", code, 0)
	diff(t, "unhealthy", out, "Total Nodes:1\n"+header+n2)

	code, out, _ = e.run("node", "-list", "-states", "broken")
	wantCode(t, "bad state", code, -1)
	diff(t, "bad state", out, "The node state broken is invalid.\nThe valid node state can be one of the following: NEW,RUNNING,UNHEALTHY,DECOMMISSIONED,LOST,REBOOTED,DECOMMISSIONING,SHUTDOWN.\n")
}

func TestQueueStatus(t *testing.T) {
	e := newTestRM(t)
	e.submit("wordcount", "MAPREDUCE", "b")

	code, out, _ := e.run("queue", "-status", "b")
	wantCode(t, "status", code, 0)
	diff(t, "status", out, `Queue Information : 
Queue Name : b
Queue Path : root.b
	State : RUNNING
	Capacity : 40.00%
	Current Capacity : .00%
	Maximum Capacity : 80.00%
	Weight : -1.00
	Maximum Parallel Apps : 2147483647
	Default Node Label expression : <DEFAULT_PARTITION>
	Accessible Node Labels : *
	Preemption : disabled
	Intra-queue Preemption : disabled
`)

	code, out, _ = e.run("queue", "-status", "nope")
	wantCode(t, "unknown", code, -1)
	diff(t, "unknown", out, "Cannot get queue from RM by queueName = nope, please check.\n")

	code, out, errOut := e.run("queue")
	wantCode(t, "no option", code, -1)
	diff(t, "no option stderr", errOut, "Invalid Command Usage : \n")
	diff(t, "no option usage", out, "usage: queue\n -help                  Displays help for all commands.\n -status <Queue Name>   List queue information about given queue.\n")
}

func TestUsage(t *testing.T) {
	e := newTestRM(t)

	code, out, errOut := e.run("application")
	wantCode(t, "no option", code, 0)
	diff(t, "no option stderr", errOut, "Invalid Command Usage : \n")
	if !strings.HasPrefix(out, "usage: application\n -appId <Application ID>            Specify Application Id to be operated\n -appStates <States>                Works with -list to filter\n") {
		t.Errorf("usage:\n%s", out)
	}
	// commons-cli breaks a word longer than the column at the width.
	if !strings.Contains(out, "\n                                    ALL,NEW,NEW_SAVING,SUBMITTED,ACCEPTED,\n                                    RUNNING,FINISHED,FAILED,KILLED\n") {
		t.Errorf("usage does not wrap the state list as HelpFormatter does:\n%s", out)
	}

	code, out, _ = e.run("application", "-status")
	wantCode(t, "missing argument", code, -1)
	if !strings.HasPrefix(out, "Missing argument for options\nusage: application\n") {
		t.Errorf("missing argument:\n%s", out)
	}

	code, out, _ = e.run("application", "-help")
	wantCode(t, "help", code, 0)
	if !strings.HasPrefix(out, "usage: application\n") {
		t.Errorf("help:\n%s", out)
	}

	code, out, _ = e.run("application", "-movetoqueue", "application_1700000000000_0001")
	wantCode(t, "move without queue", code, -1)
	if !strings.HasPrefix(out, "usage: application\n") {
		t.Errorf("move without queue:\n%s", out)
	}

	code, out, _ = e.run("application", "-status", "application_1700000000000_0001", "-list")
	wantCode(t, "status with list", code, -1)
	if !strings.HasPrefix(out, "usage: application\n") {
		t.Errorf("status with list:\n%s", out)
	}

	code, _, errOut = e.run("application", "-frobnicate")
	wantCode(t, "unknown option", code, 1)
	diff(t, "unknown option", errOut, "Exception in thread \"main\" org.apache.commons.cli.UnrecognizedOptionException: Unrecognized option: -frobnicate\n")

	code, out, _ = e.run("applicationattempt", "-list")
	wantCode(t, "attempt missing argument", code, -1)
	diff(t, "attempt missing argument", out, "Missing argument for options\nusage: applicationattempt\n"+
		" -fail <Application Attempt ID>     Fails application attempt.\n"+
		" -help                              Displays help for all commands.\n"+
		" -list <Application ID>             List application attempts for\n"+
		"                                    application.\n"+
		" -status <Application Attempt ID>   Prints the status of the application\n"+
		"                                    attempt.\n")

	code, _, _ = e.run("bogus")
	wantCode(t, "unknown command", code, -1)
}

func TestResolveRMAddress(t *testing.T) {
	dir := t.TempDir()
	got, err := ResolveRMAddress(dir)
	if err != nil || got != "127.0.0.1:8032" {
		t.Errorf("no yarn-site.xml: %q, %v", got, err)
	}
	write := func(body string) {
		t.Helper()
		xml := "<configuration>" + body + "</configuration>"
		if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(xml), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("<property><name>yarn.resourcemanager.hostname</name><value>rm.example</value></property>")
	if got, err := ResolveRMAddress(dir); err != nil || got != "rm.example:8032" {
		t.Errorf("hostname: %q, %v", got, err)
	}
	write("<property><name>yarn.resourcemanager.address</name><value>10.1.2.3:9032</value></property>")
	if got, err := ResolveRMAddress(dir); err != nil || got != "10.1.2.3:9032" {
		t.Errorf("address: %q, %v", got, err)
	}
	write("<property><name>yarn.resourcemanager.address</name><value>0.0.0.0:9032</value></property>")
	if got, err := ResolveRMAddress(dir); err != nil || got != "127.0.0.1:9032" {
		t.Errorf("wildcard: %q, %v", got, err)
	}
	write("<configuration")
	if _, err := ResolveRMAddress(dir); err == nil {
		t.Error("malformed yarn-site.xml accepted")
	}
}

func TestDialFailure(t *testing.T) {
	var out, errOut strings.Builder
	cfg := Config{RMAddress: "rm.example:8032", User: "alice", Dial: func(context.Context, string, string, string) (Caller, error) {
		return nil, errors.New("connection refused")
	}}
	code := Run(context.Background(), []string{"node", "-list"}, &out, &errOut, cfg)
	wantCode(t, "dial failure", code, 1)
	diff(t, "dial failure", errOut.String(), "Exception in thread \"main\" java.io.IOException: connecting to ResourceManager at rm.example:8032: connection refused\n")
	// Usage errors never dial.
	code = Run(context.Background(), []string{"node", "-states"}, &out, &errOut, cfg)
	wantCode(t, "usage without dial", code, -1)
}
