package routerweb

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/knitdev/knit/rm/rest"
)

// unmanagedAMName and partialReport start the names of the UAMs the
// AMRMProxy launches and of the reports merged from UAMs alone
// (UnmanagedApplicationManager.APP_NAME, RouterWebServiceUtil.PARTIAL_REPORT).
const (
	unmanagedAMName = "UnmanagedAM"
	partialReport   = "Partial Report "
)

// object is a JSON object keeping its keys' order, so that a merged answer
// reads as the RM wrote it; values stay raw.
type object rest.Object

func decodeObject(b []byte) (object, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, fmt.Errorf("not a JSON object: %.40s", b)
	}
	var o object
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o = append(o, rest.Field{Key: tok.(string), Value: v})
	}
	return o, nil
}

func (o object) MarshalJSON() ([]byte, error) { return rest.Object(o).MarshalJSON() }

func (o object) raw(key string) (json.RawMessage, bool) {
	for _, f := range o {
		if f.Key == key {
			r, ok := f.Value.(json.RawMessage)
			return r, ok
		}
	}
	return nil, false
}

func (o object) str(key string) string {
	var s string
	if r, ok := o.raw(key); ok {
		_ = json.Unmarshal(r, &s)
	}
	return s
}

func (o object) int(key string) int64 {
	r, _ := o.raw(key)
	n, _ := strconv.ParseInt(string(r), 10, 64)
	return n
}

// set replaces key's value, or appends the key.
func (o *object) set(key string, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		return
	}
	for i, f := range *o {
		if f.Key == key {
			(*o)[i].Value = json.RawMessage(b)
			return
		}
	}
	*o = append(*o, rest.Field{Key: key, Value: json.RawMessage(b)})
}

func (o *object) add(key string, n int64) {
	if _, ok := o.raw(key); ok || n != 0 {
		o.set(key, o.int(key)+n)
	}
}

// list reads the array under {"outer":{"inner":[…]}}, as the RM writes its
// lists: the inner key is absent when the list is empty.
func list(body []byte, outer, inner string) ([]object, error) {
	var top map[string]map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil {
		return nil, err
	}
	raw, ok := top[outer][inner]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, err
	}
	out := make([]object, 0, len(items))
	for _, it := range items {
		o, err := decodeObject(it)
		if err != nil {
			return nil, err
		}
		out = append(out, o)
	}
	return out, nil
}

// mergeApps merges the applications the sub-clusters report, as YARN's
// RouterWebServiceUtil.mergeAppsInfo does without partial results: an
// application's report from its home (the one with an AM) absorbs what its
// UAMs on other sub-clusters report; UAMs whose AM no sub-cluster reported
// are left out when they are the federation's own (named UnmanagedAM…) or
// several, and kept when they are a lone unmanaged AM of the user's.
// Applications keep the order they were first reported in.
func mergeApps(all []object) []object {
	var order []string
	am := map[string]*object{}
	uams := map[string][]object{}
	for _, a := range all {
		id := a.str("id")
		if _, seen := am[id]; !seen && len(uams[id]) == 0 {
			order = append(order, id)
		}
		if _, ok := a.raw("amHostHttpAddress"); ok {
			home := a
			am[id] = &home
			continue
		}
		uams[id] = append(uams[id], a)
	}
	var out []object
	for _, id := range order {
		if home, ok := am[id]; ok {
			for _, u := range uams[id] {
				mergeAMWithUAM(home, u)
			}
			out = append(out, *home)
			continue
		}
		if u := uams[id]; len(u) == 1 {
			name := u[0].str("name")
			if name != "" && !strings.HasPrefix(name, unmanagedAMName) && !strings.HasPrefix(name, partialReport) {
				out = append(out, u[0])
			}
		}
	}
	return out
}

// mergeAMWithUAM adds a UAM's figures to its AM's report, as
// RouterWebServiceUtil.mergeAMWithUAM: preemption always, use and
// requests while both run.
func mergeAMWithUAM(am *object, uam object) {
	for _, k := range []string{"preemptedResourceMB", "preemptedResourceVCores", "numNonAMContainerPreempted",
		"numAMContainerPreempted", "preemptedMemorySeconds", "preemptedVcoreSeconds"} {
		am.add(k, uam.int(k))
	}
	if am.str("state") != "RUNNING" || uam.str("state") != "RUNNING" {
		return
	}
	for _, k := range []string{"allocatedMB", "allocatedVCores", "reservedMB", "reservedVCores", "runningContainers",
		"memorySeconds", "vcoreSeconds"} {
		am.add(k, uam.int(k))
	}
	var mine, theirs []json.RawMessage
	if r, ok := am.raw("resourceRequests"); ok {
		_ = json.Unmarshal(r, &mine)
	}
	if r, ok := uam.raw("resourceRequests"); ok {
		_ = json.Unmarshal(r, &theirs)
	}
	if len(theirs) > 0 {
		am.set("resourceRequests", append(mine, theirs...))
	}
}

