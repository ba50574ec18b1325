package rest

import (
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/apps"
)

// AnyType is the applicationType of the statistics that count every type
// (RMWSConsts.ANY).
const AnyType = "*"

// StatItem is Hadoop's StatisticsItemInfo: how many applications of one
// type (lower case, or AnyType) are in one state.
type StatItem struct {
	State string `json:"state"`
	Type  string `json:"type"`
	Count int64  `json:"count"`
}

// StatsQuery is what GET /appstatistics counts: states in YARN's order of
// YarnApplicationState, and one application type (AnyType for all).
type StatsQuery struct {
	States []yarnpb.YarnApplicationStateProto
	Type   string
}

// ParseStatsQuery reads the states and applicationTypes parameters as
// RMWebServices.getAppStatistics does, with its 400 answers: each state a
// YarnApplicationState in any case, at most one type; no states means
// every state. The Router checks a query with it before it fans out.
func ParseStatsQuery(v url.Values) (StatsQuery, error) {
	q := StatsQuery{Type: AnyType}
	want := map[yarnpb.YarnApplicationStateProto]bool{}
	for _, s := range splitAll(v["states"]) {
		if err := (apps.Filter{States: []string{s}}).Validate(); err != nil {
			return q, badRequest(err.Error())
		}
		want[yarnpb.YarnApplicationStateProto(yarnpb.YarnApplicationStateProto_value[strings.ToUpper(s)])] = true
	}
	types := map[string]bool{}
	for _, t := range splitAll(v["applicationTypes"]) {
		types[strings.ToLower(t)] = true
	}
	switch len(types) {
	case 0:
	case 1:
		for t := range types {
			q.Type = t
		}
	default:
		return q, badRequest("# of applicationTypes = " + strconv.Itoa(len(types)) + ", we temporarily support at most one applicationType")
	}
	for s := yarnpb.YarnApplicationStateProto_NEW; s <= yarnpb.YarnApplicationStateProto_KILLED; s++ {
		if len(want) == 0 || want[s] {
			q.States = append(q.States, s)
		}
	}
	return q, nil
}

// AppStatistics is the body of GET /appstatistics for the items.
func AppStatistics(items []StatItem) any {
	var body struct {
		AppStatInfo struct {
			StatItem []StatItem `json:"statItem,omitempty"`
		} `json:"appStatInfo"`
	}
	body.AppStatInfo.StatItem = items
	return body
}

// appStatistics is RMWebServices.getAppStatistics: every application the
// RM holds counts, whoever asks, one item for each state asked, zero
// included.
func (s *server) appStatistics(c echo.Context) error {
	q, err := ParseStatsQuery(c.QueryParams())
	if err != nil {
		return err
	}
	counts, err := s.cfg.Cluster.CountApps(c.Request().Context(), q)
	if err != nil {
		return err
	}
	items := make([]StatItem, 0, len(q.States))
	for _, st := range q.States {
		items = append(items, StatItem{State: st.String(), Type: q.Type, Count: counts[st]})
	}
	return writeJSON(c, http.StatusOK, AppStatistics(items))
}
