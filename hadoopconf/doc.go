// Package hadoopconf reads and writes Hadoop configuration files — yarn-site.xml,
// capacity-scheduler.xml, core-site.xml — the way org.apache.hadoop.conf.
// Configuration does, and turns the ResourceManager settings Knit uses into a
// typed RMSettings with YARN's defaults.
//
// # Reading
//
// A file is <configuration> holding <property> elements with <name>, <value>
// and optionally <final> children (or name/value/final attributes). As in
// Hadoop, names are trimmed and values are not (a queue ACL of a single space
// means "nobody"), an empty <value/> sets nothing, and resources are merged in
// the order they are added: a later value replaces an earlier one unless an
// earlier definition was marked final. Overrides of final properties are
// ignored and recorded in Warnings.
//
// These files come from users, so every resource is read under Limits (bytes,
// properties, name and value sizes, element depth); input beyond a limit fails
// with ErrTooLarge and adds nothing. XInclude is refused: a file never makes
// Knit read another one.
//
// # Getting values
//
// Get and the typed getters substitute ${name} with another property's value
// and ${env.NAME} (also ${env.NAME:-default} and ${env.NAME-default}) with the
// environment, exactly as Hadoop's substituteVars: fewer than 20
// substitutions per value, an unbound variable is left as written, and a
// self-referencing value is returned unexpanded (a loop through several
// properties runs into the limit). Expanded values are bounded by
// Limits.MaxValueBytes. Java system properties, which Hadoop consults
// first, do not exist here.
// Typed getters parse as Hadoop's getInt, getLong, getFloat, getBoolean,
// getTimeDuration and getTrimmedStrings do; a value that does not parse is an
// error wrapping ErrInvalidValue (Hadoop throws NumberFormatException), except
// for booleans, where Hadoop falls back to the default and so does GetBool.
//
// # Ownership
//
// A Configuration is built by one goroutine (New, AddResource, AddFile, Set)
// and may then be read by many; reads never modify it. Package hadoopconf imports
// only the standard library.
package hadoopconf
