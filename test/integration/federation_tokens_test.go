package integration

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/hadoopconf"
	"github.com/knitdev/knit/protocols/yarnpb"
	"github.com/knitdev/knit/rm/tokens"
	"github.com/knitdev/knit/test/eventually"
)

// TestARouterDelegationTokenAuthenticatesAClientOnEveryRouter runs one
// knit-rm sub-cluster behind two knit-routers over one federation store.
// A Knit client gets an RM delegation token from the first Router, then
// connects to the second with that token alone (SASL TOKEN) and reads
// the report of an application it submitted through the first: the
// Routers share their delegation keys and tokens through the store, as
// YARN's do, and the call reaches the sub-cluster as the token's owner.
// The token's renewer renews it on the second Router.
func TestARouterDelegationTokenAuthenticatesAClientOnEveryRouter(t *testing.T) {
	buildFederation(t)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	fedNS, st := federationStore(t, "federation-tokens-")
	startSubCluster(t, "sc1", fedNS)
	var routers []string
	for _, name := range []string{"knit-router", "knit-router-2"} {
		addr := freeAddr(t)
		conf := writeSite(t, []hadoopconf.Property{
			{Name: hadoopconf.KeyRouterClientRMAddress, Value: addr},
			{Name: hadoopconf.KeyRouterRMAdminAddress, Value: freeAddr(t)},
			{Name: hadoopconf.KeyRouterWebappAddress, Value: freeAddr(t)},
		})
		startProcess(t, name, "knit-router", conf, "--kubeconfig", cluster.ControlPlane.Kubeconfig, "--namespace", fedNS)
		routers = append(routers, addr)
	}
	eventually.WithinEvery(t, time.Minute, 200*time.Millisecond, func(ctx context.Context) error {
		if active, err := st.GetSubClusters(ctx, true); err != nil || len(active) != 1 {
			return fmt.Errorf("active sub-clusters %v, %v", active, err)
		}
		for _, addr := range routers {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err != nil {
				return err
			}
			c.Close()
		}
		return nil
	})

	alice, err := client.NewRMClient(routers[0], client.RMConfig{User: "alice"})
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	newApp, id := submitUnmanaged(ctx, t, alice, "with a Router's token")
	tok, err := alice.GetDelegationToken(ctx, "yarn")
	if err != nil {
		t.Fatalf("a delegation token from the Router: %v", err)
	}
	ident, err := tokens.ParseDelegationTokenIdentifier(tok.GetIdentifier())
	if err != nil || tok.GetKind() != tokens.KindRMDelegation || tok.GetService() != routers[0] || ident.Owner != "alice" || ident.Renewer != "yarn" {
		t.Fatalf("token %v, identifier %+v, %v", tok, ident, err)
	}

	byToken, err := client.NewRMClient(routers[1], client.RMConfig{Token: tok})
	if err != nil {
		t.Fatal(err)
	}
	defer byToken.Close()
	report, err := byToken.GetApplicationReport(ctx, newApp.GetApplicationId())
	if err != nil {
		t.Fatalf("the report of %s through the second Router with the first's token: %v", id, err)
	}
	if report.GetUser() != "alice" || report.GetYarnApplicationState() == yarnpb.YarnApplicationStateProto_FAILED {
		t.Errorf("report of %s: user %q, state %v", id, report.GetUser(), report.GetYarnApplicationState())
	}

	yarn, err := client.NewRMClient(routers[1], client.RMConfig{User: "yarn"})
	if err != nil {
		t.Fatal(err)
	}
	defer yarn.Close()
	exp, err := yarn.RenewDelegationToken(ctx, tok)
	if err != nil || !exp.After(time.UnixMilli(ident.IssueDate)) {
		t.Errorf("renewal on the second Router: %v, %v", exp, err)
	}
}
