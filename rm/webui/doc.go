// Package webui serves the ResourceManager's web pages under /cluster, as a
// Hadoop RM's web application does: the cluster overview with the
// applications list (/cluster, /cluster/apps, /cluster/apps/<STATE>), an
// application's page (/cluster/app/<id>, the RM's tracking URL for an
// application without one of its own), the nodes (/cluster/nodes), the
// queues (/cluster/scheduler) and the RM itself (/cluster/cluster). "/"
// redirects to /cluster.
//
// Pages are rendered on the server with html/template, so every string an
// application or a node supplied (names, diagnostics, health reports) is
// escaped; they carry no script and read the same without JavaScript.
// Tables sort and filter through links (?sort=, ?state=, ?queue=, ?user=),
// and bars are inline SVG rectangles styled by the page's stylesheet; the
// Content-Security-Policy forbids scripts and inline styles.
//
// The caller is the user named by the user.name query parameter (Hadoop's
// pseudo authentication), or Config.AnonymousUser; every link keeps it.
// What a user may see is what the Cluster answers for that user, which the
// RM decides with the view ACLs the REST API uses. A running container's
// row links to its web shell (rm/webshell, through Config.Shells) for a
// named user who may open one.
//
// Imports: the standard library, echo, protocols/yarnerr, protocols/yarnpb,
// rm/apps (for apps.Filter) and rm/rest (its answer types, and the HTTP
// status of an error). No globals.
package webui
