package protocols_test

import (
	"fmt"
	"maps"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"

	// Registering Knit's definitions is the point of these imports.
	_ "github.com/knitdev/knit/protocols/commonpb"
	_ "github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/test/recordings"
)

// hadoopPackages maps each of Knit's proto packages to the Hadoop package it
// mirrors. Knit's carry a prefix so that they do not collide with Hadoop's
// own files registered by other Go code (colinmarc/hdfs); every name is
// compared under Hadoop's package.
var hadoopPackages = map[protoreflect.FullName]protoreflect.FullName{
	"knit.hadoop.common": "hadoop.common",
	"knit.hadoop.yarn":   "hadoop.yarn",
}

// hadoopName is name with a Knit package replaced by Hadoop's; names of
// other packages are returned as they are.
func hadoopName(name protoreflect.FullName) protoreflect.FullName {
	for knit, hadoop := range hadoopPackages {
		if rest, ok := strings.CutPrefix(string(name), string(knit)+"."); ok {
			return hadoop + "." + protoreflect.FullName(rest)
		}
	}
	return name
}

// deliberateOmissions lists Hadoop names Knit leaves out on purpose, with why.
// An entry here is the only way a Hadoop message, enum or field may be absent.
var deliberateOmissions = map[protoreflect.FullName]string{}

// beyondOracle lists Knit's files of Hadoop protocols the recorded protoset
// does not hold, with why they are Hadoop's all the same. The schema test
// leaves them out; each has a test of its own against Hadoop's file.
var beyondOracle = map[string]string{
	"commonpb/HAServiceProtocol.proto": "hadoop-common's HAServiceProtocol.proto (no package there), which the RM's admin port serves for rmadmin's HA commands; TestHAServiceProtocolIsHadoops checks it",
}

func loadOracle(t *testing.T) *protoregistry.Files {
	t.Helper()
	// Hadoop 3.4.1's own schema, compiled from its .proto files.
	raw, err := os.ReadFile(recordings.Path(t, "hadoop-schema", "hadoop-3.4.1.protoset"))
	if err != nil {
		t.Fatalf("read oracle: %v", err)
	}
	var set descriptorpb.FileDescriptorSet
	if err := proto.Unmarshal(raw, &set); err != nil {
		t.Fatalf("decode oracle: %v", err)
	}
	files, err := protodesc.NewFiles(&set)
	if err != nil {
		t.Fatalf("build oracle registry: %v", err)
	}
	return files
}

// schemaIndex is every message, enum and service of the hadoop packages.
type schemaIndex struct {
	messages map[protoreflect.FullName]protoreflect.MessageDescriptor
	enums    map[protoreflect.FullName]protoreflect.EnumDescriptor
	services map[protoreflect.FullName]protoreflect.ServiceDescriptor
}

func newSchemaIndex() schemaIndex {
	return schemaIndex{
		messages: map[protoreflect.FullName]protoreflect.MessageDescriptor{},
		enums:    map[protoreflect.FullName]protoreflect.EnumDescriptor{},
		services: map[protoreflect.FullName]protoreflect.ServiceDescriptor{},
	}
}

func (ix schemaIndex) addMessages(msgs protoreflect.MessageDescriptors) {
	for i := 0; i < msgs.Len(); i++ {
		m := msgs.Get(i)
		ix.messages[hadoopName(m.FullName())] = m
		ix.addEnums(m.Enums())
		ix.addMessages(m.Messages())
	}
}

func (ix schemaIndex) addEnums(enums protoreflect.EnumDescriptors) {
	for i := 0; i < enums.Len(); i++ {
		ix.enums[hadoopName(enums.Get(i).FullName())] = enums.Get(i)
	}
}

func (ix schemaIndex) addFile(fd protoreflect.FileDescriptor) {
	ix.addMessages(fd.Messages())
	ix.addEnums(fd.Enums())
	for i := 0; i < fd.Services().Len(); i++ {
		ix.services[hadoopName(fd.Services().Get(i).FullName())] = fd.Services().Get(i)
	}
}

// indexPackages indexes the files of packages under Hadoop's names.
func indexPackages(files interface {
	RangeFiles(func(protoreflect.FileDescriptor) bool)
}, packages []protoreflect.FullName) schemaIndex {
	ix := newSchemaIndex()
	files.RangeFiles(func(fd protoreflect.FileDescriptor) bool {
		if _, beyond := beyondOracle[fd.Path()]; slices.Contains(packages, fd.Package()) && !beyond {
			ix.addFile(fd)
		}
		return true
	})
	return ix
}

