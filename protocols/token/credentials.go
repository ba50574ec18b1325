package token

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"iter"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/knitdev/knit/protocols/commonpb"
	"github.com/knitdev/knit/protocols/writable"
)

// Magic opens every Credentials stream (Credentials.TOKEN_STORAGE_MAGIC).
const Magic = "HDTS"

// Format is the byte after Magic that says how the body is encoded
// (Credentials.SerializedFormat).
type Format byte

// The two body formats. The values are Hadoop's wire bytes.
const (
	// FormatWritable is counted Writable records; Hadoop 3 writes it by default.
	FormatWritable Format = 0
	// FormatProtobuf is one varint-delimited CredentialsProto.
	FormatProtobuf Format = 1
)

// String names f as Hadoop does.
func (f Format) String() string {
	switch f {
	case FormatWritable:
		return "WRITABLE"
	case FormatProtobuf:
		return "PROTOBUF"
	default:
		return fmt.Sprintf("Format(%d)", byte(f))
	}
}

// Errors ReadCredentials reports, wrapped with where they happened.
var (
	// ErrBadMagic is a stream that does not start with Magic.
	ErrBadMagic = errors.New("bad header found in token storage")
	// ErrUnknownFormat is a format byte other than 0 or 1.
	ErrUnknownFormat = errors.New("unknown version of token storage")
	// ErrNegativeCount is a token or secret count below zero.
	ErrNegativeCount = errors.New("negative count")
)

// MaxEntries is the most tokens, and the most secrets, a Credentials stream
// may hold; a larger count fails with writable.ErrTooLarge before anything is
// read for it. Real streams hold a handful.
const MaxEntries = 1 << 16

// entry is one aliased value of a Credentials.
type entry[V any] struct {
	alias string
	value V
}

var _ io.WriterTo = (*Credentials)(nil)

// Credentials is Hadoop's org.apache.hadoop.security.Credentials: tokens and
// secret keys, each under a unique alias. Hadoop keeps them in hash maps;
// Credentials keeps them in insertion order, so that what is read is written
// back in the same order. Adding under an alias that is present replaces the
// value in place.
//
// The zero value is empty and ready to use; a nil *Credentials reads as empty.
// Values go in and come out as copies. A Credentials is not safe for
// concurrent use.
type Credentials struct {
	tokens  []entry[Token]
	secrets []entry[[]byte]
}

// AddToken puts a copy of t under alias, replacing any token already there.
func (c *Credentials) AddToken(alias string, t Token) {
	c.tokens = put(c.tokens, alias, t.Clone())
}

// Aliased is a value under its alias, for the bulk adds.
type Aliased[V any] struct {
	Alias string
	Value V
}

// AddTokens adds tokens as AddToken would each in turn, in time linear in
// their number: AddToken looks for its alias among all there are, which
// for the tens of thousands a request can name is quadratic.
func (c *Credentials) AddTokens(tokens []Aliased[Token]) {
	for _, t := range tokens {
		c.tokens = append(c.tokens, entry[Token]{t.Alias, t.Value.Clone()})
	}
	c.tokens = dedupe(c.tokens)
}

// AddSecrets adds secrets as AddSecret would each in turn, in linear time
// (AddTokens).
func (c *Credentials) AddSecrets(secrets []Aliased[[]byte]) {
	for _, s := range secrets {
		c.secrets = append(c.secrets, entry[[]byte]{s.Alias, cloneNonNil(s.Value)})
	}
	c.secrets = dedupe(c.secrets)
}

// Token returns a copy of the token under alias.
func (c *Credentials) Token(alias string) (Token, bool) {
	if i := c.tokenIndex(alias); i >= 0 {
		return c.tokens[i].value.Clone(), true
	}
	return Token{}, false
}

// RemoveToken removes the token under alias and reports whether there was one.
func (c *Credentials) RemoveToken(alias string) bool {
	i := c.tokenIndex(alias)
	if i < 0 {
		return false
	}
	c.tokens = slices.Delete(c.tokens, i, i+1)
	return true
}

// Tokens yields each alias and a copy of its token, in order. The
// Credentials may be changed while the loop runs; the loop sees the tokens
// as they were when it started.
func (c *Credentials) Tokens() iter.Seq2[string, Token] {
	return c.tokensWhere(func(Token) bool { return true })
}

// TokensOfKind yields, like Tokens, the tokens whose Kind is kind.
func (c *Credentials) TokensOfKind(kind string) iter.Seq2[string, Token] {
	return c.tokensWhere(func(t Token) bool { return t.Kind == kind })
}

