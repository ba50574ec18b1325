package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
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

// beanMap is a Java map in Jersey's natural notation: one "entry" key per
// pair, {} when empty; its keys and values are written as JSON values.
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

// numberFormat is Integer.parseInt's or Long.parseLong's
// NumberFormatException.
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

// labelsAs answers with the cluster's node labels in body's shape.
func (s *server) labelsAs(body func([]NodeLabel) any) echo.HandlerFunc {
	return func(c echo.Context) error {
		labels, err := s.cfg.Cluster.NodeLabels(c.Request().Context())
		if err != nil {
			return err
		}
		return writeJSON(c, http.StatusOK, body(labels))
	}
}

func (s *server) labelsToNodes(c echo.Context) error {
	return s.labelsAs(func(l []NodeLabel) any { return LabelsToNodesBody(l, c.QueryParams()["labels"]) })(c)
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

// DecodeNodeLabels reads back an answer of the node-label resources
// (NodeLabelsBody, NodeToLabelsBody or LabelsToNodesBody, or an RM's of
// the same shape): the labels it names, each with the nodes it puts them
// on, in the answer's order. The Router merges sub-clusters' answers with
// it.
func DecodeNodeLabels(b []byte) ([]NodeLabel, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(b, &top); err != nil {
		return nil, err
	}
	var out []NodeLabel
	add := func(l nodeLabelInfo, nodes ...string) {
		for i := range out {
			if out[i].Name == l.Name && out[i].Exclusive == l.Exclusivity {
				out[i].Nodes = append(out[i].Nodes, nodes...)
				return
			}
		}
		out = append(out, NodeLabel{Name: l.Name, Exclusive: l.Exclusivity, Nodes: nodes})
	}
	switch {
	case top["nodeLabelsInfo"] != nil:
		labels, err := decodeLabelsInfo(top["nodeLabelsInfo"])
		for _, l := range labels {
			add(l)
		}
		return out, err
	case top["nodeToLabelsInfo"] != nil:
		var inner struct{ NodeToLabels json.RawMessage }
		if err := json.Unmarshal(top["nodeToLabelsInfo"], &inner); err != nil {
			return nil, err
		}
		err := eachEntry(inner.NodeToLabels, func(key, value json.RawMessage) error {
			var node string
			if err := json.Unmarshal(key, &node); err != nil {
				return err
			}
			labels, err := decodeLabelsInfo(value)
			for _, l := range labels {
				add(l, node)
			}
			return err
		})
		return out, err
	case top["labelsToNodesInfo"] != nil:
		var inner struct{ LabelsToNodes json.RawMessage }
		if err := json.Unmarshal(top["labelsToNodesInfo"], &inner); err != nil {
			return nil, err
		}
		err := eachEntry(inner.LabelsToNodes, func(key, value json.RawMessage) error {
			var l nodeLabelInfo
			var ids nodeIDsInfo
			if err := json.Unmarshal(key, &l); err != nil {
				return err
			}
			if err := json.Unmarshal(value, &ids); err != nil {
				return err
			}
			add(l, ids.Nodes...)
			return nil
		})
		return out, err
	}
	return nil, errors.New("not a node-label answer")
}

// decodeLabelsInfo reads a NodeLabelsInfo.
func decodeLabelsInfo(b json.RawMessage) ([]nodeLabelInfo, error) {
	var info struct{ NodeLabelInfo json.RawMessage }
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, err
	}
	return OneOrMany[nodeLabelInfo](info.NodeLabelInfo)
}

// eachEntry calls fn with the key and value of every "entry" of a map in
// Jersey's natural notation (duplicate "entry" keys, or one "entry" array).
func eachEntry(b json.RawMessage, fn func(key, value json.RawMessage) error) error {
	if len(b) == 0 {
		return nil
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return fmt.Errorf("not a map: %.40s", b)
	}
	for dec.More() {
		if _, err := dec.Token(); err != nil {
			return err
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return err
		}
		list, err := OneOrMany[struct{ Key, Value json.RawMessage }](raw)
		if err != nil {
			return err
		}
		for _, e := range list {
			if err := fn(e.Key, e.Value); err != nil {
				return err
			}
		}
	}
	return nil
}
