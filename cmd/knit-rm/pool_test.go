package main

import (
	"maps"
	"testing"

	"github.com/knitdev/knit/hadoopconf"
)

func TestThePoolIsTheNodeSelectorsLabelsAndTheFederationsSubCluster(t *testing.T) {
	tests := []struct {
		name       string
		selector   string
		federated  bool
		nodes      map[string]string
		subCluster string
		wantErr    bool
	}{
		{name: "no selector and no federation is the whole cluster"},
		{name: "equalities name the pool's labels", selector: "knit.io/sub-cluster=sc2,disk=ssd", nodes: map[string]string{"knit.io/sub-cluster": "sc2", "disk": "ssd"}},
		{name: "a federation member's pods are its sub-cluster's", federated: true, subCluster: "sc2"},
		{name: "an inequality is no node selector", selector: "disk!=hdd", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{})
			if tt.federated {
				c.Set(hadoopconf.KeyFederationEnabled, "true")
				c.Set(hadoopconf.KeyRMClusterID, "sc2")
			}
			p, err := newPool(flags{nodeSelector: tt.selector}, c)
			if (err != nil) != tt.wantErr {
				t.Fatalf("newPool(%q): %v", tt.selector, err)
			}
			if err != nil {
				return
			}
			if !maps.Equal(p.nodes, tt.nodes) || p.subCluster != tt.subCluster {
				t.Errorf("pool %+v, want nodes %v and sub-cluster %q", p, tt.nodes, tt.subCluster)
			}
		})
	}
}
