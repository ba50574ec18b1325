package logs

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/knitdev/knit/daemonsets/localizer"
)

// S3Config says how an s3a:// or s3:// remote app log dir is reached: the
// localizer's settings (endpoint, path style, region, static keys), read
// here from the fs.s3a.* keys.
type S3Config = localizer.S3Config

// S3ConfigFromHadoop reads the fs.s3a.* keys.
func S3ConfigFromHadoop(conf func(string) (string, bool)) S3Config {
	get := func(k string) string {
		v, _ := conf(k)
		return strings.TrimSpace(v)
	}
	return S3Config{
		Endpoint: get("fs.s3a.endpoint"), PathStyle: strings.EqualFold(get("fs.s3a.path.style.access"), "true"),
		Region: get("fs.s3a.endpoint.region"), AccessKeyID: get("fs.s3a.access.key"),
		SecretAccessKey: get("fs.s3a.secret.key"), SessionToken: get("fs.s3a.session.token"),
	}
}

// S3Store writes aggregated files as S3 objects; an object appears whole
// or not at all, so no temporary name is needed.
type S3Store struct {
	cfg S3Config

	mu     sync.Mutex
	client *s3.Client
}

var _ Store = (*S3Store)(nil)

// NewS3Store returns a store; its client is built on first use.
func NewS3Store(cfg S3Config) *S3Store { return &S3Store{cfg: cfg} }

func (s *S3Store) s3Client(ctx context.Context) (*s3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	c, err := localizer.NewS3Client(ctx, s.cfg, nil)
	if err != nil {
		return nil, err
	}
	s.client = c
	return c, nil
}

// Put uploads the file as one object (up to S3's 5 GiB single-part
// limit).
func (s *S3Store) Put(ctx context.Context, path string, r io.ReaderAt, size int64) error {
	u, err := url.Parse(path)
	if err != nil || (u.Scheme != "s3a" && u.Scheme != "s3") || u.Host == "" {
		return fmt.Errorf("%s is not an s3a:// or s3:// path", path)
	}
	key := strings.TrimPrefix(u.Path, "/")
	client, err := s.s3Client(ctx)
	if err != nil {
		return err
	}
	_, err = client.PutObject(ctx, &s3.PutObjectInput{
		Bucket: aws.String(u.Host), Key: aws.String(key),
		Body: io.NewSectionReader(r, 0, size), ContentLength: aws.Int64(size),
	})
	if err != nil {
		return fmt.Errorf("put s3://%s/%s: %w", u.Host, key, err)
	}
	return nil
}