// RemoveTokensOfKind removes every token whose Kind is kind and returns how
// many it removed.
func (c *Credentials) RemoveTokensOfKind(kind string) int {
	n := len(c.tokens)
	c.tokens = slices.DeleteFunc(c.tokens, func(e entry[Token]) bool { return e.value.Kind == kind })
	return n - len(c.tokens)
}

// NumTokens is the number of tokens.
func (c *Credentials) NumTokens() int {
	if c == nil {
		return 0
	}
	return len(c.tokens)
}

// AddSecret puts a copy of secret under alias, replacing any secret already there.
func (c *Credentials) AddSecret(alias string, secret []byte) {
	c.secrets = put(c.secrets, alias, cloneNonNil(secret))
}

// Secret returns a copy of the secret under alias.
func (c *Credentials) Secret(alias string) ([]byte, bool) {
	if c == nil {
		return nil, false
	}
	if i := index(c.secrets, alias); i >= 0 {
		return cloneNonNil(c.secrets[i].value), true
	}
	return nil, false
}

// RemoveSecret removes the secret under alias and reports whether there was one.
func (c *Credentials) RemoveSecret(alias string) bool {
	i := index(c.secrets, alias)
	if i < 0 {
		return false
	}
	c.secrets = slices.Delete(c.secrets, i, i+1)
	return true
}

// Secrets yields each alias and a copy of its secret, in order, over the
// secrets as they were when the loop started.
func (c *Credentials) Secrets() iter.Seq2[string, []byte] {
	var list []entry[[]byte]
	if c != nil {
		list = slices.Clone(c.secrets)
	}
	return func(yield func(string, []byte) bool) {
		for _, e := range list {
			if !yield(e.alias, cloneNonNil(e.value)) {
				return
			}
		}
	}
}

// NumSecrets is the number of secrets.
func (c *Credentials) NumSecrets() int {
	if c == nil {
		return 0
	}
	return len(c.secrets)
}

// Clone returns a deep copy of c.
func (c *Credentials) Clone() *Credentials {
	d := &Credentials{}
	if c == nil {
		return d
	}
	for _, e := range c.tokens {
		d.tokens = append(d.tokens, entry[Token]{e.alias, e.value.Clone()})
	}
	for _, e := range c.secrets {
		d.secrets = append(d.secrets, entry[[]byte]{e.alias, cloneNonNil(e.value)})
	}
	return d
}

// Equal reports whether c and d hold equal tokens and secrets under the same
// aliases in the same order. Nil and empty are equal.
func (c *Credentials) Equal(d *Credentials) bool {
	var ct, dt []entry[Token]
	var cs, ds []entry[[]byte]
	if c != nil {
		ct, cs = c.tokens, c.secrets
	}
	if d != nil {
		dt, ds = d.tokens, d.secrets
	}
	return slices.EqualFunc(ct, dt, func(a, b entry[Token]) bool {
		return a.alias == b.alias && a.value.Equal(b.value)
	}) && slices.EqualFunc(cs, ds, func(a, b entry[[]byte]) bool {
		return a.alias == b.alias && bytes.Equal(a.value, b.value)
	})
}

// Proto returns c as a CredentialsProto, the body of the PROTOBUF format,
// sharing no memory with c.
func (c *Credentials) Proto() *commonpb.CredentialsProto {
	p := &commonpb.CredentialsProto{}
	if c == nil {
		return p
	}
	for _, e := range c.tokens {
		p.Tokens = append(p.Tokens, &commonpb.CredentialsKVProto{
			Alias: proto.String(e.alias),
			Token: e.value.Proto(),
		})
	}
	for _, e := range c.secrets {
		p.Secrets = append(p.Secrets, &commonpb.CredentialsKVProto{
			Alias:  proto.String(e.alias),
			Secret: cloneNonNil(e.value),
		})
	}
	return p
}

// CredentialsFromProto returns the Credentials p holds, as Hadoop's readProto
// reads them: an entry without a token is an empty token, one without a secret
// an empty secret, and a repeated alias keeps its first position and its last
// value.
func CredentialsFromProto(p *commonpb.CredentialsProto) *Credentials {
	c := &Credentials{}
	for _, kv := range p.GetTokens() {
		c.tokens = append(c.tokens, entry[Token]{kv.GetAlias(), FromProto(kv.GetToken())})
	}
	for _, kv := range p.GetSecrets() {
		c.secrets = append(c.secrets, entry[[]byte]{kv.GetAlias(), cloneNonNil(kv.GetSecret())})
	}
	c.tokens = dedupe(c.tokens)
	c.secrets = dedupe(c.secrets)
	return c
}

