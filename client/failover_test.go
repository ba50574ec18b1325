package client

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/ipc/ipctest"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnrpc"
)

// standbyRM serves the client protocol as a standby RM does: every call
// refused with StandbyException.
func standbyRM(t *testing.T, f *fakeRM) string {
	return ipctest.Serve(t, ipc.Config{Simple: true, AdmitCall: func(context.Context, string, string) error {
		return yarnerr.Standby.New("ResourceManager rm1 is not Active!")
	}}, yarnrpc.ApplicationClientProtocolName, f.methods()...)
}

// refusedAddress is a loopback address nothing listens on.
func refusedAddress(t *testing.T) string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestRMClientFailsOverToTheActiveRM(t *testing.T) {
	tests := []struct {
		name  string
		first func(t *testing.T) string
	}{
		{"past a standby", func(t *testing.T) string { return standbyRM(t, &fakeRM{}) }},
		{"past a refused connection", refusedAddress},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			active := &fakeRM{}
			activeAddr := ipctest.Serve(t, ipc.Config{Simple: true}, yarnrpc.ApplicationClientProtocolName, active.methods()...)
			c, err := NewRMClient(tt.first(t)+","+activeAddr, RMConfig{User: "alice", Logger: quiet})
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			for range 2 { // the second call goes straight to the active
				if _, err := c.GetResourceTypeInfo(testCtx(t)); err != nil {
					t.Fatalf("call: %v", err)
				}
			}
			if len(active.users) != 2 {
				t.Errorf("active RM answered %d calls, want 2", len(active.users))
			}
		})
	}
}

func TestRMClientWithoutAnActiveRMGivesUpWithItsContext(t *testing.T) {
	c, err := NewRMClient(standbyRM(t, &fakeRM{})+","+standbyRM(t, &fakeRM{}), RMConfig{User: "alice", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(testCtx(t))
	cancel()
	if _, err := c.GetResourceTypeInfo(ctx); err == nil {
		t.Fatal("call with only standbys succeeded")
	}
}

func TestConfAddressListsEveryRMUnderHA(t *testing.T) {
	dir := t.TempDir()
	site := `<configuration>
<property><name>yarn.resourcemanager.ha.enabled</name><value>true</value></property>
<property><name>yarn.resourcemanager.ha.rm-ids</name><value>rm1,rm2</value></property>
<property><name>yarn.resourcemanager.address.rm1</name><value>127.0.0.1:18032</value></property>
<property><name>yarn.resourcemanager.address.rm2</name><value>127.0.0.1:28032</value></property>
<property><name>yarn.resourcemanager.hostname.rm1</name><value>127.0.0.1</value></property>
<property><name>yarn.resourcemanager.hostname.rm2</name><value>127.0.0.2</value></property>
</configuration>`
	if err := os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	addr, ok, err := ConfAddress(dir, KeyRMAddress, DefaultRMPort)
	if err != nil || !ok || addr != "127.0.0.1:18032,127.0.0.1:28032" {
		t.Errorf("client address = %q, %v, %v", addr, ok, err)
	}
	addr, _, err = ConfAddress(dir, KeySchedulerAddress, DefaultSchedulerPort)
	if err != nil || addr != "127.0.0.1:8030,127.0.0.2:8030" {
		t.Errorf("scheduler address = %q, %v", addr, err)
	}
	if got := Addresses(" a:1, b:2 ,"); strings.Join(got, "|") != "a:1|b:2" {
		t.Errorf("Addresses = %q", got)
	}
}

func TestRMClientOfOneRMWaitsOutAStandby(t *testing.T) {
	var calls atomic.Int32
	f := &fakeRM{}
	addr := ipctest.Serve(t, ipc.Config{Simple: true, AdmitCall: func(context.Context, string, string) error {
		if calls.Add(1) <= 2 { // a starting RM: standby until it wins the Lease
			return yarnerr.Standby.New("ResourceManager rm1 is not Active!")
		}
		return nil
	}}, yarnrpc.ApplicationClientProtocolName, f.methods()...)
	c, err := NewRMClient(addr, RMConfig{User: "alice", Logger: quiet})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.GetResourceTypeInfo(testCtx(t)); err != nil {
		t.Fatalf("call: %v", err)
	}
	if got := calls.Load(); got != 3 {
		t.Errorf("%d calls reached the RM, want 3", got)
	}
}
