package rm

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestDecodePodTemplateTakesAPodTemplateOrAPod(t *testing.T) {
	tests := []struct {
		name, data string
		label      string // the template's label "team", when decoded
		err        string
	}{
		{"a PodTemplate in YAML", "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: t}\ntemplate:\n  metadata: {labels: {team: data}}\n  spec:\n    containers: []\n", "data", ""},
		{"a Pod in JSON", `{"apiVersion":"v1","kind":"Pod","metadata":{"labels":{"team":"ml"}},"spec":{"containers":[]}}`, "ml", ""},
		{"another kind", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", "", "a ConfigMap, not a PodTemplate or a Pod"},
		{"no object", "{{{", "", "decode"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := decodePodTemplate([]byte(tt.data))
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Labels["team"] != tt.label {
				t.Errorf("label team = %q, want %q", got.Labels["team"], tt.label)
			}
		})
	}
}

func TestAQueuesPodTemplateIsInItsPodMappingAndABadOneRefusesTheRefresh(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "b.yaml")
	tmpl := "apiVersion: v1\nkind: PodTemplate\nmetadata: {name: b}\ntemplate:\n  metadata: {labels: {team: b}}\n  spec:\n    containers: []\n    tolerations: [{key: dedicated, value: b, effect: NoSchedule}]\n"
	if err := os.WriteFile(path, []byte(tmpl), 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, envOptions{adminACL: "admin", queues: baseQueues(map[string]string{"knit.queue.root.b.pod-template": path})})
	m := e.rm.QueueMapping("root.b")
	if m.Template == nil || m.Template.Labels["team"] != "b" || len(m.Template.Spec.Tolerations) != 1 {
		t.Fatalf("queue b's mapping template = %+v", m.Template)
	}
	if m := e.rm.QueueMapping("root.default"); m.Template != nil {
		t.Errorf("queue default has a template: %+v", m.Template)
	}

	addr, files := e.serveAdmin(nil)
	files.write(baseQueues(map[string]string{"knit.queue.root.b.pod-template": filepath.Join(dir, "missing.yaml")}))
	_, err := call(t, e.admin(addr, "admin"), "refreshQueues", &yarnpb.RefreshQueuesRequestProto{}, &yarnpb.RefreshQueuesResponseProto{})
	if err == nil || !strings.Contains(err.Error(), "pod template of queue root.b") {
		t.Fatalf("refresh with a missing template: %v", err)
	}
	if m := e.rm.QueueMapping("root.b"); m.Template == nil || m.Template.Labels["team"] != "b" {
		t.Error("a refused refresh changed the template in force")
	}
}
