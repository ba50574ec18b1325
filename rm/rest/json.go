package rest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Resource is a resource vector as Hadoop's ResourceInfo writes it: memory
// and vCores, then every resource type under resourceInformations.
type Resource struct {
	MemoryMB int64
	VCores   int64
	// Other holds resource types beyond memory-mb and vcores.
	Other []ResourceValue
}

// ResourceValue is one countable resource type.
type ResourceValue struct {
	Name  string
	Units string
	Value int64
}

// ResourceFromProto converts a YARN ResourceProto; nil is the zero resource.
func ResourceFromProto(p *yarnpb.ResourceProto) Resource {
	r := Resource{MemoryMB: p.GetMemory(), VCores: int64(p.GetVirtualCores())}
	for _, v := range p.GetResourceValueMap() {
		switch v.GetKey() {
		case "memory-mb", "memory":
			continue
		case "vcores":
			continue
		}
		r.Other = append(r.Other, ResourceValue{Name: v.GetKey(), Units: v.GetUnits(), Value: v.GetValue()})
	}
	return r
}

type resourceInformation struct {
	Attributes        struct{}   `json:"attributes"`
	MaximumAllocation int64      `json:"maximumAllocation"`
	MinimumAllocation int64      `json:"minimumAllocation"`
	Name              string     `json:"name"`
	ResourceType      string     `json:"resourceType"`
	Units             JavaString `json:"units"`
	Value             int64      `json:"value"`
}

type resourceJSON struct {
	Memory               int64 `json:"memory"`
	VCores               int64 `json:"vCores"`
	ResourceInformations struct {
		ResourceInformation []resourceInformation `json:"resourceInformation"`
	} `json:"resourceInformations"`
}

// MarshalJSON writes Hadoop's ResourceInfo shape.
func (r Resource) MarshalJSON() ([]byte, error) {
	var j resourceJSON
	j.Memory, j.VCores = r.MemoryMB, r.VCores
	add := func(name, units string, v int64) {
		j.ResourceInformations.ResourceInformation = append(j.ResourceInformations.ResourceInformation, resourceInformation{
			MaximumAllocation: math.MaxInt64, Name: name, ResourceType: "COUNTABLE", Units: JavaString(units), Value: v,
		})
	}
	add("memory-mb", "Mi", r.MemoryMB)
	add("vcores", "", r.VCores)
	for _, o := range r.Other {
		add(o.Name, o.Units, o.Value)
	}
	return marshal(j)
}

// JavaString is a string Jersey writes as {} when empty.
type JavaString string

func (s JavaString) MarshalJSON() ([]byte, error) {
	if s == "" {
		return []byte("{}"), nil
	}
	return marshal(string(s))
}

// JavaFloat is a Java float: always written with a fraction ("25.0").
type JavaFloat float32

func (f JavaFloat) MarshalJSON() ([]byte, error) { return javaNumber(float64(f), 32), nil }

// jdouble is a Java double holding a widened float, as Hadoop's
// ResourceUtilizationInfo does.
type jdouble float64

func (f jdouble) MarshalJSON() ([]byte, error) { return javaNumber(float64(f), 64), nil }

func javaNumber(f float64, bits int) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("0.0")
	}
	s := strconv.FormatFloat(f, 'f', -1, bits)
	if !strings.ContainsAny(s, ".eE") {
		s += ".0"
	}
	return []byte(s)
}

// entryMap is a Java map in Jersey's natural notation: one "entry" key per
// pair (duplicate keys), {} when empty. Values are strings.
type entryMap []entry

type entry struct {
	Key   string `json:"key"`
	Value string `json:"value"`
}

func (m entryMap) MarshalJSON() ([]byte, error) {
	b := make(beanMap, 0, len(m))
	for _, e := range m {
		b = append(b, struct{ Key, Value any }{e.Key, e.Value})
	}
	return b.MarshalJSON()
}

func longMap(m []*yarnpb.StringLongMapProto) entryMap {
	out := entryMap{}
	for _, e := range m {
		out = append(out, entry{Key: e.GetKey(), Value: strconv.FormatInt(e.GetValue(), 10)})
	}
	return out
}

// Field is one key and value of an Object.
type Field struct {
	Key   string
	Value any
}

// Object is a JSON object with its keys in a fixed order, as Jersey writes a
// JAXB bean's fields in declaration order; the RM builds the scheduler's
// queue tree with it.
type Object []Field

// MarshalJSON writes the fields in order.
func (o Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, f := range o {
		if i > 0 {
			b.WriteByte(',')
		}
		k, err := marshal(f.Key)
		if err != nil {
			return nil, err
		}
		b.Write(k)
		b.WriteByte(':')
		v, err := marshal(f.Value)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f.Key, err)
		}
		b.Write(v)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, as Jersey writes "<" and
// ">" (e.g. "<Not set>") unescaped.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// OneOrMany reads a JSON list, or one value standing for a list of one,
// as JSON notations other than Jersey's natural one write a one-element
// list; null or nothing is no values.
func OneOrMany[T any](raw json.RawMessage) ([]T, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []T
	if err := json.Unmarshal(raw, &list); err == nil {
		return list, nil
	}
	var one T
	err := json.Unmarshal(raw, &one)
	return []T{one}, err
}
