package procnode

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// envVar is one variable of a container's environment.
type envVar struct {
	Name, Value string
}

// envList keeps variables in the order they were first declared; a later
// Set of the same name replaces the value in place, as a map would, but the
// order stays readable and deterministic for tests and /proc/<pid>/environ.
type envList struct {
	vars  []envVar
	index map[string]int
}

func (l *envList) Set(name, value string) {
	if l.index == nil {
		l.index = map[string]int{}
	}
	if i, ok := l.index[name]; ok {
		l.vars[i].Value = value
		return
	}
	l.index[name] = len(l.vars)
	l.vars = append(l.vars, envVar{Name: name, Value: value})
}

func (l *envList) Get(name string) (string, bool) {
	i, ok := l.index[name]
	if !ok {
		return "", false
	}
	return l.vars[i].Value, true
}

func (l *envList) Map() map[string]string {
	m := make(map[string]string, len(l.vars))
	for _, v := range l.vars {
		m[v.Name] = v.Value
	}
	return m
}

// expandVars expands $(VAR) references in input the way Kubernetes does for
// env values, command and args (a port of
// k8s.io/kubernetes/third_party/forked/golang/expansion): $(NAME) becomes the
// value of NAME if mapping knows it and stays as written otherwise, $$ is an
// escaped $, and anything else after $ is left alone.
func expandVars(input string, mapping func(string) (string, bool)) string {
	var buf bytes.Buffer
	checkpoint := 0
	for cursor := 0; cursor < len(input); cursor++ {
		if input[cursor] != '$' || cursor+1 >= len(input) {
			continue
		}
		buf.WriteString(input[checkpoint:cursor])
		read, isVar, advance := readVariableName(input[cursor+1:])
		if isVar {
			if v, ok := mapping(read); ok {
				buf.WriteString(v)
			} else {
				buf.WriteString("$(" + read + ")")
			}
		} else {
			buf.WriteString(read)
		}
		cursor += advance
		checkpoint = cursor + 1
	}
	return buf.String() + input[checkpoint:]
}

// readVariableName reads what follows a '$': the text to emit (or the name
// to look up), whether it is a name, and how many bytes it used.
func readVariableName(input string) (string, bool, int) {
	r, size := utf8.DecodeRuneInString(input)
	switch r {
	case '$':
		return input[0:size], false, size
	case '(':
		for i := 1; i < len(input); i++ {
			if input[i] == ')' {
				return input[1:i], true, i + 1
			}
		}
		return "$(", false, 1
	default:
		return "$" + string(r), false, size
	}
}

// mappingFor looks a name up in the given maps, first hit wins.
func mappingFor(maps ...map[string]string) func(string) (string, bool) {
	return func(name string) (string, bool) {
		for _, m := range maps {
			if v, ok := m[name]; ok {
				return v, true
			}
		}
		return "", false
	}
}

// podFieldValue resolves a downward-API fieldPath for env (fieldRef) and
// for downwardAPI volume items. hostIP and podIP are the node's Address:
// every pod shares the host network, and the API status may not carry the
// IPs yet when the first container starts.
func podFieldValue(pod *corev1.Pod, fieldPath, address string) (string, error) {
	if p, subscript, ok := splitSubscriptedPath(fieldPath); ok {
		switch p {
		case "metadata.annotations":
			return pod.Annotations[subscript], nil
		case "metadata.labels":
			return pod.Labels[subscript], nil
		default:
			return "", fmt.Errorf("fieldPath %q does not support subscript", fieldPath)
		}
	}
	switch fieldPath {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "metadata.labels":
		return formatMap(pod.Labels), nil
	case "metadata.annotations":
		return formatMap(pod.Annotations), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP", "status.podIP", "status.hostIPs", "status.podIPs":
		// One address, so the plural forms are the same single value.
		return address, nil
	}
	return "", fmt.Errorf("unsupported fieldPath: %v", fieldPath)
}

// splitSubscriptedPath splits "metadata.labels['k']" into the path and "k".
func splitSubscriptedPath(fieldPath string) (string, string, bool) {
	if !strings.HasSuffix(fieldPath, "']") {
		return fieldPath, "", false
	}
	parts := strings.SplitN(strings.TrimSuffix(fieldPath, "']"), "['", 2)
	if len(parts) < 2 || parts[0] == "" {
		return fieldPath, "", false
	}
	return parts[0], parts[1], true
}

