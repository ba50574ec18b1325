package rest

import (
	"encoding/json"
	"testing"
)

const app3 = "/ws/v1/cluster/apps/application_1795333013199_0003"

// restCase is one call and the answer RMWebServices gives it: the whole
// body when body is set, else the RemoteException's class and message.
type restCase struct {
	name, method, target, in string
	status                   int
	body                     string
	exception, message       string
}

func runCases(t *testing.T, tests []restCase) {
	t.Helper()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, newServer(t, newFake(t)), tt.method, tt.target, tt.in)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json;charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			if tt.exception == "" {
				if w.Body.String() != tt.body {
					t.Errorf("body\n got  %s\n want %s", w.Body, tt.body)
				}
				return
			}
			var body struct{ RemoteException remoteException }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			if re := body.RemoteException; re.Exception != tt.exception || re.Message != tt.message {
				t.Errorf("got %s\n want %s: %s", w.Body, tt.exception, tt.message)
			}
		})
	}
}

func TestPriorityQueueAndTimeoutsAnswerAsRMWebServices(t *testing.T) {
	const unknown = "/ws/v1/cluster/apps/application_1795333013199_9999"
	const killed = "/ws/v1/cluster/apps/application_1795333013199_0001"
	runCases(t, []restCase{
		{name: "get priority", method: "GET", target: app3 + "/priority", status: 200, body: `{"priority":0}`},
		{name: "get priority of another's app", method: "GET", target: app3 + "/priority?user.name=mallory", status: 200, body: `{"priority":0}`},
		{name: "put priority", method: "PUT", target: app3 + "/priority?user.name=root", in: `{"priority":5}`, status: 200, body: `{"priority":5}`},
		{name: "put priority above the cluster maximum", method: "PUT", target: app3 + "/priority?user.name=root", in: `{"priority":20}`, status: 200, body: `{"priority":10}`},
		{name: "put the priority the app has", method: "PUT", target: app3 + "/priority?user.name=mallory", in: `{"priority":0}`, status: 200, body: `{"priority":0}`},
		{name: "put priority by another user", method: "PUT", target: app3 + "/priority?user.name=mallory", in: `{"priority":5}`, status: 403,
			exception: "ForbiddenException", message: "java.lang.Exception: Unauthorized attempt to change priority of appid application_1795333013199_0003 by remote user mallory"},
		{name: "put priority of unknown app", method: "PUT", target: unknown + "/priority?user.name=root", in: `{"priority":5}`, status: 404,
			exception: "NotFoundException", message: "java.lang.Exception: app with id: application_1795333013199_9999 not found"},
		{name: "put no priority", method: "PUT", target: app3 + "/priority?user.name=root", in: `{}`, status: 200, body: `{"priority":0}`},
		{name: "put no body", method: "PUT", target: app3 + "/priority?user.name=root", status: 400, exception: "WebApplicationException",
			message: unreadableMessage("invalid JSON body: unexpected end of JSON input")},
		{name: "get priority of unknown app", method: "GET", target: unknown + "/priority", status: 404,
			exception: "NotFoundException", message: "java.lang.Exception: app with id: application_1795333013199_9999 not found"},

		{name: "get queue", method: "GET", target: app3 + "/queue", status: 200, body: `{"queue":"root.default"}`},
		{name: "put the queue the app is in", method: "PUT", target: app3 + "/queue?user.name=root", in: `{"queue":"root.default"}`, status: 200, body: `{"queue":"root.default"}`},
		{name: "move", method: "PUT", target: app3 + "/queue?user.name=root", in: `{"queue":"other"}`, status: 200, body: `{"queue":"root.other"}`},
		{name: "move a killed app", method: "PUT", target: killed + "/queue?user.name=root", in: `{"queue":"other"}`, status: 400,
			exception: "BadRequestException", message: "java.lang.Exception: App in KILLED state cannot be moved."},
		{name: "move by another user", method: "PUT", target: app3 + "/queue?user.name=mallory", in: `{"queue":"other"}`, status: 403,
			exception: "ForbiddenException", message: "java.lang.Exception: Unauthorized attempt to move appid application_1795333013199_0003 by remote user mallory"},

		{name: "get timeouts", method: "GET", target: app3 + "/timeouts", status: 200,
			body: `{"timeouts":{"timeout":[{"type":"LIFETIME","expiryTime":"UNLIMITED","remainingTimeInSeconds":-1}]}}`},
		{name: "get the lifetime timeout", method: "GET", target: app3 + "/timeouts/lifetime", status: 200,
			body: `{"timeout":{"type":"LIFETIME","expiryTime":"UNLIMITED","remainingTimeInSeconds":-1}}`},
		{name: "get a timeout of no type", method: "GET", target: app3 + "/timeouts/BOGUS", status: 400,
			exception: "BadRequestException", message: "java.lang.Exception: Invalid application-state BOGUS specified. It should be one of [LIFETIME]"},
		{name: "put timeout", method: "PUT", target: app3 + "/timeout?user.name=root", in: `{"timeout":{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000"}}`, status: 200,
			body: `{"timeout":{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000","remainingTimeInSeconds":1271}}`},
		{name: "put timeout in another format", method: "PUT", target: app3 + "/timeout?user.name=root", in: `{"timeout":{"type":"LIFETIME","expiryTime":"tomorrow"}}`, status: 400,
			exception: "BadRequestException", message: "java.lang.Exception: Expire time is not in ISO8601 format. ISO8601 supported format is yyyy-MM-dd'T'HH:mm:ss.SSSZ"},
		{name: "put timeout of no type", method: "PUT", target: app3 + "/timeout?user.name=root", in: `{"timeout":{"expiryTime":"2026-11-22T08:00:00.000+0000"}}`, status: 400,
			exception: "BadRequestException", message: "java.lang.Exception: Timeout type or ExpiryTime is null."},
		{name: "put timeout by another user", method: "PUT", target: app3 + "/timeout?user.name=mallory", in: `{"timeout":{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000"}}`, status: 403,
			exception: "ForbiddenException", message: "java.lang.Exception: Unauthorized attempt to change timeout of app application_1795333013199_0003 by remote user mallory"},
	})
}

