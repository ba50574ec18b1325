package webshell

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/knitdev/knit/rks/launch"
)

// TestExecCommandEntersTheContainersWorkFolderWithItsEnvironment runs the
// script with the machine's /bin/sh over launch files laid out as
// knit-node and knit-launcher leave them.
func TestExecCommandEntersTheContainersWorkFolderWithItsEnvironment(t *testing.T) {
	root := t.TempDir()
	launchDir := filepath.Join(root, "launch")
	work := filepath.Join(root, "usercache", "alice", "appcache", "application_1_0001", "container_1_0001_01_000002")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := launch.EncodeFiles(launch.Files{ContainerID: "container_1_0001_01_000002", User: "alice", WorkDir: work,
		Env: []launch.EnvVar{{Name: "X", Value: `"quoted" and \"workDir\":\"/elsewhere\"`}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(launchDir, "uid-1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(launch.FilesPath(launchDir, "uid-1"), files, 0o644); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/bash\nset -o pipefail -e\nexport CONTAINER_ID=\"container_1_0001_01_000002\"\nexport JVM_PID=\"$$\"\nexport CLASSPATH=\"$PWD/*:lib\"\nexec /bin/bash -c \"sleep 1000\"\n"
	if err := os.WriteFile(filepath.Join(work, launchScript), []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}

	for _, tc := range []struct {
		name    string
		podUID  string
		command []string
		want    string
	}{
		{"a command runs in the work folder with the container's environment", "uid-1",
			[]string{"sh", "-c", `echo "$CONTAINER_ID $CLASSPATH"; pwd`}, "container_1_0001_01_000002 " + work + "/*:lib\n" + work + "\n"},
		{"the login shell reads its commands", "uid-1", nil, "container_1_0001_01_000002\n"},
		{"a pod without launch files keeps its own folder", "uid-2", []string{"sh", "-c", `echo "[$CONTAINER_ID]"`}, "[]\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			argv := ExecCommand(launchDir, tc.command)
			cmd := exec.Command(argv[0], argv[1:]...)
			cmd.Env = []string{launch.EnvPodUID + "=" + tc.podUID, "PATH=" + os.Getenv("PATH"), "SHELL=/bin/sh"}
			cmd.Dir = root
			cmd.Stdin = strings.NewReader("echo $CONTAINER_ID\n")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if got := string(out); got != tc.want {
				t.Fatalf("output %q, want %q", got, tc.want)
			}
		})
	}
}
