package amrmproxy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"

	"github.com/knitdev/knit/hadoopconf"
)

// WriteAMConf writes the Hadoop configuration folder the node's AM
// containers get as HADOOP_CONF_DIR: the node's own (src) with the
// scheduler address, and each HA RM's, set to the proxy's address, as an
// NM with the AMRMProxy on arranges; the AM's client then sends its
// heartbeats, and sets its token's service, to the proxy. Other files of
// src are copied as they are.
func WriteAMConf(dst, src, proxyAddr string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	ents, err := os.ReadDir(src)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	for _, e := range ents {
		if e.Name() == "yarn-site.xml" {
			continue
		}
		// Stat follows links: a cluster may link the user's files in.
		path := filepath.Join(src, e.Name())
		if fi, err := os.Stat(path); err != nil || !fi.Mode().IsRegular() {
			continue
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("amrmproxy: AM configuration: %w", err)
		}
		if err := renameio.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return fmt.Errorf("amrmproxy: AM configuration: %w", err)
		}
	}
	c := hadoopconf.New(hadoopconf.Options{})
	if err := c.AddFile(filepath.Join(src, "yarn-site.xml")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	ids, err := hadoopconf.RMHAIDs(c)
	if err != nil {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	c.Set(hadoopconf.KeyRMSchedulerAddress, proxyAddr)
	for _, id := range ids {
		c.Set(hadoopconf.KeyRMSchedulerAddress+"."+id, proxyAddr)
	}
	var buf bytes.Buffer
	if err := c.WriteXML(&buf); err != nil {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	if err := renameio.WriteFile(filepath.Join(dst, "yarn-site.xml"), buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("amrmproxy: AM configuration: %w", err)
	}
	return nil
}