// formatMap renders labels or annotations as a downwardAPI file does:
// sorted key="quoted value" lines.
func formatMap(m map[string]string) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b []byte
	for _, k := range keys {
		if len(b) > 0 {
			b = append(b, '\n')
		}
		b = append(b, k...)
		b = append(b, '=')
		b = strconv.AppendQuote(b, m[k])
	}
	return string(b)
}

// containerResourceValue resolves a resourceFieldRef as the kubelet does:
// limits that are not set default to the node's allocatable, cpu rounds up
// to whole divisor units, everything else divides the byte count and rounds
// up.
func containerResourceValue(fs *corev1.ResourceFieldSelector, c *corev1.Container, allocatable corev1.ResourceList) (string, error) {
	divisor := resource.MustParse("1")
	if !fs.Divisor.IsZero() {
		divisor = fs.Divisor
	}
	limits := corev1.ResourceList{}
	for k, v := range c.Resources.Limits {
		limits[k] = v
	}
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourceEphemeralStorage} {
		if _, ok := limits[name]; !ok {
			if q, ok := allocatable[name]; ok {
				limits[name] = q
			}
		}
	}
	var list corev1.ResourceList
	var name string
	switch {
	case strings.HasPrefix(fs.Resource, "limits."):
		list, name = limits, strings.TrimPrefix(fs.Resource, "limits.")
	case strings.HasPrefix(fs.Resource, "requests."):
		list, name = c.Resources.Requests, strings.TrimPrefix(fs.Resource, "requests.")
	default:
		return "", fmt.Errorf("unsupported container resource: %v", fs.Resource)
	}
	q := list[corev1.ResourceName(name)]
	switch {
	case name == string(corev1.ResourceCPU):
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case name == string(corev1.ResourceMemory), name == string(corev1.ResourceEphemeralStorage),
		strings.HasPrefix(name, corev1.ResourceHugePagesPrefix):
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", fmt.Errorf("unsupported container resource: %v", fs.Resource)
}

// objectSource reads the ConfigMaps and Secrets a pod refers to, once each
// per pod set-up, straight from the API (no watch: a process node serves
// few pods and reads them only when a container starts).
type objectSource struct {
	client     kubernetes.Interface
	namespace  string
	configMaps map[string]*corev1.ConfigMap
	secrets    map[string]*corev1.Secret
}

func newObjectSource(client kubernetes.Interface, namespace string) *objectSource {
	return &objectSource{client: client, namespace: namespace,
		configMaps: map[string]*corev1.ConfigMap{}, secrets: map[string]*corev1.Secret{}}
}

func (s *objectSource) configMap(ctx context.Context, name string) (*corev1.ConfigMap, error) {
	if cm, ok := s.configMaps[name]; ok {
		return cm, nil
	}
	cm, err := s.client.CoreV1().ConfigMaps(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("configmap %s/%s: %w", s.namespace, name, err)
	}
	s.configMaps[name] = cm
	return cm, nil
}

func (s *objectSource) secret(ctx context.Context, name string) (*corev1.Secret, error) {
	if sec, ok := s.secrets[name]; ok {
		return sec, nil
	}
	sec, err := s.client.CoreV1().Secrets(s.namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", s.namespace, name, err)
	}
	s.secrets[name] = sec
	return sec, nil
}

// envContext is what resolving a container's environment needs besides the
// container itself.
type envContext struct {
	Pod         *corev1.Pod
	Address     string
	Allocatable corev1.ResourceList
	// ServiceEnv are the KUBERNETES_SERVICE_* variables: visible to $(VAR)
	// expansion and added last unless the container sets them itself.
	ServiceEnv []envVar
	Objects    *objectSource
}

// serviceEnv builds the variables the kubelet injects for the default
// namespace's kubernetes Service, pointing at the real API server because
// there is no kube-proxy to reach a ClusterIP.
func serviceEnv(host, port string) []envVar {
	if host == "" || port == "" {
		return nil
	}
	url := "tcp://" + net.JoinHostPort(host, port)
	p := "KUBERNETES_PORT_" + port + "_TCP"
	return []envVar{
		{"KUBERNETES_SERVICE_HOST", host},
		{"KUBERNETES_SERVICE_PORT", port},
		{"KUBERNETES_SERVICE_PORT_HTTPS", port},
		{"KUBERNETES_PORT", url},
		{p, url},
		{p + "_PROTO", "tcp"},
		{p + "_PORT", port},
		{p + "_ADDR", host},
	}
}

