package yarnid

import (
	"errors"
	"math"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

func TestIDsFormatAsYARNDoes(t *testing.T) {
	app := ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}
	tests := []struct {
		name string
		id   interface{ String() string }
		want string
	}{
		{"application", app, "application_1700000000000_0007"},
		{"application number wider than 4 digits", ApplicationID{ClusterTimestamp: 1700000000000, ID: 123456}, "application_1700000000000_123456"},
		{"largest application number", ApplicationID{ClusterTimestamp: math.MaxInt64, ID: math.MaxInt32}, "application_9223372036854775807_2147483647"},
		{"attempt", AttemptID{App: app, ID: 1}, "appattempt_1700000000000_0007_000001"},
		{"attempt number wider than 6 digits", AttemptID{App: app, ID: 12345678}, "appattempt_1700000000000_0007_12345678"},
		{"container", ContainerID{Attempt: AttemptID{App: app, ID: 1}, Sequence: 1}, "container_1700000000000_0007_01_000001"},
		{"container with epoch", ContainerID{Attempt: AttemptID{App: app, ID: 1}, Epoch: 3, Sequence: 2}, "container_e03_1700000000000_0007_01_000002"},
		{"container with a wide epoch, attempt and sequence", ContainerID{Attempt: AttemptID{App: app, ID: 123}, Epoch: 1234, Sequence: 12345678}, "container_e1234_1700000000000_0007_123_12345678"},
		{"container with the largest parts", ContainerID{Attempt: AttemptID{App: app, ID: 1}, Epoch: 1<<23 - 1, Sequence: 1<<40 - 1}, "container_e8388607_1700000000000_0007_01_1099511627775"},
		// Reports carry attempt -1 before the first attempt; Java's
		// NumberFormat puts the sign before the zeros.
		{"negative attempt number", AttemptID{App: app, ID: -1}, "appattempt_1700000000000_0007_-000001"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.id.String(); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestParseReadsWhatStringWrites(t *testing.T) {
	apps := []string{"application_1700000000000_0007", "application_1795333013199_9999", "application_1_123456", "application_0_0000", "application_9223372036854775807_2147483647"}
	for _, s := range apps {
		id, err := ParseApplicationID(s)
		if err != nil || id.String() != s {
			t.Errorf("%s: %v, %v", s, id, err)
		}
	}
	attempts := []string{"appattempt_1700000000000_0007_000001", "appattempt_1_0001_1234567"}
	for _, s := range attempts {
		id, err := ParseAttemptID(s)
		if err != nil || id.String() != s {
			t.Errorf("%s: %v, %v", s, id, err)
		}
	}
	containers := []string{
		"container_1700000000000_0007_01_000001",
		"container_e03_1700000000000_0007_01_000002",
		"container_e17_1410901177871_0001_01_000005",
		"container_e8388607_1700000000000_0007_01_1099511627775",
		"container_1700000000000_123456_123_12345678",
	}
	for _, s := range containers {
		id, err := ParseContainerID(s)
		if err != nil || id.String() != s {
			t.Errorf("%s: %v, %v", s, id, err)
		}
	}
}

func TestParseAcceptsWhatJavaAccepts(t *testing.T) {
	// Leading zeros beyond the minimum width and an explicit zero epoch.
	id, err := ParseContainerID("container_e00_1700000000000_00007_001_0000002")
	if err != nil {
		t.Fatal(err)
	}
	want := ContainerID{Attempt: AttemptID{App: ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}, ID: 1}, Sequence: 2}
	if id != want {
		t.Errorf("got %+v, want %+v", id, want)
	}
}

func TestParseRejectsMalformedIDsWithClearErrors(t *testing.T) {
	tests := []struct {
		parse func(string) error
		in    string
		want  string // part of the message
	}{
		{appParse, "", `must start with "application_"`},
		{appParse, "app_1_0001", `must start with "application_"`},
		{appParse, "application_1700000000000", "want <cluster timestamp>_<number>"},
		{appParse, "application_1700000000000_0001_01", "want <cluster timestamp>_<number>"},
		{appParse, "application__0001", "cluster timestamp: empty"},
		{appParse, "application_17x_0001", `cluster timestamp: "17x" is not a decimal number`},
		{appParse, "application_+1_0001", `"+1" is not a decimal number`},
		{appParse, "application_1_-1", `application number: "-1" is not a decimal number`},
		{appParse, "application_1_2147483648", `application number: "2147483648" is out of range`},
		{appParse, "application_9223372036854775808_1", "cluster timestamp: \"9223372036854775808\" is out of range"},
		{appParse, "application_1_ 1", "not a decimal number"},
		{attemptParse, "application_1_0001", `must start with "appattempt_"`},
		{attemptParse, "appattempt_1_0001", "want <cluster timestamp>_<application>_<attempt>"},
		{attemptParse, "appattempt_1_0001_x", `attempt number: "x" is not a decimal number`},
		{containerParse, "container_1_0001_01", "want [e<epoch>_]<cluster timestamp>_<application>_<attempt>_<sequence>"},
		{containerParse, "container_e_1_0001_01_000001", "epoch: empty"},
		{containerParse, "container_eX_1_0001_01_000001", `epoch: "X" is not a decimal number`},
		{containerParse, "container_e8388608_1_0001_01_000001", "epoch: 8388608 is above 8388607"},
		{containerParse, "container_1_0001_01_1099511627776", "sequence number: 1099511627776 does not fit in 40 bits"},
		{containerParse, "container_1_0001_01_000001_7", "want [e<epoch>_]"},
		{containerParse, "Container_1_0001_01_000001", `must start with "container_"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			err := tt.parse(tt.in)
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("err = %v, want *ParseError", err)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("message %q does not say %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.in) {
				t.Errorf("message %q does not quote the input", err)
			}
		})
	}
}

func TestParseErrorsShortenHugeInput(t *testing.T) {
	_, err := ParseApplicationID("application_" + strings.Repeat("9", 10000))
	if err == nil || len(err.Error()) > 300 {
		t.Errorf("error of %d bytes: %.80v", len(err.Error()), err)
	}
}

func appParse(s string) error       { _, err := ParseApplicationID(s); return err }
func attemptParse(s string) error   { _, err := ParseAttemptID(s); return err }
func containerParse(s string) error { _, err := ParseContainerID(s); return err }

func TestIDsConvertToAndFromProtos(t *testing.T) {
	c := ContainerID{Attempt: AttemptID{App: ApplicationID{ClusterTimestamp: 1700000000000, ID: 7}, ID: 2}, Epoch: 3, Sequence: 5}
	p := c.Proto()
	want := &yarnpb.ContainerIdProto{
		AppAttemptId: &yarnpb.ApplicationAttemptIdProto{
			ApplicationId: &yarnpb.ApplicationIdProto{Id: proto.Int32(7), ClusterTimestamp: proto.Int64(1700000000000)},
			AttemptId:     proto.Int32(2),
		},
		Id: proto.Int64(3<<40 | 5),
	}
	if !proto.Equal(p, want) {
		t.Errorf("proto = %v, want %v", p, want)
	}
	back, err := ContainerIDFromProto(p)
	if err != nil || back != c {
		t.Errorf("back = %+v, %v", back, err)
	}
	att, err := AttemptIDFromProto(c.Attempt.Proto())
	if err != nil || att != c.Attempt {
		t.Errorf("attempt back = %+v, %v", att, err)
	}
	app, err := ApplicationIDFromProto(c.Attempt.App.Proto())
	if err != nil || app != c.Attempt.App {
		t.Errorf("app back = %+v, %v", app, err)
	}
}

func TestProtoConversionsRejectMissingParts(t *testing.T) {
	if _, err := ApplicationIDFromProto(nil); err == nil {
		t.Error("nil application id taken")
	}
	if _, err := AttemptIDFromProto(&yarnpb.ApplicationAttemptIdProto{AttemptId: proto.Int32(1)}); err == nil {
		t.Error("attempt id without application taken")
	}
	if _, err := ContainerIDFromProto(&yarnpb.ContainerIdProto{Id: proto.Int64(1)}); err == nil {
		t.Error("container id without attempt taken")
	}
	neg := ContainerID{Attempt: AttemptID{App: ApplicationID{ClusterTimestamp: 1700000000000, ID: 2}, ID: 1}, Sequence: 1}.Proto()
	neg.Id = proto.Int64(-1)
	if _, err := ContainerIDFromProto(neg); err == nil {
		t.Error("negative container id taken")
	}
}

func FuzzParseApplicationID(f *testing.F) {
	for _, s := range []string{"application_1700000000000_0007", "application_1_123456", "application__", "application_1_-1", "application_01_00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseApplicationID(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		// What parses must format to a string that parses back to the same id.
		again, err := ParseApplicationID(id.String())
		if err != nil || again != id {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, id, id.String(), again, err)
		}
		if id.ID < 0 || id.ClusterTimestamp < 0 {
			t.Fatalf("%q parsed to negative %+v", s, id)
		}
	})
}

func FuzzParseContainerID(f *testing.F) {
	for _, s := range []string{"container_1700000000000_0007_01_000001", "container_e03_1700000000000_0007_01_000002", "container_e8388607_1_1_1_1099511627775", "container_e_1_1_1_1", "container_1_1_1"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, err := ParseContainerID(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v is not a *ParseError", err)
			}
			return
		}
		again, err := ParseContainerID(id.String())
		if err != nil || again != id {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, id, id.String(), again, err)
		}
		// The wire form must carry the same id.
		back, err := ContainerIDFromProto(id.Proto())
		if err != nil || back != id {
			t.Fatalf("%q → proto → %+v, %v", s, back, err)
		}
	})
}
