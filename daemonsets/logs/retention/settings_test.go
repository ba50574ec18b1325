package retention

import (
	"slices"
	"testing"
	"time"

	"github.com/knitdev/knit/hadoopconf"
)

func TestSettingsFromHadoop(t *testing.T) {
	on := map[string]string{"yarn.log-aggregation-enable": "true"}
	with := func(extra map[string]string) map[string]string {
		out := map[string]string{}
		for _, m := range []map[string]string{on, extra} {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	tests := []struct {
		name    string
		conf    map[string]string
		want    Settings
		wantErr bool
	}{
		{name: "off by default: logs are kept forever", conf: on},
		{name: "off without log aggregation", conf: map[string]string{ConfRetainSeconds: "3600"}},
		{name: "off with a negative retain time", conf: with(map[string]string{ConfRetainSeconds: "-5"})},
		{
			name: "checked every tenth of the retain time by default",
			conf: with(map[string]string{ConfRetainSeconds: "86400"}),
			want: Settings{Enabled: true, Retain: 24 * time.Hour, Interval: 144 * time.Minute, Roots: []string{"/tmp/logs"}},
		},
		{
			name: "a negative check interval is the default one",
			conf: with(map[string]string{ConfRetainSeconds: "5", ConfCheckIntervalSeconds: "-1"}),
			want: Settings{Enabled: true, Retain: 5 * time.Second, Interval: 500 * time.Millisecond, Roots: []string{"/tmp/logs"}},
		},
		{
			name: "the check interval set",
			conf: with(map[string]string{ConfRetainSeconds: "0", ConfCheckIntervalSeconds: "60", "yarn.nodemanager.remote-app-log-dir": "s3a://b/logs"}),
			want: Settings{Enabled: true, Interval: time.Minute, Roots: []string{"s3a://b/logs"}},
		},
		{
			name: "a retain time past what a Duration holds is the longest one",
			conf: with(map[string]string{ConfRetainSeconds: "9223372036854775807", ConfCheckIntervalSeconds: "60"}),
			want: Settings{Enabled: true, Retain: 1<<63 - 1, Interval: time.Minute, Roots: []string{"/tmp/logs"}},
		},
		{
			name: "formats sharing a root walk it once",
			conf: with(map[string]string{ConfRetainSeconds: "60", "yarn.log-aggregation.file-formats": "IndexedFormat,TFile"}),
			want: Settings{Enabled: true, Retain: time.Minute, Interval: 6 * time.Second, Roots: []string{"/tmp/logs"}},
		},
		{
			name: "a format with its own root adds it",
			conf: with(map[string]string{
				ConfRetainSeconds: "60", "yarn.log-aggregation.file-formats": "IndexedFormat,TFile",
				"yarn.log-aggregation.IndexedFormat.remote-app-log-dir": "/ifile",
			}),
			want: Settings{Enabled: true, Retain: time.Minute, Interval: 6 * time.Second, Roots: []string{"/ifile", "/tmp/logs"}},
		},
		{name: "a zero retain time without a check interval is refused", conf: with(map[string]string{ConfRetainSeconds: "0"}), wantErr: true},
		{name: "a retain time that is not a number is refused", conf: with(map[string]string{ConfRetainSeconds: "a week"}), wantErr: true},
		{name: "a check interval that is not a number is refused", conf: with(map[string]string{ConfRetainSeconds: "60", ConfCheckIntervalSeconds: "1m"}), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := hadoopconf.New(hadoopconf.Options{})
			for k, v := range tt.conf {
				c.Set(k, v)
			}
			got, err := SettingsFromHadoop(c)
			if tt.wantErr {
				if err == nil {
					t.Fatalf("accepted: %+v", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Enabled != tt.want.Enabled || got.Retain != tt.want.Retain || got.Interval != tt.want.Interval || !slices.Equal(got.Roots, tt.want.Roots) {
				t.Errorf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

func TestStoresAreThoseKnitNodeWrites(t *testing.T) {
	c := hadoopconf.New(hadoopconf.Options{})
	s := Settings{Roots: []string{"/tmp/logs", "file:///var/logs", "s3a://b/logs"}}
	stores, err := Stores(s, c)
	if err != nil {
		t.Fatal(err)
	}
	if len(stores) != 3 {
		t.Errorf("%d stores, want 3", len(stores))
	}
	if _, err := Stores(Settings{Roots: []string{"hdfs://nn:8020/logs"}}, c); err == nil {
		t.Error("an hdfs root has a store; knit-node writes none")
	}
}
