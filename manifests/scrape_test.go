package manifests

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/discovery/kubernetes"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/relabel"
	"github.com/prometheus/prometheus/util/strutil"
	"go.yaml.in/yaml/v2"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// scrapeFile is the part of a Prometheus configuration file
// prometheus/prometheus.yml writes, decoded with Prometheus's own types
// (their YAML decoding validates), strictly: a field Prometheus does not
// know fails. Debian's promtool is built without Kubernetes discovery, so
// it cannot check this file.
type scrapeFile struct {
	Global struct {
		ScrapeInterval model.Duration `yaml:"scrape_interval"`
		ScrapeTimeout  model.Duration `yaml:"scrape_timeout"`
	} `yaml:"global"`
	ScrapeConfigs []struct {
		JobName             string                 `yaml:"job_name"`
		KubernetesSDConfigs []*kubernetes.SDConfig `yaml:"kubernetes_sd_configs"`
		RelabelConfigs      []*relabel.Config      `yaml:"relabel_configs"`
	} `yaml:"scrape_configs"`
}

// TestThePlainPrometheusConfigScrapesWhatThePodsAnnounce: the scrape
// configuration decodes as Prometheus decodes it, and its relabelling,
// applied to what Kubernetes discovery says of the rendered knit-rm and
// knit-node pods, scrapes each on the port and path its annotations name,
// which are the ports the binaries serve /metrics on; a pod without the
// annotation is not scraped.
func TestThePlainPrometheusConfigScrapesWhatThePodsAnnounce(t *testing.T) {
	b, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f scrapeFile
	if err := yaml.UnmarshalStrict(b, &f); err != nil {
		t.Fatalf("prometheus/prometheus.yml: %v", err)
	}
	if len(f.ScrapeConfigs) != 1 || len(f.ScrapeConfigs[0].KubernetesSDConfigs) != 1 ||
		f.ScrapeConfigs[0].KubernetesSDConfigs[0].Role != kubernetes.RolePod || f.Global.ScrapeTimeout > f.Global.ScrapeInterval {
		t.Fatalf("want one pod-role scrape job, timeout within the interval: %+v", f)
	}
	sc := f.ScrapeConfigs[0]
	for _, c := range sc.RelabelConfigs {
		if err := c.Validate(model.UTF8Validation); err != nil {
			t.Fatalf("relabel %+v: %v", c, err)
		}
	}

	r := render(t, "base")
	rm := one[*appsv1.Deployment](t, r, "knit", "knit-rm").Spec.Template
	node := one[*appsv1.DaemonSet](t, r, "knit", "knit-node").Spec.Template
	tests := []struct {
		name     string
		pod      corev1.PodTemplateSpec
		wantPort string // where the binary serves /metrics
	}{
		{"knit-rm on its web port", rm, portNamed(t, rm.Spec, "knit-rm", "web")},
		{"knit-node on the NM web port", node, flagValue(t, node.Spec, "knit-node", "--nm-web-port")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var scraped []string
			for _, target := range discoveredTargets(tt.pod, sc.JobName) {
				out, keep := relabel.Process(target, sc.RelabelConfigs...)
				if !keep {
					t.Fatalf("target %s dropped", target)
				}
				scraped = append(scraped, out.Get(model.AddressLabel)+out.Get(model.MetricsPathLabel)+" job="+out.Get(model.JobLabel))
			}
			want := "10.0.0.7:" + tt.wantPort + "/metrics job=" + tt.pod.Labels["app.kubernetes.io/name"]
			for _, s := range scraped {
				if s != want {
					t.Errorf("scrapes %s, want %s", s, want)
				}
			}
			// Without the annotation, no target.
			quiet := *tt.pod.DeepCopy()
			delete(quiet.Annotations, "prometheus.io/scrape")
			for _, target := range discoveredTargets(quiet, sc.JobName) {
				if _, keep := relabel.Process(target, sc.RelabelConfigs...); keep {
					t.Errorf("a pod without prometheus.io/scrape is scraped: %s", target)
				}
			}
		})
	}
}

// discoveredTargets are the targets Kubernetes discovery's pod role makes
// of a pod on 10.0.0.7: one per declared container port, with the pod's
// labels and annotations as __meta_kubernetes_pod_ labels.
func discoveredTargets(pod corev1.PodTemplateSpec, job string) []labels.Labels {
	base := map[string]string{
		model.JobLabel:                    job,
		model.MetricsPathLabel:            "/metrics",
		"__meta_kubernetes_namespace":     "knit",
		"__meta_kubernetes_pod_name":      "pod-1",
		"__meta_kubernetes_pod_node_name": "node-1",
	}
	for k, v := range pod.Labels {
		base["__meta_kubernetes_pod_label_"+strutil.SanitizeLabelName(k)] = v
	}
	for k, v := range pod.Annotations {
		base["__meta_kubernetes_pod_annotation_"+strutil.SanitizeLabelName(k)] = v
		base["__meta_kubernetes_pod_annotationpresent_"+strutil.SanitizeLabelName(k)] = "true"
	}
	var out []labels.Labels
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			l := map[string]string{model.AddressLabel: "10.0.0.7:" + strconv.Itoa(int(p.ContainerPort))}
			for k, v := range base {
				l[k] = v
			}
			out = append(out, labels.FromMap(l))
		}
	}
	return out
}

func portNamed(t *testing.T, spec corev1.PodSpec, container, port string) string {
	t.Helper()
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if c.Name == container && p.Name == port {
				return strconv.Itoa(int(p.ContainerPort))
			}
		}
	}
	t.Fatalf("no port %s on container %s", port, container)
	return ""
}

func flagValue(t *testing.T, spec corev1.PodSpec, container, flag string) string {
	t.Helper()
	for _, c := range spec.Containers {
		if c.Name != container {
			continue
		}
		for _, a := range c.Args {
			if v, ok := strings.CutPrefix(a, flag+"="); ok {
				return v
			}
		}
	}
	t.Fatalf("no %s on container %s", flag, container)
	return ""
}
