package store

import (
	"bytes"
	"encoding/json"
	"maps"
	"testing"
	"time"

	"github.com/knitdev/knit/rks/launch"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestRecordsSurviveTheirObjectEncoding(t *testing.T) {
	s := &Store{ns: "knit"}
	finish := time.Date(2025, 3, 4, 5, 6, 7, 891011121, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		rec  Record
	}{
		{"running, no data", Record{ID: "application_1700000000000_0001", State: "RUNNING", User: "alice", Queue: "root.default"}},
		{"finished, binary data", Record{ID: "application_1700000000000_0002", State: StateFinished, User: "bob@EXAMPLE.COM",
			Queue: "root.a.b", FinishTime: finish, Data: []byte{0, 1, 2, 0xff, '\n'}, ResourceVersion: "42"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := s.toObject(tt.rec)
			if err != nil {
				t.Fatal(err)
			}
			// Through JSON, as the API server keeps it.
			raw, err := json.Marshal(obj.Object)
			if err != nil {
				t.Fatal(err)
			}
			back := &unstructured.Unstructured{}
			if err := back.UnmarshalJSON(raw); err != nil {
				t.Fatal(err)
			}
			got, err := fromObject(back)
			if err != nil {
				t.Fatal(err)
			}
			want := tt.rec
			if got.ID != want.ID || got.State != want.State || got.User != want.User || got.Queue != want.Queue ||
				!got.FinishTime.Equal(want.FinishTime) || !bytes.Equal(got.Data, want.Data) ||
				got.ResourceVersion != want.ResourceVersion {
				t.Errorf("round trip:\n got %+v\nwant %+v", got, want)
			}
		})
	}
}

func TestObjectsCarrySanitisedLabelsAndTheDerivedName(t *testing.T) {
	s := &Store{ns: "knit"}
	obj, err := s.toObject(Record{ID: "application_1_0007", State: "RUNNING", User: "bob@EXAMPLE.COM", Queue: "root.q"})
	if err != nil {
		t.Fatal(err)
	}
	if obj.GetName() != "application-1-0007" || obj.GetNamespace() != "knit" || obj.GetKind() != Kind || obj.GetAPIVersion() != "knit.io/v1alpha1" {
		t.Errorf("object %s/%s %s %s", obj.GetNamespace(), obj.GetName(), obj.GetAPIVersion(), obj.GetKind())
	}
	want := map[string]string{launch.LabelState: "RUNNING", launch.LabelUser: "bob_EXAMPLE.COM", launch.LabelQueue: "root.q", launch.LabelApplication: "application_1_0007"}
	if got := obj.GetLabels(); !maps.Equal(got, want) {
		t.Errorf("labels %v, want %v", got, want)
	}
}

func TestObjectsThatDoNotDecodeAreErrors(t *testing.T) {
	tests := []struct {
		name string
		spec map[string]any
	}{
		{"no spec", nil},
		{"no id", map[string]any{"state": "RUNNING"}},
		{"id not a string", map[string]any{"id": 7}},
		{"bad data", map[string]any{"id": "application_1_1", "data": "not base64!"}},
		{"bad finish time", map[string]any{"id": "application_1_1", "finishTime": "yesterday"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := &unstructured.Unstructured{Object: map[string]any{}}
			if tt.spec != nil {
				obj.Object["spec"] = tt.spec
			}
			obj.SetName("application-1-1")
			if rec, err := fromObject(obj); err == nil {
				t.Errorf("fromObject = %+v, want an error", rec)
			}
		})
	}
}

func TestCRDDefinesTheYarnApplicationKind(t *testing.T) {
	crd := CRD()
	if crd.GetName() != "yarnapplications.knit.io" {
		t.Errorf("name %q", crd.GetName())
	}
	kind, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "kind")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	short, _, _ := unstructured.NestedStringSlice(crd.Object, "spec", "names", "shortNames")
	if kind != Kind || plural != Resource || len(short) != 1 || short[0] != "yapp" {
		t.Errorf("kind %q, plural %q, short names %v", kind, plural, short)
	}
	if crd.Object["spec"].(map[string]any)["scope"] != "Namespaced" {
		t.Error("not namespaced")
	}
	// Each call is a new object: a caller rendering or changing it cannot
	// change what Install creates.
	unstructured.RemoveNestedField(crd.Object, "spec")
	if _, ok := CRD().Object["spec"]; !ok {
		t.Error("CRD returned a shared object")
	}
}

func TestCRDIsEstablishedOnlyWhenTheServerSaysSo(t *testing.T) {
	cond := func(typ, status string) any {
		return map[string]any{"type": typ, "status": status, "message": typ + " " + status}
	}
	tests := []struct {
		name        string
		status      any
		established bool
		fails       bool
	}{
		{"no status", nil, false, false},
		{"null conditions", map[string]any{"conditions": nil}, false, false},
		{"names accepted only", map[string]any{"conditions": []any{cond("NamesAccepted", "True")}}, false, false},
		{"established", map[string]any{"conditions": []any{cond("NamesAccepted", "True"), cond("Established", "True")}}, true, false},
		{"not established", map[string]any{"conditions": []any{cond("Established", "False")}}, false, false},
		{"names taken", map[string]any{"conditions": []any{cond("NamesAccepted", "False")}}, false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			crd := CRD()
			if tt.status != nil {
				crd.Object["status"] = tt.status
			}
			established, err := crdEstablished(crd)
			if established != tt.established || (err != nil) != tt.fails {
				t.Errorf("crdEstablished = %v, %v; want %v, error %v", established, err, tt.established, tt.fails)
			}
		})
	}
}
