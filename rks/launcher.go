package rks

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/cenkalti/backoff/v4"
	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rks/launch"
)

// LaunchRequest is one container to start: from startContainers, or the
// RM's own launch of an AM container.
type LaunchRequest struct {
	Container yarnid.ContainerID
	// User is the application's submitter.
	User string
	// Node is the container's NodeId.
	Node    *yarnpb.NodeIdProto
	Context *yarnpb.ContainerLaunchContextProto
	// Credentials go to the container's token file; nil for none.
	Credentials *token.Credentials
	// AppSubmitTime (ms) and WebProxyBase are set for AM containers.
	AppSubmitTime int64
	WebProxyBase  string
}

// Launch hands a container its launch context: the credentials into a
// Secret owned by the pod, the rest onto the pod as an annotation, which
// the node's knit-node picks up. A container starts once: a second launch
// is refused as the NodeManager refuses a relaunch.
func (s *Service) Launch(ctx context.Context, req LaunchRequest) error {
	id := req.Container
	// The informer may not show a start made a moment ago: what this
	// service started is remembered too.
	s.mu.Lock()
	if s.starting[id] {
		s.mu.Unlock()
		return relaunch(id)
	}
	s.starting[id] = true
	s.mu.Unlock()
	launched := false
	defer func() {
		if !launched {
			s.mu.Lock()
			delete(s.starting, id)
			s.mu.Unlock()
		}
	}()

	pod, ok := s.cfg.Pods.ContainerPod(id)
	if !ok || pod.DeletionTimestamp != nil {
		return yarnerr.YarnException.Errorf("Container %s was released, expired or has ended before it was started", id)
	}
	if started(pod) {
		return relaunch(id)
	}
	clc := proto.Clone(req.Context).(*yarnpb.ContainerLaunchContextProto)
	if clc == nil {
		clc = &yarnpb.ContainerLaunchContextProto{}
	}
	clc.Tokens = nil
	// Service data may hold secrets (MapReduce's job token): it travels
	// with the credentials, never in the readable annotation.
	serviceData := clc.ServiceData
	clc.ServiceData = nil
	raw, err := proto.Marshal(clc)
	if err != nil {
		return fmt.Errorf("rks: launch context of %s: %w", id, err)
	}
	lc := launch.Context{
		ContainerID:   id.String(),
		User:          req.User,
		NMHost:        req.Node.GetHost(),
		NMPort:        req.Node.GetPort(),
		NMHTTPPort:    s.cfg.NMHTTPPort,
		LaunchContext: raw,
		AppSubmitTime: req.AppSubmitTime,
		WebProxyBase:  req.WebProxyBase,
		Image:         envValue(clc, dockerImageEnv),
	}
	lc.RunAsUser, lc.RunAsGroup = runAs(pod)
	if req.Credentials != nil || len(serviceData) > 0 {
		lc.TokensSecret = pod.Name + "-tokens"
		if err := s.writeSecret(ctx, pod, lc.TokensSecret, req.Credentials, serviceData); err != nil {
			return err
		}
	}
	value, err := launch.EncodeContext(lc)
	if err != nil {
		return yarnerr.YarnException.Errorf("%v", err)
	}
	if err := s.patchPod(ctx, pod, value, lc.Image); err != nil {
		return err
	}
	launched = true
	s.forgetGone()
	if s.cfg.Observer != nil {
		s.cfg.Observer.ContainerStarted(ctx, id)
	}
	s.log.InfoContext(ctx, "container started", "container", id.String(), "pod", pod.Namespace+"/"+pod.Name, "node", pod.Spec.NodeName)
	return nil
}

// forgetGone drops, now and then, the started containers whose pods are
// gone, so the record stays as small as the set of live containers.
func (s *Service) forgetGone() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.launches++
	if s.launches%1024 != 0 {
		return
	}
	for id := range s.starting {
		if _, ok := s.cfg.Pods.ContainerPod(id); !ok {
			delete(s.starting, id)
		}
	}
}

func relaunch(id yarnid.ContainerID) error {
	return yarnerr.YarnException.Errorf("Unauthorized request to start container. \n %s%s.", yarnerr.RelaunchMessage, id)
}

// started reports whether a pod's container was given its launch context.
func started(p *corev1.Pod) bool {
	_, ok := p.Annotations[launch.AnnotationContext]
	return ok
}

