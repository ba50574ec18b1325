package logs

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// RemoteEntry is a file or a folder of a remote app log dir, as Hadoop's
// FileStatus gives it to AggregatedLogDeletionService.
type RemoteEntry struct {
	Path string
	Name string
	Dir  bool
	// ModTime is the zero time for a folder of an S3 store: S3 has no
	// folders, only key prefixes, and S3A gives those no modification
	// time either, so only their files' times count.
	ModTime time.Time
}

// s3DeleteBatch is the most keys one DeleteObjects call takes.
const s3DeleteBatch = 1000

// Entries lists the files and folders directly in dir, sorted by name; a
// folder that does not exist has none.
func (LocalStore) Entries(_ context.Context, dir string) ([]RemoteEntry, error) {
	p, err := localPath(dir)
	if err != nil {
		return nil, err
	}
	des, err := os.ReadDir(p)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", p, err)
	}
	out := make([]RemoteEntry, 0, len(des))
	for _, e := range des {
		if !e.IsDir() && !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if errors.Is(err, os.ErrNotExist) {
			// Removed since the folder was read.
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", p, err)
		}
		out = append(out, RemoteEntry{Path: filepath.Join(p, e.Name()), Name: e.Name(), Dir: e.IsDir(), ModTime: info.ModTime()})
	}
	return out, nil
}

// Delete removes a file, or a folder with everything in it; what does
// not exist is already deleted.
func (LocalStore) Delete(_ context.Context, p string) error {
	lp, err := localPath(p)
	if err != nil {
		return err
	}
	if lp == "" || filepath.Clean(lp) == string(filepath.Separator) {
		return fmt.Errorf("delete %q: refusing to delete the root folder", p)
	}
	if err := os.RemoveAll(lp); err != nil {
		return fmt.Errorf("delete %s: %w", lp, err)
	}
	return nil
}

// Entries lists the objects directly under dir and the key prefixes
// ("folders") one level down, sorted by name.
func (s *S3Store) Entries(ctx context.Context, dir string) ([]RemoteEntry, error) {
	bucket, prefix, err := s3Location(dir)
	if err != nil {
		return nil, err
	}
	if prefix = strings.TrimSuffix(prefix, "/"); prefix != "" {
		prefix += "/"
	}
	client, err := s.s3Client(ctx)
	if err != nil {
		return nil, err
	}
	base := dir[:strings.Index(dir, "://")] + "://" + bucket + "/"
	var out []RemoteEntry
	p := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix), Delimiter: aws.String("/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err)
		}
		for _, cp := range page.CommonPrefixes {
			key := strings.TrimSuffix(aws.ToString(cp.Prefix), "/")
			out = append(out, RemoteEntry{Path: base + key, Name: path.Base(key), Dir: true})
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			// A key ending in "/" is a folder marker (S3A makes them for
			// empty folders), never a file.
			if strings.HasSuffix(key, "/") {
				continue
			}
			out = append(out, RemoteEntry{Path: base + key, Name: path.Base(key), ModTime: aws.ToTime(o.LastModified)})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Delete removes the object at p and every object under p/, as a
// recursive delete of a file or a folder, in DeleteObjects calls of at
// most 1000 keys.
func (s *S3Store) Delete(ctx context.Context, p string) error {
	bucket, key, err := s3Location(p)
	if err != nil {
		return err
	}
	if key = strings.TrimSuffix(key, "/"); key == "" {
		return fmt.Errorf("delete %s: refusing to delete a whole bucket", p)
	}
	client, err := s.s3Client(ctx)
	if err != nil {
		return err
	}
	// The keys are all listed before any goes, so the listing never runs
	// over keys deleted under it. Deleting a key that does not exist
	// succeeds, so the key itself needs no lookup.
	keys := []string{key}
	pg := s3.NewListObjectsV2Paginator(client, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(key + "/")})
	for pg.HasMorePages() {
		page, err := pg.NextPage(ctx)
		if err != nil {
			return fmt.Errorf("list s3://%s/%s/: %w", bucket, key, err)
		}
		for _, o := range page.Contents {
			keys = append(keys, aws.ToString(o.Key))
		}
	}
	for len(keys) > 0 {
		n := min(len(keys), s3DeleteBatch)
		ids := make([]types.ObjectIdentifier, n)
		for i, k := range keys[:n] {
			ids[i] = types.ObjectIdentifier{Key: aws.String(k)}
		}
		out, err := client.DeleteObjects(ctx, &s3.DeleteObjectsInput{
			Bucket: aws.String(bucket), Delete: &types.Delete{Objects: ids, Quiet: aws.Bool(true)},
		})
		if err != nil {
			return fmt.Errorf("delete s3://%s/%s: %w", bucket, key, err)
		}
		if len(out.Errors) > 0 {
			e := out.Errors[0]
			return fmt.Errorf("delete s3://%s/%s: %d keys not deleted, first s3://%s/%s: %s: %s",
				bucket, key, len(out.Errors), bucket, aws.ToString(e.Key), aws.ToString(e.Code), aws.ToString(e.Message))
		}
		keys = keys[n:]
	}
	return nil
}
