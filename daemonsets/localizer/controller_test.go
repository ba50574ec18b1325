package localizer

import (
	"context"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes/fake"
	metadatafake "k8s.io/client-go/metadata/fake"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/rks/launch"
)

const rmNamespace = "knit"

// fakePreparer records the controller's calls; the application's folders
// are "on the node" while apps holds it.
type fakePreparer struct {
	mu       sync.Mutex
	apps     []string
	prepared []launch.Context
	creds    [][]byte
	cleaned  []string
	released int
}

func (f *fakePreparer) Prepare(_ context.Context, c launch.Context, credentials []byte) (launch.Files, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.prepared = append(f.prepared, c)
	f.creds = append(f.creds, credentials)
	if !slices.Contains(f.apps, testApp) {
		f.apps = append(f.apps, testApp)
	}
	return launch.Files{ContainerID: c.ContainerID, WorkDir: "/work"}, nil
}

func (f *fakePreparer) Release(string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.released++
}

func (f *fakePreparer) releases() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.released
}

func (f *fakePreparer) CleanApplication(app string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleaned = append(f.cleaned, app)
	f.apps = slices.DeleteFunc(f.apps, func(a string) bool { return a == app })
	return nil
}

func (f *fakePreparer) Applications() ([]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.apps), nil
}

func (f *fakePreparer) snapshot() (prepared int, cleaned []string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.prepared), slices.Clone(f.cleaned)
}

// fakeServices records what the node's aux services were told.
type fakeServices struct {
	mu      sync.Mutex
	inits   []map[string][]byte
	users   []string
	stopped []yarnid.ApplicationID
}

func (f *fakeServices) InitializeApplication(_ context.Context, user string, _ yarnid.ApplicationID, data map[string][]byte) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.inits = append(f.inits, data)
	f.users = append(f.users, user)
	return nil
}

func (f *fakeServices) StopApplication(_ context.Context, app yarnid.ApplicationID) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.stopped = append(f.stopped, app)
	return nil
}

func (f *fakeServices) snapshot() (inits []map[string][]byte, stopped []yarnid.ApplicationID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.inits), slices.Clone(f.stopped)
}

func applicationObject(state string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{
		TypeMeta: metav1.TypeMeta{APIVersion: launch.ApplicationGroup + "/" + launch.ApplicationVersion, Kind: launch.ApplicationKind},
		ObjectMeta: metav1.ObjectMeta{Name: "application-1700000000000-0001", Namespace: rmNamespace,
			Labels: map[string]string{launch.LabelState: state, launch.LabelApplication: testApp}},
	}
}

func startedPod(t *testing.T) (*corev1.Pod, *corev1.Secret) {
	t.Helper()
	value, err := launch.EncodeContext(launch.Context{ContainerID: testContainer(2), User: "alice", TokensSecret: "p1-tokens"})
	if err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "apps", UID: "uid-1",
			Labels:      map[string]string{launch.LabelApplication: testApp, launch.LabelContainer: testContainer(2)},
			Annotations: map[string]string{launch.AnnotationContext: value}},
		Spec: corev1.PodSpec{NodeName: "node-1"},
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "p1-tokens", Namespace: "apps"},
		Data: map[string][]byte{
			launch.SecretKeyTokens:                             []byte("HDTS"),
			launch.ServiceDataSecretKey(launch.ShuffleService): []byte("job token"),
		},
	}
	return pod, secret
}

func runController(t *testing.T, client *fake.Clientset, meta *metadatafake.FakeMetadataClient, prep *fakePreparer, svc *fakeServices) {
	t.Helper()
	runControllerIn(t, t.TempDir(), client, meta, prep, svc)
}

func runControllerIn(t *testing.T, launchDir string, client *fake.Clientset, meta *metadatafake.FakeMetadataClient, prep *fakePreparer, svc *fakeServices, opts ...func(*ControllerConfig)) {
	t.Helper()
	cfg := ControllerConfig{
		Client: client, Metadata: meta, ApplicationsNamespace: rmNamespace, Services: svc,
		NodeName: "node-1", LaunchDir: launchDir, Preparer: prep,
	}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := NewController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

func newMetadataClient(objects ...runtime.Object) *metadatafake.FakeMetadataClient {
	scheme := metadatafake.NewTestScheme()
	_ = metav1.AddMetaToScheme(scheme)
	return metadatafake.NewSimpleMetadataClient(scheme, objects...)
}

func yarnApplications() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: launch.ApplicationGroup, Version: launch.ApplicationVersion, Resource: launch.ApplicationResource}
}

