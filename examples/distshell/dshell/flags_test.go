package dshell

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"testing/fstest"
	"time"
)

func TestParseClientFlags(t *testing.T) {
	confDir := t.TempDir()
	site := `<configuration>
<property><name>yarn.resourcemanager.address</name><value>rm.example:8032</value></property>
<property><name>yarn.resourcemanager.scheduler.address</name><value>rm.example:8030</value></property>
</configuration>`
	if err := os.WriteFile(filepath.Join(confDir, "yarn-site.xml"), []byte(site), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		check   func(t *testing.T, o ClientOptions)
		wantErr bool
	}{
		{"DistributedShell's defaults without a configuration", []string{"-shell_command", "date"}, map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				want := ClientOptions{
					RMAddress: "127.0.0.1:8032", User: "alice", AppName: "DistributedShell", Queue: "default",
					MaxAMAttempts: 2, AttemptFailuresValidityInterval: -1, MasterMemoryMB: 128, MasterVcores: 1,
					Timeout: 600 * time.Second,
					Task:    TaskSpec{ShellCommand: "date", ShellEnv: map[string]string{}, NumContainers: 1, MemoryMB: 128, Vcores: 1},
				}
				if !reflect.DeepEqual(o, want) {
					t.Errorf("options\n%+v\nwant\n%+v", o, want)
				}
			}, false},
		{"addresses come from HADOOP_CONF_DIR", []string{"-shell_command=date"}, map[string]string{"USER": "alice", "HADOOP_CONF_DIR": confDir},
			func(t *testing.T, o ClientOptions) {
				if o.RMAddress != "rm.example:8032" || o.SchedulerAddress != "rm.example:8030" {
					t.Errorf("rm %q scheduler %q", o.RMAddress, o.SchedulerAddress)
				}
			}, false},
		{"flags override the configuration", []string{"-shell_command=date", "-rm_address=a:1", "-scheduler_address=b:2", "-user=bob"},
			map[string]string{"USER": "alice", "HADOOP_CONF_DIR": confDir},
			func(t *testing.T, o ClientOptions) {
				if o.RMAddress != "a:1" || o.SchedulerAddress != "b:2" || o.User != "bob" {
					t.Errorf("rm %q scheduler %q user %q", o.RMAddress, o.SchedulerAddress, o.User)
				}
			}, false},
		{"repeated shell_env, resources, priorities and timeout", []string{
			"-shell_command", "env", "-shell_args", "-0", "-shell_env", "A=1", "-shell_env", "B=x=y", "-shell_env", "C",
			"-num_containers", "3", "-container_memory", "512", "-container_vcores", "2", "-shell_cmd_priority", "5", "-priority", "7",
			"-master_memory", "1024", "-master_vcores", "2", "-timeout", "1500", "-keep_containers_across_application_attempts",
			"-attempt_failures_validity_interval", "30000", "-max_am_attempts", "4", "-queue", "q1", "-appname", "n"},
			map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				wantTask := TaskSpec{ShellCommand: "env", ShellArgs: "-0", ShellEnv: map[string]string{"A": "1", "B": "x=y", "C": ""},
					NumContainers: 3, MemoryMB: 512, Vcores: 2, Priority: 5}
				if !reflect.DeepEqual(o.Task, wantTask) {
					t.Errorf("task %+v, want %+v", o.Task, wantTask)
				}
				if o.AppPriority != 7 || o.MasterMemoryMB != 1024 || o.MasterVcores != 2 || o.Timeout != 1500*time.Millisecond ||
					!o.KeepContainers || o.AttemptFailuresValidityInterval != 30000 || o.MaxAMAttempts != 4 || o.Queue != "q1" || o.AppName != "n" {
					t.Errorf("options %+v", o)
				}
			}, false},
		{"no shell command is an error", []string{}, map[string]string{"USER": "alice"}, nil, true},
		{"shell_args takes the words up to the next flag, as Commons CLI does", []string{
			"-shell_command", "echo", "-shell_args", "hello", "big world", "-n", "-num_containers", "2"}, map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				if o.Task.ShellArgs != "hello big world -n" || o.Task.NumContainers != 2 {
					t.Errorf("shell args %q, %d containers", o.Task.ShellArgs, o.Task.NumContainers)
				}
			}, false},
		{"repeated shell_args join by a space", []string{"-shell_command=echo", "-shell_args=a", "--shell_args", "b c"}, map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				if o.Task.ShellArgs != "a b c" {
					t.Errorf("shell args %q, want %q", o.Task.ShellArgs, "a b c")
				}
			}, false},
		{"shell_env is trimmed and split at its first =", []string{"-shell_command=env", "-shell_env", " A=x = y ", "-shell_env", "B"}, map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				if want := map[string]string{"A": "x = y", "B": ""}; !reflect.DeepEqual(o.Task.ShellEnv, want) {
					t.Errorf("environment %q, want %q", o.Task.ShellEnv, want)
				}
			}, false},
		{"a shell script instead of a command", []string{"-shell_script", "job.sh", "-shell_args", "1"}, map[string]string{"USER": "alice"},
			func(t *testing.T, o ClientOptions) {
				if o.ShellScript != "job.sh" || o.Task.ShellCommand != "" || o.Task.ShellArgs != "1" {
					t.Errorf("script %q command %q args %q", o.ShellScript, o.Task.ShellCommand, o.Task.ShellArgs)
				}
			}, false},
		{"a shell script and a command is an error", []string{"-shell_script", "job.sh", "-shell_command", "date"}, map[string]string{"USER": "alice"}, nil, true},
		{"without $USER the login user submits", []string{"-shell_command=date"}, nil, func(t *testing.T, o ClientOptions) {
			if o.User == "" {
				t.Error("no user")
			}
		}, false},
		{"HADOOP_USER_NAME wins over USER", []string{"-shell_command=date"}, map[string]string{"USER": "alice", "HADOOP_USER_NAME": "bob"}, func(t *testing.T, o ClientOptions) {
			if o.User != "bob" {
				t.Errorf("user %q, want bob", o.User)
			}
		}, false},
		{"zero containers is an error", []string{"-shell_command=date", "-num_containers=0"}, map[string]string{"USER": "alice"}, nil, true},
		{"stray arguments are an error", []string{"-shell_command=date", "extra"}, map[string]string{"USER": "alice"}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, err := parseClientFlags(tt.args, func(k string) string { return tt.env[k] }, io.Discard)
			if (err != nil) != tt.wantErr {
				t.Fatalf("parse: %v, want error %v", err, tt.wantErr)
			}
			if tt.check != nil {
				tt.check(t, o)
			}
		})
	}
}

