package rest

import (
	"bytes"
	"net/http"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnerr"
)

// NodeLabel is one cluster node label and the nodes (host:port) that
// carry it.
type NodeLabel struct {
	Name      string
	Exclusive bool
	Nodes     []string
}

// nodeLabelInfo is Hadoop's NodeLabelInfo.
type nodeLabelInfo struct {
	Name        string `json:"name"`
	Exclusivity bool   `json:"exclusivity"`
}

// nodeLabelsInfo is Hadoop's NodeLabelsInfo.
type nodeLabelsInfo struct {
	NodeLabelInfo []nodeLabelInfo `json:"nodeLabelInfo,omitempty"`
}

// nodeIDsInfo is Hadoop's NodeIDsInfo.
type nodeIDsInfo struct {
	Nodes []string `json:"nodes,omitempty"`
}

// beanMap is a Java map of JAXB beans in Jersey's natural notation: one
// "entry" key per pair, {} when empty.
type beanMap []struct{ Key, Value any }

func (m beanMap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, e := range m {
		if i > 0 {
			b.WriteByte(',')
		}
		v, err := marshal(Object{{Key: "key", Value: e.Key}, {Key: "value", Value: e.Value}})
		if err != nil {
			return nil, err
		}
		b.WriteString(`"entry":`)
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

func labelInfo(l NodeLabel) nodeLabelInfo {
	return nodeLabelInfo{Name: l.Name, Exclusivity: l.Exclusive}
}

// NodeLabelsBody is GET /get-node-labels's body for the labels.
func NodeLabelsBody(labels []NodeLabel) any {
	var info nodeLabelsInfo
	for _, l := range labels {
		info.NodeLabelInfo = append(info.NodeLabelInfo, labelInfo(l))
	}
	return map[string]nodeLabelsInfo{"nodeLabelsInfo": info}
}

// NodeToLabelsBody is GET /get-node-to-labels's body: each node carrying
// a label, with its labels, in the order the labels list them.
func NodeToLabelsBody(labels []NodeLabel) any {
	var order []string
	byNode := map[string]*nodeLabelsInfo{}
	for _, l := range labels {
		for _, n := range l.Nodes {
			if byNode[n] == nil {
				byNode[n] = &nodeLabelsInfo{}
				order = append(order, n)
			}
			byNode[n].NodeLabelInfo = append(byNode[n].NodeLabelInfo, labelInfo(l))
		}
	}
	m := beanMap{}
	for _, n := range order {
		m = append(m, struct{ Key, Value any }{n, byNode[n]})
	}
	return map[string]any{"nodeToLabelsInfo": map[string]beanMap{"nodeToLabels": m}}
}

// LabelsToNodesBody is GET /label-mappings's body: each label asked (all
// when none is) that nodes carry, with its nodes.
func LabelsToNodesBody(labels []NodeLabel, asked []string) any {
	m := beanMap{}
	for _, l := range labels {
		if len(l.Nodes) == 0 || (len(asked) > 0 && !contains(asked, l.Name)) {
			continue
		}
		m = append(m, struct{ Key, Value any }{labelInfo(l), nodeIDsInfo{Nodes: l.Nodes}})
	}
	return map[string]any{"labelsToNodesInfo": map[string]beanMap{"labelsToNodes": m}}
}

// numberFormat is Integer.parseInt's NumberFormatException.
func numberFormat(s string) *yarnerr.Error {
	return yarnerr.NumberFormat.New(`For input string: "` + s + `"`)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (s *server) nodeLabels(c echo.Context) error {
	labels, err := s.cfg.Cluster.NodeLabels(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, NodeLabelsBody(labels))
}

func (s *server) nodeToLabels(c echo.Context) error {
	labels, err := s.cfg.Cluster.NodeLabels(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, NodeToLabelsBody(labels))
}

func (s *server) labelsToNodes(c echo.Context) error {
	labels, err := s.cfg.Cluster.NodeLabels(c.Request().Context())
	if err != nil {
		return err
	}
	return writeJSON(c, http.StatusOK, LabelsToNodesBody(labels, c.QueryParams()["labels"]))
}

// labelsOnNode is RMWebServices.getLabelsOnNode: the labels of the node,
// none for a node no label is on; a node named without a port stands for
// every node manager of its host (port 0, toNodeIdWithDefaultPort).
func (s *server) labelsOnNode(c echo.Context) error {
	id := c.Param("nodeid")
	host, port, hasPort := strings.Cut(id, ":")
	if hasPort {
		if _, err := strconv.ParseInt(port, 10, 32); err != nil {
			return exception(http.StatusBadRequest, numberFormat(port))
		}
	} else {
		port = "0"
	}
	labels, err := s.cfg.Cluster.NodeLabels(c.Request().Context())
	if err != nil {
		return err
	}
	var on []NodeLabel
	for _, l := range labels {
		for _, n := range l.Nodes {
			h, p, _ := strings.Cut(n, ":")
			if h == host && (port == "0" || p == port) {
				on = append(on, l)
				break
			}
		}
	}
	return writeJSON(c, http.StatusOK, NodeLabelsBody(on))
}