// mergeNodes keeps one report per node id, the newest by lastHealthUpdate,
// as RouterWebServiceUtil.deleteDuplicateNodesInfo does; nodes keep the
// order they were first reported in.
func mergeNodes(all []object) []object {
	var out []object
	at := map[string]int{}
	for _, n := range all {
		id := n.str("id")
		i, ok := at[id]
		if !ok {
			at[id] = len(out)
			out = append(out, n)
			continue
		}
		if out[i].int("lastHealthUpdate") < n.int("lastHealthUpdate") {
			out[i] = n
		}
	}
	return out
}

// addMetrics adds b's figures to a, those RouterWebServiceUtil.mergeMetrics
// adds; the rest (utilization, partitions) stay as the zero federation's.
func addMetrics(a *rest.ClusterMetrics, b rest.ClusterMetrics) {
	a.AppsSubmitted += b.AppsSubmitted
	a.AppsCompleted += b.AppsCompleted
	a.AppsPending += b.AppsPending
	a.AppsRunning += b.AppsRunning
	a.AppsFailed += b.AppsFailed
	a.AppsKilled += b.AppsKilled
	a.ReservedMB += b.ReservedMB
	a.AvailableMB += b.AvailableMB
	a.AllocatedMB += b.AllocatedMB
	a.ReservedVirtualCores += b.ReservedVirtualCores
	a.AvailableVirtualCores += b.AvailableVirtualCores
	a.AllocatedVirtualCores += b.AllocatedVirtualCores
	a.ContainersAllocated += b.ContainersAllocated
	a.ContainersReserved += b.ContainersReserved
	a.ContainersPending += b.ContainersPending
	a.TotalMB += b.TotalMB
	a.TotalVirtualCores += b.TotalVirtualCores
	a.TotalNodes += b.TotalNodes
	a.LostNodes += b.LostNodes
	a.UnhealthyNodes += b.UnhealthyNodes
	a.DecommissioningNodes += b.DecommissioningNodes
	a.DecommissionedNodes += b.DecommissionedNodes
	a.RebootedNodes += b.RebootedNodes
	a.ActiveNodes += b.ActiveNodes
	a.ShutdownNodes += b.ShutdownNodes
}

// metricsOf reads {"clusterMetrics":{…}}, as the RM answers /metrics and
// as the sub-clusters' heartbeats write their capability.
func metricsOf(b []byte) (rest.ClusterMetrics, error) {
	var m struct {
		ClusterMetrics *rest.ClusterMetrics `json:"clusterMetrics"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return rest.ClusterMetrics{}, err
	}
	if m.ClusterMetrics == nil {
		return rest.ClusterMetrics{}, errors.New("no clusterMetrics")
	}
	return *m.ClusterMetrics, nil
}

// statItems reads an appstatistics answer's items.
func statItems(b []byte) ([]rest.StatItem, error) {
	var body struct {
		AppStatInfo struct{ StatItem json.RawMessage }
	}
	if err := json.Unmarshal(b, &body); err != nil {
		return nil, err
	}
	return rest.OneOrMany[rest.StatItem](body.AppStatInfo.StatItem)
}

// addStatItems adds more's counts to those of the same state and type in
// sum, and appends the others.
func addStatItems(sum, more []rest.StatItem) []rest.StatItem {
next:
	for _, m := range more {
		for i := range sum {
			if sum[i].State == m.State && sum[i].Type == m.Type {
				sum[i].Count += m.Count
				continue next
			}
		}
		sum = append(sum, m)
	}
	return sum
}

// mergeLabels adds more's labels to all: a label already there (same name
// and exclusivity) gains the nodes it lacked. The result is by name.
func mergeLabels(all, more []rest.NodeLabel) []rest.NodeLabel {
next:
	for _, m := range more {
		for i := range all {
			if all[i].Name == m.Name && all[i].Exclusive == m.Exclusive {
				for _, n := range m.Nodes {
					if !slices.Contains(all[i].Nodes, n) {
						all[i].Nodes = append(all[i].Nodes, n)
					}
				}
				continue next
			}
		}
		all = append(all, rest.NodeLabel{Name: m.Name, Exclusive: m.Exclusive, Nodes: slices.Clone(m.Nodes)})
	}
	slices.SortStableFunc(all, func(a, b rest.NodeLabel) int { return strings.Compare(a.Name, b.Name) })
	return all
}
