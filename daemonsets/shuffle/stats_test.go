package shuffle

import (
	"context"
	"testing"

	"github.com/knitdev/knit/daemonsets/auxservice"
)

func TestStatsCountJobsAndConnections(t *testing.T) {
	s := startService(t, Config{})
	if got := s.Stats(); got != (Stats{}) {
		t.Errorf("a new service: %+v", got)
	}
	if err := s.InitializeApplication(context.Background(), auxservice.Application{
		User: testUser, ID: mustApp(t, testApp), ServiceData: serviceData(testJob, testSecret),
	}); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Jobs != 1 || got.Connections != 0 {
		t.Errorf("after one job: %+v", got)
	}
	if err := s.StopApplication(context.Background(), mustApp(t, testApp)); err != nil {
		t.Fatal(err)
	}
	if got := s.Stats(); got.Jobs != 0 {
		t.Errorf("after the job stopped: %+v", got)
	}
}
