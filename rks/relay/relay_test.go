package relay

import (
	"bytes"
	"io"
	"net"
	"strings"
	"testing"
)

func TestReadHeaderFindsTheNodeAndKeepsTheRest(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantNode string
		wantRest string
		wantErr  bool
	}{
		{name: "relayed connection", in: "KNIT-RELAY 127.0.1.1:8041\nhrpc\x09", wantNode: "127.0.1.1:8041", wantRest: "hrpc\x09"},
		{name: "direct Hadoop connection", in: "hrpc\x09\x00\x00", wantRest: "hrpc\x09\x00\x00"},
		{name: "short direct connection", in: "hr", wantRest: "hr"},
		{name: "header without host:port", in: "KNIT-RELAY nonsense\n", wantErr: true},
		{name: "header without an end", in: "KNIT-RELAY " + strings.Repeat("a", MaxHeader), wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			node, rest, err := ReadHeader(strings.NewReader(tt.in))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err %v, want error %v", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			b, _ := io.ReadAll(rest)
			if node != tt.wantNode || string(b) != tt.wantRest {
				t.Errorf("node %q rest %q, want %q %q", node, b, tt.wantNode, tt.wantRest)
			}
		})
	}
}

func TestWriteHeaderRefusesNodesThatWouldBreakTheLine(t *testing.T) {
	for _, node := range []string{"", "a b:1", "a\n:1", strings.Repeat("a", MaxHeader)} {
		if err := WriteHeader(io.Discard, node); err == nil {
			t.Errorf("WriteHeader(%q) accepted", node)
		}
	}
	var buf bytes.Buffer
	if err := WriteHeader(&buf, "h:1"); err != nil || buf.String() != "KNIT-RELAY h:1\n" {
		t.Errorf("header %q, %v", buf.String(), err)
	}
}

func TestListenerHandsOutConnectionsWithTheirNode(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rl := NewListener(l)
	defer rl.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if err := WriteHeader(c, "10.0.0.1:8041"); err != nil {
		t.Fatal(err)
	}
	_, _ = c.Write([]byte("ping"))
	got, err := rl.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer got.Close()
	rc := got.(*Conn)
	buf := make([]byte, 4)
	if _, err := io.ReadFull(rc, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("read %q, %v", buf, err)
	}
	if rc.Node() != "10.0.0.1:8041" {
		t.Errorf("node %q", rc.Node())
	}
	ctx := ConnContext(t.Context(), rc)
	if n, ok := NodeFrom(ctx); !ok || n != "10.0.0.1:8041" {
		t.Errorf("NodeFrom = %q, %v", n, ok)
	}
}

func FuzzReadHeader(f *testing.F) {
	f.Add([]byte("KNIT-RELAY 127.0.1.1:8041\nhrpc"))
	f.Add([]byte("hrpc\x09\x00\x00"))
	f.Add([]byte("KNIT-RELAY \n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		node, rest, err := ReadHeader(bytes.NewReader(b))
		if err != nil {
			return
		}
		if node != "" {
			if _, _, err := net.SplitHostPort(node); err != nil {
				t.Fatalf("node %q is no host:port", node)
			}
		}
		if _, err := io.ReadAll(rest); err != nil {
			t.Fatal(err)
		}
	})
}
