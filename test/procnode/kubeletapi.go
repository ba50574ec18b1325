package procnode

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/kubelet/pkg/cri/streaming/portforward"
	remotecommandserver "k8s.io/kubelet/pkg/cri/streaming/remotecommand"
)

// KubeletTLS is what a process node needs to serve the kubelet API as a
// kubelet does: its serving certificate (signed by the cluster CA, naming
// the node's address, so an API server started with
// --kubelet-certificate-authority trusts it) and the CAs its clients'
// certificates must chain to (the CA of the API server's
// --kubelet-client-certificate, the kubelet's --client-ca-file).
type KubeletTLS struct {
	Certificate tls.Certificate
	ClientCAs   *x509.CertPool
}

// The kubelet's streaming defaults (its --streaming-connection-idle-timeout
// and the CRI streaming server's stream creation timeout).
const (
	streamIdleTimeout     = 4 * time.Hour
	streamCreationTimeout = remotecommandconsts.DefaultStreamCreationTimeout
)

// kubeletAPI serves the part of the kubelet's HTTPS API that the API
// server proxies to: container logs, exec, attach and port-forward, and
// healthz. Every request needs a client certificate from ClientCAs, and
// the certificate's user must be allowed the kubelet's resource attribute
// (nodes/proxy, nodes/healthz) by a SubjectAccessReview, as a kubelet in
// Webhook authorization mode asks.
type kubeletAPI struct {
	node   string
	client kubernetes.Interface
	pods   corelisters.PodLister
	rt     *procRuntime
	dir    string
	addr   string // the node's address, where pods' ports listen
	log    *slog.Logger
	// sessions counts handlers in flight, hijacked ones included, which
	// http.Server.Shutdown does not wait for.
	sessions sync.WaitGroup
}

// routes is the kubelet's URL space for what the API server proxies (see
// pkg/kubelet/server in Kubernetes: the uid forms are the same routes
// with the pod's UID, which must then match).
func (k *kubeletAPI) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	mux.HandleFunc("GET /containerLogs/{ns}/{pod}/{container}", k.serveContainerLogs)
	for _, m := range []string{"GET", "POST"} {
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{container}", k.serveExec)
		mux.HandleFunc(m+" /exec/{ns}/{pod}/{uid}/{container}", k.serveExec)
		mux.HandleFunc(m+" /attach/{ns}/{pod}/{container}", k.serveAttach)
		mux.HandleFunc(m+" /attach/{ns}/{pod}/{uid}/{container}", k.serveAttach)
		mux.HandleFunc(m+" /portForward/{ns}/{pod}", k.servePortForward)
		mux.HandleFunc(m+" /portForward/{ns}/{pod}/{uid}", k.servePortForward)
	}
	return k.authorize(mux)
}

// authorize admits a request whose verified client certificate's user may
// use the path, as the kubelet's Webhook authorizer decides: the verb from
// the HTTP method, the resource nodes, the subresource from the path.
func (k *kubeletAPI) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.sessions.Add(1)
		defer k.sessions.Done()
		if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 {
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		cert := r.TLS.VerifiedChains[0][0]
		user, groups := cert.Subject.CommonName, cert.Subject.Organization
		verb, sub := kubeletAttributes(r)
		attrs := fmt.Sprintf("user=%s, verb=%s, resource=nodes, subresource=%s", user, verb, sub)
		review, err := k.client.AuthorizationV1().SubjectAccessReviews().Create(r.Context(), &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{
				User:   user,
				Groups: append(groups, "system:authenticated"),
				ResourceAttributes: &authorizationv1.ResourceAttributes{
					Verb: verb, Resource: "nodes", Subresource: sub, Name: k.node,
				},
			},
		}, metav1.CreateOptions{})
		switch {
		case err != nil:
			k.log.Warn("kubelet API authorization failed", "user", user, "path", r.URL.Path, "err", err)
			http.Error(w, "Authorization error ("+attrs+")", http.StatusInternalServerError)
		case !review.Status.Allowed:
			k.log.Info("kubelet API request forbidden", "user", user, "path", r.URL.Path, "reason", review.Status.Reason)
			http.Error(w, "Forbidden ("+attrs+")", http.StatusForbidden)
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// kubeletAttributes maps a request to the verb and nodes subresource the
// kubelet's authorizer checks (pkg/kubelet/server/auth.go).
func kubeletAttributes(r *http.Request) (verb, subresource string) {
	switch r.Method {
	case http.MethodPost, http.MethodPut:
		verb = "create"
	case http.MethodPatch:
		verb = "patch"
	case http.MethodDelete:
		verb = "delete"
	default:
		verb = "get"
	}
	subresource = "proxy"
	if r.URL.Path == "/healthz" || strings.HasPrefix(r.URL.Path, "/healthz/") {
		subresource = "healthz"
	}
	return verb, subresource
}

// serve runs the kubelet API on l until ctx ends, then closes every
// connection (ending exec sessions, log follows and port forwards, whose
// request contexts derive from ctx) and waits for the handlers.
func (k *kubeletAPI) serve(ctx context.Context, l net.Listener, cert KubeletTLS) error {
	srv := &http.Server{
		Handler: k.routes(),
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{cert.Certificate},
			ClientCAs:    cert.ClientCAs,
			ClientAuth:   tls.RequireAndVerifyClientCert,
			MinVersion:   tls.VersionTLS12,
			// SPDY and WebSocket upgrades need HTTP/1.1.
			NextProtos: []string{"http/1.1"},
		},
		ReadHeaderTimeout: 30 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(k.log.Handler(), slog.LevelDebug),
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(l, "", "") }()
	select {
	case err := <-errc:
		k.sessions.Wait()
		return fmt.Errorf("kubelet API: %w", err)
	case <-ctx.Done():
	}
	err := srv.Close()
	<-errc
	k.sessions.Wait()
	if err != nil {
		return fmt.Errorf("kubelet API: close: %w", err)
	}
	return nil
}

