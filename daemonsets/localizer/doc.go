// Package localizer is the NodeManager's resource localization, as a
// library for knit-node: for a started container (a launch.Context written
// by RKS) it fetches the launch context's local resources from file,
// http(s), hdfs and s3(a) into the node's cache, in YARN's folder layout
// and with YARN's checks (FSDownload), unpacks archives, builds the
// container's work folder with a link per resource, its token file and
// its tmp folder, with the DefaultContainerExecutor's permissions, and
// returns the launch.Files that knit-launcher runs the container from.
//
// hdfs:// resources are read with github.com/colinmarc/hdfs over
// connections that bound what a namenode or datanode can make the client
// allocate (hdfsguard.go).
//
// The cache index lives in memory and is rebuilt from the cache folders
// on New: after a restart, calling Prepare again for a container that is
// still running holds its resources again without downloading them.
package localizer