// containerEnv resolves c's environment as the kubelet does: envFrom first,
// then env in order (values $(VAR)-expanded against what is declared so far
// and the service variables; valueFrom resolved, not expanded), then the
// service variables the container did not set, then HOSTNAME as a container
// runtime adds it. An error means the container cannot be configured
// (CreateContainerConfigError).
func containerEnv(ctx context.Context, ec envContext, c *corev1.Container) (*envList, error) {
	var env envList
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm, err := ec.Objects.configMap(ctx, from.ConfigMapRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.ConfigMapRef.Optional) {
					continue
				}
				return nil, err
			}
			for _, k := range sortedKeys(cm.Data) {
				env.Set(from.Prefix+k, cm.Data[k])
			}
		case from.SecretRef != nil:
			sec, err := ec.Objects.secret(ctx, from.SecretRef.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(from.SecretRef.Optional) {
					continue
				}
				return nil, err
			}
			for _, k := range sortedKeys(sec.Data) {
				env.Set(from.Prefix+k, string(sec.Data[k]))
			}
		}
	}
	svc := map[string]string{}
	for _, v := range ec.ServiceEnv {
		svc[v.Name] = v.Value
	}
	for _, e := range c.Env {
		val := e.Value
		if val != "" {
			val = expandVars(val, mappingFor(env.Map(), svc))
		} else if e.ValueFrom != nil {
			var ok bool
			var err error
			val, ok, err = resolveValueFrom(ctx, ec, c, e.ValueFrom)
			if err != nil {
				return nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			if !ok {
				continue // optional source that is missing
			}
		}
		env.Set(e.Name, val)
	}
	for _, v := range ec.ServiceEnv {
		if _, ok := env.Get(v.Name); !ok {
			env.Set(v.Name, v.Value)
		}
	}
	if _, ok := env.Get("HOSTNAME"); !ok {
		env.Set("HOSTNAME", podHostname(ec.Pod))
	}
	return &env, nil
}

// resolveValueFrom returns the value, false if an optional source is
// missing, or an error.
func resolveValueFrom(ctx context.Context, ec envContext, c *corev1.Container, from *corev1.EnvVarSource) (string, bool, error) {
	switch {
	case from.FieldRef != nil:
		v, err := podFieldValue(ec.Pod, from.FieldRef.FieldPath, ec.Address)
		return v, err == nil, err
	case from.ResourceFieldRef != nil:
		target := c
		if n := from.ResourceFieldRef.ContainerName; n != "" && n != c.Name {
			if target = findContainer(ec.Pod, n); target == nil {
				return "", false, fmt.Errorf("resourceFieldRef names unknown container %q", n)
			}
		}
		v, err := containerResourceValue(from.ResourceFieldRef, target, ec.Allocatable)
		return v, err == nil, err
	case from.ConfigMapKeyRef != nil:
		ref := from.ConfigMapKeyRef
		cm, err := ec.Objects.configMap(ctx, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := cm.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %v in ConfigMap %v/%v", ref.Key, ec.Pod.Namespace, ref.Name)
		}
		return v, true, nil
	case from.SecretKeyRef != nil:
		ref := from.SecretKeyRef
		sec, err := ec.Objects.secret(ctx, ref.Name)
		if err != nil {
			if apierrors.IsNotFound(err) && isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, err
		}
		v, ok := sec.Data[ref.Key]
		if !ok {
			if isTrue(ref.Optional) {
				return "", false, nil
			}
			return "", false, fmt.Errorf("couldn't find key %v in Secret %v/%v", ref.Key, ec.Pod.Namespace, ref.Name)
		}
		return string(v), true, nil
	}
	return "", false, errors.New("valueFrom source not supported by a process node")
}

// expandCommand applies $(VAR) expansion to command and args with the
// container's final environment, as the kubelet does.
func expandCommand(c *corev1.Container, env *envList) (command, args []string) {
	m := mappingFor(env.Map())
	for _, s := range c.Command {
		command = append(command, expandVars(s, m))
	}
	for _, s := range c.Args {
		args = append(args, expandVars(s, m))
	}
	return command, args
}

func podHostname(pod *corev1.Pod) string {
	if pod.Spec.Hostname != "" {
		return pod.Spec.Hostname
	}
	return pod.Name
}

func findContainer(pod *corev1.Pod, name string) *corev1.Container {
	for i := range pod.Spec.Containers {
		if pod.Spec.Containers[i].Name == name {
			return &pod.Spec.Containers[i]
		}
	}
	for i := range pod.Spec.InitContainers {
		if pod.Spec.InitContainers[i].Name == name {
			return &pod.Spec.InitContainers[i]
		}
	}
	return nil
}

func isTrue(b *bool) bool { return b != nil && *b }

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
