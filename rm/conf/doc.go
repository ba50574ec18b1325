// Package conf turns the ResourceManager settings Knit uses into a typed
// RMSettings with YARN's defaults (LoadRMSettings) and checks them as
// Hadoop's ResourceManager does when it starts (Validate). Reading the
// Hadoop configuration files themselves is package hadoopconf's.
//
// Package conf imports only the standard library and hadoopconf.
package conf