// ParseCredentials reads a Credentials stream in either format from b with
// writable's default limits. Bytes after the counted content are ignored.
func ParseCredentials(b []byte) (*Credentials, error) {
	return ReadCredentials(writable.NewBytesReader(b, writable.Limits{}))
}

// ReadCredentials reads a Credentials stream in either format
// (Credentials.readTokenStorageStream) and stops after the counted content,
// leaving anything that follows unread. Text and byte fields are bounded by
// r's MaxLength, the whole stream (a PROTOBUF body included) by its MaxTotal.
// A repeated alias keeps its first position and its last value, as Hadoop's
// map does.
func ReadCredentials(r *writable.Reader) (*Credentials, error) {
	magic, err := r.ReadRaw(len(Magic))
	if err != nil {
		return nil, fmt.Errorf("token: read credentials header: %w", err)
	}
	if string(magic) != Magic {
		return nil, fmt.Errorf("token: read credentials header %q: %w", magic, ErrBadMagic)
	}
	f, err := r.ReadByte()
	if err != nil {
		return nil, fmt.Errorf("token: read credentials format: %w", err)
	}
	switch Format(f) {
	case FormatWritable:
		return readWritableBody(r)
	case FormatProtobuf:
		return readProtobufBody(r)
	default:
		return nil, fmt.Errorf("token: read credentials format %d: %w", f, ErrUnknownFormat)
	}
}

// readWritableBody is Credentials.readFields.
func readWritableBody(r *writable.Reader) (*Credentials, error) {
	c := &Credentials{}
	n, err := readCount(r, "token")
	if err != nil {
		return nil, err
	}
	for i := range n {
		alias, err := r.ReadText()
		if err != nil {
			return nil, fmt.Errorf("token: read credentials token %d alias: %w", i, err)
		}
		t, err := ReadToken(r)
		if err != nil {
			return nil, fmt.Errorf("token: read credentials token %d (alias %q): %w", i, alias, err)
		}
		c.tokens = append(c.tokens, entry[Token]{alias, t})
	}
	if n, err = readCount(r, "secret"); err != nil {
		return nil, err
	}
	for i := range n {
		alias, err := r.ReadText()
		if err != nil {
			return nil, fmt.Errorf("token: read credentials secret %d alias: %w", i, err)
		}
		secret, err := r.ReadBytes()
		if err != nil {
			return nil, fmt.Errorf("token: read credentials secret %d (alias %q): %w", i, alias, err)
		}
		c.secrets = append(c.secrets, entry[[]byte]{alias, secret})
	}
	c.tokens = dedupe(c.tokens)
	c.secrets = dedupe(c.secrets)
	return c, nil
}

func readCount(r *writable.Reader, what string) (int32, error) {
	n, err := r.ReadVInt()
	if err != nil {
		return 0, fmt.Errorf("token: read credentials %s count: %w", what, err)
	}
	if n < 0 {
		return 0, fmt.Errorf("token: read credentials %s count %d: %w", what, n, ErrNegativeCount)
	}
	if n > MaxEntries {
		return 0, fmt.Errorf("token: read credentials %s count %d above %d: %w", what, n, MaxEntries, writable.ErrTooLarge)
	}
	return n, nil
}

// readProtobufBody is Credentials.readProto: CredentialsProto.parseDelimitedFrom.
func readProtobufBody(r *writable.Reader) (*Credentials, error) {
	size, err := readUvarint(r)
	if err != nil {
		return nil, fmt.Errorf("token: read credentials protobuf length: %w", err)
	}
	if size > math.MaxInt32 {
		return nil, fmt.Errorf("token: read credentials protobuf length %d: %w", size, writable.ErrTooLarge)
	}
	body, err := r.ReadRaw(int(size))
	if err != nil {
		return nil, fmt.Errorf("token: read credentials protobuf body: %w", err)
	}
	if err := countEntries(body); err != nil {
		return nil, fmt.Errorf("token: read credentials protobuf body: %w", err)
	}
	var p commonpb.CredentialsProto
	if err := proto.Unmarshal(body, &p); err != nil {
		return nil, fmt.Errorf("token: decode credentials protobuf body: %w", err)
	}
	return CredentialsFromProto(&p), nil
}

