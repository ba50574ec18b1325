package rm

import (
	"fmt"
	"io"
	"os"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/knitdev/knit/rm/queues"
)

// maxPodTemplateBytes bounds a queue's pod template file.
const maxPodTemplateBytes = 1 << 20

// podTemplates are the queues' pod templates, by the path the queue names.
type podTemplates map[string]*corev1.PodTemplateSpec

// loadPodTemplates reads the pod template of every queue that names one
// (knit.queue.<path>.pod-template), so that a bad file refuses the
// configuration instead of failing every pod of the queue later.
func loadPodTemplates(tree *queues.Tree) (podTemplates, error) {
	out := podTemplates{}
	for _, q := range tree.Queues() {
		path := q.Kube.PodTemplate
		if path == "" || out[path] != nil {
			continue
		}
		t, err := readPodTemplate(path)
		if err != nil {
			return nil, fmt.Errorf("pod template of queue %s: %w", q.Path, err)
		}
		out[path] = t
	}
	return out, nil
}

func readPodTemplate(path string) (*corev1.PodTemplateSpec, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxPodTemplateBytes+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(data) > maxPodTemplateBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxPodTemplateBytes)
	}
	t, err := decodePodTemplate(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// decodePodTemplate reads a PodTemplate or a Pod, in YAML or JSON, as
// kubectl would: what it holds for the pod is the template.
func decodePodTemplate(data []byte) (*corev1.PodTemplateSpec, error) {
	obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(data, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	switch o := obj.(type) {
	case *corev1.PodTemplate:
		return &o.Template, nil
	case *corev1.Pod:
		return &corev1.PodTemplateSpec{ObjectMeta: o.ObjectMeta, Spec: o.Spec}, nil
	default:
		return nil, fmt.Errorf("a %s, not a PodTemplate or a Pod", gvk.Kind)
	}
}
