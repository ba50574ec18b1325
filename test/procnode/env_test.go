package procnode

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestExpandVars(t *testing.T) {
	t.Parallel()
	vars := map[string]string{"A": "a", "B": "b", "EMPTY": "", "PATHY": "/x"}
	cases := []struct{ in, want string }{
		{"plain", "plain"},
		{"$(A)", "a"},
		{"$(A)$(B)", "ab"},
		{"x$(A)y", "xay"},
		{"$(UNDEFINED)", "$(UNDEFINED)"},
		{"$(EMPTY)", ""},
		{"$$(A)", "$(A)"}, // escaped
		{"$$$(A)", "$a"},
		{"$A", "$A"},   // only $(...) is a reference
		{"$(A", "$(A"}, // unterminated
		{"$", "$"},
		{"a$", "a$"},
		{"$()", "$()"}, // empty name: not defined
		{"$(PATHY)/bin", "/x/bin"},
		{"ü$(A)ü", "üaü"},
	}
	m := mappingFor(vars)
	for _, tc := range cases {
		if got := expandVars(tc.in, m); got != tc.want {
			t.Errorf("expandVars(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func testPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "p1", Namespace: "ns1", UID: "uid-1",
			Labels:      map[string]string{"app": "web", "tier": "front"},
			Annotations: map[string]string{"note": "hello \"x\""},
		},
		Spec: corev1.PodSpec{NodeName: "node-1", ServiceAccountName: "sa1"},
	}
}

func TestPodFieldValue(t *testing.T) {
	t.Parallel()
	pod := testPod()
	cases := []struct{ path, want string }{
		{"metadata.name", "p1"},
		{"metadata.namespace", "ns1"},
		{"metadata.uid", "uid-1"},
		{"metadata.labels['app']", "web"},
		{"metadata.labels['missing']", ""},
		{"metadata.annotations['note']", `hello "x"`},
		{"metadata.labels", "app=\"web\"\ntier=\"front\""},
		{"metadata.annotations", `note="hello \"x\""`},
		{"spec.nodeName", "node-1"},
		{"spec.serviceAccountName", "sa1"},
		{"status.hostIP", "127.0.1.1"},
		{"status.hostIPs", "127.0.1.1"},
		{"status.podIP", "127.0.1.1"},
		{"status.podIPs", "127.0.1.1"},
	}
	for _, tc := range cases {
		got, err := podFieldValue(pod, tc.path, "127.0.1.1")
		if err != nil || got != tc.want {
			t.Errorf("podFieldValue(%s) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
	for _, bad := range []string{"spec.containers", "metadata.name['x']"} {
		if _, err := podFieldValue(pod, bad, "127.0.1.1"); err == nil {
			t.Errorf("podFieldValue(%s) did not fail", bad)
		}
	}
}

func TestContainerResourceValue(t *testing.T) {
	t.Parallel()
	c := &corev1.Container{Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
	}}
	alloc := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("16Gi")}
	cases := []struct {
		res, divisor, want string
	}{
		{"requests.cpu", "", "1"}, // 250m rounds up to 1 core
		{"requests.cpu", "1m", "250"},
		{"limits.cpu", "", "8"}, // unset limit: node allocatable
		{"requests.memory", "", "67108864"},
		{"requests.memory", "1Mi", "64"},
		{"limits.memory", "1Mi", "128"},
		{"limits.memory", "1Gi", "1"}, // rounds up
	}
	for _, tc := range cases {
		fs := &corev1.ResourceFieldSelector{Resource: tc.res}
		if tc.divisor != "" {
			fs.Divisor = resource.MustParse(tc.divisor)
		}
		got, err := containerResourceValue(fs, c, alloc)
		if err != nil || got != tc.want {
			t.Errorf("%s/%s = %q, %v; want %q", tc.res, tc.divisor, got, err, tc.want)
		}
	}
	if _, err := containerResourceValue(&corev1.ResourceFieldSelector{Resource: "limits.gpu"}, c, alloc); err == nil {
		t.Error("unsupported resource did not fail")
	}
}

func TestContainerEnv(t *testing.T) {
	t.Parallel()
	opt := true
	client := fake.NewClientset(
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns1"},
			Data: map[string]string{"K1": "cm-v1", "K2": "cm-v2"}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns1"},
			Data: map[string][]byte{"password": []byte("s3cret"), "K2": []byte("sec-v2")}},
	)
	pod := testPod()
	c := &corev1.Container{
		Name: "main",
		EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}},
			{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Optional: &opt}},
		},
		Env: []corev1.EnvVar{
			{Name: "A", Value: "a"},
			{Name: "B", Value: "$(A)-$(K1)-$(LATER)-$$(A)"},
			{Name: "LATER", Value: "later"},
			{Name: "K1", Value: "overridden"}, // env beats envFrom, in place
			{Name: "POD", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			{Name: "APP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.labels['app']"}}},
			{Name: "IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "MEM", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{Resource: "limits.memory", Divisor: resource.MustParse("1Gi")}}},
			{Name: "PW", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "password"}}},
			{Name: "CMK", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}, Key: "K2"}}},
			{Name: "OPT", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "nope", Optional: &opt}}},
			{Name: "SVC", Value: "$(KUBERNETES_SERVICE_HOST):$(KUBERNETES_SERVICE_PORT)"},
			{Name: "KUBERNETES_SERVICE_PORT", Value: "mine"},
		},
	}
	ec := envContext{Pod: pod, Address: "127.0.1.1",
		Allocatable: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("16Gi")},
		ServiceEnv:  serviceEnv("127.0.0.1", "6443"), Objects: newObjectSource(client, "ns1")}
	env, err := containerEnv(context.Background(), ec, c)
	if err != nil {
		t.Fatal(err)
	}
	want := []envVar{
		{"K1", "overridden"}, {"K2", "cm-v2"}, {"S_K2", "sec-v2"}, {"S_password", "s3cret"},
		{"A", "a"}, {"B", "a-cm-v1-$(LATER)-$(A)"}, {"LATER", "later"},
		{"POD", "p1"}, {"APP", "web"}, {"IP", "127.0.1.1"}, {"MEM", "16"}, {"PW", "s3cret"}, {"CMK", "cm-v2"},
		{"SVC", "127.0.0.1:6443"}, {"KUBERNETES_SERVICE_PORT", "mine"},
		{"KUBERNETES_SERVICE_HOST", "127.0.0.1"}, {"KUBERNETES_SERVICE_PORT_HTTPS", "6443"},
		{"KUBERNETES_PORT", "tcp://127.0.0.1:6443"}, {"KUBERNETES_PORT_6443_TCP", "tcp://127.0.0.1:6443"},
		{"KUBERNETES_PORT_6443_TCP_PROTO", "tcp"}, {"KUBERNETES_PORT_6443_TCP_PORT", "6443"},
		{"KUBERNETES_PORT_6443_TCP_ADDR", "127.0.0.1"},
		{"HOSTNAME", "p1"},
	}
	if len(env.vars) != len(want) {
		t.Fatalf("env =\n%v\nwant\n%v", env.vars, want)
	}
	for i := range want {
		if env.vars[i] != want[i] {
			t.Errorf("env[%d] = %v, want %v", i, env.vars[i], want[i])
		}
	}

	c.Args = []string{"$(A)", "$(POD)/$(MISSING)"}
	_, args := expandCommand(c, env)
	if strings.Join(args, " ") != "a p1/$(MISSING)" {
		t.Errorf("args = %q", args)
	}
}

