// Package routerweb is the Router's web address (yarn.router.webapp.address):
// the RM REST API of the whole federation, as YARN's RouterWebServices with
// FederationInterceptorREST serve it, and the federation page.
//
// It calls the sub-clusters' RM web services over HTTP, as YARN's Router
// does: cluster-wide reads are fanned out to the active sub-clusters and
// merged (applications by id, an AM's report with its UAMs'; nodes by id,
// the newest report winning; metrics and application statistics summed;
// node labels joined), while calls about one
// application (its report, state, attempts, an attempt and its
// containers, its priority, queue and timeouts) go to its home in the
// federation store. New applications
// and submissions are placed by the RPC Router's own code (router.Router's
// OnRandomActive and SubmitHome), so both doors route alike. The
// reservation calls go to one active sub-cluster and its answer is passed
// on: a knit-rm has no reservation system and every one answers them
// alike, so the Router answers what a single RM does. Errors the
// Router makes itself are written by rm/rest, in the RM's shapes; a
// sub-cluster's own answer about a single application is passed on as it
// is.
package routerweb
