// Package yarnid reads and writes YARN's application, attempt and container
// ids: their strings (application_<ts>_<seq>, appattempt_…, container_e<epoch>_…)
// as Hadoop prints and parses them, and their protos. RM, RGS, RKS and the
// node services all name containers by them.
package yarnid

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/yarnpb"
)

// Id string prefixes, as YARN's ApplicationId, ApplicationAttemptId and
// ContainerId write them.
const (
	appPrefix       = "application_"
	attemptPrefix   = "appattempt_"
	containerPrefix = "container_"
)

// Bounds of the two halves of ContainerIdProto.id: the low 40 bits are the
// sequence number, the bits above it the RM epoch. The epoch is capped at 23
// bits so that the combined id stays a positive int64.
const (
	sequenceBits = 40
	sequenceMask = int64(1)<<sequenceBits - 1
	maxEpoch     = int64(1)<<(63-sequenceBits) - 1
)

// ApplicationID identifies an application: the timestamp of the cluster
// (RM) that issued it and a sequence number.
type ApplicationID struct {
	ClusterTimestamp int64
	ID               int32
}

// String formats the id as YARN does: application_<ts>_<id, at least 4 digits>.
func (id ApplicationID) String() string {
	return appPrefix + strconv.FormatInt(id.ClusterTimestamp, 10) + "_" + pad(int64(id.ID), 4)
}

// Proto returns the id as the wire message.
func (id ApplicationID) Proto() *yarnpb.ApplicationIdProto {
	return &yarnpb.ApplicationIdProto{
		Id:               proto.Int32(id.ID),
		ClusterTimestamp: proto.Int64(id.ClusterTimestamp),
	}
}

// ApplicationIDFromProto reads a wire id. Absent fields read as zero, as
// Java's ApplicationIdPBImpl reads them; a nil message is an error.
func ApplicationIDFromProto(p *yarnpb.ApplicationIdProto) (ApplicationID, error) {
	if p == nil {
		return ApplicationID{}, errors.New("missing application id")
	}
	return ApplicationID{ClusterTimestamp: p.GetClusterTimestamp(), ID: p.GetId()}, nil
}

// ParseApplicationID reads the string form written by String. It is stricter
// than Java's ApplicationId.fromString: no signs, no trailing fields.
func ParseApplicationID(s string) (ApplicationID, error) {
	const kind = "ApplicationId"
	rest, ok := strings.CutPrefix(s, appPrefix)
	if !ok {
		return ApplicationID{}, parseErr(kind, s, fmt.Errorf("must start with %q", appPrefix))
	}
	f := strings.Split(rest, "_")
	if len(f) != 2 {
		return ApplicationID{}, parseErr(kind, s, fmt.Errorf("want <cluster timestamp>_<number> after %q", appPrefix))
	}
	id, err := parseAppFields(f[0], f[1])
	if err != nil {
		return ApplicationID{}, parseErr(kind, s, err)
	}
	return id, nil
}

// AttemptID identifies one attempt of an application; attempts count from 1.
type AttemptID struct {
	App ApplicationID
	ID  int32
}

// String formats the id as YARN does:
// appattempt_<ts>_<app, at least 4 digits>_<attempt, at least 6 digits>.
func (id AttemptID) String() string {
	return attemptPrefix + strconv.FormatInt(id.App.ClusterTimestamp, 10) + "_" +
		pad(int64(id.App.ID), 4) + "_" + pad(int64(id.ID), 6)
}

// Proto returns the id as the wire message.
func (id AttemptID) Proto() *yarnpb.ApplicationAttemptIdProto {
	return &yarnpb.ApplicationAttemptIdProto{
		ApplicationId: id.App.Proto(),
		AttemptId:     proto.Int32(id.ID),
	}
}

// AttemptIDFromProto reads a wire attempt id; its application id must be set.
func AttemptIDFromProto(p *yarnpb.ApplicationAttemptIdProto) (AttemptID, error) {
	if p == nil {
		return AttemptID{}, errors.New("missing application attempt id")
	}
	app, err := ApplicationIDFromProto(p.GetApplicationId())
	if err != nil {
		return AttemptID{}, fmt.Errorf("application attempt id: %w", err)
	}
	return AttemptID{App: app, ID: p.GetAttemptId()}, nil
}

