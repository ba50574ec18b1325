package routerweb

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/knitdev/knit/federation/router"
	"github.com/knitdev/knit/protocols/yarnerr"
)

// reservation passes a reservation call to one active sub-cluster, the
// first in id order that answers, and its answer back as it is. A
// knit-rm has no reservation system and answers each such call, its
// checks of the caller, the query and the body included, as every other
// knit-rm does, so the Router answers what a single RM answers; an RM it
// cannot reach is logged and the next one asked.
func (w *Web) reservation(c echo.Context) error {
	ctx := c.Request().Context()
	var body []byte
	if c.Request().Method != http.MethodGet {
		var err error
		if body, err = readBody(c); err != nil {
			return err
		}
	}
	active, err := w.active(ctx)
	if err != nil {
		return err
	}
	for _, sc := range active {
		a, err := w.call(ctx, sc, c.Request().Method, pathQuery(c), body, c.Request().Header)
		if err == nil {
			return pass(c, a)
		}
		if ctx.Err() != nil {
			return err
		}
		w.log.WarnContext(ctx, "sub-cluster unreachable for a reservation call; asking the next", "subCluster", sc.ID, "path", c.Request().URL.Path, "err", err)
	}
	return yarnerr.YarnException.New(router.NoActiveSubCluster)
}