func sortedNames[T any](m map[protoreflect.FullName]T) []protoreflect.FullName {
	names := make([]protoreflect.FullName, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return names[i] < names[j] })
	return names
}

// describeField is everything about a field that reaches the wire or the
// generated API: number, name, kind, cardinality, default and referenced type.
func describeField(f protoreflect.FieldDescriptor) string {
	ref := ""
	switch {
	case f.Message() != nil:
		ref = string(hadoopName(f.Message().FullName()))
	case f.Enum() != nil:
		ref = string(hadoopName(f.Enum().FullName()))
	}
	def := ""
	if f.HasDefault() {
		def = fmt.Sprint(f.Default().Interface())
		if f.Enum() != nil {
			def = string(f.DefaultEnumValue().Name())
		}
	}
	return fmt.Sprintf("%d %s %v %v default=%q ref=%s", f.Number(), f.Name(), f.Cardinality(), f.Kind(), def, ref)
}

func TestSchemaMatchesHadoop341(t *testing.T) {
	want := indexPackages(loadOracle(t), slices.Collect(maps.Values(hadoopPackages)))
	got := indexPackages(protoregistry.GlobalFiles, slices.Collect(maps.Keys(hadoopPackages)))

	t.Run("messages", func(t *testing.T) {
		for _, name := range sortedNames(want.messages) {
			wm := want.messages[name]
			gm, ok := got.messages[name]
			if !ok {
				if _, omitted := deliberateOmissions[name]; !omitted {
					t.Errorf("message %s missing", name)
				}
				continue
			}
			wf, gf := wm.Fields(), gm.Fields()
			for i := 0; i < wf.Len(); i++ {
				w := wf.Get(i)
				g := gf.ByNumber(w.Number())
				if g == nil {
					if _, omitted := deliberateOmissions[w.FullName()]; !omitted {
						t.Errorf("%s: field %s (%d) missing", name, w.Name(), w.Number())
					}
					continue
				}
				if dw, dg := describeField(w), describeField(g); dw != dg {
					t.Errorf("%s: field differs\n  hadoop: %s\n  knit:   %s", name, dw, dg)
				}
			}
			for i := 0; i < gf.Len(); i++ {
				if wf.ByNumber(gf.Get(i).Number()) == nil {
					t.Errorf("%s: field %s (%d) is not Hadoop's", name, gf.Get(i).Name(), gf.Get(i).Number())
				}
			}
			if fmt.Sprint(wm.ExtensionRanges()) != fmt.Sprint(gm.ExtensionRanges()) {
				t.Errorf("%s: extension ranges %v, Hadoop has %v", name, gm.ExtensionRanges(), wm.ExtensionRanges())
			}
		}
		for _, name := range sortedNames(got.messages) {
			if _, ok := want.messages[name]; !ok {
				t.Errorf("message %s is not Hadoop's", name)
			}
		}
	})

	t.Run("enums", func(t *testing.T) {
		for _, name := range sortedNames(want.enums) {
			we := want.enums[name]
			ge, ok := got.enums[name]
			if !ok {
				if _, omitted := deliberateOmissions[name]; !omitted {
					t.Errorf("enum %s missing", name)
				}
				continue
			}
			if w, g := enumValues(we), enumValues(ge); w != g {
				t.Errorf("enum %s values differ\n  hadoop: %s\n  knit:   %s", name, w, g)
			}
		}
		for _, name := range sortedNames(got.enums) {
			if _, ok := want.enums[name]; !ok {
				t.Errorf("enum %s is not Hadoop's", name)
			}
		}
	})

	t.Run("services", func(t *testing.T) {
		for _, name := range sortedNames(want.services) {
			ws := want.services[name]
			gs, ok := got.services[name]
			if !ok {
				t.Errorf("service %s missing", name)
				continue
			}
			if w, g := methods(ws), methods(gs); w != g {
				t.Errorf("service %s methods differ\n  hadoop: %s\n  knit:   %s", name, w, g)
			}
		}
		for _, name := range sortedNames(got.services) {
			if _, ok := want.services[name]; !ok {
				t.Errorf("service %s is not Hadoop's", name)
			}
		}
	})
}

