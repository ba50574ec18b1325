package procnode

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const defaultFileMode = 0o644

// volumeContext is what setting up a pod's volumes needs.
type volumeContext struct {
	Pod         *corev1.Pod
	Paths       podPaths
	Address     string
	Allocatable corev1.ResourceList
	Objects     *objectSource
}

// setupVolumes fills the pod's volume folders: emptyDir becomes an empty
// folder, hostPath is checked or created on the host, and secret,
// configMap, downwardAPI and projected volumes are written as files once.
// It is idempotent, so a pod whose Secret is missing is simply set up
// again on the next sync. Contents are not refreshed later: a process node
// is for tests and local runs, where projected files do not change while a
// pod lives (the service account token the API server issues for
// kube-api-access volumes is valid far longer than its nominal hour).
func setupVolumes(ctx context.Context, vc volumeContext) error {
	for i := range vc.Pod.Spec.Volumes {
		v := &vc.Pod.Spec.Volumes[i]
		if err := setupVolume(ctx, vc, v); err != nil {
			return fmt.Errorf("volume %q: %w", v.Name, err)
		}
	}
	return nil
}

func setupVolume(ctx context.Context, vc volumeContext, v *corev1.Volume) error {
	dir := vc.Paths.volume(v.Name)
	switch {
	case v.EmptyDir != nil:
		// medium: Memory is a plain folder too; there is no tmpfs to mount.
		return os.MkdirAll(dir, 0o777)
	case v.HostPath != nil:
		return setupHostPath(v.HostPath)
	case v.Secret != nil:
		return writeSecretVolume(ctx, vc, dir, v.Secret)
	case v.ConfigMap != nil:
		return writeConfigMapVolume(ctx, vc, dir, v.ConfigMap)
	case v.DownwardAPI != nil:
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		return writeDownwardAPI(vc, dir, v.DownwardAPI.Items, v.DownwardAPI.DefaultMode)
	case v.Projected != nil:
		return writeProjected(ctx, vc, dir, v.Projected)
	}
	return errors.New("volume type not supported by a process node (emptyDir, hostPath, secret, configMap, downwardAPI and projected are)")
}

func setupHostPath(hp *corev1.HostPathVolumeSource) error {
	t := corev1.HostPathUnset
	if hp.Type != nil {
		t = *hp.Type
	}
	switch t {
	case corev1.HostPathUnset:
		// No checks for the unset type; a missing path becomes a folder,
		// as most uses of an untyped hostPath expect one.
		if _, err := os.Lstat(hp.Path); err == nil {
			return nil
		}
		return os.MkdirAll(hp.Path, 0o755)
	case corev1.HostPathDirectoryOrCreate:
		return os.MkdirAll(hp.Path, 0o755)
	case corev1.HostPathFileOrCreate:
		if err := os.MkdirAll(filepath.Dir(hp.Path), 0o755); err != nil {
			return err
		}
		f, err := os.OpenFile(hp.Path, os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		return f.Close()
	case corev1.HostPathDirectory:
		if st, err := os.Stat(hp.Path); err != nil || !st.IsDir() {
			return fmt.Errorf("hostPath type check failed: %s is not a directory", hp.Path)
		}
	case corev1.HostPathFile:
		if st, err := os.Stat(hp.Path); err != nil || !st.Mode().IsRegular() {
			return fmt.Errorf("hostPath type check failed: %s is not a file", hp.Path)
		}
	default:
		if _, err := os.Stat(hp.Path); err != nil {
			return fmt.Errorf("hostPath type check failed: %w", err)
		}
	}
	return nil
}

func writeSecretVolume(ctx context.Context, vc volumeContext, dir string, src *corev1.SecretVolumeSource) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	sec, err := vc.Objects.secret(ctx, src.SecretName)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(src.Optional) {
			return nil
		}
		return err
	}
	return writeKeyedFiles(dir, sec.Data, src.Items, src.DefaultMode, isTrue(src.Optional), "Secret "+src.SecretName)
}

