package procnode

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestSetupVolumes(t *testing.T) {
	t.Parallel()
	client := fakeClient(
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns1"},
			Data: map[string][]byte{"a": []byte("A"), "b": []byte("B")}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm", Namespace: "ns1"},
			Data: map[string]string{"text": "T"}, BinaryData: map[string][]byte{"bin": {0, 1}}},
	)
	host := t.TempDir()
	existingFile := filepath.Join(host, "file")
	if err := os.WriteFile(existingFile, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	optional := true
	pod := testPod()
	pod.Spec.Containers = []corev1.Container{{Name: "main", Resources: corev1.ResourceRequirements{
		Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("1Gi")}}}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "empty", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{Medium: corev1.StorageMediumMemory}}},
		{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec",
			DefaultMode: ptr.To(int32(0o600)), Items: []corev1.KeyToPath{{Key: "b", Path: "deep/b", Mode: ptr.To(int32(0o640))}}}}},
		{Name: "allsec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "sec"}}},
		{Name: "optsec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "absent", Optional: &optional}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "cm"}}}},
		{Name: "down", VolumeSource: corev1.VolumeSource{DownwardAPI: &corev1.DownwardAPIVolumeSource{Items: []corev1.DownwardAPIVolumeFile{
			{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}},
			{Path: "mem", ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "main", Resource: "limits.memory", Divisor: resource.MustParse("1Mi")}},
		}}}},
		{Name: "hostnew", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(host, "new", "dir")}}},
		{Name: "hostfile", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: filepath.Join(host, "f", "made"),
			Type: ptr.To(corev1.HostPathFileOrCreate)}}},
		{Name: "hostexisting", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: existingFile}}},
	}
	paths := newPodPaths(t.TempDir(), pod.Namespace, pod.Name, pod.UID)
	vc := volumeContext{Pod: pod, Paths: paths, Address: testAddress, Objects: newObjectSource(client, "ns1")}
	if err := setupVolumes(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	// Idempotent.
	if err := setupVolumes(context.Background(), vc); err != nil {
		t.Fatal(err)
	}
	files := []struct {
		path, content string
		mode          os.FileMode
	}{
		{filepath.Join(paths.volume("sec"), "deep", "b"), "B", 0o640},
		{filepath.Join(paths.volume("allsec"), "a"), "A", 0o644},
		{filepath.Join(paths.volume("allsec"), "b"), "B", 0o644},
		{filepath.Join(paths.volume("cm"), "text"), "T", 0o644},
		{filepath.Join(paths.volume("cm"), "bin"), "\x00\x01", 0o644},
		{filepath.Join(paths.volume("down"), "name"), "p1", 0o644},
		{filepath.Join(paths.volume("down"), "mem"), "1024", 0o644},
		{filepath.Join(host, "f", "made"), "", 0o644},
		{existingFile, "x", 0o644},
	}
	for _, f := range files {
		st, err := os.Stat(f.path)
		if err != nil {
			t.Errorf("%s: %v", f.path, err)
			continue
		}
		data, _ := os.ReadFile(f.path)
		if string(data) != f.content || st.Mode().Perm() != f.mode {
			t.Errorf("%s = %q %v, want %q %v", f.path, data, st.Mode().Perm(), f.content, f.mode)
		}
	}
	for _, d := range []string{paths.volume("empty"), filepath.Join(host, "new", "dir")} {
		if st, err := os.Stat(d); err != nil || !st.IsDir() {
			t.Errorf("%s not a folder: %v", d, err)
		}
	}
	if entries, _ := os.ReadDir(paths.volume("sec")); len(entries) != 1 {
		t.Errorf("items not honoured: %v", entries)
	}
}

func TestSetupVolumesErrors(t *testing.T) {
	t.Parallel()
	client := fakeClient(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "sec", Namespace: "ns1"}, Data: map[string][]byte{"a": nil}})
	cases := map[string]corev1.VolumeSource{
		"missing secret": {Secret: &corev1.SecretVolumeSource{SecretName: "absent"}},
		"missing key":    {Secret: &corev1.SecretVolumeSource{SecretName: "sec", Items: []corev1.KeyToPath{{Key: "nope", Path: "x"}}}},
		"escaping path":  {Secret: &corev1.SecretVolumeSource{SecretName: "sec", Items: []corev1.KeyToPath{{Key: "a", Path: "../x"}}}},
		"unsupported":    {PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "c"}},
		"not a dir":      {HostPath: &corev1.HostPathVolumeSource{Path: "/etc/hostname", Type: ptr.To(corev1.HostPathDirectory)}},
	}
	for name, src := range cases {
		pod := testPod()
		pod.Spec.Volumes = []corev1.Volume{{Name: "v", VolumeSource: src}}
		vc := volumeContext{Pod: pod, Paths: newPodPaths(t.TempDir(), "ns1", "p1", "u"), Objects: newObjectSource(client, "ns1")}
		if err := setupVolumes(context.Background(), vc); err == nil || !strings.Contains(err.Error(), `volume "v"`) {
			t.Errorf("%s: err = %v", name, err)
		}
	}
}

func TestMountMappings(t *testing.T) {
	t.Parallel()
	pod := testPod()
	host := t.TempDir()
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: host}}},
	}
	paths := newPodPaths(t.TempDir(), pod.Namespace, pod.Name, pod.UID)
	c := &corev1.Container{Name: "main", TerminationMessagePath: "/tmp/msg", VolumeMounts: []corev1.VolumeMount{
		{Name: "data", MountPath: "/data"},
		{Name: "data", MountPath: "/logs", SubPathExpr: "logs/$(POD)"},
		{Name: "host", MountPath: "/h", SubPath: "sub"},
	}}
	var env envList
	env.Set("POD", "p1")
	maps, err := mountMappings(pod, c, paths, &env, "/term")
	if err != nil {
		t.Fatal(err)
	}
	want := []pathMapping{
		{"/data", paths.volume("data")},
		{"/logs", filepath.Join(paths.volume("data"), "logs", "p1")},
		{"/h", filepath.Join(host, "sub")},
		{"/tmp/msg", "/term"},
	}
	if len(maps) != len(want) {
		t.Fatalf("maps = %v", maps)
	}
	for i := range want {
		if maps[i] != want[i] {
			t.Errorf("maps[%d] = %v, want %v", i, maps[i], want[i])
		}
	}
	if st, err := os.Stat(want[1].To); err != nil || !st.IsDir() {
		t.Errorf("subPathExpr folder not created: %v", err)
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/x", SubPath: "../../etc"}}
	if _, err := mountMappings(pod, c, paths, &env, "/term"); err == nil {
		t.Error("escaping subPath accepted")
	}
	c.VolumeMounts = []corev1.VolumeMount{{Name: "nope", MountPath: "/x"}}
	if _, err := mountMappings(pod, c, paths, &env, "/term"); err == nil {
		t.Error("unknown volume accepted")
	}
	c.VolumeMounts, c.TerminationMessagePath = nil, ""
	maps, _ = mountMappings(pod, c, paths, &env, "/term")
	if len(maps) != 1 || maps[0].From != "/dev/termination-log" {
		t.Errorf("default termination path: %v", maps)
	}
}
