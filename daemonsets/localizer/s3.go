package localizer

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// S3Config says how s3:// and s3a:// resources are read. Zero values mean
// the SDK's defaults: the AWS endpoint of the region, and the default
// credentials chain (environment, shared files, web identity, instance
// role).
type S3Config struct {
	// Endpoint is the service's base URL, e.g. a MinIO or test server.
	Endpoint string
	// PathStyle addresses buckets as <endpoint>/<bucket>/<key>, as most
	// non-AWS servers need (fs.s3a.path.style.access).
	PathStyle bool
	// Region signs the requests; "us-east-1" if neither this nor the
	// environment names one.
	Region string
	// AccessKeyID and SecretAccessKey, when set, replace the default
	// credentials chain; SessionToken goes with them if non-empty.
	AccessKeyID     string
	SecretAccessKey string
	SessionToken    string
}

// s3Source reads s3://bucket/key and s3a://bucket/key with the node's
// credentials (the container's user has no say: S3 has no Hadoop users).
type s3Source struct {
	cfg  S3Config
	http *http.Client

	mu     sync.Mutex
	client *s3.Client
}

// s3Client builds the client on first use, so that loading the shared
// configuration happens under a caller's context, and again after a
// failure.
func (s *s3Source) s3Client(ctx context.Context) (*s3.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		return s.client, nil
	}
	c, err := NewS3Client(ctx, s.cfg, s.http)
	if err != nil {
		return nil, err
	}
	s.client = c
	return c, nil
}

// NewS3Client returns an S3 client as cfg describes it; hc, if not nil,
// carries its requests. The node's other S3 users (log aggregation) share
// it.
func NewS3Client(ctx context.Context, cfg S3Config, hc *http.Client) (*s3.Client, error) {
	var opts []func(*config.LoadOptions) error
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.AccessKeyID != "" {
		opts = append(opts, config.WithCredentialsProvider(
			credentials.NewStaticCredentialsProvider(cfg.AccessKeyID, cfg.SecretAccessKey, cfg.SessionToken)))
	}
	if hc != nil {
		opts = append(opts, config.WithHTTPClient(hc))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("localizer: load S3 configuration: %w", err)
	}
	if awsCfg.Region == "" {
		awsCfg.Region = "us-east-1"
	}
	return s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
		// Objects written without checksums are normal, not news.
		o.DisableLogOutputChecksumValidationSkipped = true
	}), nil
}

func (s *s3Source) Open(ctx context.Context, r Request) (*Object, error) {
	bucket, key := r.URL.Host, strings.TrimPrefix(r.URL.Path, "/")
	if bucket == "" || key == "" {
		return nil, fmt.Errorf("localizer: %s names no bucket and key", r.URL)
	}
	client, err := s.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
	if err != nil {
		var noKey *types.NoSuchKey
		var noBucket *types.NoSuchBucket
		var resp *awshttp.ResponseError
		if errors.As(err, &noKey) || errors.As(err, &noBucket) ||
			(errors.As(err, &resp) && resp.HTTPStatusCode() == http.StatusNotFound) {
			return nil, fmt.Errorf("localizer: get %s: %w", r.URL, fs.ErrNotExist)
		}
		return nil, fmt.Errorf("localizer: get %s: %w", r.URL, err)
	}
	o := &Object{Body: out.Body, Size: aws.ToInt64(out.ContentLength), Public: true}
	if out.ContentLength == nil {
		o.Size = -1
	}
	if out.LastModified != nil {
		o.ModTime = out.LastModified.UnixMilli()
	}
	return o, nil
}