func writeConfigMapVolume(ctx context.Context, vc volumeContext, dir string, src *corev1.ConfigMapVolumeSource) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cm, err := vc.Objects.configMap(ctx, src.Name)
	if err != nil {
		if apierrors.IsNotFound(err) && isTrue(src.Optional) {
			return nil
		}
		return err
	}
	return writeKeyedFiles(dir, configMapData(cm), src.Items, src.DefaultMode, isTrue(src.Optional), "ConfigMap "+src.Name)
}

func configMapData(cm *corev1.ConfigMap) map[string][]byte {
	data := make(map[string][]byte, len(cm.Data)+len(cm.BinaryData))
	for k, v := range cm.BinaryData {
		data[k] = v
	}
	for k, v := range cm.Data {
		data[k] = []byte(v)
	}
	return data
}

// writeKeyedFiles writes a Secret's or ConfigMap's keys: every key as a
// file of its name, or only the listed items at their paths.
func writeKeyedFiles(dir string, data map[string][]byte, items []corev1.KeyToPath, defaultMode *int32, optional bool, what string) error {
	if len(items) == 0 {
		for _, k := range sortedKeys(data) {
			if err := writeVolumeFile(dir, k, data[k], fileMode(nil, defaultMode)); err != nil {
				return err
			}
		}
		return nil
	}
	for _, it := range items {
		v, ok := data[it.Key]
		if !ok {
			if optional {
				continue
			}
			return fmt.Errorf("couldn't find key %s in %s", it.Key, what)
		}
		if err := writeVolumeFile(dir, it.Path, v, fileMode(it.Mode, defaultMode)); err != nil {
			return err
		}
	}
	return nil
}

func writeDownwardAPI(vc volumeContext, dir string, items []corev1.DownwardAPIVolumeFile, defaultMode *int32) error {
	for _, it := range items {
		var v string
		var err error
		switch {
		case it.FieldRef != nil:
			v, err = podFieldValue(vc.Pod, it.FieldRef.FieldPath, vc.Address)
		case it.ResourceFieldRef != nil:
			c := findContainer(vc.Pod, it.ResourceFieldRef.ContainerName)
			if c == nil {
				return fmt.Errorf("downwardAPI item %s names unknown container %q", it.Path, it.ResourceFieldRef.ContainerName)
			}
			v, err = containerResourceValue(it.ResourceFieldRef, c, vc.Allocatable)
		default:
			err = errors.New("item has neither fieldRef nor resourceFieldRef")
		}
		if err != nil {
			return fmt.Errorf("downwardAPI item %s: %w", it.Path, err)
		}
		if err := writeVolumeFile(dir, it.Path, []byte(v), fileMode(it.Mode, defaultMode)); err != nil {
			return err
		}
	}
	return nil
}

func writeProjected(ctx context.Context, vc volumeContext, dir string, src *corev1.ProjectedVolumeSource) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, s := range src.Sources {
		switch {
		case s.Secret != nil:
			sec, err := vc.Objects.secret(ctx, s.Secret.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(s.Secret.Optional) {
					continue
				}
				return err
			}
			if err := writeKeyedFiles(dir, sec.Data, s.Secret.Items, src.DefaultMode, isTrue(s.Secret.Optional), "Secret "+s.Secret.Name); err != nil {
				return err
			}
		case s.ConfigMap != nil:
			cm, err := vc.Objects.configMap(ctx, s.ConfigMap.Name)
			if err != nil {
				if apierrors.IsNotFound(err) && isTrue(s.ConfigMap.Optional) {
					continue
				}
				return err
			}
			if err := writeKeyedFiles(dir, configMapData(cm), s.ConfigMap.Items, src.DefaultMode, isTrue(s.ConfigMap.Optional), "ConfigMap "+s.ConfigMap.Name); err != nil {
				return err
			}
		case s.DownwardAPI != nil:
			if err := writeDownwardAPI(vc, dir, s.DownwardAPI.Items, src.DefaultMode); err != nil {
				return err
			}
		case s.ServiceAccountToken != nil:
			token, err := requestToken(ctx, vc, s.ServiceAccountToken)
			if err != nil {
				return err
			}
			mode := fileMode(nil, src.DefaultMode)
			if err := writeVolumeFile(dir, s.ServiceAccountToken.Path, []byte(token), mode); err != nil {
				return err
			}
		default:
			return errors.New("projected source not supported by a process node")
		}
	}
	return nil
}