func TestContainerEnvErrors(t *testing.T) {
	t.Parallel()
	client := fake.NewClientset(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns1"}})
	cases := map[string]corev1.EnvVar{
		"missing secret": {Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}, Key: "k"}}},
		"missing key": {Name: "X", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "sec"}, Key: "k"}}},
		"bad field": {Name: "X", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nope"}}},
	}
	for name, ev := range cases {
		ec := envContext{Pod: testPod(), Address: "127.0.1.1", Objects: newObjectSource(client, "ns1")}
		if _, err := containerEnv(context.Background(), ec, &corev1.Container{Env: []corev1.EnvVar{ev}}); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func TestHostnameFromSpec(t *testing.T) {
	t.Parallel()
	pod := testPod()
	pod.Spec.Hostname = "custom"
	ec := envContext{Pod: pod, Objects: newObjectSource(fake.NewClientset(), "ns1")}
	env, err := containerEnv(context.Background(), ec, &corev1.Container{})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := env.Get("HOSTNAME"); v != "custom" {
		t.Errorf("HOSTNAME = %q", v)
	}
	env, _ = containerEnv(context.Background(), ec, &corev1.Container{Env: []corev1.EnvVar{{Name: "HOSTNAME", Value: "set"}}})
	if v, _ := env.Get("HOSTNAME"); v != "set" {
		t.Errorf("HOSTNAME = %q, want the container's own", v)
	}
}
