package sparkapp

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/daemonsets/sparkshuffle"
)

// ExecutorOptions are the executor role's settings.
type ExecutorOptions struct {
	// Spec is what the AM told the executor.
	Spec ExecutorSpec
	// Host is the executor's node ($NM_HOST), whose shuffle service a
	// stage-1 executor registers with.
	Host string
	// LocalDirs are the container's local dirs ($LOCAL_DIRS).
	LocalDirs []string
	// TokenFile is the container's credentials ($HADOOP_TOKEN_FILE_LOCATION).
	TokenFile string
	// Stdout receives what the executor did, a line per registration or
	// fetch.
	Stdout io.Writer
	// Logger receives progress; nil means slog.Default().
	Logger *slog.Logger
}

// RunExecutor runs one executor of the job; see the package comment.
func RunExecutor(ctx context.Context, opts ExecutorOptions) error {
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	if opts.Stdout == nil {
		opts.Stdout = io.Discard
	}
	if opts.TokenFile == "" {
		return errors.New("no credentials file (HADOOP_TOKEN_FILE_LOCATION not set)")
	}
	creds, err := client.ReadCredentialsFile(opts.TokenFile)
	if err != nil {
		return err
	}
	secret, ok := creds.Secret(SecretAlias)
	if !ok {
		return fmt.Errorf("no %s secret in the credentials", SecretAlias)
	}
	cfg := sparkshuffle.ClientConfig{AppID: opts.Spec.App, Secret: secret, Auth: sparkshuffle.AuthSASL}
	switch opts.Spec.Stage {
	case 1:
		return writeAndRegister(ctx, opts, cfg)
	case 2:
		if opts.Spec.WrongSecret {
			cfg.Secret = []byte(WrongSecret)
		}
		return fetchAll(ctx, opts, cfg)
	}
	return fmt.Errorf("unknown stage %d", opts.Spec.Stage)
}

// writeAndRegister writes the executor's maps' output in blockmgr dirs of
// its local dirs as Spark's sort shuffle does, then registers the executor
// with the shuffle service of its node.
func writeAndRegister(ctx context.Context, opts ExecutorOptions, cfg sparkshuffle.ClientConfig) error {
	s := opts.Spec
	if len(opts.LocalDirs) == 0 {
		return errors.New("no local dirs (LOCAL_DIRS not set)")
	}
	if opts.Host == "" {
		return errors.New("no node host (NM_HOST not set)")
	}
	var dirs []string
	for _, d := range opts.LocalDirs {
		// DiskBlockManager.createLocalDirs.
		dir := filepath.Join(d, "blockmgr-"+randomUUID())
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("block manager dir: %w", err)
		}
		dirs = append(dirs, dir)
	}
	blocks := 0
	for _, m := range s.MapIDs {
		var parts [][]byte
		for r := range s.Partitions {
			parts = append(parts, Block(s.ShuffleID, m, int32(r), s.BlockBytes))
		}
		if err := sparkshuffle.WriteMapOutput(dirs, SubDirsPerLocalDir, s.ShuffleID, m, parts); err != nil {
			return fmt.Errorf("map %d output: %w", m, err)
		}
		blocks += len(parts)
	}
	addr := net.JoinHostPort(opts.Host, strconv.Itoa(s.ShufflePort))
	c, err := sparkshuffle.Dial(ctx, addr, cfg)
	if err != nil {
		return fmt.Errorf("shuffle service at %s: %w", addr, err)
	}
	defer c.Close()
	info := sparkshuffle.ExecutorShuffleInfo{LocalDirs: dirs, SubDirsPerLocalDir: SubDirsPerLocalDir, ShuffleManager: ShuffleManager}
	if err := c.RegisterExecutor(&sparkshuffle.RegisterExecutor{AppID: s.App, ExecID: s.ExecID, Info: info}); err != nil {
		return fmt.Errorf("registering executor %s with the shuffle service at %s: %w", s.ExecID, addr, err)
	}
	fmt.Fprintf(opts.Stdout, "executor %s wrote %d maps (%d blocks) and registered with the shuffle service at %s\n", s.ExecID, len(s.MapIDs), blocks, addr)
	return nil
}

// fetchAll fetches the executor's partitions of every map from the shuffle
// service of each writer's node and checks every block.
func fetchAll(ctx context.Context, opts ExecutorOptions, cfg sparkshuffle.ClientConfig) error {
	s := opts.Spec
	for _, w := range s.Writers {
		addr := net.JoinHostPort(w.Host, strconv.Itoa(s.ShufflePort))
		n, size, err := fetchFrom(ctx, addr, cfg, s, w)
		if err != nil {
			return fmt.Errorf("fetching the blocks of executor %s from the shuffle service at %s: %w", w.ExecID, addr, err)
		}
		fmt.Fprintf(opts.Stdout, "executor %s on %s fetched %d blocks (%d bytes) of executor %s from the shuffle service at %s, all verified\n",
			s.ExecID, opts.Host, n, size, w.ExecID, addr)
	}
	return nil
}

// fetchFrom fetches s.Reduces of w's maps in one request, as
// OneForOneBlockFetcher does, and returns the blocks and bytes checked.
func fetchFrom(ctx context.Context, addr string, cfg sparkshuffle.ClientConfig, s ExecutorSpec, w MapStatus) (int, int, error) {
	type blockID struct {
		m int64
		r int32
	}
	var want []blockID
	var req any
	if s.OldFetchProtocol {
		ob := &sparkshuffle.OpenBlocks{AppID: s.App, ExecID: w.ExecID}
		for _, m := range w.MapIDs {
			for _, r := range s.Reduces {
				want = append(want, blockID{m, r})
				ob.BlockIDs = append(ob.BlockIDs, fmt.Sprintf("shuffle_%d_%d_%d", s.ShuffleID, m, r))
			}
		}
		req = ob
	} else {
		fb := &sparkshuffle.FetchShuffleBlocks{AppID: s.App, ExecID: w.ExecID, ShuffleID: s.ShuffleID, MapIDs: w.MapIDs}
		for _, m := range w.MapIDs {
			for _, r := range s.Reduces {
				want = append(want, blockID{m, r})
			}
			fb.ReduceIDs = append(fb.ReduceIDs, append([]int32(nil), s.Reduces...))
		}
		req = fb
	}
	if len(want) == 0 {
		return 0, 0, nil
	}
	c, err := sparkshuffle.Dial(ctx, addr, cfg)
	if err != nil {
		return 0, 0, err
	}
	defer c.Close()
	got, size := 0, 0
	err = c.Fetch(req, func(chunk int, data []byte) error {
		if chunk >= len(want) {
			return fmt.Errorf("chunk %d of %d blocks", chunk, len(want))
		}
		b := want[chunk]
		if exp := Block(s.ShuffleID, b.m, b.r, s.BlockBytes); !bytes.Equal(data, exp) {
			return fmt.Errorf("block shuffle_%d_%d_%d: %d bytes differ from the %d written", s.ShuffleID, b.m, b.r, len(data), len(exp))
		}
		got++
		size += len(data)
		return nil
	})
	if err != nil {
		return got, size, err
	}
	if got != len(want) {
		return got, size, fmt.Errorf("%d blocks fetched, want %d", got, len(want))
	}
	return got, size, nil
}

// randomUUID is a random (version 4) UUID, as Java's UUID.randomUUID.
func randomUUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read never fails
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}
