package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"testing"
	"time"
)

// node is a JSON value that keeps key order and duplicate keys.
type jnode struct {
	kind  byte // '{', '[', 's', 'n', 'b', '0'
	keys  []string
	vals  []*jnode
	str   string
	isInt bool
}

func parseOrdered(t testing.TB, b []byte) *jnode {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	n, err := readNode(dec)
	if err != nil {
		t.Fatalf("parse %s: %v", b, err)
	}
	return n
}

func readNode(dec *json.Decoder) (*jnode, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		n := &jnode{kind: byte(v)}
		for dec.More() {
			if v == '{' {
				k, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.keys = append(n.keys, k.(string))
			}
			c, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.vals = append(n.vals, c)
		}
		_, err := dec.Token()
		return n, err
	case string:
		return &jnode{kind: 's', str: v}, nil
	case json.Number:
		return &jnode{kind: 'n', str: v.String(), isInt: !strings.ContainsAny(v.String(), ".eE")}, nil
	case bool:
		return &jnode{kind: 'b', str: strconv.FormatBool(v)}, nil
	default:
		return &jnode{kind: '0'}, nil
	}
}

// sameJSON reports every difference between want and got: keys and their
// order at every level, value kinds, values (paths in skip only by kind).
func sameJSON(path string, want, got *jnode, skip map[string]bool, diffs *[]string) {
	if want.kind != got.kind {
		*diffs = append(*diffs, fmt.Sprintf("%s: kind %c, got %c", path, want.kind, got.kind))
		return
	}
	switch want.kind {
	case '{', '[':
		if want.kind == '{' && strings.Join(want.keys, ",") != strings.Join(got.keys, ",") {
			*diffs = append(*diffs, fmt.Sprintf("%s: keys\n want %v\n got  %v", path, want.keys, got.keys))
			return
		}
		if len(want.vals) != len(got.vals) {
			*diffs = append(*diffs, fmt.Sprintf("%s: %d elements, got %d", path, len(want.vals), len(got.vals)))
			return
		}
		for i := range want.vals {
			p := path + "[" + strconv.Itoa(i) + "]"
			if want.kind == '{' {
				p = path + "." + want.keys[i]
			}
			sameJSON(p, want.vals[i], got.vals[i], skip, diffs)
		}
	case 'n':
		if skip[path] {
			return
		}
		wf, _ := strconv.ParseFloat(want.str, 64)
		gf, _ := strconv.ParseFloat(got.str, 64)
		if wf != gf || want.isInt != got.isInt {
			*diffs = append(*diffs, fmt.Sprintf("%s: %s, got %s", path, want.str, got.str))
		}
	default:
		if !skip[path] && want.str != got.str {
			*diffs = append(*diffs, fmt.Sprintf("%s: %q, got %q", path, want.str, got.str))
		}
	}
}

