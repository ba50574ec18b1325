package store

import (
	"strings"
	"testing"
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
