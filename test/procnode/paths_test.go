package procnode

import "testing"

func TestPathTranslation(t *testing.T) {
	t.Parallel()
	tr := newPathTranslator([]pathMapping{
		{From: "/data", To: "/host/vol/data"},
		{From: "/data/sub/", To: "/host/vol/sub"}, // trailing slash is cleaned
		{From: "/dev/termination-log", To: "/host/c/0.termination-log"},
		{From: "/tmp", To: "/host/tmp/tmp"}, // a host path holding a mapped path
		{From: "relative", To: "/never"},    // ignored: not a path one can find in text
		{From: "/", To: "/never"},           // ignored: would swallow everything
	})
	cases := []struct {
		in, want string
	}{
		{"/data", "/host/vol/data"},
		{"/data/", "/host/vol/data/"},
		{"/data/file.txt", "/host/vol/data/file.txt"},
		{"/data/sub", "/host/vol/sub"},            // longest mountPath first
		{"/data/sub/x", "/host/vol/sub/x"},        // longest mountPath first
		{"/data/subway", "/host/vol/data/subway"}, // /data/sub is not a prefix on a boundary
		{"/data2", "/data2"},                      // not followed by a boundary
		{"/database/x", "/database/x"},
		{"/x/data", "/x/data"}, // not preceded by a boundary
		{"x/data", "x/data"},
		{"echo boom > /dev/termination-log; exit 3", "echo boom > /host/c/0.termination-log; exit 3"},
		{"cat /data/a /data/b", "cat /host/vol/data/a /host/vol/data/b"},
		{"--dir=/data/x", "--dir=/host/vol/data/x"},
		{"PATH=/data/bin:/usr/bin", "PATH=/host/vol/data/bin:/usr/bin"},
		{"/usr/bin:/data/bin", "/usr/bin:/host/vol/data/bin"},
		{`"/data"`, `"/host/vol/data"`},
		{"'/data/x'", "'/host/vol/data/x'"},
		{"(/data)", "(/host/vol/data)"},
		{"/data;/data", "/host/vol/data;/host/vol/data"},
		{"/tmp/x", "/host/tmp/tmp/x"}, // rewritten once, not again inside the result
		{"/dev/termination-log2", "/dev/termination-log2"},
		{"", ""},
		{"no paths here", "no paths here"},
	}
	for _, tc := range cases {
		if got := tr.translate(tc.in); got != tc.want {
			t.Errorf("translate(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestPathTranslationWithoutMappings(t *testing.T) {
	t.Parallel()
	var tr pathTranslator
	if got := tr.translate("/data/x"); got != "/data/x" {
		t.Errorf("got %q", got)
	}
	if got := tr.translateAll(nil); got != nil {
		t.Errorf("translateAll(nil) = %v", got)
	}
}
