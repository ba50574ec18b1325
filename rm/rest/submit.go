package rest

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"

	"github.com/knitdev/knit/protocols/token"
	"github.com/knitdev/knit/protocols/writable"
	"github.com/knitdev/knit/protocols/yarnid"
	"github.com/knitdev/knit/protocols/yarnpb"
)

// list is a Jersey natural-notation list: one object or an array of them.
type list[T any] []T

func (l *list[T]) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '[' {
		var v []T
		err := json.Unmarshal(b, &v)
		*l = v
		return err
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	*l = list[T]{v}
	return nil
}

type kv[V any] struct {
	Key   string `json:"key"`
	Value V      `json:"value"`
}

type entries[V any] struct {
	Entry list[kv[V]] `json:"entry"`
}

// submissionContext is Hadoop's ApplicationSubmissionContextInfo, the body
// of POST /apps.
type submissionContext struct {
	ApplicationID   string         `json:"application-id"`
	ApplicationName *string        `json:"application-name"`
	Queue           *string        `json:"queue"`
	Priority        *int32         `json:"priority"`
	AMContainerSpec *containerSpec `json:"am-container-spec"`
	UnmanagedAM     *bool          `json:"unmanaged-AM"`
	MaxAppAttempts  *int32         `json:"max-app-attempts"`
	Resource        *struct {
		Memory int64 `json:"memory"`
		VCores int32 `json:"vCores"`
	} `json:"resource"`
	ApplicationType *string `json:"application-type"`
	KeepContainers  *bool   `json:"keep-containers-across-application-attempts"`
	ApplicationTags *struct {
		Tag list[string] `json:"tag"`
	} `json:"application-tags"`
	AttemptFailuresValidityInterval *int64  `json:"attempt-failures-validity-interval"`
	AppNodeLabelExpression          *string `json:"app-node-label-expression"`
	AMNodeLabelExpression           *string `json:"am-container-node-label-expression"`
}

type containerSpec struct {
	LocalResources entries[localResource] `json:"local-resources"`
	Environment    entries[string]        `json:"environment"`
	Commands       struct {
		Command list[string] `json:"command"`
	} `json:"commands"`
	ServiceData     entries[string] `json:"service-data"`
	ApplicationACLs entries[string] `json:"application-acls"`
	// Credentials is Hadoop's CredentialsInfo: tokens as
	// Token.encodeToUrlString writes them, secrets in base64, each under
	// its alias.
	Credentials *struct {
		Tokens  entries[string] `json:"tokens"`
		Secrets entries[string] `json:"secrets"`
	} `json:"credentials"`
}

type localResource struct {
	Resource   string `json:"resource"`
	Type       string `json:"type"`
	Visibility string `json:"visibility"`
	Size       int64  `json:"size"`
	Timestamp  int64  `json:"timestamp"`
	Pattern    string `json:"pattern"`
}

// submissionProto is a submission read from its body in the RPC form, as
// RMWebAppUtil.createAppSubmissionContext makes it.
func submissionProto(in submissionContext) (*yarnpb.ApplicationSubmissionContextProto, error) {
	id, err := yarnid.ParseApplicationID(in.ApplicationID)
	if err != nil {
		return nil, illegalArgument(fmt.Sprintf("Invalid ApplicationId: %s", in.ApplicationID))
	}
	sc := &yarnpb.ApplicationSubmissionContextProto{
		ApplicationId:                           id.Proto(),
		ApplicationName:                         in.ApplicationName,
		Queue:                                   in.Queue,
		UnmanagedAm:                             in.UnmanagedAM,
		MaxAppAttempts:                          in.MaxAppAttempts,
		ApplicationType:                         in.ApplicationType,
		KeepContainersAcrossApplicationAttempts: in.KeepContainers,
		AttemptFailuresValidityInterval:         in.AttemptFailuresValidityInterval,
		NodeLabelExpression:                     in.AppNodeLabelExpression,
	}
	if in.Priority != nil {
		sc.Priority = &yarnpb.PriorityProto{Priority: in.Priority}
	}
	if r := in.Resource; r != nil {
		sc.Resource = &yarnpb.ResourceProto{Memory: ptr(r.Memory), VirtualCores: ptr(r.VCores)}
	}
	if in.ApplicationTags != nil {
		sc.ApplicationTags = in.ApplicationTags.Tag
	}
	if in.AMNodeLabelExpression != nil {
		rr := &yarnpb.ResourceRequestProto{
			ResourceName:        ptr("*"),
			NumContainers:       ptr(int32(1)),
			Priority:            &yarnpb.PriorityProto{Priority: ptr(int32(0))},
			Capability:          sc.Resource,
			NodeLabelExpression: in.AMNodeLabelExpression,
		}
		sc.AmContainerResourceRequest = []*yarnpb.ResourceRequestProto{rr}
	}
	if cs := in.AMContainerSpec; cs != nil {
		clc := &yarnpb.ContainerLaunchContextProto{Command: cs.Commands.Command}
		for _, e := range cs.LocalResources.Entry {
			lr, err := localResourceProto(e.Value)
			if err != nil {
				return nil, err
			}
			clc.LocalResources = append(clc.LocalResources, &yarnpb.StringLocalResourceMapProto{Key: ptr(e.Key), Value: lr})
		}
		for _, e := range cs.Environment.Entry {
			clc.Environment = append(clc.Environment, &yarnpb.StringStringMapProto{Key: ptr(e.Key), Value: ptr(e.Value)})
		}
		for _, e := range cs.ServiceData.Entry {
			// RMWebAppUtil leaves an empty value out.
			if e.Value != "" {
				clc.ServiceData = append(clc.ServiceData, &yarnpb.StringBytesMapProto{Key: ptr(e.Key), Value: decodeBase64(e.Value)})
			}
		}
		if c := cs.Credentials; c != nil && (len(c.Tokens.Entry) > 0 || len(c.Secrets.Entry) > 0) {
			tokens := make([]token.Aliased[token.Token], 0, len(c.Tokens.Entry))
			for _, e := range c.Tokens.Entry {
				t, err := token.ReadToken(writable.NewBytesReader(decodeBase64(e.Value), writable.Limits{}))
				if err != nil {
					return nil, badRequest("Could not parse credentials data; exception message = " + javaMessage(err))
				}
				tokens = append(tokens, token.Aliased[token.Token]{Alias: e.Key, Value: t})
			}
			secrets := make([]token.Aliased[[]byte], 0, len(c.Secrets.Entry))
			for _, e := range c.Secrets.Entry {
				secrets = append(secrets, token.Aliased[[]byte]{Alias: e.Key, Value: decodeBase64(e.Value)})
			}
			creds := &token.Credentials{}
			creds.AddTokens(tokens)
			creds.AddSecrets(secrets)
			b, err := creds.Marshal(token.FormatWritable)
			if err != nil {
				return nil, fmt.Errorf("rest: credentials of a submission: %w", err)
			}
			clc.Tokens = b
		}
		for _, e := range cs.ApplicationACLs.Entry {
			v, ok := yarnpb.ApplicationAccessTypeProto_value["APPACCESS_"+strings.ToUpper(e.Key)]
			if !ok {
				return nil, illegalArgument("No enum constant org.apache.hadoop.yarn.api.records.ApplicationAccessType." + e.Key)
			}
			clc.Application_ACLs = append(clc.Application_ACLs, &yarnpb.ApplicationACLMapProto{
				AccessType: yarnpb.ApplicationAccessTypeProto(v).Enum(), Acl: ptr(e.Value)})
		}
		sc.AmContainerSpec = clc
	}
	return sc, nil
}

