package tokens

import (
	"context"
	"slices"

	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/ipc"
	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/yarnerr"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// KindNM is the kind of NMTokens (NMTokenIdentifier.KIND).
const KindNM = "NMToken"

// NMTokens is the NMToken secret manager: the RM side
// (NMTokenSecretManagerInRM) signs one token per (attempt, node) for the AM,
// and the NodeManager side (NMTokenSecretManagerInNM), which RKS plays,
// checks them when an AM connects to a node's NM port.
type NMTokens struct{ m *Manager }

// NMTokens returns the NMToken secret manager.
func (m *Manager) NMTokens() NMTokens { return NMTokens{m} }

// Create signs an NMToken under the current key for attempt to use on node;
// submitter is the application's user. Its service is
// Config.TokenService(node), where NMClient looks it up.
func (n NMTokens) Create(attempt *yarnpb.ApplicationAttemptIdProto, node *yarnpb.NodeIdProto, submitter string) token.Token {
	return n.sign(n.m.snap.Load().keys.NMToken.Current, attempt, node, submitter)
}

func (n NMTokens) sign(key *MasterKey, attempt *yarnpb.ApplicationAttemptIdProto, node *yarnpb.NodeIdProto, submitter string) token.Token {
	id := &yarnpb.NMTokenIdentifierProto{
		AppAttemptId: attemptProto(attempt),
		NodeId:       &yarnpb.NodeIdProto{Host: proto.String(node.GetHost()), Port: proto.Int32(node.GetPort())},
		AppSubmitter: proto.String(submitter),
		KeyId:        proto.Int32(key.ID),
	}
	raw := marshal(id)
	return token.Token{
		Identifier: raw,
		Password:   password(key.Secret, raw),
		Kind:       KindNM,
		Service:    n.m.cfg.TokenService(node.GetHost(), node.GetPort()),
	}
}

// ForNodes returns the NMTokens an allocate answer carries
// (createAndGetNMTokens): one for each of nodes that the attempt has no
// token for under the current key, and records them as sent. After a key
// activation, ForgetNode or an RM restart, the next allocation on a node
// sends a new token; nodes may repeat.
func (n NMTokens) ForNodes(attempt *yarnpb.ApplicationAttemptIdProto, submitter string, nodes []*yarnpb.NodeIdProto) []*yarnpb.NMTokenProto {
	key := n.m.snap.Load().keys.NMToken.Current
	ak := keyOfAttempt(attempt)
	n.m.sentMu.Lock()
	defer n.m.sentMu.Unlock()
	sent := n.m.sent[ak]
	if sent == nil {
		sent = map[nodeKey]int32{}
		n.m.sent[ak] = sent
	}
	var out []*yarnpb.NMTokenProto
	for _, node := range nodes {
		nk := keyOfNode(node)
		if id, ok := sent[nk]; ok && id == key.ID {
			continue
		}
		sent[nk] = key.ID
		out = append(out, &yarnpb.NMTokenProto{
			NodeId: &yarnpb.NodeIdProto{Host: proto.String(node.GetHost()), Port: proto.Int32(node.GetPort())},
			Token:  n.sign(key, attempt, node, submitter).Proto(),
		})
	}
	return out
}

// ForgetAttempt drops the record of the NMTokens an attempt got
// (unregisterApplicationAttempt). Roll also drops it for attempts that are
// no longer live.
func (n NMTokens) ForgetAttempt(attempt *yarnpb.ApplicationAttemptIdProto) {
	n.m.sentMu.Lock()
	defer n.m.sentMu.Unlock()
	delete(n.m.sent, keyOfAttempt(attempt))
}

// ForgetNode makes every attempt get a new NMToken for node with its next
// allocation there (removeNodeKey, called when a node is lost or rejoins).
func (n NMTokens) ForgetNode(node *yarnpb.NodeIdProto) {
	nk := keyOfNode(node)
	n.m.sentMu.Lock()
	defer n.m.sentMu.Unlock()
	for _, sent := range n.m.sent {
		delete(sent, nk)
	}
}

// forgetDeadAttempts drops the sent records of attempts no longer live.
func (m *Manager) forgetDeadAttempts(ctx context.Context) {
	m.sentMu.Lock()
	attempts := make([]attemptKey, 0, len(m.sent))
	for ak := range m.sent {
		attempts = append(attempts, ak)
	}
	m.sentMu.Unlock()
	// AttemptValid runs without the lock: it belongs to the RM and may be slow.
	for _, ak := range attempts {
		if !m.cfg.AttemptValid(ctx, ak.proto()) {
			m.sentMu.Lock()
			delete(m.sent, ak)
			m.sentMu.Unlock()
		}
	}
}

// RetrievePassword is NMTokenSecretManagerInNM.retrievePassword. The token
// verifies under the current or next key, under a retired key for one
// rolling interval, and under the key its attempt is pinned to. If node is
// not nil, the token must have been issued for that node.
func (n NMTokens) RetrievePassword(identifier []byte, node *yarnpb.NodeIdProto) (*yarnpb.NMTokenIdentifierProto, []byte, error) {
	var id yarnpb.NMTokenIdentifierProto
	if err := proto.Unmarshal(identifier, &id); err != nil ||
		id.GetAppAttemptId().GetApplicationId() == nil || id.GetNodeId() == nil {
		return nil, nil, yarnerr.InvalidToken.New(msgCannotDeserialize)
	}
	attempt := AttemptString(id.GetAppAttemptId())
	snap := n.m.snap.Load()
	pin, pinned := snap.pins[keyOfAttempt(id.GetAppAttemptId())]
	key := snap.keys.NMToken.find(id.GetKeyId(), n.m.cfg.Clock.Now(), true, func(k int32) bool { return pinned && k == pin })
	if node != nil && keyOfNode(node) != keyOfNode(id.GetNodeId()) {
		// Hadoop's message lacks the space before "expected".
		return &id, nil, yarnerr.InvalidToken.Errorf("Given NMToken for application : %s is not valid for current node manager.expected : %s found : %s",
			attempt, yarnid.NodeString(node), yarnid.NodeString(id.GetNodeId()))
	}
	if key == nil {
		return &id, nil, yarnerr.InvalidToken.Errorf("Given NMToken for application : %s seems to have been generated illegally.", attempt)
	}
	return &id, password(key.Secret, identifier), nil
}

// SecretLookup returns the check the NM port's ipc.Server (RKS) runs. node,
// if not nil, tells which node a connection arrived for, and tokens of other
// nodes are refused. The caller's user is the attempt id string; the
// identity is the *yarnpb.NMTokenIdentifierProto, which RKS passes to
// PinAttempt when a container starts and compares with container tokens.
func (n NMTokens) SecretLookup(node func(ctx context.Context) *yarnpb.NodeIdProto) ipc.SecretLookup {
	return func(ctx context.Context, identifier []byte) (ipc.Secret, error) {
		var want *yarnpb.NodeIdProto
		if node != nil {
			want = node(ctx)
		}
		id, pw, err := n.RetrievePassword(identifier, want)
		if err != nil {
			return ipc.Secret{}, err
		}
		return ipc.Secret{Password: pw, User: AttemptString(id.GetAppAttemptId()), Identity: id}, nil
	}
}

// PinAttempt records, on a successful startContainers, the key of the
// NMToken the attempt used (appAttemptStartContainer), so that the attempt's
// later calls with that token keep working however the keys roll, until the
// attempt ends. The token must be under the current, next or a retired key;
// an older one is refused as Hadoop refuses it. A new pin is saved before
// PinAttempt returns.
func (n NMTokens) PinAttempt(ctx context.Context, id *yarnpb.NMTokenIdentifierProto) error {
	ak := keyOfAttempt(id.GetAppAttemptId())
	snap := n.m.snap.Load()
	if pin, ok := snap.pins[ak]; ok && pin == id.GetKeyId() {
		return nil
	}
	return n.m.update(ctx, func(k *Keys) (bool, error) {
		if k.NMToken.find(id.GetKeyId(), n.m.cfg.Clock.Now(), true, nil) == nil {
			return false, yarnerr.InvalidToken.Errorf("Older NMToken should not be used while starting the container.")
		}
		i := slices.IndexFunc(k.NMTokenPins, func(p NMTokenPin) bool {
			return p.ClusterTimestamp == ak.clusterTimestamp && p.AppID == ak.app && p.AttemptID == ak.attempt
		})
		pin := NMTokenPin{ClusterTimestamp: ak.clusterTimestamp, AppID: ak.app, AttemptID: ak.attempt, KeyID: id.GetKeyId()}
		if i < 0 {
			k.NMTokenPins = append(k.NMTokenPins, pin)
		} else {
			if k.NMTokenPins[i] == pin {
				return false, nil
			}
			k.NMTokenPins[i] = pin
		}
		return true, nil
	})
}
