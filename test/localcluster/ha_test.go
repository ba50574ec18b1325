package localcluster

import (
	"log/slog"
	"testing"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
)

func TestTwoRMsWriteTheHAClientConfiguration(t *testing.T) {
	dir := t.TempDir()
	rms := []RMAddresses{
		{Client: "127.0.0.1:18032", Scheduler: "127.0.0.1:18030", Admin: "127.0.0.1:18033", Web: "127.0.0.1:18088"},
		{Client: "127.0.0.1:28032", Scheduler: "127.0.0.1:28030", Admin: "127.0.0.1:28033", Web: "127.0.0.1:28088"},
	}
	confDir, err := writeRMConf(slog.New(slog.DiscardHandler), dir, rms, nodePorts{}, userConf{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ key, want string }{
		{client.KeyRMAddress, "127.0.0.1:18032,127.0.0.1:28032"},
		{client.KeySchedulerAddress, "127.0.0.1:18030,127.0.0.1:28030"},
		{hadoopconf.KeyRMAdminAddress, "127.0.0.1:18033,127.0.0.1:28033"},
	}
	for _, tt := range tests {
		if got, _, err := client.ConfAddress(confDir, tt.key, 1); err != nil || got != tt.want {
			t.Errorf("%s = %q, %v; want %q", tt.key, got, err, tt.want)
		}
	}
	// knit-rm rm2 binds rm2's addresses.
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(confDir + "/yarn-site.xml"); err != nil {
		t.Fatal(err)
	}
	if got, _ := hadoopconf.ForRM(c, "rm2").Get(hadoopconf.KeyRMWebappAddress, ""); got != rms[1].Web {
		t.Errorf("rm2's web address = %q, want %q", got, rms[1].Web)
	}
}