func localResourceProto(in localResource) (*yarnpb.LocalResourceProto, error) {
	u, err := url.Parse(in.Resource)
	if err != nil || in.Resource == "" {
		return nil, badRequest("invalid local resource URL " + strconv.Quote(in.Resource))
	}
	lu := &yarnpb.URLProto{Scheme: ptr(u.Scheme), File: ptr(u.Path)}
	if h := u.Hostname(); h != "" {
		lu.Host = ptr(h)
	}
	if p := u.Port(); p != "" {
		n, err := strconv.ParseInt(p, 10, 32)
		if err != nil {
			return nil, badRequest("invalid local resource URL " + strconv.Quote(in.Resource))
		}
		lu.Port = ptr(int32(n))
	}
	if u.User != nil {
		lu.UserInfo = ptr(u.User.String())
	}
	lr := &yarnpb.LocalResourceProto{Resource: lu, Size: ptr(in.Size), Timestamp: ptr(in.Timestamp)}
	if in.Pattern != "" {
		lr.Pattern = ptr(in.Pattern)
	}
	if in.Type != "" {
		v, ok := yarnpb.LocalResourceTypeProto_value[strings.ToUpper(in.Type)]
		if !ok {
			return nil, illegalArgument("No enum constant org.apache.hadoop.yarn.api.records.LocalResourceType." + in.Type)
		}
		lr.Type = yarnpb.LocalResourceTypeProto(v).Enum()
	}
	if in.Visibility != "" {
		v, ok := yarnpb.LocalResourceVisibilityProto_value[strings.ToUpper(in.Visibility)]
		if !ok {
			return nil, illegalArgument("No enum constant org.apache.hadoop.yarn.api.records.LocalResourceVisibility." + in.Visibility)
		}
		lr.Visibility = yarnpb.LocalResourceVisibilityProto(v).Enum()
	}
	return lr, nil
}

// decodeBase64 reads base64 as commons-codec's Base64 decoder, which
// RMWebAppUtil uses for service data, secrets and tokens, reads it: either
// alphabet (standard or URL-safe), padding or none, anything outside the
// alphabet skipped, the end at the first pad, a last lone character
// dropped. It never fails, as that decoder never does.
func decodeBase64(s string) []byte {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '=':
			i = len(s)
			continue
		case c == '-':
			c = '+'
		case c == '_':
			c = '/'
		case !('A' <= c && c <= 'Z' || 'a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '+' || c == '/'):
			continue
		}
		b = append(b, c)
	}
	if len(b)%4 == 1 {
		b = b[:len(b)-1]
	}
	out := make([]byte, base64.RawStdEncoding.DecodedLen(len(b)))
	n, _ := base64.RawStdEncoding.Decode(out, b)
	return out[:n]
}

// javaMessage is the message of the exception Token.readFields throws for
// err: an EOFException, which has none (Java prints null), for a token cut
// short.
func javaMessage(err error) string {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return "null"
	}
	return err.Error()
}
