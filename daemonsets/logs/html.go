package logs

import (
	"errors"
	"fmt"
	"html"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"

	"github.com/labstack/echo/v4"
)

// htmlPage writes the page frame around content.
func (s *server) htmlPage(c echo.Context, status int, title, content string) error {
	return c.HTML(status, s.pageHead(c, title)+content+pageTail)
}

// pageHead sets the page's headers and returns the frame before its
// content.
func (s *server) pageHead(c echo.Context, title string) string {
	rm := s.cfg.RMWebAddress
	if rm != "" && !strings.Contains(rm, "://") {
		rm = "http://" + rm
	}
	h := c.Response().Header()
	h.Set("Cache-Control", "no-cache")
	h.Set("Pragma", "no-cache")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("X-Frame-Options", "SAMEORIGIN")
	return strings.NewReplacer("{{TITLE}}", html.EscapeString(title), "{{RM}}", html.EscapeString(rm)).Replace(pageHead)
}

// htmlAccess finds the container and checks the caller and the URL's
// user segment, answering the page itself when they fail.
func (s *server) htmlAccess(c echo.Context) (Container, bool, error) {
	id, user := c.Param("cid"), c.Param("user")
	title := "Logs for " + id
	ctr, ok, err := s.find(id)
	if err != nil {
		return ctr, false, s.htmlPage(c, http.StatusBadRequest, title, h1("Invalid container ID: "+id))
	}
	if !ok {
		if done, err := s.aggregatedPage(c, ctr, c.Param("file")); done {
			return ctr, false, err
		}
		return ctr, false, s.htmlPage(c, http.StatusNotFound, title, h1("Unknown container. Container either has not started or has already completed or doesn't belong to this node at all."))
	}
	if ctr.User != "" && user != ctr.User {
		return ctr, false, s.htmlPage(c, http.StatusForbidden, title, h1("Exception reading log file. Application submitted by '"+ctr.User+"' doesn't own requested log file : "+id))
	}
	if err := s.allowed(c, ctr); err != nil {
		var re *remoteException
		if !errors.As(err, &re) {
			return ctr, false, err
		}
		return ctr, false, s.htmlPage(c, re.status, title, h1(re.text))
	}
	return ctr, true, nil
}

func h1(msg string) string {
	return "          <h1>\n            " + html.EscapeString(msg) + "\n          </h1>\n"
}

func (s *server) logURL(ctr Container, user, file, query string) string {
	return "/node/containerlogs/" + ctr.ID + "/" + user + "/" + file + "/?" + query
}

// htmlList is ContainerLogsPage's list of a container's log files.
func (s *server) htmlList(c echo.Context) error {
	ctr, ok, err := s.htmlAccess(c)
	if !ok {
		return err
	}
	files, err := s.cfg.Dirs.Files(ctr.App, ctr.ID)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("          <h2>\n            Local Logs:\n          </h2>\n")
	for _, f := range files {
		fmt.Fprintf(&b, "          <p>\n            <a href=\"%s\">%s : Total file length is %d bytes.</a>\n",
			html.EscapeString(s.logURL(ctr, c.Param("user"), f.Name, "start=-4096")), html.EscapeString(f.Name), f.Info.Size())
	}
	return s.htmlPage(c, http.StatusOK, "Logs for "+ctr.ID, b.String())
}

// htmlFile is ContainerLogsPage's view of one log: bytes start to end
// (negative counts from the end; start defaults to -4096, end to the
// length).
func (s *server) htmlFile(c echo.Context) error {
	ctr, ok, err := s.htmlAccess(c)
	if !ok {
		return err
	}
	title := "Logs for " + ctr.ID
	name := c.Param("file")
	f, found := s.cfg.Dirs.File(ctr.App, ctr.ID, name)
	if !found {
		return s.htmlPage(c, http.StatusNotFound, title, h1("Cannot get container logs. Log file "+name+" not found"))
	}
	length := f.Info.Size()
	start, end, msg := pageRange(c, length)
	if msg != "" {
		return s.htmlPage(c, http.StatusOK, title, h1(msg))
	}
	file, err := os.Open(f.Path)
	if err != nil {
		return s.htmlPage(c, http.StatusNotFound, title, h1("Cannot get container logs. Log file "+name+" not found"))
	}
	defer file.Close()
	var b strings.Builder
	if toRead := end - start; toRead < length {
		fmt.Fprintf(&b, "          <p>\n            Showing %d bytes. Click \n            <a href=\"%s\">here</a>\n             for full log\n",
			toRead, html.EscapeString(s.logURL(ctr, c.Param("user"), name, "start=0")))
	}
	b.WriteString("          <pre>")
	return s.streamPage(c, title, b.String(), io.NewSectionReader(file, start, end-start), "</pre>\n")
}

// streamPage writes a page whose content ends with r's bytes, escaped,
// without holding them.
func (s *server) streamPage(c echo.Context, title, before string, r io.Reader, after string) error {
	head := s.pageHead(c, title)
	c.Response().Header().Set(echo.HeaderContentType, echo.MIMETextHTMLCharsetUTF8)
	c.Response().WriteHeader(http.StatusOK)
	w := c.Response()
	if _, err := io.WriteString(w, head+before); err != nil {
		return nil
	}
	buf := make([]byte, 32*1024)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := io.WriteString(w, html.EscapeString(string(buf[:n]))); werr != nil {
				return nil
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			s.log.Warn("send log page", "title", title, "err", err)
			return nil
		}
	}
	_, _ = io.WriteString(w, after+pageTail)
	return nil
}

// pageRange is ContainerLogsBlock's byte range of a log of length bytes:
// start (default -4096) to end (default the length), negative values
// counting from the end; msg says why there is none.
func pageRange(c echo.Context, length int64) (start, end int64, msg string) {
	start, err1 := param(c, "start", -4096)
	end, err2 := param(c, "end", length)
	if err1 != nil || err2 != nil {
		return 0, 0, "Invalid start or end value."
	}
	if start < 0 {
		start = max(length+start, 0)
	}
	if end < 0 {
		end = length + end
		if end < 0 {
			end = length
		}
	}
	end = min(end, length)
	if start > end {
		return 0, 0, "Invalid start and end values. Start: [" + strconv.FormatInt(start, 10) + "], end[" + strconv.FormatInt(end, 10) + "]"
	}
	return start, end, ""
}

func param(c echo.Context, name string, def int64) (int64, error) {
	v := c.QueryParam(name)
	if v == "" {
		return def, nil
	}
	return strconv.ParseInt(v, 10, 64)
}
