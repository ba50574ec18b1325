package routerweb

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/federation/store"
	"github.com/knitdev/knit/rm/rest"
)

// pageHTML is the federation page: one row per sub-cluster, its figures
// read from the capability its RM heartbeats, as YARN's FederationBlock
// reads them. html/template escapes every value the store holds.
const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head><meta charset="utf-8"><title>Federation</title>
<style>
body{font-family:sans-serif;font-size:13px;margin:1em}
table{border-collapse:collapse}
th,td{border:1px solid #ccc;padding:3px 6px;text-align:left}
th{background:#eee}
td.n{text-align:right}
</style></head>
<body>
<h1>Federation</h1>
<p>{{len .SubClusters}} sub-cluster(s), {{.Active}} active, as of {{.Now}}.</p>
<table id="subclusters">
<thead><tr>
<th>SubCluster</th><th>State</th><th>Last Start Time</th><th>Last Heartbeat</th>
<th>Apps Submitted</th><th>Apps Pending</th><th>Apps Running</th><th>Apps Failed</th><th>Apps Killed</th><th>Apps Completed</th>
<th>Containers Allocated</th><th>Memory Used / Total (MB)</th><th>VCores Used / Total</th>
<th>Active Nodes</th><th>Lost Nodes</th><th>Unhealthy Nodes</th><th>Decommissioned Nodes</th>
</tr></thead>
<tbody>
{{range .SubClusters}}<tr>
<td>{{if .WebURL}}<a href="{{.WebURL}}">{{.ID}}</a>{{else}}{{.ID}}{{end}}</td>
<td>{{.State}}</td><td>{{.Started}}</td><td>{{.Heartbeat}}</td>
{{with .Metrics}}<td class="n">{{.AppsSubmitted}}</td><td class="n">{{.AppsPending}}</td><td class="n">{{.AppsRunning}}</td><td class="n">{{.AppsFailed}}</td><td class="n">{{.AppsKilled}}</td><td class="n">{{.AppsCompleted}}</td>
<td class="n">{{.ContainersAllocated}}</td><td class="n">{{.AllocatedMB}} / {{.TotalMB}}</td><td class="n">{{.AllocatedVirtualCores}} / {{.TotalVirtualCores}}</td>
<td class="n">{{.ActiveNodes}}</td><td class="n">{{.LostNodes}}</td><td class="n">{{.UnhealthyNodes}}</td><td class="n">{{.DecommissionedNodes}}</td>
{{else}}<td colspan="13">{{.Capability}}</td>{{end}}
</tr>
{{end}}</tbody>
</table>
</body>
</html>
`

func newPageTemplate() (*template.Template, error) {
	return template.New("federation").Parse(pageHTML)
}

// pageRow is one sub-cluster on the page.
type pageRow struct {
	ID, State, Started, Heartbeat string
	// WebURL is the sub-cluster RM's web UI; empty if it has none.
	WebURL string
	// Metrics are nil when the capability cannot be read; Capability
	// says why.
	Metrics    *rest.ClusterMetrics
	Capability string
}

func (w *Web) federationPage(c echo.Context) error {
	ctx := c.Request().Context()
	all, err := w.store.GetSubClusters(ctx, false)
	if err != nil {
		return fmt.Errorf("routerweb: sub-clusters of the federation page: %w", err)
	}
	all = slices.SortedFunc(slices.Values(all), func(a, b store.SubClusterInfo) int { return strings.Compare(a.ID, b.ID) })
	now := w.now()
	data := struct {
		Now         string
		Active      int
		SubClusters []pageRow
	}{Now: now.UTC().Format(time.RFC1123)}
	for _, sc := range all {
		row := pageRow{ID: sc.ID, State: sc.State.String(), Started: stamp(sc.LastStartTime), Heartbeat: stamp(sc.LastHeartBeat)}
		if !sc.LastHeartBeat.IsZero() {
			row.Heartbeat += fmt.Sprintf(" (%s ago)", now.Sub(sc.LastHeartBeat).Round(time.Second))
		}
		if sc.State.Active() {
			data.Active++
		}
		if sc.RMWebServiceAddress != "" {
			row.WebURL = "http://" + sc.RMWebServiceAddress + "/cluster"
		}
		switch m, err := metricsOf([]byte(sc.Capability)); {
		case sc.Capability == "":
			row.Capability = "no heartbeat yet"
		case err != nil:
			row.Capability = "capability unreadable: " + err.Error()
		default:
			row.Metrics = &m
		}
		data.SubClusters = append(data.SubClusters, row)
	}
	var b bytes.Buffer
	if err := w.page.Execute(&b, data); err != nil {
		return fmt.Errorf("routerweb: federation page: %w", err)
	}
	return c.HTMLBlob(http.StatusOK, b.Bytes())
}

func stamp(t time.Time) string {
	if t.IsZero() {
		return "N/A"
	}
	return t.UTC().Format(time.RFC1123)
}
