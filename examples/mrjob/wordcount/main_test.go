package wordcount

import (
	"bytes"
	"strings"
	"testing"

	"github.com/knitdev/knit/examples/yarnapp"
)

func TestMainRefusesBadCommandLines(t *testing.T) {
	env := func(string) string { return "" }
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an unknown role", []string{"shuffle"}, `unknown role "shuffle"`},
		{"a client without input", []string{"-reduces", "2"}, "-input is required"},
		{"a task without a spec", []string{"map"}, "spec:"},
		{"an AM with a spec that is not one", []string{"am", "-spec=!!"}, "spec:"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			if code := Main(t.Context(), tt.args, &stdout, &stderr, env); code != ExitUsage {
				t.Errorf("exit %d, want %d; stderr %s", code, ExitUsage, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.want) {
				t.Errorf("stderr %q lacks %q", stderr.String(), tt.want)
			}
		})
	}
}

func TestSpecsTravelAsOneShellSafeWord(t *testing.T) {
	spec := TaskSpec{Job: "job_1_0001", Attempt: "attempt_1_0001_r_000000_0", Output: "/tmp/out dir/'$x\"",
		Hosts: []MapHost{{Host: "127.0.1.2", Port: 13562, Maps: []string{"attempt_1_0001_m_000000_0"}}}}
	enc, err := yarnapp.EncodeSpec(spec)
	if err != nil {
		t.Fatal(err)
	}
	if strings.IndexFunc(enc, func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_')
	}) >= 0 {
		t.Errorf("spec %q has characters the launch script would read", enc)
	}
	var back TaskSpec
	if err := yarnapp.DecodeSpec(enc, &back); err != nil {
		t.Fatal(err)
	}
	if back.Output != spec.Output || back.Hosts[0].Maps[0] != spec.Hosts[0].Maps[0] {
		t.Errorf("round trip %+v", back)
	}
	if got := roleCommand("reduce", enc, "stdout", "stderr"); got != "./mrjob reduce -spec="+enc+" 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr" {
		t.Errorf("command %q", got)
	}
}
