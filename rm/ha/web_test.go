package ha

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/knitdev/knit/rm/rest"
)

func TestStandbyWeb(t *testing.T) {
	tests := []struct {
		name         string
		active       string
		path         string
		wantStatus   int
		wantLocation string
		wantRefresh  string
	}{
		{"cluster info answers here", "http://rm1:8088", "/ws/v1/cluster/info", http.StatusOK, "", ""},
		{"isActive says not active", "http://rm1:8088", "/isActive", http.StatusMethodNotAllowed, "", ""},
		{"an API call redirects to the active", "http://rm1:8088", "/ws/v1/cluster/apps?user.name=alice", http.StatusTemporaryRedirect, "http://rm1:8088/ws/v1/cluster/apps?user.name=alice", ""},
		{"a page redirects to the active", "http://rm1:8088/", "/cluster/app/application_1_0001", http.StatusTemporaryRedirect, "http://rm1:8088/cluster/app/application_1_0001", ""},
		{"no active known: refresh later", "", "/cluster", http.StatusTemporaryRedirect, "", "5;url=/cluster"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := StandbyWeb(WebConfig{Info: rest.ClusterInfo{ID: 7, HAState: "STANDBY"}, ActiveURL: func() string { return tt.active }})
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, tt.path, nil))
			if rec.Code != tt.wantStatus || rec.Header().Get("Location") != tt.wantLocation || rec.Header().Get("Refresh") != tt.wantRefresh {
				t.Fatalf("%s: %d Location %q Refresh %q, want %d %q %q", tt.path, rec.Code, rec.Header().Get("Location"), rec.Header().Get("Refresh"), tt.wantStatus, tt.wantLocation, tt.wantRefresh)
			}
			if tt.path == "/ws/v1/cluster/info" {
				var body struct {
					ClusterInfo rest.ClusterInfo `json:"clusterInfo"`
				}
				if err := json.Unmarshal(rec.Body.Bytes(), &body); err != nil || body.ClusterInfo.HAState != "STANDBY" {
					t.Errorf("info = %s (%v), want haState STANDBY", rec.Body, err)
				}
			}
		})
	}
}

func TestIsActiveOnTheActive(t *testing.T) {
	rec := httptest.NewRecorder()
	IsActive(func() bool { return true }).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, IsActivePath, nil))
	if rec.Code != http.StatusOK || rec.Body.String() != msgIsActive {
		t.Errorf("isActive on the active: %d %q", rec.Code, rec.Body)
	}
}
