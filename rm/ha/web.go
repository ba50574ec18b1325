package ha

import (
	"encoding/json"
	"html"
	"net/http"
	"strings"

	"github.com/knitdev/knit/rm/rest"
)

// Paths of the web port that answer on a standby too.
const (
	// IsActivePath is Hadoop's IsActiveServlet: 200 on the active RM, 405
	// on a standby. Load balancers and readiness probes ask it.
	IsActivePath = "/isActive"
	infoPath     = "/ws/v1/cluster/info"
)

// IsActive's bodies, IsActiveServlet's.
const (
	msgIsActive  = "I am Active!"
	msgNotActive = "I am not Active!"
)

// noActiveRetrySeconds is when a page asked of a standby that knows no
// active RM refreshes itself (RMWebAppFilter's BASIC_SLEEP_TIME).
const noActiveRetrySeconds = "5"

// IsActive serves IsActivePath.
func IsActive(active func() bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if active() {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
			_, _ = w.Write([]byte(msgIsActive))
			return
		}
		http.Error(w, msgNotActive, http.StatusMethodNotAllowed)
	}
}

// WebConfig is what StandbyWeb needs.
type WebConfig struct {
	// Info is the standby's /ws/v1/cluster/info (haState STANDBY).
	Info rest.ClusterInfo
	// ActiveURL is the base URL of the active RM's web port
	// ("http://host:8088"), or "" when no active RM is known.
	ActiveURL func() string
}

// StandbyWeb serves a standby's web port as RMWebAppFilter does: the
// cluster info and IsActivePath answer here, every other page redirects
// (307) to the same page on the active RM. Knit's standby holds no state,
// so the pages a YARN standby renders itself (/cluster, /proxy, /conf…)
// redirect too.
func StandbyWeb(cfg WebConfig) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+IsActivePath, IsActive(func() bool { return false }))
	info := func(w http.ResponseWriter, _ *http.Request) {
		b, err := json.Marshal(struct {
			ClusterInfo rest.ClusterInfo `json:"clusterInfo"`
		}{cfg.Info})
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json;charset=utf-8")
		w.Header().Set("Cache-Control", "no-cache")
		_, _ = w.Write(b)
	}
	for _, p := range []string{"/ws/v1/cluster", "/ws/v1/cluster/{$}", infoPath} {
		mux.HandleFunc("GET "+p, info)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		uri := r.URL.EscapedPath()
		if r.URL.RawQuery != "" {
			uri += "?" + r.URL.RawQuery
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if active := strings.TrimSuffix(cfg.ActiveURL(), "/"); active != "" {
			w.Header().Set("Location", active+uri)
			w.WriteHeader(http.StatusTemporaryRedirect)
			_, _ = w.Write([]byte("This is standby RM. The redirect url is: " + html.EscapeString(uri) + "\n"))
			return
		}
		w.Header().Set("Refresh", noActiveRetrySeconds+";url="+uri)
		w.WriteHeader(http.StatusTemporaryRedirect)
		_, _ = w.Write([]byte("Can not find any active RM. Will retry in next " + noActiveRetrySeconds + " seconds.\n"))
	})
	return mux
}
