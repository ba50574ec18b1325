package rks

import (
	"context"
	"errors"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
	"github.com/knitdev/knit/rks/relay"
)

var (
	app1    = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 1}
	app2    = yarnid.ApplicationID{ClusterTimestamp: 1700000000000, ID: 2}
	attempt = yarnid.AttemptID{App: app1, ID: 1}
	task    = yarnid.ContainerID{Attempt: attempt, Sequence: 2}
	node    = "127.0.1.1:8041"
)

// fakePods plays RGS: one pod per container, a status per container.
type fakePods struct {
	pods    map[yarnid.ContainerID]*corev1.Pod
	status  map[yarnid.ContainerID]yarnpb.ContainerStateProto
	stopped []yarnid.ContainerID
	// versions are the versions the node side holds.
	versions map[yarnid.ContainerID]int32
	dumps    []yarnid.ContainerID
}

func (f *fakePods) ContainerPod(id yarnid.ContainerID) (*corev1.Pod, bool) {
	p, ok := f.pods[id]
	return p, ok
}

func (f *fakePods) ContainerStatus(id yarnid.ContainerID) (*yarnpb.ContainerStatusProto, bool) {
	if _, ok := f.pods[id]; !ok {
		return nil, false
	}
	return &yarnpb.ContainerStatusProto{ContainerId: id.Proto(), State: f.status[id].Enum()}, true
}

func (f *fakePods) StopContainer(id yarnid.ContainerID) {
	f.stopped = append(f.stopped, id)
}

func (f *fakePods) NodeVersion(id yarnid.ContainerID) int32 { return f.versions[id] }

func (f *fakePods) RequestThreadDump(_ context.Context, id yarnid.ContainerID) error {
	f.dumps = append(f.dumps, id)
	return nil
}

func (f *fakePods) ApplyNodeUpdate(_ context.Context, id yarnid.ContainerID, version int32, _ *yarnpb.ResourceProto) error {
	if f.versions == nil {
		f.versions = map[yarnid.ContainerID]int32{}
	}
	f.versions[id] = version
	return nil
}

// fakeTokens accepts any container token whose password is "ok".
type fakeTokens struct{}

func (fakeTokens) VerifyContainerToken(tok token.Token) (*yarnpb.ContainerTokenIdentifierProto, error) {
	var id yarnpb.ContainerTokenIdentifierProto
	if err := proto.Unmarshal(tok.Identifier, &id); err != nil {
		return nil, err
	}
	if string(tok.Password) != "ok" {
		return &id, yarnerr.InvalidToken.Errorf("Invalid container token used for starting container on : %s", id.GetNmHostAddr())
	}
	return &id, nil
}

func (fakeTokens) PinAttempt(context.Context, *yarnpb.NMTokenIdentifierProto) error { return nil }

func containerToken(id yarnid.ContainerID, nodeAddr, password string, am bool) *commonpb.TokenProto {
	ident := &yarnpb.ContainerTokenIdentifierProto{ContainerId: id.Proto(), NmHostAddr: proto.String(nodeAddr), AppSubmitter: proto.String("alice")}
	if am {
		ident.ContainerType = yarnpb.ContainerTypeProto_APPLICATION_MASTER.Enum()
	}
	raw, _ := proto.Marshal(ident)
	return token.Token{Identifier: raw, Password: []byte(password), Kind: "ContainerToken", Service: nodeAddr}.Proto()
}

func nmCaller(ctx context.Context, app yarnid.ApplicationID) context.Context {
	id := &yarnpb.NMTokenIdentifierProto{
		AppAttemptId: yarnid.AttemptID{App: app, ID: 1}.Proto(),
		NodeId:       &yarnpb.NodeIdProto{Host: proto.String("127.0.1.1"), Port: proto.Int32(8041)},
	}
	return ipc.WithCaller(ctx, ipc.Caller{Auth: ipc.AuthToken, TokenIdentity: id})
}

// fakeAuxServices is what knit-node publishes: node-1 runs the shuffle.
type fakeAuxServices map[string]map[string][]byte

func (f fakeAuxServices) AuxServices(node string) map[string][]byte { return f[node] }

// shufflePort is node-1's shuffle port.
const shufflePort = 13562