func envValue(clc *yarnpb.ContainerLaunchContextProto, name string) string {
	for _, e := range clc.GetEnvironment() {
		if e.GetKey() == name {
			return e.GetValue()
		}
	}
	return ""
}

// fieldManager names RKS's writes (the launch context on a pod, the
// container's Secret) in the objects' managed fields, apart from RGS's.
const fieldManager = "knit-rks"

func retryPolicy(ctx context.Context) backoff.BackOff {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval = 50 * time.Millisecond
	b.MaxInterval = 2 * time.Second
	b.MaxElapsedTime = 30 * time.Second
	return backoff.WithContext(b, ctx)
}

// writeSecret stores the credentials and the service data in a Secret the
// pod owns, so it goes with the pod.
func (s *Service) writeSecret(ctx context.Context, p *corev1.Pod, name string, creds *token.Credentials, serviceData []*yarnpb.StringBytesMapProto) error {
	data := make(map[string][]byte, 1+len(serviceData))
	if creds != nil {
		b, err := creds.Marshal(token.FormatWritable)
		if err != nil {
			return fmt.Errorf("rks: credentials of %s: %w", name, err)
		}
		data[launch.SecretKeyTokens] = b
	}
	for _, sd := range serviceData {
		data[launch.ServiceDataSecretKey(sd.GetKey())] = sd.GetValue()
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name:      name,
			Namespace: p.Namespace,
			Labels:    map[string]string{launch.LabelSecret: "container-tokens"},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1", Kind: "Pod", Name: p.Name, UID: p.UID, Controller: ptr.To(true),
			}},
		},
		Type: corev1.SecretTypeOpaque,
		Data: data,
	}
	secrets := s.cfg.Client.CoreV1().Secrets(p.Namespace)
	op := func() error {
		_, err := secrets.Create(ctx, secret, metav1.CreateOptions{FieldManager: fieldManager})
		if apierrors.IsAlreadyExists(err) {
			// An earlier try that failed after the write: make it ours.
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{FieldManager: fieldManager})
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	if err := backoff.Retry(op, retryPolicy(ctx)); err != nil {
		return yarnerr.YarnException.Errorf("storing the credentials of %s/%s: %v", p.Namespace, name, err)
	}
	return nil
}

// patchPod puts the launch context on the pod, and the requested image on
// its main container, with the pod's resource version as precondition: a
// pod that changed meanwhile (deleted, ended) is read again by the caller's
// retry rather than patched blind.
func (s *Service) patchPod(ctx context.Context, p *corev1.Pod, value, image string) error {
	patch := map[string]any{
		"metadata": map[string]any{"annotations": map[string]string{launch.AnnotationContext: value}},
	}
	if image != "" {
		patch["spec"] = map[string]any{"containers": []map[string]string{{"name": launch.ContainerName, "image": image}}}
	}
	body, err := json.Marshal(patch)
	if err != nil {
		return fmt.Errorf("rks: patch: %w", err)
	}
	pods := s.cfg.Client.CoreV1().Pods(p.Namespace)
	op := func() error {
		_, err := pods.Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{FieldManager: fieldManager})
		if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			return backoff.Permanent(err)
		}
		return err
	}
	if err := backoff.Retry(op, retryPolicy(ctx)); err != nil {
		if apierrors.IsNotFound(err) {
			return yarnerr.YarnException.Errorf("Container's pod %s/%s is gone", p.Namespace, p.Name)
		}
		return yarnerr.YarnException.Errorf("launching on pod %s/%s: %v", p.Namespace, p.Name, err)
	}
	return nil
}

func sortedKeys(m map[string][]byte) []string { return slices.Sorted(maps.Keys(m)) }

// runAs is who the pod's main container runs as, from its security context
// or the pod's; the group falls back to the pod's fsGroup. Nil when the
// image decides.
func runAs(p *corev1.Pod) (uid, gid *int64) {
	if sc := p.Spec.SecurityContext; sc != nil {
		uid, gid = sc.RunAsUser, sc.RunAsGroup
		if gid == nil {
			gid = sc.FSGroup
		}
	}
	for _, c := range p.Spec.Containers {
		if c.Name == launch.ContainerName && c.SecurityContext != nil {
			if c.SecurityContext.RunAsUser != nil {
				uid = c.SecurityContext.RunAsUser
			}
			if c.SecurityContext.RunAsGroup != nil {
				gid = c.SecurityContext.RunAsGroup
			}
		}
	}
	return uid, gid
}
