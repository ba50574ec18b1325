package logs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// RemoteFile is one file of a remote app log dir.
type RemoteFile struct {
	Path    string
	Name    string
	Size    int64
	ModTime time.Time
}

// RemoteReader is an open remote file.
type RemoteReader interface {
	io.ReaderAt
	io.Closer
}

// Lister reads remote app log dirs, for `knit logs`.
type Lister interface {
	// List returns the files directly in dir, sorted by name; a folder
	// that does not exist has none.
	List(ctx context.Context, dir string) ([]RemoteFile, error)
	Open(ctx context.Context, f RemoteFile) (RemoteReader, error)
}

// ListerFor returns the Lister of a remote app log dir, as StoreFor.
func ListerFor(root string, conf func(string) (string, bool)) (Lister, error) {
	st, err := StoreFor(root, conf)
	if err != nil {
		return nil, err
	}
	l, ok := st.(Lister)
	if !ok {
		return nil, fmt.Errorf("remote app log dir %s cannot be read", root)
	}
	return l, nil
}

var (
	_ Lister = LocalStore{}
	_ Lister = (*S3Store)(nil)
)

// List lists a local folder.
func (LocalStore) List(_ context.Context, dir string) ([]RemoteFile, error) {
	p, err := localPath(dir)
	if err != nil {
		return nil, err
	}
	entries, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []RemoteFile
	for _, e := range entries {
		if !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, RemoteFile{Path: filepath.Join(p, e.Name()), Name: e.Name(), Size: info.Size(), ModTime: info.ModTime()})
	}
	return out, nil
}

// Open opens a local file.
func (LocalStore) Open(_ context.Context, f RemoteFile) (RemoteReader, error) {
	p, err := localPath(f.Path)
	if err != nil {
		return nil, err
	}
	return os.Open(p)
}

func s3Location(p string) (bucket, key string, err error) {
	u, err := url.Parse(p)
	if err != nil || (u.Scheme != "s3a" && u.Scheme != "s3") || u.Host == "" {
		return "", "", fmt.Errorf("%s is not an s3a:// or s3:// path", p)
	}
	return u.Host, strings.TrimPrefix(u.Path, "/"), nil
}

// List lists the objects directly under dir.
func (s *S3Store) List(ctx context.Context, dir string) ([]RemoteFile, error) {
	bucket, prefix, err := s3Location(dir)
	if err != nil {
		return nil, err
	}
	prefix = strings.TrimSuffix(prefix, "/") + "/"
	client, err := s.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	scheme := dir[:strings.Index(dir, "://")]
	var out []RemoteFile
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			out = append(out, RemoteFile{
				Path: scheme + "://" + bucket + "/" + key, Name: path.Base(key),
				Size: aws.ToInt64(o.Size), ModTime: aws.ToTime(o.LastModified),
			})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Open returns a ReaderAt over the object that reads it in ranged blocks.
func (s *S3Store) Open(ctx context.Context, f RemoteFile) (RemoteReader, error) {
	bucket, key, err := s3Location(f.Path)
	if err != nil {
		return nil, err
	}
	client, err := s.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	return &s3ReaderAt{ctx: ctx, client: client, bucket: bucket, key: key, size: f.Size}, nil
}

// s3BlockSize is what one ranged GET fetches.
const s3BlockSize = 1 << 20

// s3ReaderAt reads an object through ranged GETs of s3BlockSize, keeping
// the last block (the readers go mostly forward).
type s3ReaderAt struct {
	ctx         context.Context
	client      *s3.Client
	bucket, key string
	size        int64

	mu       sync.Mutex
	blockOff int64
	block    []byte
}

func (r *s3ReaderAt) ReadAt(p []byte, off int64) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		if pos >= r.size {
			return n, io.EOF
		}
		if r.block == nil || pos < r.blockOff || pos >= r.blockOff+int64(len(r.block)) {
			start := pos / s3BlockSize * s3BlockSize
			end := min(start+s3BlockSize, r.size) - 1
			out, err := r.client.GetObject(r.ctx, &s3.GetObjectInput{
				Bucket: aws.String(r.bucket), Key: aws.String(r.key), Range: aws.String(fmt.Sprintf("bytes=%d-%d", start, end)),
			})
			if err != nil {
				return n, fmt.Errorf("read s3://%s/%s: %w", r.bucket, r.key, err)
			}
			b, err := io.ReadAll(io.LimitReader(out.Body, end-start+1))
			out.Body.Close()
			if err != nil {
				return n, fmt.Errorf("read s3://%s/%s: %w", r.bucket, r.key, err)
			}
			if int64(len(b)) != end-start+1 {
				return n, fmt.Errorf("read s3://%s/%s: %d bytes for range %d-%d", r.bucket, r.key, len(b), start, end)
			}
			r.blockOff, r.block = start, b
		}
		n += copy(p[n:], r.block[pos-r.blockOff:])
	}
	return n, nil
}

func (r *s3ReaderAt) Close() error { return nil }