func newTestService(t *testing.T) (*Service, *fakePods, *fake.Clientset) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Namespace: "ns", UID: "uid-1"},
		Spec: corev1.PodSpec{NodeName: "node-1", Containers: []corev1.Container{{Name: launch.ContainerName, Image: "launcher"}}}}
	client := fake.NewClientset(pod)
	pods := &fakePods{pods: map[yarnid.ContainerID]*corev1.Pod{task: pod}, status: map[yarnid.ContainerID]yarnpb.ContainerStateProto{task: yarnpb.ContainerStateProto_C_RUNNING}}
	aux := fakeAuxServices{"node-1": {launch.ShuffleService: launch.PortMetadata(shufflePort)}}
	s, err := New(Config{Client: client, Pods: pods, Tokens: fakeTokens{}, AuxServices: aux, NMHTTPPort: 8042})
	if err != nil {
		t.Fatal(err)
	}
	return s, pods, client
}

func credentialsWithAMRMToken(t *testing.T) []byte {
	t.Helper()
	var c token.Credentials
	c.AddToken("", token.Token{Identifier: []byte("am"), Password: []byte("pw"), Kind: kindAMRM})
	c.AddToken("hdfs", token.Token{Identifier: []byte("dt"), Password: []byte("pw"), Kind: "HDFS_DELEGATION_TOKEN"})
	b, err := c.Marshal(token.FormatWritable)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestStartContainersPutsTheLaunchContextOnThePod(t *testing.T) {
	s, _, client := newTestService(t)
	clc := &yarnpb.ContainerLaunchContextProto{
		Command:     []string{"echo hi 1><LOG_DIR>/stdout"},
		Environment: []*yarnpb.StringStringMapProto{{Key: proto.String(dockerImageEnv), Value: proto.String("busybox:1")}},
		Tokens:      credentialsWithAMRMToken(t),
		ServiceData: []*yarnpb.StringBytesMapProto{{Key: proto.String(launch.ShuffleService), Value: []byte("secret")}},
	}
	ctx := relay.WithNode(nmCaller(t.Context(), app1), node)
	resp, err := s.StartContainers(ctx, &yarnpb.StartContainersRequestProto{StartContainerRequest: []*yarnpb.StartContainerRequestProto{
		{ContainerLaunchContext: clc, ContainerToken: containerToken(task, node, "ok", false)},
	}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetFailedRequests()) > 0 || len(resp.GetSucceededRequests()) != 1 {
		t.Fatalf("answer %v", resp)
	}
	var shuffle []byte
	for _, m := range resp.GetServicesMetaData() {
		if m.GetKey() == launch.ShuffleService {
			shuffle = m.GetValue()
		}
	}
	if len(shuffle) != 4 || int(shuffle[2])<<8|int(shuffle[3]) != shufflePort {
		t.Errorf("mapreduce_shuffle metadata %v, want the 4-byte port %d", shuffle, shufflePort)
	}
	pod, err := client.CoreV1().Pods("ns").Get(t.Context(), "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lc, err := launch.DecodeContext(pod.Annotations[launch.AnnotationContext])
	if err != nil {
		t.Fatal(err)
	}
	if lc.ContainerID != task.String() || lc.User != "alice" || lc.NMHost != "127.0.1.1" || lc.NMPort != 8041 || lc.NMHTTPPort != 8042 {
		t.Errorf("context %+v", lc)
	}
	if pod.Spec.Containers[0].Image != "busybox:1" {
		t.Errorf("image %q, want the launch context's Docker image", pod.Spec.Containers[0].Image)
	}
	var got yarnpb.ContainerLaunchContextProto
	if err := proto.Unmarshal(lc.LaunchContext, &got); err != nil || len(got.GetTokens()) != 0 || got.GetCommand()[0] != clc.GetCommand()[0] {
		t.Errorf("launch context %v (%v): tokens must stay off the pod", &got, err)
	}
	if len(got.GetServiceData()) != 0 {
		t.Errorf("launch context on the pod carries service data %v: it may hold secrets and belongs in the Secret", got.GetServiceData())
	}
	secret, err := client.CoreV1().Secrets("ns").Get(t.Context(), lc.TokensSecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(secret.OwnerReferences) != 1 || secret.OwnerReferences[0].UID != "uid-1" {
		t.Errorf("secret owners %v, want the pod", secret.OwnerReferences)
	}
	creds, err := token.ParseCredentials(secret.Data[launch.SecretKeyTokens])
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := creds.Token(""); ok || creds.NumTokens() != 1 {
		t.Errorf("task credentials keep %d tokens; the AMRMToken must be stripped", creds.NumTokens())
	}
	if got := string(secret.Data[launch.ServiceDataSecretKey(launch.ShuffleService)]); got != "secret" {
		t.Errorf("secret's mapreduce_shuffle service data %q, want the AM's bytes", got)
	}
	// Every write names RKS as its field manager.
	writes := 0
	for _, a := range client.Actions() {
		var manager string
		switch a := a.(type) {
		case k8stesting.CreateActionImpl:
			manager = a.GetCreateOptions().FieldManager
		case k8stesting.UpdateActionImpl:
			manager = a.GetUpdateOptions().FieldManager
		case k8stesting.PatchActionImpl:
			manager = a.GetPatchOptions().FieldManager
		default:
			continue
		}
		writes++
		if manager != fieldManager {
			t.Errorf("%s of %s by %q, want %q", a.GetVerb(), a.GetResource().Resource, manager, fieldManager)
		}
	}
	if writes != 2 {
		t.Errorf("%d writes, want the Secret's create and the pod's patch", writes)
	}
}

func TestStartContainersAnswersWithTheServicesOfTheContainersNode(t *testing.T) {
	tests := []struct {
		name string
		aux  fakeAuxServices
		want []string
	}{
		{name: "the node publishes the shuffle", aux: fakeAuxServices{"node-1": {launch.ShuffleService: launch.PortMetadata(shufflePort)}}, want: []string{launch.ShuffleService}},
		{name: "another node's services are not this node's", aux: fakeAuxServices{"node-2": {launch.ShuffleService: launch.PortMetadata(shufflePort)}}},
		{name: "a node that publishes nothing advertises nothing", aux: fakeAuxServices{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newTestService(t)
			s.cfg.AuxServices = tt.aux
			ctx := relay.WithNode(nmCaller(t.Context(), app1), node)
			resp, err := s.StartContainers(ctx, &yarnpb.StartContainersRequestProto{StartContainerRequest: []*yarnpb.StartContainerRequestProto{
				{ContainerLaunchContext: &yarnpb.ContainerLaunchContextProto{Command: []string{"true"}}, ContainerToken: containerToken(task, node, "ok", false)},
			}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range resp.GetServicesMetaData() {
				got = append(got, m.GetKey())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("services %v, want %v", got, tt.want)
			}
		})
	}
}

func TestStartContainersRefusesPerContainerAsTheNodeManagerDoes(t *testing.T) {
	tests := []struct {
		name      string
		caller    yarnid.ApplicationID
		relayed   string
		token     *commonpb.TokenProto
		service   string
		twice     bool
		wantClass yarnerr.Class
		wantMsg   string
	}{
		{name: "forged container token", caller: app1, token: containerToken(task, node, "forged", false),
			wantClass: yarnerr.InvalidToken, wantMsg: "Invalid container token"},
		{name: "NMToken of another application", caller: app2, token: containerToken(task, node, "ok", false),
			wantClass: yarnerr.YarnException, wantMsg: "was used for starting container with container token issued for application attempt : appattempt_1700000000000_0001_000001"},
		{name: "container token for another node", caller: app1, token: containerToken(task, "127.0.1.9:8041", "ok", false),
			wantClass: yarnerr.InvalidToken, wantMsg: "issued for NodeManager 127.0.1.9:8041"},
		{name: "relayed through another node", caller: app1, relayed: "127.0.1.2:8041", token: containerToken(task, node, "ok", false),
			wantClass: yarnerr.InvalidToken, wantMsg: "not for 127.0.1.2:8041"},
		{name: "unknown aux service", caller: app1, service: "no_such_service", token: containerToken(task, node, "ok", false),
			wantClass: yarnerr.InvalidAuxService, wantMsg: "The auxService:no_such_service does not exist"},
		{name: "second start", caller: app1, twice: true, token: containerToken(task, node, "ok", false),
			wantClass: yarnerr.YarnException, wantMsg: "Attempt to relaunch the same container with id " + task.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _, _ := newTestService(t)
			ctx := nmCaller(t.Context(), tt.caller)
			if tt.relayed != "" {
				ctx = relay.WithNode(ctx, tt.relayed)
			}
			clc := &yarnpb.ContainerLaunchContextProto{Command: []string{"true"}}
			if tt.service != "" {
				clc.ServiceData = []*yarnpb.StringBytesMapProto{{Key: proto.String(tt.service)}}
			}
			req := &yarnpb.StartContainersRequestProto{StartContainerRequest: []*yarnpb.StartContainerRequestProto{{ContainerLaunchContext: clc, ContainerToken: tt.token}}}
			if tt.twice {
				if _, err := s.StartContainers(ctx, req); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := s.StartContainers(ctx, req)
			if err != nil {
				t.Fatal(err)
			}
			if len(resp.GetFailedRequests()) != 1 || len(resp.GetSucceededRequests()) != 0 {
				t.Fatalf("answer %v, want one failure", resp)
			}
			ex := resp.GetFailedRequests()[0].GetException()
			if ex.GetClassName() != string(tt.wantClass) || !strings.Contains(ex.GetMessage(), tt.wantMsg) {
				t.Errorf("failure %s: %q, want %s containing %q", ex.GetClassName(), ex.GetMessage(), tt.wantClass, tt.wantMsg)
			}
		})
	}
}

func TestStopAnswersForTheCallersApplicationOnly(t *testing.T) {
	tests := []struct {
		name        string
		caller      yarnid.ApplicationID
		state       yarnpb.ContainerStateProto
		wantStopped bool
		wantErr     string
	}{
		{name: "running container is stopped", caller: app1, state: yarnpb.ContainerStateProto_C_RUNNING, wantStopped: true},
		{name: "completed container stops as a no-op", caller: app1, state: yarnpb.ContainerStateProto_C_COMPLETE},
		{name: "another application's container is refused", caller: app2, state: yarnpb.ContainerStateProto_C_RUNNING,
			wantErr: "appattempt_1700000000000_0002_000001 attempted to stop non-application container : " + task.String()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, pods, _ := newTestService(t)
			pods.status[task] = tt.state
			resp, err := s.StopContainers(nmCaller(t.Context(), tt.caller), &yarnpb.StopContainersRequestProto{ContainerId: []*yarnpb.ContainerIdProto{task.Proto()}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.wantErr != "" {
				if len(resp.GetFailedRequests()) != 1 || resp.GetFailedRequests()[0].GetException().GetMessage() != tt.wantErr {
					t.Errorf("answer %v, want %q", resp, tt.wantErr)
				}
				return
			}
			if len(resp.GetSucceededRequests()) != 1 || (len(pods.stopped) == 1) != tt.wantStopped {
				t.Errorf("answer %v, stopped %v, want stopped %v", resp, pods.stopped, tt.wantStopped)
			}
		})
	}
}

func TestStatusOfAContainerNotStartedIsNotHandled(t *testing.T) {
	s, _, _ := newTestService(t)
	resp, err := s.GetContainerStatuses(nmCaller(t.Context(), app1), &yarnpb.GetContainerStatusesRequestProto{ContainerId: []*yarnpb.ContainerIdProto{task.Proto()}})
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.GetFailedRequests()) != 1 || !strings.Contains(resp.GetFailedRequests()[0].GetException().GetMessage(), "is not handled by this NodeManager") {
		t.Errorf("answer %v", resp)
	}
}

func TestCallsWithoutAnNMTokenAreRefused(t *testing.T) {
	s, _, _ := newTestService(t)
	ctx := ipc.WithCaller(t.Context(), ipc.Caller{Auth: ipc.AuthSimple, User: "mallory"})
	_, err := s.StartContainers(ctx, &yarnpb.StartContainersRequestProto{})
	var e *yarnerr.Error
	if !errors.As(err, &e) || e.Class != yarnerr.YarnException || e.Message != msgInvalidNMToken {
		t.Errorf("err %v, want %q", err, msgInvalidNMToken)
	}
}

func updateToken(id yarnid.ContainerID, version int32, password string) *commonpb.TokenProto {
	ident := &yarnpb.ContainerTokenIdentifierProto{ContainerId: id.Proto(), NmHostAddr: proto.String(node), AppSubmitter: proto.String("alice"),
		Version: proto.Int32(version), Resource: yarnpb.NewResource(2048, 1)}
	raw, _ := proto.Marshal(ident)
	return token.Token{Identifier: raw, Password: []byte(password), Kind: "ContainerToken", Service: node}.Proto()
}

func TestUpdateContainerTakesOnlyNewerVersionsOfStartedContainers(t *testing.T) {
	s, pods, _ := newTestService(t)
	ctx := relay.WithNode(nmCaller(t.Context(), app1), node)
	unstarted := yarnid.ContainerID{Attempt: attempt, Sequence: 3}
	pods.pods[unstarted] = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p3", Namespace: "ns"}}
	pods.pods[task].Annotations = map[string]string{launch.AnnotationContext: "{}"}
	tests := []struct {
		name    string
		caller  context.Context
		tok     *commonpb.TokenProto
		class   yarnerr.Class
		message string
		version int32 // the node's version after
	}{
		{"a first update", ctx, updateToken(task, 1, "ok"), "", "", 1},
		{"the same version again", ctx, updateToken(task, 1, "ok"), yarnerr.YarnException,
			"Container " + task.String() + " has update version [1] >= requested version [1]", 1},
		{"an older version", ctx, updateToken(task, 0, "ok"), yarnerr.YarnException,
			"Container " + task.String() + " has update version [1] >= requested version [0]", 1},
		{"a forged token", ctx, updateToken(task, 2, "forged"), yarnerr.InvalidToken, "Invalid container token", 1},
		{"another application's NMToken", relay.WithNode(nmCaller(t.Context(), app2), node), updateToken(task, 2, "ok"), yarnerr.YarnException,
			"Unauthorized request to increase container resource.\nNMToken for application attempt : appattempt_1700000000000_0002_000001 was used for increasing resource of container", 1},
		{"a container never started", ctx, updateToken(unstarted, 1, "ok"), yarnerr.YarnException,
			"Container " + unstarted.String() + " is not handled by this NodeManager", 1},
		{"a newer version", ctx, updateToken(task, 3, "ok"), "", "", 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			resp, err := s.UpdateContainer(tt.caller, &yarnpb.ContainerUpdateRequestProto{UpdateContainerToken: []*commonpb.TokenProto{tt.tok}})
			if err != nil {
				t.Fatal(err)
			}
			if tt.class == "" {
				if len(resp.GetSucceededRequests()) != 1 || len(resp.GetFailedRequests()) != 0 {
					t.Errorf("answer %v, want success", resp)
				}
			} else {
				f := resp.GetFailedRequests()
				if len(f) != 1 || f[0].GetException().GetClassName() != string(tt.class) || !strings.Contains(f[0].GetException().GetMessage(), tt.message) {
					t.Errorf("answer %v, want %s: %q", resp, tt.class, tt.message)
				}
			}
			if v := pods.versions[task]; v != tt.version {
				t.Errorf("node version %d, want %d", v, tt.version)
			}
		})
	}
}

func TestRunAsReadsTheMainContainerThenThePod(t *testing.T) {
	id := func(v int64) *int64 { return &v }
	tests := []struct {
		name     string
		pod      corev1.PodSpec
		uid, gid *int64
	}{
		{"nothing set: the image decides", corev1.PodSpec{Containers: []corev1.Container{{Name: launch.ContainerName}}}, nil, nil},
		{"the pod's user, its fsGroup as group", corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: id(1000), FSGroup: id(2000)},
			Containers:      []corev1.Container{{Name: launch.ContainerName}}}, id(1000), id(2000)},
		{"the main container wins", corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: id(1000), RunAsGroup: id(1000)},
			Containers: []corev1.Container{{Name: "sidecar", SecurityContext: &corev1.SecurityContext{RunAsUser: id(7)}},
				{Name: launch.ContainerName, SecurityContext: &corev1.SecurityContext{RunAsUser: id(3000), RunAsGroup: id(3001)}}}}, id(3000), id(3001)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			uid, gid := runAs(&corev1.Pod{Spec: tt.pod})
			if !reflect.DeepEqual(uid, tt.uid) || !reflect.DeepEqual(gid, tt.gid) {
				t.Errorf("runAs = %v, %v; want %v, %v", ptrString(uid), ptrString(gid), ptrString(tt.uid), ptrString(tt.gid))
			}
		})
	}
}

func ptrString(p *int64) string {
	if p == nil {
		return "nil"
	}
	return strconv.FormatInt(*p, 10)
}
