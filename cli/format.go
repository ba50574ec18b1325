package cli

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// Java prints a null reference as "null"; the PBImpl getters return null
// for unset string fields, so an unset field prints so here too.
func jstr(s *string) string {
	if s == nil {
		return "null"
	}
	return *s
}

func appIDString(p *yarnpb.ApplicationIdProto) string {
	if p == nil {
		return "null"
	}
	id, err := yarnid.ApplicationIDFromProto(p)
	if err != nil {
		return "null"
	}
	return id.String()
}

func attemptIDString(p *yarnpb.ApplicationAttemptIdProto) string {
	if p == nil {
		return "null"
	}
	id, err := yarnid.AttemptIDFromProto(p)
	if err != nil {
		return "null"
	}
	return id.String()
}

func containerIDString(p *yarnpb.ContainerIdProto) string {
	if p == nil {
		return "null"
	}
	id, err := yarnid.ContainerIDFromProto(p)
	if err != nil {
		return "null"
	}
	return id.String()
}

// nodeIDString is NodeId.toString: host:port.
func nodeIDString(p *yarnpb.NodeIdProto) string {
	if p == nil {
		return "null"
	}
	return yarnid.NodeString(p)
}

// Java enum names are the proto names without their prefixes
// (ProtoUtils.convertFromProtoFormat).
func appState(s yarnpb.YarnApplicationStateProto) string { return s.String() }

func finalStatus(s yarnpb.FinalApplicationStatusProto) string {
	return strings.TrimPrefix(s.String(), "APP_")
}

func attemptState(s yarnpb.YarnApplicationAttemptStateProto) string {
	return strings.TrimPrefix(s.String(), "APP_ATTEMPT_")
}

func nodeState(s yarnpb.NodeStateProto) string { return strings.TrimPrefix(s.String(), "NS_") }

func queueState(s yarnpb.QueueStateProto) string { return strings.TrimPrefix(s.String(), "Q_") }

func containerState(s yarnpb.ContainerStateProto) string {
	return strings.TrimPrefix(s.String(), "C_")
}

// percent is DecimalFormat("###.##%"): times 100, at most two decimals, no
// leading zero before the point, "0" when nothing else would be printed.
func percent(v float32) string {
	s := strconv.FormatFloat(float64(v)*100, 'f', 2, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	s = strings.TrimPrefix(s, "0")
	s = strings.Replace(s, "-0.", "-.", 1)
	if s == "" || s == "-" || s == "-0" {
		s = "0"
	}
	return s + "%"
}

// twoDecimals is DecimalFormat("#.00"): exactly two decimals and no
// leading zero (0 prints ".00").
func twoDecimals(v float64) string {
	s := strconv.FormatFloat(v, 'f', 2, 64)
	if strings.HasPrefix(s, "0.") {
		return s[1:]
	}
	if strings.HasPrefix(s, "-0.") {
		if s == "-0.00" {
			return "-.00"
		}
		return "-" + s[2:]
	}
	return s
}

// javaTime is org.apache.hadoop.yarn.util.Times.format: "EEE MMM dd
// HH:mm:ss Z yyyy" in local time, "N/A" for no time.
func javaTime(ms int64) string {
	if ms <= 0 {
		return "N/A"
	}
	return time.UnixMilli(ms).Format("Mon Jan 02 15:04:05 -0700 2006")
}

// resourceSeconds is StringHelper.getResourceSecondsString: memory and
// vcores first, then any other resource.
func resourceSeconds(m []*yarnpb.StringLongMapProto, mem, vcores int64) string {
	other := []string{}
	if len(m) > 0 {
		mem, vcores = 0, 0
		for _, e := range m {
			switch e.GetKey() {
			case "memory-mb":
				mem = e.GetValue()
			case "vcores":
				vcores = e.GetValue()
			default:
				other = append(other, fmt.Sprintf("%d %s-seconds", e.GetValue(), e.GetKey()))
			}
		}
	}
	return strings.Join(append([]string{fmt.Sprintf("%d MB-seconds", mem), fmt.Sprintf("%d vcore-seconds", vcores)}, other...), ", ")
}
