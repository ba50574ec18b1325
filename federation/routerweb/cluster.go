package routerweb

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/rm/rest"
)

// gather fans a GET out and reads every answer with read; a refusal (4xx)
// is passed on as the sub-cluster gave it.
func (w *Web) gather(c echo.Context, pathQuery string, read func(answer) error) (refused bool, err error) {
	ok, ref, err := w.fanOut(c.Request().Context(), pathQuery)
	if err != nil {
		return false, err
	}
	if ref != nil {
		return true, pass(c, *ref)
	}
	for _, a := range ok {
		if err := read(a); err != nil {
			return false, yarnerr.YarnException.Wrap(fmt.Errorf("sub-cluster %s answered %s with: %w", a.sc.ID, pathQuery, err))
		}
	}
	return false, nil
}

// perSubCluster answers what YARN's Router cannot merge (the cluster
// info, the scheduler) as a list with each sub-cluster's answer marked
// with its id: {root:{"subCluster":[{…,"subClusterId":…}]}}, as
// FederationClusterInfo and FederationSchedulerTypeInfo do.
// The cluster info and the scheduler are not merged: queues of different
// sub-clusters are different queues. YARN's Router lists each
// sub-cluster's answer marked with its id, {root:{"subCluster":[{…,
// "subClusterId":…}]}}, as FederationClusterInfo and
// FederationSchedulerTypeInfo write them.
func (w *Web) perSubCluster(c echo.Context, path, root string, item func([]byte) (object, error)) error {
	var list []object
	refused, err := w.gather(c, path, func(a answer) error {
		o, err := item(a.body)
		if err != nil {
			return err
		}
		o.set("subClusterId", a.sc.ID)
		list = append(list, o)
		return nil
	})
	if refused || err != nil {
		return err
	}
	if list == nil {
		list = []object{}
	}
	return rest.WriteJSON(c, http.StatusOK, map[string]map[string][]object{root: {"subCluster": list}})
}

func (w *Web) info(c echo.Context) error {
	return w.perSubCluster(c, "/ws/v1/cluster/info", "federationClusterInfo", func(b []byte) (object, error) {
		var top struct {
			ClusterInfo json.RawMessage `json:"clusterInfo"`
		}
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, err
		}
		return decodeObject(top.ClusterInfo)
	})
}

func (w *Web) scheduler(c echo.Context) error {
	return w.perSubCluster(c, "/ws/v1/cluster/scheduler", "federationSchedulerTypeInfo", func(b []byte) (object, error) {
		var top struct {
			Scheduler struct {
				SchedulerInfo json.RawMessage `json:"schedulerInfo"`
			} `json:"scheduler"`
		}
		if err := json.Unmarshal(b, &top); err != nil {
			return nil, err
		}
		return object{{Key: "schedulerInfo", Value: top.Scheduler.SchedulerInfo}}, nil
	})
}

func (w *Web) metrics(c echo.Context) error {
	var sum rest.ClusterMetrics
	refused, err := w.gather(c, "/ws/v1/cluster/metrics", func(a answer) error {
		m, err := metricsOf(a.body)
		addMetrics(&sum, m)
		return err
	})
	if refused || err != nil {
		return err
	}
	return rest.WriteJSON(c, http.StatusOK, map[string]rest.ClusterMetrics{"clusterMetrics": sum})
}

// apps sends the query, filters and all, to every active sub-cluster and
// merges what they list.
func (w *Web) apps(c echo.Context) error { return w.mergedList(c, "apps", "app", mergeApps) }

func (w *Web) nodes(c echo.Context) error { return w.mergedList(c, "nodes", "node", mergeNodes) }

// mergedList fans the request out and answers {outer:{inner:[…]}} with
// the lists merged; inner is left out when empty, as the RM leaves it.
func (w *Web) mergedList(c echo.Context, outer, inner string, merge func([]object) []object) error {
	var all []object
	refused, err := w.gather(c, pathQuery(c), func(a answer) error {
		l, err := list(a.body, outer, inner)
		all = append(all, l...)
		return err
	})
	if refused || err != nil {
		return err
	}
	body := map[string]any{}
	if merged := merge(all); len(merged) > 0 {
		body[inner] = merged
	}
	return rest.WriteJSON(c, http.StatusOK, map[string]any{outer: body})
}

// node asks every active sub-cluster for the node and answers with the
// newest report, as FederationInterceptorREST.getNode does; a node no
// sub-cluster knows is the RM's 404.
func (w *Web) node(c echo.Context) error {
	id := c.Param("nodeid")
	ok, _, err := w.fanOut(c.Request().Context(), "/ws/v1/cluster/nodes/"+url.PathEscape(id))
	if err != nil {
		return err
	}
	var newest object
	for _, a := range ok {
		var top map[string]json.RawMessage
		if err := json.Unmarshal(a.body, &top); err != nil {
			return yarnerr.YarnException.Wrap(fmt.Errorf("sub-cluster %s answered node %s with: %w", a.sc.ID, id, err))
		}
		n, err := decodeObject(top["node"])
		if err != nil {
			return yarnerr.YarnException.Wrap(fmt.Errorf("sub-cluster %s answered node %s with: %w", a.sc.ID, id, err))
		}
		if newest == nil || newest.int("lastHealthUpdate") < n.int("lastHealthUpdate") {
			newest = n
		}
	}
	if newest == nil {
		return rest.NotFound("nodeId, " + id + ", is not found")
	}
	return rest.WriteJSON(c, http.StatusOK, map[string]object{"node": newest})
}

// appStatistics sums the sub-clusters' counts of each state and type, as
// FederationInterceptorREST.getAppStatistics merges them
// (mergeApplicationStatisticsInfo); the items keep the order the first
// answer naming them gave.
func (w *Web) appStatistics(c echo.Context) error {
	var items []rest.StatItem
	refused, err := w.gather(c, pathQuery(c), func(a answer) error {
		got, err := statItems(a.body)
		items = addStatItems(items, got)
		return err
	})
	if refused || err != nil {
		return err
	}
	return rest.WriteJSON(c, http.StatusOK, rest.AppStatistics(items))
}

// nodeLabels answers a node-label resource with the union of the
// sub-clusters' answers, as FederationInterceptorREST merges
// getClusterNodeLabels, getNodeToLabels, getLabelsToNodes and
// getLabelsOnNode: a label once (by name and exclusivity), with the nodes
// any sub-cluster puts it on; body writes the union in the resource's
// shape.
func (w *Web) nodeLabels(body func([]rest.NodeLabel) any) echo.HandlerFunc {
	return func(c echo.Context) error {
		var all []rest.NodeLabel
		refused, err := w.gather(c, pathQuery(c), func(a answer) error {
			labels, err := rest.DecodeNodeLabels(a.body)
			all = mergeLabels(all, labels)
			return err
		})
		if refused || err != nil {
			return err
		}
		return rest.WriteJSON(c, http.StatusOK, body(all))
	}
}
