package localcluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"

	"github.com/knitdev/knit/hadoopconf"
)

// The user's Hadoop configuration (`knit local up --conf-dir DIR`) reaches
// knit-rm, every knit-node and every client through one folder,
// hadoop-conf/ (HadoopConfDir), which is also knit-rm's --conf-dir:
//
//   - yarn-site.xml and core-site.xml of DIR are merged into the ones the
//     cluster writes there: the user's properties win, except the RM's
//     addresses, which the cluster picks;
//   - every other file of DIR (capacity-scheduler.xml, mapred-site.xml,
//     log4j.properties, …) is linked there, so an edit in DIR is what
//     `knit rmadmin -refreshQueues` reads next.
//
// A file put in hadoop-conf/ by hand (capacity-scheduler.xml, say) is used
// as well, unless DIR has one of the same name: then `up` refuses to start
// rather than pick one silently. Links in hadoop-conf/ are the cluster's:
// each start removes them and links DIR's files again, so a start without
// --conf-dir keeps no file of an earlier DIR.

// siteFiles are the files of a conf dir merged into the cluster's own.
var siteFiles = []string{"yarn-site.xml", "core-site.xml"}

// userConf is what a start reads of the user's configuration folder.
type userConf struct {
	dir string
	// yarn and core are the properties of the folder's yarn-site.xml and
	// core-site.xml, by name, unsubstituted.
	yarn, core []hadoopconf.Property
}

// readUserConf reads dir's site files; an empty dir reads none.
func readUserConf(dir string) (userConf, error) {
	if dir == "" {
		return userConf{}, nil
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return userConf{}, fmt.Errorf("localcluster: conf dir: %w", err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return userConf{}, fmt.Errorf("localcluster: conf dir: %w", err)
	} else if !fi.IsDir() {
		return userConf{}, fmt.Errorf("localcluster: conf dir %s is not a folder", abs)
	}
	u := userConf{dir: abs}
	for _, name := range siteFiles {
		props, err := readProperties(filepath.Join(abs, name))
		if err != nil {
			return userConf{}, err
		}
		if name == "yarn-site.xml" {
			u.yarn = props
		} else {
			u.core = props
		}
	}
	return u, nil
}

// readProperties is a site file's properties by name; none when it is
// missing.
func readProperties(path string) ([]hadoopconf.Property, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(path); err != nil {
		return nil, fmt.Errorf("localcluster: %w", err)
	}
	names := c.Names()
	slices.Sort(names)
	props := make([]hadoopconf.Property, 0, len(names))
	for _, n := range names {
		v, _ := c.Raw(n)
		props = append(props, hadoopconf.Property{Name: n, Value: v})
	}
	return props, nil
}

// mergeProperties is owned, then defaults the user does not set, then the
// user's properties but those owned names (dropped ones are logged), then
// extra: later wins in a Hadoop configuration.
func mergeProperties(log *slog.Logger, file string, owned, defaults, user, extra []hadoopconf.Property) []hadoopconf.Property {
	has := func(list []hadoopconf.Property, name string) bool {
		return slices.ContainsFunc(list, func(p hadoopconf.Property) bool { return p.Name == name })
	}
	out := slices.Clone(owned)
	for _, p := range defaults {
		if !has(user, p.Name) {
			out = append(out, p)
		}
	}
	for _, p := range user {
		if has(owned, p.Name) {
			log.Warn("the local cluster sets this property itself; the conf dir's value is not used", "file", file, "property", p.Name, "value", p.Value)
			continue
		}
		out = append(out, p)
	}
	return append(out, extra...)
}

// linkUserConf removes the links an earlier start made in hadoopConf, then
// links every file of u.dir but the site files into it. A file of the same
// name already in hadoopConf (put there by hand) refuses the start.
func linkUserConf(log *slog.Logger, hadoopConf string, u userConf) error {
	ents, err := os.ReadDir(hadoopConf)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("localcluster: %w", err)
	}
	for _, e := range ents {
		if e.Type()&os.ModeSymlink != 0 {
			if err := os.Remove(filepath.Join(hadoopConf, e.Name())); err != nil {
				return fmt.Errorf("localcluster: %w", err)
			}
		}
	}
	if u.dir == "" {
		return nil
	}
	ents, err = os.ReadDir(u.dir)
	if err != nil {
		return fmt.Errorf("localcluster: conf dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() || slices.Contains(siteFiles, e.Name()) {
			continue
		}
		dst := filepath.Join(hadoopConf, e.Name())
		if _, err := os.Lstat(dst); err == nil {
			return conflictError(e.Name(), hadoopConf, u.dir)
		}
		if err := os.Symlink(filepath.Join(u.dir, e.Name()), dst); err != nil {
			return fmt.Errorf("localcluster: conf dir: %w", err)
		}
		log.Info("configuration file linked", "file", e.Name(), "from", u.dir, "to", hadoopConf)
	}
	return nil
}

// checkLegacyRMConf refuses a start on a folder whose rm-conf/, which
// knit-rm read before hadoop-conf/ was its configuration folder, holds a
// capacity-scheduler.xml: it would otherwise be ignored.
func checkLegacyRMConf(dir string) error {
	old := filepath.Join(dir, "rm-conf", "capacity-scheduler.xml")
	if _, err := os.Stat(old); err == nil {
		return fmt.Errorf("localcluster: %s is no longer read: knit-rm reads %s; move it there or pass it with --conf-dir", old, HadoopConfDir(dir))
	}
	return nil
}

// CheckConfDir says whether a cluster in dir can start with the user's
// configuration folder confDir (empty for none) without ignoring a file:
// `knit local up` asks before it starts anything, and the start asks again.
func CheckConfDir(dir, confDir string) error {
	if err := checkLegacyRMConf(dir); err != nil {
		return err
	}
	if confDir == "" {
		return nil
	}
	ents, err := os.ReadDir(confDir)
	if err != nil {
		return fmt.Errorf("localcluster: conf dir: %w", err)
	}
	for _, e := range ents {
		if e.IsDir() || slices.Contains(siteFiles, e.Name()) {
			continue
		}
		if handPlaced(filepath.Join(HadoopConfDir(dir), e.Name())) {
			return conflictError(e.Name(), HadoopConfDir(dir), confDir)
		}
	}
	return nil
}

// handPlaced says whether path is a file the cluster did not link.
func handPlaced(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSymlink == 0
}

func conflictError(name, hadoopConf, confDir string) error {
	return fmt.Errorf("localcluster: %s was put in %s by hand and the conf dir %s has one too: remove one of them", name, hadoopConf, confDir)
}