func TestUpdatesWithoutUserAreRejectedWhenUserRequired(t *testing.T) {
	h := newServer(t, newFake(t), func(c *Config) { c.RequireUser = true })
	for _, r := range []struct{ target, body string }{
		{app3 + "/priority", `{"priority":5}`},
		{app3 + "/queue", `{"queue":"other"}`},
		{app3 + "/timeout", `{"timeout":{"type":"LIFETIME","expiryTime":"2026-11-22T08:00:00.000+0000"}}`},
	} {
		if w := serve(t, h, "PUT", r.target, r.body); w.Code != 401 {
			t.Errorf("%s: %d %s", r.target, w.Code, w.Body)
		}
	}
}

func TestAttemptAndContainersAnswerAsWebServices(t *testing.T) {
	const attempt = app3 + "/appattempts/appattempt_1795333013199_0003_000001"
	const c2 = `{"containerId":"container_1795333013199_0003_01_000002","allocatedMB":1024,"allocatedVCores":1,"assignedNodeId":"localhost:8141","priority":1,` +
		`"startedTime":1795333081002,"finishedTime":0,"elapsedTime":47634,"diagnosticsInfo":{},` +
		`"logUrl":"http://localhost:8142/node/containerlogs/container_1795333013199_0003_01_000002/root","containerExitStatus":-1000,"containerState":"RUNNING",` +
		`"nodeHttpAddress":"http://localhost:8142","nodeId":"localhost:8141","allocatedResources":{"entry":{"key":"memory-mb","value":"1024"},"entry":{"key":"vcores","value":"1"}}}`
	runCases(t, []restCase{
		{name: "attempt", method: "GET", target: attempt + "?user.name=root", status: 200,
			body: `{"appAttempt":{"appAttemptId":"appattempt_1795333013199_0003_000001","rpcPort":0,"diagnosticsInfo":"N/A","appAttemptState":"RUNNING","startedTime":1795333080848,"finishedTime":0}}`},
		{name: "one container", method: "GET", target: attempt + "/containers/container_1795333013199_0003_01_000002?user.name=root", status: 200, body: `{"container":` + c2 + `}`},
		{name: "unknown attempt", method: "GET", target: app3 + "/appattempts/appattempt_1795333013199_0003_000009?user.name=root", status: 404,
			exception: "NotFoundException", message: "org.apache.hadoop.yarn.exceptions.ApplicationAttemptNotFoundException: ApplicationAttempt with id 'appattempt_1795333013199_0003_000009' doesn't exist in RM."},
		{name: "attempt of unknown app", method: "GET", target: "/ws/v1/cluster/apps/application_1795333013199_0009/appattempts/appattempt_1795333013199_0009_000001", status: 404,
			exception: "NotFoundException", message: "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException: Application with id 'application_1795333013199_0009' doesn't exist in RM."},
		{name: "unknown container", method: "GET", target: attempt + "/containers/container_1795333013199_0003_01_000009?user.name=root", status: 404,
			exception: "NotFoundException", message: "org.apache.hadoop.yarn.exceptions.ContainerNotFoundException: Container with id 'container_1795333013199_0003_01_000009' doesn't exist in RM."},
		{name: "attempt of another app", method: "GET", target: app3 + "/appattempts/appattempt_1795333013199_0002_000001", status: 404,
			exception: "NotFoundException", message: "java.lang.Exception: appId and appAttemptId don't match"},
		{name: "container of another attempt", method: "GET", target: attempt + "/containers/container_1795333013199_0003_02_000001", status: 404,
			exception: "NotFoundException", message: "java.lang.Exception: appAttemptId and containerId don't match"},
		{name: "not an attempt id", method: "GET", target: app3 + "/appattempts/bogus", status: 400,
			exception: "IllegalArgumentException", message: "Invalid AppAttemptId prefix: bogus"},
		{name: "not a container id", method: "GET", target: attempt + "/containers/container_x", status: 400,
			exception: "IllegalArgumentException", message: "Invalid ContainerId: container_x"},
		{name: "attempt seen by another user", method: "GET", target: attempt + "?user.name=mallory", status: 500,
			exception: "WebApplicationException", message: "org.apache.hadoop.yarn.exceptions.YarnException: User mallory does not have privilage to see this application application_1795333013199_0003"},
	})
}