// readUvarint reads a protobuf varint, as CodedInputStream.readRawVarint32
// reads a delimited message's length.
func readUvarint(r *writable.Reader) (uint64, error) {
	var v uint64
	for i := range binary.MaxVarintLen64 {
		b, err := r.ReadByte()
		if err != nil {
			if i > 0 && errors.Is(err, io.EOF) {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, err
		}
		if i == binary.MaxVarintLen64-1 && b > 1 {
			break
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b < 0x80 {
			return v, nil
		}
	}
	return 0, errors.New("varint overflows 64 bits")
}

// countEntries checks, before anything is allocated for them, that the
// CredentialsProto in body holds at most MaxEntries tokens and secrets.
// Malformed bodies are left for proto.Unmarshal to report.
func countEntries(body []byte) error {
	var tokens, secrets int
	for len(body) > 0 {
		num, typ, n := protowire.ConsumeTag(body)
		if n < 0 {
			return nil
		}
		body = body[n:]
		n = protowire.ConsumeFieldValue(num, typ, body)
		if n < 0 {
			return nil
		}
		body = body[n:]
		switch num {
		case 1:
			tokens++
		case 2:
			secrets++
		}
	}
	if tokens > MaxEntries {
		return fmt.Errorf("%d tokens above %d: %w", tokens, MaxEntries, writable.ErrTooLarge)
	}
	if secrets > MaxEntries {
		return fmt.Errorf("%d secrets above %d: %w", secrets, MaxEntries, writable.ErrTooLarge)
	}
	return nil
}

// Marshal returns c as a Credentials stream in format f.
func (c *Credentials) Marshal(f Format) ([]byte, error) {
	switch f {
	case FormatWritable:
		return c.appendWritable(nil), nil
	case FormatProtobuf:
		body, err := proto.Marshal(c.Proto())
		if err != nil {
			return nil, fmt.Errorf("token: marshal credentials protobuf body: %w", err)
		}
		b := append([]byte(Magic), byte(FormatProtobuf))
		b = protowire.AppendVarint(b, uint64(len(body)))
		return append(b, body...), nil
	default:
		return nil, fmt.Errorf("token: marshal credentials format %d: %w", byte(f), ErrUnknownFormat)
	}
}

// WriteTo writes c to w as a WRITABLE Credentials stream
// (Credentials.writeTokenStorageToStream's default).
func (c *Credentials) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(c.appendWritable(nil))
	if err != nil {
		return int64(n), fmt.Errorf("token: write credentials: %w", err)
	}
	return int64(n), nil
}

func (c *Credentials) appendWritable(dst []byte) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, byte(FormatWritable))
	dst = writable.AppendVLong(dst, int64(c.NumTokens()))
	if c != nil {
		for _, e := range c.tokens {
			dst = writable.AppendText(dst, e.alias)
			dst = e.value.AppendWritable(dst)
		}
	}
	dst = writable.AppendVLong(dst, int64(c.NumSecrets()))
	if c != nil {
		for _, e := range c.secrets {
			dst = writable.AppendText(dst, e.alias)
			dst = writable.AppendBytes(dst, e.value)
		}
	}
	return dst
}

func (c *Credentials) tokenIndex(alias string) int {
	if c == nil {
		return -1
	}
	return index(c.tokens, alias)
}

func (c *Credentials) tokensWhere(keep func(Token) bool) iter.Seq2[string, Token] {
	var list []entry[Token]
	if c != nil {
		list = slices.Clone(c.tokens)
	}
	return func(yield func(string, Token) bool) {
		for _, e := range list {
			if keep(e.value) && !yield(e.alias, e.value.Clone()) {
				return
			}
		}
	}
}

func index[V any](list []entry[V], alias string) int {
	return slices.IndexFunc(list, func(e entry[V]) bool { return e.alias == alias })
}

// put sets alias to v, in place if alias is present, else at the end.
func put[V any](list []entry[V], alias string, v V) []entry[V] {
	if i := index(list, alias); i >= 0 {
		list[i].value = v
		return list
	}
	return append(list, entry[V]{alias, v})
}

// dedupe merges repeated aliases as a map's puts would: each alias keeps its
// first position and takes its last value.
func dedupe[V any](list []entry[V]) []entry[V] {
	if len(list) < 2 {
		return list
	}
	pos := make(map[string]int, len(list))
	out := list[:0]
	for _, e := range list {
		if i, ok := pos[e.alias]; ok {
			out[i].value = e.value
			continue
		}
		pos[e.alias] = len(out)
		out = append(out, e)
	}
	return out
}
