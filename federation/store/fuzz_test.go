package store

import (
	"testing"
)

// The sub-cluster ConfigMaps are read back from the API server, where
// anyone allowed to edit them may have written anything.
func FuzzSubClusterFromData(f *testing.F) {
	f.Add("sc1", "SC_RUNNING", "1700000000000", "1600000000000", `{"clusterMetrics":{}}`)
	f.Add("", "SC_LOST", "x", "-1", "")
	f.Fuzz(func(t *testing.T, id, state, beat, start, capability string) {
		info, err := SubClusterFromData(map[string]string{keyID: id, keyState: state, keyLastHeartBeat: beat, keyLastStartTime: start, keyCapability: capability})
		if err != nil {
			return
		}
		if info.ID == "" || !(info.State >= StateNew && info.State <= StateDecommissioned) || len(info.Capability) > MaxCapability {
			t.Fatalf("accepted %+v", info)
		}
		// What was read writes back to the same.
		again, err := SubClusterFromData(subClusterData(info))
		if err != nil || !sameInfo(again, info) {
			t.Fatalf("round trip: %+v, %v; want %+v", again, err, info)
		}
	})
}