// ParseAttemptID reads the string form written by AttemptID.String.
func ParseAttemptID(s string) (AttemptID, error) {
	const kind = "ApplicationAttemptId"
	rest, ok := strings.CutPrefix(s, attemptPrefix)
	if !ok {
		return AttemptID{}, parseErr(kind, s, fmt.Errorf("must start with %q", attemptPrefix))
	}
	f := strings.Split(rest, "_")
	if len(f) != 3 {
		return AttemptID{}, parseErr(kind, s, fmt.Errorf("want <cluster timestamp>_<application>_<attempt> after %q", attemptPrefix))
	}
	app, err := parseAppFields(f[0], f[1])
	if err != nil {
		return AttemptID{}, parseErr(kind, s, err)
	}
	n, err := parseDecimal(f[2], 31)
	if err != nil {
		return AttemptID{}, parseErr(kind, s, fmt.Errorf("attempt number: %w", err))
	}
	return AttemptID{App: app, ID: int32(n)}, nil
}

// ContainerID identifies a container: the attempt that allocated it, the RM
// epoch (restarts of a work-preserving RM) and a sequence number within the
// attempt. The AM container is sequence 1.
type ContainerID struct {
	Attempt  AttemptID
	Epoch    int64 // 0 ≤ Epoch < 2^23
	Sequence int64 // 0 ≤ Sequence < 2^40
}

// ProtoID is the int64 ContainerIdProto.id carries: epoch<<40 | sequence.
func (id ContainerID) ProtoID() int64 {
	return id.Epoch<<sequenceBits | id.Sequence&sequenceMask
}

// String formats the id as YARN does:
// container_[e<epoch, at least 2 digits>_]<ts>_<app ≥4>_<attempt ≥2>_<sequence ≥6>,
// the epoch part only when the epoch is not zero.
func (id ContainerID) String() string {
	var b strings.Builder
	b.WriteString(containerPrefix)
	if id.Epoch > 0 {
		b.WriteString("e" + pad(id.Epoch, 2) + "_")
	}
	b.WriteString(strconv.FormatInt(id.Attempt.App.ClusterTimestamp, 10) + "_")
	b.WriteString(pad(int64(id.Attempt.App.ID), 4) + "_")
	b.WriteString(pad(int64(id.Attempt.ID), 2) + "_")
	b.WriteString(pad(id.Sequence, 6))
	return b.String()
}

// Proto returns the id as the wire message. Like Java since Hadoop 2.6 it
// leaves the deprecated app_id field unset.
func (id ContainerID) Proto() *yarnpb.ContainerIdProto {
	return &yarnpb.ContainerIdProto{
		AppAttemptId: id.Attempt.Proto(),
		Id:           proto.Int64(id.ProtoID()),
	}
}

// ContainerIDFromProto reads a wire container id. The attempt id must be set
// (Java reads nothing else) and the id must not be negative.
func ContainerIDFromProto(p *yarnpb.ContainerIdProto) (ContainerID, error) {
	if p == nil {
		return ContainerID{}, errors.New("missing container id")
	}
	att, err := AttemptIDFromProto(p.GetAppAttemptId())
	if err != nil {
		return ContainerID{}, fmt.Errorf("container id: %w", err)
	}
	raw := p.GetId()
	if raw < 0 {
		return ContainerID{}, fmt.Errorf("container id: negative id %d", raw)
	}
	return ContainerID{Attempt: att, Epoch: raw >> sequenceBits, Sequence: raw & sequenceMask}, nil
}

