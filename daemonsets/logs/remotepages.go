package logs

import (
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/daemonsets/logs/aggregated"
)

// Aggregated says where this node's aggregated logs are, so that the log
// pages still show a container whose logs have left the node. (A
// NodeManager redirects to yarn.log.server.url, a JobHistory server; Knit
// has none, and reads the aggregated file itself.)
type Aggregated struct {
	Lister Lister
	// Layouts are the formats' layouts, in yarn.log-aggregation.file-formats
	// order.
	Layouts []aggregated.Layout
}

// openAggregated opens this node's aggregated files of app, owned by
// user: one, or with rolling aggregation one per upload
// (<node file>_<ms>), oldest first. close closes them all.
func (s *server) openAggregated(ctx context.Context, app, user string) (readers []aggregated.Reader, close func()) {
	var closers []io.Closer
	close = func() {
		for _, c := range closers {
			c.Close()
		}
	}
	ag := s.cfg.Aggregated
	if ag == nil || ag.Lister == nil {
		return nil, close
	}
	name := aggregated.NodeFile(s.cfg.NodeID)
	for _, l := range ag.Layouts {
		dir, err := l.AppDir(user, app)
		if err != nil {
			return nil, close
		}
		files, err := ag.Lister.List(ctx, dir)
		if err != nil {
			s.log.WarnContext(ctx, "list aggregated logs", "dir", dir, "err", err)
			continue
		}
		slices.SortFunc(files, func(a, b RemoteFile) int { return strings.Compare(a.Name, b.Name) })
		for _, f := range files {
			if f.Name != name && !(strings.HasPrefix(f.Name, name+"_") && !strings.HasSuffix(f.Name, tmpSuffix)) {
				continue
			}
			rr, err := ag.Lister.Open(ctx, f)
			if err != nil {
				s.log.WarnContext(ctx, "open aggregated logs", "path", f.Path, "err", err)
				continue
			}
			r, err := aggregated.Open(l.Format, rr, f.Size, f.ModTime)
			if err != nil {
				rr.Close()
				s.log.WarnContext(ctx, "read aggregated logs", "path", f.Path, "err", err)
				continue
			}
			closers = append(closers, rr)
			readers = append(readers, r)
		}
		if len(readers) > 0 {
			return readers, close
		}
	}
	return nil, close
}

// errSent stops a walk once the page is sent.
var errSent = errors.New("page sent")

// aggregatedPage answers the log pages of a container whose logs are no
// longer on the node: its file list, or one file (start and end as for
// local logs). It reports false when it has nothing to show.
func (s *server) aggregatedPage(c echo.Context, ctr Container, file string) (bool, error) {
	user := c.Param("user")
	title := "Logs for " + ctr.ID
	readers, closeAll := s.openAggregated(c.Request().Context(), ctr.App, user)
	defer closeAll()
	if len(readers) == 0 {
		return false, nil
	}
	h := readers[0].Header()
	if h.Owner != user {
		return true, s.htmlPage(c, http.StatusForbidden, title, h1("Exception reading log file. Application submitted by '"+h.Owner+"' doesn't own requested log file : "+ctr.ID))
	}
	if who := caller(c); !s.cfg.Access.CanView(who, h.Owner, h.ACLs) {
		return true, s.htmlPage(c, http.StatusForbidden, title, h1("User ["+who+"] is not authorized to view the logs for "+ctr.ID))
	}
	var b strings.Builder
	found := false
	walk := func(f aggregated.LogFile, content io.Reader) error {
		if f.ContainerID != ctr.ID || (file != "" && f.Name != file) {
			return nil
		}
		found = true
		if file == "" {
			fmt.Fprintf(&b, "          <p>\n            <a href=\"%s\">%s : Total file length is %d bytes.</a>\n",
				html.EscapeString(s.logURL(ctr, user, f.Name, "start=-4096")), html.EscapeString(f.Name), f.Length)
			return nil
		}
		start, end, msg := pageRange(c, f.Length)
		if msg != "" {
			b.WriteString(h1(msg))
			return nil
		}
		if toRead := end - start; toRead < f.Length {
			fmt.Fprintf(&b, "          <p>\n            Showing %d bytes. Click \n            <a href=\"%s\">here</a>\n             for full log\n",
				toRead, html.EscapeString(s.logURL(ctr, user, f.Name, "start=0")))
		}
		if _, err := io.CopyN(io.Discard, content, start); err != nil {
			return err
		}
		b.WriteString("          <pre>")
		if err := s.streamPage(c, title, b.String(), io.LimitReader(content, end-start), "</pre>\n"); err != nil {
			return err
		}
		return errSent
	}
	var err error
	for _, r := range readers {
		if err = r.Walk(walk); err != nil {
			break
		}
	}
	if err == errSent {
		return true, nil
	}
	if err != nil {
		return true, err
	}
	if !found {
		return false, nil
	}
	if file == "" {
		return true, s.htmlPage(c, http.StatusOK, title, "          <h2>\n            Aggregated Logs:\n          </h2>\n"+b.String())
	}
	return true, s.htmlPage(c, http.StatusOK, title, b.String())
}