func TestParseAMFlags(t *testing.T) {
	env := map[string]string{
		"CONTAINER_ID":               "container_1700000000000_0001_01_000001",
		"HADOOP_TOKEN_FILE_LOCATION": "container_tokens",
	}
	script := map[string]string{
		EnvScriptLocation: "file:///staging/DistributedShell/application_1700000000000_0001/ExecScript.sh",
		EnvScriptLen:      "12", EnvScriptTimestamp: "1700000000123",
	}
	staged := func(kv ...string) fstest.MapFS {
		files := fstest.MapFS{}
		for i := 0; i < len(kv); i += 2 {
			b, err := appendJavaUTF(nil, kv[i+1])
			if err != nil {
				t.Fatal(err)
			}
			files[kv[i]] = &fstest.MapFile{Data: b}
		}
		return files
	}
	tests := []struct {
		name          string
		args          []string
		files         fstest.MapFS
		env           map[string]string
		wantCommand   string
		wantArgs      string
		wantScript    string // the script's file, if any
		wantScheduler string
		wantErr       string
	}{
		{"the staged command and arguments", []string{"-scheduler_address=rm:8030"}, staged(ShellCommandKey, "echo", ShellArgsKey, `"a b" $X`+"\n'c'"), nil,
			"echo", `"a b" $X` + "\n'c'", "", "rm:8030", ""},
		{"the local scheduler default without one", nil, staged(ShellCommandKey, "date"), nil, "date", "", "", "127.0.0.1:8030", ""},
		{"a command given by hand wins over the staged one", []string{"-shell_command", "ls", "-shell_args", "-l", "-a"}, staged(ShellCommandKey, "date", ShellArgsKey, "x"), nil,
			"ls", "-l -a", "", "127.0.0.1:8030", ""},
		{"the script the environment locates", nil, staged(ShellArgsKey, "1 2"), script, "", "1 2", "/staging/DistributedShell/application_1700000000000_0001/ExecScript.sh", "127.0.0.1:8030", ""},
		{"nothing to run is an error", nil, staged(ShellArgsKey, "1"), nil, "", "", "", "", errNoCommand.Error()},
		{"a script without its length is an error", nil, nil, map[string]string{EnvScriptLocation: script[EnvScriptLocation], EnvScriptTimestamp: "1"}, "", "", "", "",
			"dshell am: Illegal values in env for shell script path"},
		{"a command file not in Java's form is an error", nil, fstest.MapFS{ShellCommandKey: &fstest.MapFile{Data: []byte("echo")}}, nil, "", "", "", "",
			"dshell am: shellCommands: malformed Java modified UTF-8: 2 bytes of 25955"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			getenv := func(k string) string {
				if v, ok := tt.env[k]; ok {
					return v
				}
				return env[k]
			}
			o, err := parseAMFlags(tt.args, getenv, tt.files, io.Discard)
			if fmt.Sprint(err) != fmt.Sprint(errOrNil(tt.wantErr)) {
				t.Fatalf("parse: %v, want %s", err, tt.wantErr)
			}
			if err != nil {
				return
			}
			if o.Task.ShellCommand != tt.wantCommand || o.Task.ShellArgs != tt.wantArgs || o.Task.Script.GetResource().GetFile() != tt.wantScript {
				t.Errorf("command %q args %q script %v, want %q %q %q", o.Task.ShellCommand, o.Task.ShellArgs, o.Task.Script, tt.wantCommand, tt.wantArgs, tt.wantScript)
			}
			if o.SchedulerAddress != tt.wantScheduler || o.ContainerID != env["CONTAINER_ID"] || o.TokenFile != env["HADOOP_TOKEN_FILE_LOCATION"] {
				t.Errorf("options %+v", o)
			}
		})
	}
}

func errOrNil(s string) error {
	if s == "" {
		return nil
	}
	return errors.New(s)
}
