package dashboards

import (
	"regexp"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Served is a prometheus.Registerer that registers on a real registry,
// so that a binary's metrics code runs exactly as it does there, and
// records the metric names each collector describes: every name the
// binary can serve, including those of vectors that hold no series yet,
// with the _bucket, _sum and _count series of histograms and summaries.
type Served struct {
	reg   *prometheus.Registry
	names map[string]bool
}

var _ prometheus.Registerer = (*Served)(nil)

// NewServed returns an empty Served.
func NewServed() *Served {
	return &Served{reg: prometheus.NewRegistry(), names: map[string]bool{}}
}

// fqName reads a descriptor's name from its String, the only place
// client_golang shows it.
var fqName = regexp.MustCompile(`^Desc\{fqName: "([^"]+)"`)

// Register registers c and records its names.
func (s *Served) Register(c prometheus.Collector) error {
	if err := s.reg.Register(c); err != nil {
		return err
	}
	ch := make(chan *prometheus.Desc)
	go func() { c.Describe(ch); close(ch) }()
	var names []string
	for d := range ch {
		if m := fqName.FindStringSubmatch(d.String()); m != nil {
			names = append(names, m[1])
		}
	}
	switch c.(type) {
	case prometheus.Histogram, *prometheus.HistogramVec:
		s.add(names, "_bucket", "_sum", "_count")
	case prometheus.Summary, *prometheus.SummaryVec:
		s.add(names, "_sum", "_count")
	default:
		s.add(names)
		// A collector's own histograms and summaries (the Go runtime's)
		// show their kind only in what it collects.
		mc := make(chan prometheus.Metric)
		go func() { c.Collect(mc); close(mc) }()
		for m := range mc {
			var pb dto.Metric
			if m.Write(&pb) != nil {
				continue
			}
			name := fqName.FindStringSubmatch(m.Desc().String())
			switch {
			case name == nil:
			case pb.Histogram != nil:
				s.add(name[1:], "_bucket", "_sum", "_count")
			case pb.Summary != nil:
				s.add(name[1:], "_sum", "_count")
			}
		}
	}
	return nil
}

func (s *Served) add(names []string, suffixes ...string) {
	for _, n := range names {
		s.names[n] = true
		for _, suf := range suffixes {
			s.names[n+suf] = true
		}
	}
}

// MustRegister registers cs, panicking on an error, as the registry does.
func (s *Served) MustRegister(cs ...prometheus.Collector) {
	for _, c := range cs {
		if err := s.Register(c); err != nil {
			panic(err)
		}
	}
}

// Unregister unregisters c; its names stay recorded.
func (s *Served) Unregister(c prometheus.Collector) bool { return s.reg.Unregister(c) }

// Missing is the names of used that s does not serve, sorted.
func (s *Served) Missing(used []string) []string {
	var out []string
	for _, n := range used {
		if !s.names[n] {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// Len is how many names s serves.
func (s *Served) Len() int { return len(s.names) }