// ParseContainerID reads both string forms written by ContainerID.String,
// with or without the epoch. An explicit "e00" epoch is accepted, as Java
// accepts it.
func ParseContainerID(s string) (ContainerID, error) {
	const kind = "ContainerId"
	rest, ok := strings.CutPrefix(s, containerPrefix)
	if !ok {
		return ContainerID{}, parseErr(kind, s, fmt.Errorf("must start with %q", containerPrefix))
	}
	f := strings.Split(rest, "_")
	var epoch int64
	if len(f) > 0 && strings.HasPrefix(f[0], "e") {
		e, err := parseDecimal(f[0][1:], 63)
		if err != nil {
			return ContainerID{}, parseErr(kind, s, fmt.Errorf("epoch: %w", err))
		}
		if e > maxEpoch {
			return ContainerID{}, parseErr(kind, s, fmt.Errorf("epoch: %d is above %d", e, maxEpoch))
		}
		epoch = e
		f = f[1:]
	}
	if len(f) != 4 {
		return ContainerID{}, parseErr(kind, s, fmt.Errorf("want [e<epoch>_]<cluster timestamp>_<application>_<attempt>_<sequence> after %q", containerPrefix))
	}
	app, err := parseAppFields(f[0], f[1])
	if err != nil {
		return ContainerID{}, parseErr(kind, s, err)
	}
	att, err := parseDecimal(f[2], 31)
	if err != nil {
		return ContainerID{}, parseErr(kind, s, fmt.Errorf("attempt number: %w", err))
	}
	seq, err := parseDecimal(f[3], 63)
	if err != nil {
		return ContainerID{}, parseErr(kind, s, fmt.Errorf("sequence number: %w", err))
	}
	if seq > sequenceMask {
		// Java would silently OR the excess bits into the epoch.
		return ContainerID{}, parseErr(kind, s, fmt.Errorf("sequence number: %d does not fit in 40 bits", seq))
	}
	return ContainerID{Attempt: AttemptID{App: app, ID: int32(att)}, Epoch: epoch, Sequence: seq}, nil
}

// ParseError reports an id string that is not well formed. Id strings come
// from users (CLI arguments, REST paths), so the message names the part that
// is wrong.
type ParseError struct {
	Kind  string // ApplicationId, ApplicationAttemptId or ContainerId
	Input string // the string, shortened to 100 bytes
	Err   error
}

// Error quotes the input and says what is wrong with it.
func (e *ParseError) Error() string {
	return fmt.Sprintf("invalid %s %q: %v", e.Kind, e.Input, e.Err)
}

// Unwrap returns the reason.
func (e *ParseError) Unwrap() error { return e.Err }

func parseErr(kind, input string, err error) error {
	// A user may send anything; keep errors and logs bounded.
	if len(input) > 100 {
		input = input[:100] + "..."
	}
	return &ParseError{Kind: kind, Input: input, Err: err}
}

// parseAppFields reads the <cluster timestamp>_<application number> pair all
// three id forms share.
func parseAppFields(ts, n string) (ApplicationID, error) {
	t, err := parseDecimal(ts, 63)
	if err != nil {
		return ApplicationID{}, fmt.Errorf("cluster timestamp: %w", err)
	}
	id, err := parseDecimal(n, 31)
	if err != nil {
		return ApplicationID{}, fmt.Errorf("application number: %w", err)
	}
	return ApplicationID{ClusterTimestamp: t, ID: int32(id)}, nil
}

// parseDecimal reads an unsigned decimal below 2^bits. strconv alone would
// also take a sign, which no YARN id string carries.
func parseDecimal(s string, bits int) (int64, error) {
	if s == "" {
		return 0, errors.New("empty")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%q is not a decimal number", s)
		}
	}
	n, err := strconv.ParseInt(s, 10, bits+1)
	if err != nil {
		return 0, fmt.Errorf("%q is out of range", s)
	}
	return n, nil
}

// pad formats n with at least width digits, as Java's NumberFormat with
// setMinimumIntegerDigits does: wider numbers are never cut, and a minus
// sign goes before the zeros.
func pad(n int64, width int) string {
	u := uint64(n)
	if n < 0 {
		u = -u // two's complement: also right for math.MinInt64
	}
	s := strconv.FormatUint(u, 10)
	if len(s) < width {
		s = strings.Repeat("0", width-len(s)) + s
	}
	if n < 0 {
		s = "-" + s
	}
	return s
}
