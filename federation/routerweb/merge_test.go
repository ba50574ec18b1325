package routerweb

import (
	"encoding/json"
	"strconv"
	"testing"
)

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

func objects(t *testing.T, js ...string) []object {
	t.Helper()
	var out []object
	for _, j := range js {
		o, err := decodeObject([]byte(j))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

func TestMergeAppsKeepsWhatYARNsRouterKeeps(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []string
		want string
	}{
		{"an AM's report absorbs its UAM's use while both run",
			[]string{`{"id":"a","amHostHttpAddress":"h:1","state":"RUNNING","allocatedMB":10,"resourceRequests":[1]}`,
				`{"id":"a","name":"UnmanagedAM","state":"RUNNING","allocatedMB":5,"resourceRequests":[2]}`},
			`[{"id":"a","amHostHttpAddress":"h:1","state":"RUNNING","allocatedMB":15,"resourceRequests":[1,2]}]`},
		{"a UAM reported before its AM is merged all the same",
			[]string{`{"id":"a","name":"UnmanagedAM","state":"RUNNING","allocatedMB":5}`,
				`{"id":"a","amHostHttpAddress":"h:1","state":"RUNNING","allocatedMB":10}`},
			`[{"id":"a","amHostHttpAddress":"h:1","state":"RUNNING","allocatedMB":15}]`},
		{"a finished AM takes only the UAM's preemption",
			[]string{`{"id":"a","amHostHttpAddress":"h:1","state":"FINISHED","allocatedMB":0,"preemptedResourceMB":1}`,
				`{"id":"a","name":"UnmanagedAM","state":"RUNNING","allocatedMB":5,"preemptedResourceMB":2}`},
			`[{"id":"a","amHostHttpAddress":"h:1","state":"FINISHED","allocatedMB":0,"preemptedResourceMB":3}]`},
		{"a federation UAM without its AM is left out",
			[]string{`{"id":"a","name":"UnmanagedAM application_1_0001","state":"RUNNING"}`}, `null`},
		{"UAMs without their AM are left out",
			[]string{`{"id":"a","name":"x","state":"RUNNING"}`, `{"id":"a","name":"x","state":"RUNNING"}`}, `null`},
		{"an application without AM host of the user's own is kept, order kept",
			[]string{`{"id":"b","amHostHttpAddress":"h:1"}`, `{"id":"a","name":"spark","state":"ACCEPTED"}`},
			`[{"id":"b","amHostHttpAddress":"h:1"},{"id":"a","name":"spark","state":"ACCEPTED"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := json.Marshal(mergeApps(objects(t, tc.in...)))
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Errorf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestMergeNodesKeepsTheNewestReportOfEachNode(t *testing.T) {
	got, err := json.Marshal(mergeNodes(objects(t,
		`{"id":"n:1","lastHealthUpdate":5,"from":"old"}`, `{"id":"n:2","lastHealthUpdate":1}`, `{"id":"n:1","lastHealthUpdate":9,"from":"new"}`,
		`{"id":"n:1","lastHealthUpdate":7,"from":"between"}`)))
	if err != nil {
		t.Fatal(err)
	}
	if want := `[{"id":"n:1","lastHealthUpdate":9,"from":"new"},{"id":"n:2","lastHealthUpdate":1}]`; string(got) != want {
		t.Errorf("got  %s\nwant %s", got, want)
	}
}
