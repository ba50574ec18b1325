package store

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestObjectNameIsTheIDInLowerCaseWithDashes(t *testing.T) {
	tests := []struct {
		id, want string
	}{
		{"application_1700000000000_0001", "application-1700000000000-0001"},
		{"application_1700000000000_12345", "application-1700000000000-12345"},
		{"Application_1_1", "application-1-1"},
	}
	for _, tt := range tests {
		got, err := ObjectName(tt.id)
		if err != nil || got != tt.want {
			t.Errorf("ObjectName(%q) = %q, %v; want %q", tt.id, got, err, tt.want)
		}
	}
}

func TestObjectNameRejectsIDsThatMakeNoObjectName(t *testing.T) {
	for _, id := range []string{
		"",
		"application_1/2",
		"_application_1_1",
		"application 1",
		"application_" + strings.Repeat("1", 250),
	} {
		if got, err := ObjectName(id); err == nil {
			t.Errorf("ObjectName(%q) = %q, want an error", id, got)
		}
	}
}

func TestLabelValueIsAlwaysAValidLabelValue(t *testing.T) {
	tests := []struct {
		in, want string
	}{
		{"", ""},
		{"RUNNING", "RUNNING"},
		{"root.default", "root.default"},
		{"alice", "alice"},
		{"alice@EXAMPLE.COM", "alice_EXAMPLE.COM"},
		{"hdfs/nn1.example.com@EXAMPLE.COM", "hdfs_nn1.example.com_EXAMPLE.COM"},
		{"jürgen", "j__rgen"},
		{"-leading.and.trailing-", "leading.and.trailing"},
		{"@@@", ""},
		{"a b", "a_b"},
		{strings.Repeat("q", 70), strings.Repeat("q", 63)},
		// Cut to 63 first, then trimmed: the cut must not leave a '.' last.
		{strings.Repeat("q", 62) + ".x", strings.Repeat("q", 62)},
	}
	for _, tt := range tests {
		got := labelValue(tt.in)
		if got != tt.want {
			t.Errorf("labelValue(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if msgs := validation.IsValidLabelValue(got); len(msgs) > 0 {
			t.Errorf("labelValue(%q) = %q, not a label value: %v", tt.in, got, msgs)
		}
	}
}
