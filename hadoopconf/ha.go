package hadoopconf

import (
	"fmt"
	"strings"
)

// Property names of ResourceManager HA, as in yarn-default.xml.
const (
	KeyRMHAEnabled           = "yarn.resourcemanager.ha.enabled"
	KeyRMHAIDs               = "yarn.resourcemanager.ha.rm-ids"
	KeyRMHAID                = "yarn.resourcemanager.ha.id"
	KeyRMHAAutomaticFailover = "yarn.resourcemanager.ha.automatic-failover.enabled"
)

// rmAddressPorts are the RM addresses that HA sets per RM id, with the port
// each takes from yarn.resourcemanager.hostname.<id>.
var rmAddressPorts = []struct {
	key  string
	port int
}{
	{KeyRMAddress, 8032},
	{KeyRMSchedulerAddress, 8030},
	{KeyRMAdminAddress, 8033},
	{KeyRMWebappAddress, 8088},
}

// RMHAIDs returns yarn.resourcemanager.ha.rm-ids when
// yarn.resourcemanager.ha.enabled is true, and nil when HA is off. HA on
// with fewer than two ids is refused, as HAUtil.verifyAndSetRMHAIdsList
// refuses it.
func RMHAIDs(c *Configuration) ([]string, error) {
	on, err := c.GetBool(KeyRMHAEnabled, false)
	if err != nil || !on {
		return nil, err
	}
	ids, err := c.GetStrings(KeyRMHAIDs, nil)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, id := range ids {
		if id = strings.TrimSpace(id); id != "" {
			out = append(out, id)
		}
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("%s needs at least two ids with %s on, has %q", KeyRMHAIDs, KeyRMHAEnabled, ids)
	}
	return out, nil
}

// ForRM returns a copy of c in which the RM addresses and hostname are RM
// id's, as HAUtil.getConfValueForRMInstance reads them: each address key
// takes key.<id> when set, else yarn.resourcemanager.hostname.<id> with the
// address's default port; the hostname takes hostname.<id>.
func ForRM(c *Configuration, id string) *Configuration {
	d := c.Clone()
	host, hasHost := c.Raw(KeyRMHostname + "." + id)
	if hasHost {
		d.Set(KeyRMHostname, host)
	}
	for _, a := range rmAddressPorts {
		if v, ok := c.Raw(a.key + "." + id); ok {
			d.Set(a.key, v)
		} else if hasHost {
			d.Set(a.key, fmt.Sprintf("%s:%d", strings.TrimSpace(host), a.port))
		}
	}
	return d
}