func enumValues(e protoreflect.EnumDescriptor) string {
	var s string
	for i := 0; i < e.Values().Len(); i++ {
		v := e.Values().Get(i)
		s += fmt.Sprintf("%s=%d ", v.Name(), v.Number())
	}
	return s
}

func methods(s protoreflect.ServiceDescriptor) string {
	var out []string
	for i := 0; i < s.Methods().Len(); i++ {
		m := s.Methods().Get(i)
		out = append(out, fmt.Sprintf("%s(%s)%s", m.Name(), hadoopName(m.Input().FullName()), hadoopName(m.Output().FullName())))
	}
	sort.Strings(out)
	return fmt.Sprint(out)
}

// TestHAServiceProtocolIsHadoops checks the one file beyond the oracle
// against Hadoop 3.4.1's HAServiceProtocol.proto, written out here field by
// field: number, name, cardinality, kind and the type it refers to.
func TestHAServiceProtocolIsHadoops(t *testing.T) {
	fd, err := protoregistry.GlobalFiles.FindFileByPath("commonpb/HAServiceProtocol.proto")
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"HAStateChangeRequestInfoProto":    {`1 reqSource required enum default="" ref=hadoop.common.HARequestSource`},
		"MonitorHealthRequestProto":        nil,
		"MonitorHealthResponseProto":       nil,
		"TransitionToActiveRequestProto":   {`1 reqInfo required message default="" ref=hadoop.common.HAStateChangeRequestInfoProto`},
		"TransitionToActiveResponseProto":  nil,
		"TransitionToStandbyRequestProto":  {`1 reqInfo required message default="" ref=hadoop.common.HAStateChangeRequestInfoProto`},
		"TransitionToStandbyResponseProto": nil,
		"GetServiceStatusRequestProto":     nil,
		"GetServiceStatusResponseProto": {`1 state required enum default="" ref=hadoop.common.HAServiceStateProto`,
			`2 readyToBecomeActive optional bool default="" ref=`, `3 notReadyReason optional string default="" ref=`},
	}
	msgs := fd.Messages()
	if msgs.Len() != len(want) {
		t.Errorf("%d messages, want %d", msgs.Len(), len(want))
	}
	for name, fields := range want {
		m := msgs.ByName(protoreflect.Name(name))
		if m == nil {
			t.Errorf("message %s missing", name)
			continue
		}
		var got []string
		for i := 0; i < m.Fields().Len(); i++ {
			got = append(got, describeField(m.Fields().Get(i)))
		}
		if !slices.Equal(got, fields) {
			t.Errorf("%s fields\n got %q\nwant %q", name, got, fields)
		}
	}
	enums := map[string]string{
		"HAServiceStateProto": "INITIALIZING=0 ACTIVE=1 STANDBY=2",
		"HARequestSource":     "REQUEST_BY_USER=0 REQUEST_BY_USER_FORCED=1 REQUEST_BY_ZKFC=2",
	}
	for name, values := range enums {
		e := fd.Enums().ByName(protoreflect.Name(name))
		if e == nil {
			t.Errorf("enum %s missing", name)
			continue
		}
		var got []string
		for i := 0; i < e.Values().Len(); i++ {
			got = append(got, fmt.Sprintf("%s=%d", e.Values().Get(i).Name(), e.Values().Get(i).Number()))
		}
		if strings.Join(got, " ") != values {
			t.Errorf("enum %s: %v, want %s", name, got, values)
		}
	}
	svc := fd.Services().ByName("HAServiceProtocolService")
	if svc == nil {
		t.Fatal("service HAServiceProtocolService missing")
	}
	if got := fmt.Sprint(methods(svc)); got != "[getServiceStatus(hadoop.common.GetServiceStatusRequestProto)hadoop.common.GetServiceStatusResponseProto monitorHealth(hadoop.common.MonitorHealthRequestProto)hadoop.common.MonitorHealthResponseProto transitionToActive(hadoop.common.TransitionToActiveRequestProto)hadoop.common.TransitionToActiveResponseProto transitionToStandby(hadoop.common.TransitionToStandbyRequestProto)hadoop.common.TransitionToStandbyResponseProto]" {
		t.Errorf("methods %s", got)
	}
}