// errPodNotFound and errContainerNotFound are answered with 404.
var (
	errPodNotFound       = errors.New("pod does not exist")
	errContainerNotFound = errors.New("container not found")
)

// findPod is the pod namespace/name bound to this node (and of UID uid, if
// given), as the kubelet finds it among its pods.
func (k *kubeletAPI) findPod(ns, name string, uid types.UID) (*corev1.Pod, error) {
	pod, err := k.pods.Pods(ns).Get(name)
	if apierrors.IsNotFound(err) || (err == nil && (pod.Spec.NodeName != k.node || (uid != "" && pod.UID != uid))) {
		return nil, errPodNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("get pod %s/%s: %w", ns, name, err)
	}
	return pod, nil
}

// runningAttempt is the run of container in pod that is running now.
func (k *kubeletAPI) runningAttempt(pod *corev1.Pod, container string) (*attempt, error) {
	if findContainer(pod, container) == nil {
		return nil, fmt.Errorf("%w: %q in pod %q", errContainerNotFound, container, pod.Name)
	}
	paths := newPodPaths(k.dir, pod.Namespace, pod.Name, pod.UID)
	nums, err := attemptNumbers(paths.state(container))
	if err != nil {
		return nil, err
	}
	if len(nums) > 0 {
		a, err := k.rt.load(paths.attempt(container, nums[len(nums)-1]))
		if err != nil {
			return nil, err
		}
		running, err := k.rt.settle(a)
		if err != nil {
			return nil, err
		}
		if running {
			return a, nil
		}
	}
	return nil, fmt.Errorf("container %q in pod %q is not running", container, pod.Name)
}

// writeLookupError answers a failed lookup as the kubelet does: 404 for a
// pod or container it does not have, 500 with the runtime's message
// otherwise (a container that does not run).
func writeLookupError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	if errors.Is(err, errPodNotFound) || errors.Is(err, errContainerNotFound) {
		code = http.StatusNotFound
	}
	http.Error(w, err.Error(), code)
}

func (k *kubeletAPI) serveExec(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := r.URL.Query()[corev1.ExecCommandParam]
	if len(cmd) == 0 {
		http.Error(w, "no command given", http.StatusBadRequest)
		return
	}
	pod, err := k.findPod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeLookupError(w, err)
		return
	}
	a, err := k.runningAttempt(pod, r.PathValue("container"))
	if err != nil {
		writeLookupError(w, err)
		return
	}
	s := &session{rt: k.rt, run: a, log: k.log.With("pod", a.Spec.Pod, "container", a.Spec.Container)}
	defer s.wait()
	remotecommandserver.ServeExec(w, r, s, pod.Name, pod.UID, a.Spec.Container, cmd, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *kubeletAPI) serveAttach(w http.ResponseWriter, r *http.Request) {
	opts, err := remotecommandserver.NewOptions(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, err := k.findPod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeLookupError(w, err)
		return
	}
	a, err := k.runningAttempt(pod, r.PathValue("container"))
	if err != nil {
		writeLookupError(w, err)
		return
	}
	if opts.TTY {
		// The container's process has no terminal to attach to; a
		// container runtime refuses the same for a container created
		// without tty.
		http.Error(w, fmt.Sprintf("container %q in pod %q was not started with a TTY", a.Spec.Container, pod.Name), http.StatusBadRequest)
		return
	}
	s := &session{rt: k.rt, run: a, log: k.log.With("pod", a.Spec.Pod, "container", a.Spec.Container)}
	defer s.wait()
	remotecommandserver.ServeAttach(w, r, s, pod.Name, pod.UID, a.Spec.Container, opts,
		streamIdleTimeout, streamCreationTimeout, remotecommandconsts.SupportedStreamingProtocols)
}

func (k *kubeletAPI) servePortForward(w http.ResponseWriter, r *http.Request) {
	opts, err := portforward.NewV4Options(r)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	pod, err := k.findPod(r.PathValue("ns"), r.PathValue("pod"), types.UID(r.PathValue("uid")))
	if err != nil {
		writeLookupError(w, err)
		return
	}
	fw := &portForwarder{addr: k.addr, log: k.log.With("pod", pod.Namespace+"/"+pod.Name)}
	portforward.ServePortForward(w, r, fw, pod.Name, pod.UID, opts,
		streamIdleTimeout, streamCreationTimeout, portforward.SupportedProtocols)
}

// listenKubeletAPI opens the kubelet API's port on the node's address; a
// zero port takes a free one, which the Node then publishes.
func listenKubeletAPI(address string, port int32) (net.Listener, int32, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(address, strconv.Itoa(int(port))))
	if err != nil {
		return nil, 0, fmt.Errorf("kubelet API: %w", err)
	}
	return l, int32(l.Addr().(*net.TCPAddr).Port), nil
}