func TestAStartedContainersServiceDataReachesTheServicesBeforeItIsPrepared(t *testing.T) {
	pod, secret := startedPod(t)
	prep, svc := &fakePreparer{}, &fakeServices{}
	runController(t, fake.NewClientset(pod, secret), newMetadataClient(applicationObject("RUNNING")), prep, svc)
	waitFor(t, "the container prepared", func() bool { n, _ := prep.snapshot(); return n == 1 })
	inits, _ := svc.snapshot()
	if len(inits) != 1 || string(inits[0][launch.ShuffleService]) != "job token" || len(inits[0]) != 1 {
		t.Fatalf("services told %v, want the shuffle's service data alone", inits)
	}
	if svc.users[0] != "alice" {
		t.Errorf("user %q, want the container's", svc.users[0])
	}
	if string(prep.creds[0]) != "HDTS" {
		t.Errorf("credentials %q, want the Secret's tokens", prep.creds[0])
	}
}

func TestAContainerPreparedBeforeARestartTellsTheServicesAgainWithoutBeingPreparedAgain(t *testing.T) {
	pod, secret := startedPod(t)
	launchDir := t.TempDir()
	if err := WriteFiles(launchDir, string(pod.UID), launch.Files{ContainerID: testContainer(2), WorkDir: "/work"}); err != nil {
		t.Fatal(err)
	}
	prep, svc := &fakePreparer{}, &fakeServices{}
	runControllerIn(t, launchDir, fake.NewClientset(pod, secret), newMetadataClient(applicationObject("RUNNING")), prep, svc)
	waitFor(t, "the services told", func() bool { inits, _ := svc.snapshot(); return len(inits) == 1 })
	if n, _ := prep.snapshot(); n != 0 {
		t.Errorf("prepared %d times; its launch files were already written", n)
	}
}

func TestAnApplicationEndsOnTheNodeWhenItEndsInTheRMNotWhenItsPodsGo(t *testing.T) {
	pod, secret := startedPod(t)
	client := fake.NewClientset(pod, secret)
	meta := newMetadataClient(applicationObject("RUNNING"))
	prep, svc := &fakePreparer{}, &fakeServices{}
	runController(t, client, meta, prep, svc)
	waitFor(t, "the container prepared", func() bool { n, _ := prep.snapshot(); return n == 1 })

	// The map's pod goes (the AM stopped its finished container): its
	// output must stay for the reducers.
	if err := client.CoreV1().Pods("apps").Delete(t.Context(), "p1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The pod's going is handled (its container released) without a
	// clean-up of the application.
	waitFor(t, "the container released", func() bool { return prep.releases() == 1 })
	if _, cleaned := prep.snapshot(); len(cleaned) != 0 {
		t.Fatalf("application cleaned when its pod went: %v", cleaned)
	}

	obj := applicationObject("FINISHED")
	if _, err := meta.Resource(yarnApplications()).Namespace(rmNamespace).(metadatafake.MetadataClient).UpdateFake(obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the application cleaned", func() bool { _, cleaned := prep.snapshot(); return len(cleaned) == 1 })
	if _, cleaned := prep.snapshot(); cleaned[0] != testApp {
		t.Errorf("cleaned %v", cleaned)
	}
	if _, stopped := svc.snapshot(); len(stopped) != 1 || stopped[0].String() != testApp {
		t.Errorf("services stopped %v, want %s", stopped, testApp)
	}
}

func TestLeftoverFoldersOfEndedOrForgottenApplicationsAreCleanedAtStart(t *testing.T) {
	const forgotten = "application_1700000000000_0009"
	running := "application_1700000000000_0004"
	runningObj := applicationObject("RUNNING")
	runningObj.Name, runningObj.Labels[launch.LabelApplication] = "application-1700000000000-0004", running
	prep := &fakePreparer{apps: []string{testApp, running, forgotten}}
	runController(t, fake.NewClientset(), newMetadataClient(applicationObject("KILLED"), runningObj), prep, &fakeServices{})
	waitFor(t, "two applications cleaned", func() bool { _, cleaned := prep.snapshot(); return len(cleaned) == 2 })
	_, cleaned := prep.snapshot()
	slices.Sort(cleaned)
	if want := []string{testApp, forgotten}; !slices.Equal(cleaned, want) {
		t.Errorf("cleaned %v, want %v (the running one stays)", cleaned, want)
	}
}