func TestContainersListTheAttemptsContainers(t *testing.T) {
	w := serve(t, newServer(t, newFake(t)), "GET", app3+"/appattempts/appattempt_1795333013199_0003_000001/containers?user.name=root", "")
	if w.Code != 200 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	var body struct {
		Containers struct {
			Container []struct{ ContainerID string }
		}
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range body.Containers.Container {
		got = append(got, c.ContainerID)
	}
	if len(got) != 2 || got[0] != "container_1795333013199_0003_01_000001" || got[1] != "container_1795333013199_0003_01_000002" {
		t.Errorf("containers %v", got)
	}
	w = serve(t, newServer(t, newFake(t)), "GET", "/ws/v1/cluster/apps/application_1795333013199_0002/appattempts/appattempt_1795333013199_0002_000001/containers?user.name=root", "")
	if w.Code != 200 || w.Body.String() != `{"containers":{}}` {
		t.Errorf("ended attempt: %d %s", w.Code, w.Body)
	}
}

func TestAppStatisticsCountEveryStateAsked(t *testing.T) {
	all := func(typ string, killed, finished, running int) string {
		return `{"appStatInfo":{"statItem":[{"state":"NEW","type":"` + typ + `","count":0},{"state":"NEW_SAVING","type":"` + typ + `","count":0},` +
			`{"state":"SUBMITTED","type":"` + typ + `","count":0},{"state":"ACCEPTED","type":"` + typ + `","count":0},` +
			`{"state":"RUNNING","type":"` + typ + `","count":` + itoa(int64(running)) + `},{"state":"FINISHED","type":"` + typ + `","count":` + itoa(int64(finished)) + `},` +
			`{"state":"FAILED","type":"` + typ + `","count":0},{"state":"KILLED","type":"` + typ + `","count":` + itoa(int64(killed)) + `}]}}`
	}
	runCases(t, []restCase{
		{name: "every state of every type", method: "GET", target: "/ws/v1/cluster/appstatistics", status: 200, body: all("*", 1, 1, 1)},
		{name: "states asked, one type", method: "GET", target: "/ws/v1/cluster/appstatistics?states=killed,Running&applicationTypes=YARN", status: 200,
			body: `{"appStatInfo":{"statItem":[{"state":"RUNNING","type":"yarn","count":1},{"state":"KILLED","type":"yarn","count":1}]}}`},
		{name: "a type no app has", method: "GET", target: "/ws/v1/cluster/appstatistics?applicationTypes=MAPREDUCE", status: 200, body: all("mapreduce", 0, 0, 0)},
		{name: "unknown state", method: "GET", target: "/ws/v1/cluster/appstatistics?states=BOGUS", status: 400, exception: "BadRequestException",
			message: "java.lang.Exception: Invalid application-state BOGUS specified. It should be one of [NEW, NEW_SAVING, SUBMITTED, ACCEPTED, RUNNING, FINISHED, FAILED, KILLED]"},
		{name: "two types", method: "GET", target: "/ws/v1/cluster/appstatistics?applicationTypes=YARN&applicationTypes=mapreduce", status: 400, exception: "BadRequestException",
			message: "java.lang.Exception: # of applicationTypes = 2, we temporarily support at most one applicationType"},
	})
}
