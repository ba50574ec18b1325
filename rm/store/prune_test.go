package store

import (
	"slices"
	"testing"
	"time"
)

func TestOldestCompletedKeepsTheNewestCompleted(t *testing.T) {
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(min int) time.Time { return t0.Add(time.Duration(min) * time.Minute) }
	records := []Record{
		{ID: "app_3", State: StateFinished, FinishTime: at(3)},
		{ID: "app_1", State: StateFailed, FinishTime: at(1)},
		{ID: "app_run", State: "RUNNING"},
		{ID: "app_2", State: StateKilled, FinishTime: at(2)},
		{ID: "app_acc", State: "ACCEPTED"},
		{ID: "app_4", State: StateFinished, FinishTime: at(4)},
	}
	tests := []struct {
		name    string
		records []Record
		keep    int
		want    []string
	}{
		{"nothing stored", nil, 10, nil},
		{"under the limit", records, 10, nil},
		{"at the limit", records, 4, nil},
		{"one over", records, 3, []string{"app_1"}},
		{"oldest first", records, 1, []string{"app_1", "app_2", "app_3"}},
		{"keep none", records, 0, []string{"app_1", "app_2", "app_3", "app_4"}},
		{"negative keeps none", records, -1, []string{"app_1", "app_2", "app_3", "app_4"}},
		{"running never chosen", []Record{{ID: "a", State: "RUNNING"}, {ID: "b", State: "FINISHING"}}, 0, nil},
		{"ties go by id", []Record{
			{ID: "app_b", State: StateFinished, FinishTime: at(1)},
			{ID: "app_a", State: StateFinished, FinishTime: at(1)},
			{ID: "app_c", State: StateFinished, FinishTime: at(1)},
		}, 1, []string{"app_a", "app_b"}},
		{"no finish time counts as oldest", []Record{
			{ID: "app_new", State: StateFinished, FinishTime: at(9)},
			{ID: "app_unknown", State: StateFailed},
		}, 1, []string{"app_unknown"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := slices.Clone(tt.records)
			got := OldestCompleted(tt.records, tt.keep)
			if !slices.Equal(got, tt.want) {
				t.Errorf("OldestCompleted(keep %d) = %q, want %q", tt.keep, got, tt.want)
			}
			if !slices.EqualFunc(in, tt.records, func(a, b Record) bool { return a.ID == b.ID }) {
				t.Error("OldestCompleted reordered its input")
			}
		})
	}
}