// requestToken asks the TokenRequest API for a token bound to the pod, as
// the kubelet's token manager does for serviceAccountToken projections.
func requestToken(ctx context.Context, vc volumeContext, p *corev1.ServiceAccountTokenProjection) (string, error) {
	sa := vc.Pod.Spec.ServiceAccountName
	if sa == "" {
		sa = "default"
	}
	tr := &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{
			ExpirationSeconds: p.ExpirationSeconds,
			BoundObjectRef: &authenticationv1.BoundObjectReference{
				APIVersion: "v1", Kind: "Pod", Name: vc.Pod.Name, UID: vc.Pod.UID,
			},
		},
	}
	if p.Audience != "" {
		tr.Spec.Audiences = []string{p.Audience}
	}
	out, err := vc.Objects.client.CoreV1().ServiceAccounts(vc.Pod.Namespace).CreateToken(ctx, sa, tr, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("token for service account %s/%s: %w", vc.Pod.Namespace, sa, err)
	}
	return out.Status.Token, nil
}

func fileMode(item, def *int32) fs.FileMode {
	switch {
	case item != nil:
		return fs.FileMode(*item) & fs.ModePerm
	case def != nil:
		return fs.FileMode(*def) & fs.ModePerm
	}
	return defaultFileMode
}

// writeVolumeFile writes rel (a relative path from the API, never leaving
// dir) atomically, so a process never reads half a file.
func writeVolumeFile(dir, rel string, data []byte, mode fs.FileMode) error {
	clean := path.Clean(rel)
	if rel == "" || path.IsAbs(rel) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("volume file path %q must be relative and stay inside the volume", rel)
	}
	p := filepath.Join(dir, filepath.FromSlash(clean))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return writeFileAtomic(p, data, mode)
}

// mountMappings maps each of c's volumeMounts to the host folder (or file,
// with subPath) it stands for, plus the terminationMessagePath to
// termFile. env expands subPathExpr.
func mountMappings(pod *corev1.Pod, c *corev1.Container, paths podPaths, env *envList, termFile string) ([]pathMapping, error) {
	var maps []pathMapping
	for _, vm := range c.VolumeMounts {
		var vol *corev1.Volume
		for i := range pod.Spec.Volumes {
			if pod.Spec.Volumes[i].Name == vm.Name {
				vol = &pod.Spec.Volumes[i]
			}
		}
		if vol == nil {
			return nil, fmt.Errorf("volumeMount %q names no volume of the pod", vm.Name)
		}
		base := paths.volume(vol.Name)
		if vol.HostPath != nil {
			base = vol.HostPath.Path
		}
		sub := vm.SubPath
		if vm.SubPathExpr != "" {
			sub = expandVars(vm.SubPathExpr, mappingFor(env.Map()))
		}
		if sub != "" {
			clean := path.Clean(sub)
			if path.IsAbs(sub) || clean == ".." || strings.HasPrefix(clean, "../") {
				return nil, fmt.Errorf("volumeMount %q: subPath %q must stay inside the volume", vm.Name, sub)
			}
			base = filepath.Join(base, filepath.FromSlash(clean))
			// As the kubelet does, a subPath that does not exist yet is
			// created as a folder.
			if _, err := os.Stat(base); errors.Is(err, fs.ErrNotExist) {
				if err := os.MkdirAll(base, 0o777); err != nil {
					return nil, fmt.Errorf("volumeMount %q: %w", vm.Name, err)
				}
			}
		}
		maps = append(maps, pathMapping{From: vm.MountPath, To: base})
	}
	tp := c.TerminationMessagePath
	if tp == "" {
		tp = corev1.TerminationMessagePathDefault
	}
	maps = append(maps, pathMapping{From: tp, To: termFile})
	return maps, nil
}