func serve(t testing.TB, h http.Handler, method, target, body string) *httptest.ResponseRecorder {
	t.Helper()
	var r *http.Request
	if body == "" {
		r = httptest.NewRequest(method, target, nil)
	} else {
		r = httptest.NewRequest(method, target, strings.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

func newServer(t testing.TB, f *fakeCluster, mod ...func(*Config)) http.Handler {
	cfg := Config{Cluster: f, Now: func() time.Time { return now }}
	for _, m := range mod {
		m(&cfg)
	}
	return New(cfg)
}

func TestGETAnswersHaveHadoopShape(t *testing.T) {
	tests := []struct {
		path, file string
		skip       []string // clock-dependent values
	}{
		{"/ws/v1/cluster", "cluster.json", nil},
		{"/ws/v1/cluster/info", "cluster_info.json", nil},
		{"/ws/v1/cluster/metrics", "cluster_metrics.json", nil},
		{"/ws/v1/cluster/scheduler", "cluster_scheduler.json", nil},
		// elapsedTime of the running app is clock-dependent: the fake clock
		// is that of the single-app recording; the list recordings were
		// taken a few ms earlier.
		{"/ws/v1/cluster/apps", "cluster_apps.json", []string{"$.apps.app[2].elapsedTime"}},
		{"/ws/v1/cluster/apps?states=RUNNING", "cluster_apps@states=RUNNING.json", []string{"$.apps.app[0].elapsedTime"}},
		{"/ws/v1/cluster/apps/application_1795333013199_0002", "cluster_apps_application_1795333013199_0002.json", nil},
		{"/ws/v1/cluster/apps/application_1795333013199_0003", "cluster_apps_application_1795333013199_0003.json", nil},
		{"/ws/v1/cluster/apps/application_1795333013199_0002/appattempts", "cluster_apps_application_1795333013199_0002_appattempts.json", nil},
		{"/ws/v1/cluster/apps/application_1795333013199_0003/appattempts", "cluster_apps_application_1795333013199_0003_appattempts.json", nil},
		{"/ws/v1/cluster/apps/application_1795333013199_0002/state", "cluster_apps_application_1795333013199_0002_state.json", nil},
		{"/ws/v1/cluster/apps/application_1795333013199_0003/state", "cluster_apps_application_1795333013199_0003_state.json", nil},
		{"/ws/v1/cluster/nodes", "cluster_nodes.json", nil},
		{"/ws/v1/cluster/nodes/localhost:8141", "cluster_nodes_localhost_8141.json", nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			h := newServer(t, newFake(t))
			w := serve(t, h, http.MethodGet, tt.path, "")
			if w.Code != http.StatusOK {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/json;charset=utf-8" {
				t.Errorf("Content-Type %q", ct)
			}
			skip := map[string]bool{}
			for _, s := range tt.skip {
				skip[s] = true
			}
			var diffs []string
			sameJSON("$", parseOrdered(t, fixture(t, tt.file)), parseOrdered(t, w.Body.Bytes()), skip, &diffs)
			for _, d := range diffs {
				t.Error(d)
			}
		})
	}
}

func TestNewApplicationHasHadoopShape(t *testing.T) {
	for _, target := range []string{"/ws/v1/cluster/apps/new-application", "/ws/v1/cluster/apps/new-application?user.name=root"} {
		w := serve(t, newServer(t, newFake(t)), http.MethodPost, target, "")
		if w.Code != http.StatusOK {
			t.Fatalf("%s: status %d: %s", target, w.Code, w.Body)
		}
		var diffs []string
		sameJSON("$", parseOrdered(t, fixture(t, "POST_cluster_apps_new-application.json")), parseOrdered(t, w.Body.Bytes()), nil, &diffs)
		for _, d := range diffs {
			t.Error(d)
		}
	}
}

func compact(t testing.TB, b []byte) string {
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		t.Fatal(err)
	}
	return buf.String()
}

func TestErrorsAreRemoteExceptions(t *testing.T) {
	tests := []struct {
		name, method, target, body string
		status                     int
		file                       string // byte-compared when set
		exception, message         string
	}{
		{name: "unknown app", method: "GET", target: "/ws/v1/cluster/apps/application_1795333013199_9999", status: 404, file: "cluster_apps_application_1795333013199_9999.404.json"},
		{name: "bad state filter", method: "GET", target: "/ws/v1/cluster/apps?states=BOGUS", status: 400, file: "cluster_apps@states=BOGUS.400.json"},
		{name: "limit not a number", method: "GET", target: "/ws/v1/cluster/apps?limit=abc", status: 400, exception: "BadRequestException", message: "java.lang.Exception: limit value must be a number!"},
		{name: "bad final status", method: "GET", target: "/ws/v1/cluster/apps?finalStatus=NOPE", status: 400, exception: "IllegalArgumentException", message: "No enum constant org.apache.hadoop.yarn.api.records.FinalApplicationStatus.NOPE"},
		{name: "bad time range", method: "GET", target: "/ws/v1/cluster/apps?startedTimeBegin=5&startedTimeEnd=4", status: 400, exception: "BadRequestException", message: "java.lang.Exception: startedTimeEnd must be greater than startTimeBegin"},
		{name: "bad app id", method: "GET", target: "/ws/v1/cluster/apps/nonsense", status: 400, exception: "BadRequestException", message: "Invalid ApplicationId prefix: nonsense. The valid ApplicationId should start with prefix application"},
		{name: "bad app number", method: "GET", target: "/ws/v1/cluster/apps/application_1_x", status: 400, exception: "BadRequestException", message: "Invalid ApplicationId: application_1_x"},
		{name: "bad deSelects", method: "GET", target: "/ws/v1/cluster/apps?deSelects=bogus", status: 400, exception: "BadRequestException"},
		{name: "unknown node", method: "GET", target: "/ws/v1/cluster/nodes/nohost:1", status: 404, exception: "NotFoundException", message: "java.lang.Exception: nodeId, nohost:1, is not found"},
		{name: "bad node state", method: "GET", target: "/ws/v1/cluster/nodes?states=bogus", status: 400, exception: "IllegalArgumentException", message: "No enum constant org.apache.hadoop.yarn.api.records.NodeState.BOGUS"},
		{name: "wrong method", method: "DELETE", target: "/ws/v1/cluster/metrics", status: 405, exception: "WebApplicationException", message: "HTTP 405 Method Not Allowed"},
		{name: "bad JSON body", method: "PUT", target: "/ws/v1/cluster/apps/application_1795333013199_0003/state?user.name=root", body: "{", status: 400, exception: "WebApplicationException", message: unreadableMessage("invalid JSON body: unexpected end of JSON input")},
		{name: "only KILLED target", method: "PUT", target: "/ws/v1/cluster/apps/application_1795333013199_0003/state?user.name=root", body: `{"state":"FINISHED"}`, status: 400, exception: "BadRequestException", message: "java.lang.Exception: Only 'KILLED' is allowed as a target state."},
		{name: "kill by other user", method: "PUT", target: "/ws/v1/cluster/apps/application_1795333013199_0003/state?user.name=mallory", body: `{"state":"KILLED"}`, status: 403, exception: "ForbiddenException", message: "java.lang.Exception: Unauthorized attempt to kill appid application_1795333013199_0003 by remote user mallory"},
		{name: "submit bad JSON", method: "POST", target: "/ws/v1/cluster/apps?user.name=root", body: `{"application-id":`, status: 400, exception: "WebApplicationException", message: unreadableMessage("invalid JSON body: unexpected end of JSON input")},
		{name: "submit too big", method: "POST", target: "/ws/v1/cluster/apps?user.name=root", body: `{"application-id":"application_1795333013199_0004","resource":{"memory":99999,"vCores":1}}`, status: 400, exception: "BadRequestException", message: "java.lang.Exception: Invalid resource request, requested memory > max"},
		{name: "body over 1 MiB", method: "POST", target: "/ws/v1/cluster/apps?user.name=root", body: `{"application-name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, status: 400, exception: "BadRequestException"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := serve(t, newServer(t, newFake(t)), tt.method, tt.target, tt.body)
			if w.Code != tt.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tt.status, w.Body)
			}
			if tt.file != "" {
				if got, want := w.Body.String(), compact(t, fixture(t, tt.file)); got != want {
					t.Errorf("body\n got  %s\n want %s", got, want)
				}
				return
			}
			var body struct{ RemoteException remoteException }
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("%v: %s", err, w.Body)
			}
			if body.RemoteException.Exception != tt.exception || (tt.message != "" && body.RemoteException.Message != tt.message) {
				t.Errorf("got %s", w.Body)
			}
		})
	}
}

func TestWritesWithoutUserAreRejectedWhenUserRequired(t *testing.T) {
	h := newServer(t, newFake(t), func(c *Config) { c.RequireUser = true })
	for _, r := range []struct{ method, target, body string }{
		{"POST", "/ws/v1/cluster/apps/new-application", ""},
		{"PUT", "/ws/v1/cluster/apps/application_1795333013199_0003/state", `{"state":"KILLED"}`},
		{"POST", "/ws/v1/cluster/apps", `{}`},
	} {
		w := serve(t, h, r.method, r.target, r.body)
		want := `{"RemoteException":{"exception":"AuthorizationException","message":"Unable to obtain user name, user not authenticated","javaClassName":"org.apache.hadoop.security.authorize.AuthorizationException"}}`
		if w.Code != 401 || w.Body.String() != want {
			t.Errorf("%s %s: %d %s", r.method, r.target, w.Code, w.Body)
		}
	}
}

func TestKillAnswersAcceptedWhileKillingAndOKWhenDone(t *testing.T) {
	for _, done := range []bool{false, true} {
		f := newFake(t)
		f.killNow = done
		target := "/ws/v1/cluster/apps/application_1795333013199_0003/state?user.name=root"
		w := serve(t, newServer(t, f), "PUT", target, `{"state":"KILLED"}`)
		wantCode, wantBody := 202, `{"state":"RUNNING"}`
		if done {
			wantCode, wantBody = 200, `{"state":"KILLED"}`
		}
		if w.Code != wantCode || w.Body.String() != wantBody {
			t.Errorf("done=%v: %d %s", done, w.Code, w.Body)
		}
		if loc := w.Header().Get("Location"); !done && loc != "http://example.com/ws/v1/cluster/apps/application_1795333013199_0003/state" {
			t.Errorf("Location %q", loc)
		}
		if len(f.killed) != 1 {
			t.Errorf("killed %v", f.killed)
		}
	}
}

func TestKillOfKilledAppAnswersOKWithoutKilling(t *testing.T) {
	f := newFake(t)
	w := serve(t, newServer(t, f), "PUT", "/ws/v1/cluster/apps/application_1795333013199_0001/state?user.name=root", `{"state":"KILLED"}`)
	if w.Code != 200 || w.Body.String() != `{"state":"KILLED"}` || len(f.killed) != 0 {
		t.Errorf("%d %s %v", w.Code, w.Body, f.killed)
	}
}

func TestSubmitAnswersAcceptedWithLocation(t *testing.T) {
	f := newFake(t)
	body := `{
	  "application-id": "application_1795333013199_0004",
	  "application-name": "test",
	  "queue": "default",
	  "priority": 3,
	  "am-container-spec": {
	    "local-resources": {"entry": {"key": "app.jar", "value": {"resource": "hdfs://nn:8020/user/root/app.jar", "type": "FILE", "visibility": "APPLICATION", "size": 43004, "timestamp": 1405452071209}}},
	    "environment": {"entry": [{"key": "A", "value": "1"}, {"key": "B", "value": "2"}]},
	    "commands": {"command": "sleep 10"},
	    "application-acls": {"entry": [{"key": "VIEW_APP", "value": "root"}]}
	  },
	  "max-app-attempts": 2,
	  "resource": {"memory": 1024, "vCores": 1},
	  "application-type": "YARN",
	  "keep-containers-across-application-attempts": false,
	  "application-tags": {"tag": ["a", "b"]}
	}`
	w := serve(t, newServer(t, f), "POST", "/ws/v1/cluster/apps?user.name=root", body)
	if w.Code != 202 || w.Body.Len() != 0 {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if loc := w.Header().Get("Location"); loc != "http://example.com/ws/v1/cluster/apps/application_1795333013199_0004" {
		t.Errorf("Location %q", loc)
	}
	if len(f.submitted) != 1 {
		t.Fatal("not submitted")
	}
	sc := f.submitted[0]
	lr := sc.GetAmContainerSpec().GetLocalResources()
	if sc.GetApplicationName() != "test" || sc.GetPriority().GetPriority() != 3 || sc.GetResource().GetMemory() != 1024 ||
		len(lr) != 1 || lr[0].GetValue().GetResource().GetHost() != "nn" || lr[0].GetValue().GetResource().GetPort() != 8020 ||
		len(sc.GetAmContainerSpec().GetEnvironment()) != 2 || len(sc.GetAmContainerSpec().GetCommand()) != 1 ||
		len(sc.GetApplicationTags()) != 2 || sc.GetMaxAppAttempts() != 2 || len(sc.GetAmContainerSpec().GetApplication_ACLs()) != 1 {
		t.Errorf("decoded %v", sc)
	}
}

func TestEmptyListsAreEmptyObjects(t *testing.T) {
	f := newFake(t)
	w := serve(t, newServer(t, f), "GET", "/ws/v1/cluster/apps?states=NEW", "")
	if w.Body.String() != `{"apps":{}}` {
		t.Errorf("%s", w.Body)
	}
	w = serve(t, newServer(t, f), "GET", "/ws/v1/cluster/nodes?states=LOST", "")
	if w.Body.String() != `{"nodes":{}}` {
		t.Errorf("%s", w.Body)
	}
}

func FuzzParseAppsQuery(f *testing.F) {
	for _, s := range []string{"states=RUNNING,killed", "state=NEW&limit=3", "limit=abc", "startedTimeBegin=1&startedTimeEnd=0",
		"applicationTypes=YARN,,MAPREDUCE&applicationTags=a", "deSelects=resourceInfo,timeouts", "finalStatus=SUCCEEDED"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, raw string) {
		v, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		q, err := parseAppsQuery(v)
		if err != nil {
			re, ok := err.(*remoteException)
			if !ok || re.status != 400 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if q.filter.Limit < 0 {
			t.Fatal("negative limit")
		}
	})
}

func FuzzDecodeSubmission(f *testing.F) {
	f.Add([]byte(`{"application-id":"application_1_0001","am-container-spec":{"commands":{"command":["a","b"]}}}`))
	f.Add([]byte(`{"application-id":"application_1_0001","am-container-spec":{"local-resources":{"entry":{"key":"k","value":{"resource":"hdfs://h:1/p"}}}}}`))
	f.Add([]byte(`{`))
	f.Fuzz(func(t *testing.T, b []byte) {
		sc, err := decodeSubmission("application/json", b)
		if err != nil {
			re, ok := err.(*remoteException)
			if !ok || re.status != 400 {
				t.Fatalf("error %T %v", err, err)
			}
			return
		}
		if sc.GetApplicationId() == nil {
			t.Fatal("no application id")
		}
	})
}

func TestDeSelectsLeaveOutFields(t *testing.T) {
	w := serve(t, newServer(t, newFake(t)), "GET", "/ws/v1/cluster/apps/application_1795333013199_0003?deSelects=resourceInfo,timeouts&deSelects=amNodeLabelExpression", "")
	n := parseOrdered(t, w.Body.Bytes()).vals[0]
	for _, k := range n.keys {
		if k == "resourceInfo" || k == "timeouts" || k == "amNodeLabelExpression" {
			t.Errorf("%s still there", k)
		}
	}
}
