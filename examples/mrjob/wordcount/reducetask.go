package wordcount

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/knitdev/knit/client"
	"github.com/knitdev/knit/examples/mrjob/mapred"
)

// ErrTooManyFetchFailures is the reducer giving up on the shuffle, in
// ShuffleSchedulerImpl.checkReducerHealth's words.
var ErrTooManyFetchFailures = errors.New("Exceeded MAX_FAILED_UNIQUE_FETCHES; bailing-out.")

// The Fetcher's and ShuffleSchedulerImpl's constants.
const (
	// DefaultInitialPenalty is ShuffleSchedulerImpl.INITIAL_PENALTY: a
	// host's first back-off after a failed fetch, grown by 1.3 per failure.
	DefaultInitialPenalty = 10 * time.Second
	penaltyGrowthRate     = 1.3
	// DefaultMaxDelay is mapreduce.reduce.shuffle.retry-delay.max.ms.
	DefaultMaxDelay = 60 * time.Second
	// DefaultParallelCopies is mapreduce.reduce.shuffle.parallelcopies.
	DefaultParallelCopies = 5
	// fetchRetryDelayDefault is the Fetcher's back-off for a 429 without a
	// usable Retry-After (milliseconds in the header).
	fetchRetryDelayDefault = 60 * time.Second
	// maxSegment bounds one map's segment held in memory.
	maxSegment = 256 << 20
)

// ReduceOptions are a reduce task's settings.
type ReduceOptions struct {
	// Spec is what the AM said: job, attempt, the maps by node, output.
	Spec TaskSpec
	// TokenFile is the container's credentials ($HADOOP_TOKEN_FILE_LOCATION),
	// which hold the shuffle secret.
	TokenFile string
	// Stdout receives the "word<TAB>count" lines.
	Stdout io.Writer
	// Logger receives the Fetcher's messages; nil means slog.Default().
	Logger *slog.Logger
	// HTTP fetches map outputs; nil means a client with the Fetcher's
	// connect and read timeouts and no compression.
	HTTP *http.Client
	// InitialPenalty and MaxDelay shape a failing host's back-off; zero
	// means DefaultInitialPenalty and DefaultMaxDelay.
	InitialPenalty, MaxDelay time.Duration
	// ParallelCopies bounds the hosts fetched from at once; zero means
	// DefaultParallelCopies.
	ParallelCopies int
}

// RunReduce is one reduce task of WordCount: it fetches its partition of
// every map from the map's node as Fetcher does, merges the segments,
// sums each word's counts and writes them. An error that wraps
// ErrTooManyFetchFailures is a shuffle that failed as Hadoop's fails.
func RunReduce(ctx context.Context, opts ReduceOptions) error {
	log := opts.Logger
	if log == nil {
		log = slog.Default()
	}
	attempt, err := mapred.ParseAttemptID(opts.Spec.Attempt)
	if err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	if attempt.Task.Type != mapred.Reduce {
		return fmt.Errorf("reduce: %s is no reduce attempt", attempt)
	}
	secret, err := shuffleSecret(opts.TokenFile)
	if err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	if opts.Spec.ForgeShuffleToken {
		secret = forge(secret)
		log.Warn("signing fetches with a forged shuffle secret")
	}
	s := newScheduler(opts, attempt.Task.Index, secret, log)
	segments, err := s.run(ctx)
	if err != nil {
		return fmt.Errorf("reduce %s: error in shuffle in fetcher: %w", attempt, err)
	}

	var out bytes.Buffer
	var word []byte
	var sum int64
	flush := func() error {
		if word == nil {
			return nil
		}
		w, err := mapred.ParseText(word)
		if err != nil {
			return err
		}
		fmt.Fprintf(&out, "%s\t%d\n", w, sum)
		return nil
	}
	for r := range mapred.Merge(segments, mapred.CompareText) {
		n, err := mapred.ParseInt(r.Value)
		if err != nil {
			return fmt.Errorf("reduce %s: %w", attempt, err)
		}
		if word != nil && mapred.CompareText(word, r.Key) == 0 {
			sum += int64(n)
			continue
		}
		if err := flush(); err != nil {
			return fmt.Errorf("reduce %s: %w", attempt, err)
		}
		word, sum = r.Key, int64(n)
	}
	if err := flush(); err != nil {
		return fmt.Errorf("reduce %s: %w", attempt, err)
	}
	if opts.Spec.Output != "" {
		if err := commitPart(opts.Spec.Output, attempt, out.Bytes()); err != nil {
			return fmt.Errorf("reduce %s: %w", attempt, err)
		}
	}
	if _, err := opts.Stdout.Write(out.Bytes()); err != nil {
		return fmt.Errorf("reduce %s: %w", attempt, err)
	}
	return nil
}

// PartName is a reducer's output file, as FileOutputFormat names it.
func PartName(reduce int) string { return fmt.Sprintf("part-r-%05d", reduce) }

// commitPart writes the attempt's output under <output>/_temporary/<attempt>
// and renames it into place, as FileOutputCommitter's task commit does.
func commitPart(output string, attempt mapred.AttemptID, b []byte) error {
	dir := filepath.Join(output, "_temporary", attempt.String())
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	name := PartName(attempt.Task.Index)
	if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
		return err
	}
	return os.Rename(filepath.Join(dir, name), filepath.Join(output, name))
}

// shuffleSecret reads the shuffle secret from the task's credentials, as
// the reducer does: the MapReduceShuffleToken secret, else the job token's
// password.
func shuffleSecret(tokenFile string) ([]byte, error) {
	if tokenFile == "" {
		return nil, errors.New("no credentials file (HADOOP_TOKEN_FILE_LOCATION not set)")
	}
	creds, err := client.ReadCredentialsFile(tokenFile)
	if err != nil {
		return nil, err
	}
	if s, ok := creds.Secret(mapred.ShuffleSecretAlias); ok {
		return s, nil
	}
	if t, ok := creds.Token(mapred.JobTokenAlias); ok {
		return t.Password, nil
	}
	return nil, fmt.Errorf("no %s secret and no %s in the credentials", mapred.ShuffleSecretAlias, mapred.JobTokenAlias)
}

// forge returns a secret of the same length that is not secret.
func forge(secret []byte) []byte {
	f := make([]byte, len(secret))
	_, _ = rand.Read(f) // crypto/rand.Read never fails
	if bytes.Equal(f, secret) {
		f[0] ^= 0xff
	}
	return f
}

// host is one node's map outputs and its back-off.
type host struct {
	MapHost
	penaltyUntil time.Time
}

// scheduler is ShuffleSchedulerImpl for one reducer: what is left to fetch,
// per-map failure counts, per-host penalties and the reducer's health.
type scheduler struct {
	opts      ReduceOptions
	reduce    int
	secret    []byte
	log       *slog.Logger
	http      *http.Client
	hosts     []*host
	mapIndex  map[string]int // map attempt → its place in the merge
	remaining map[string]bool
	segments  [][]mapred.Record

	failureCounts   map[string]int
	totalFailures   int
	maxFailedUnique int
	abortLimit      int
	start, progress time.Time
}

func newScheduler(opts ReduceOptions, reduce int, secret []byte, log *slog.Logger) *scheduler {
	if opts.InitialPenalty <= 0 {
		opts.InitialPenalty = DefaultInitialPenalty
	}
	if opts.MaxDelay <= 0 {
		opts.MaxDelay = DefaultMaxDelay
	}
	if opts.ParallelCopies <= 0 {
		opts.ParallelCopies = DefaultParallelCopies
	}
	s := &scheduler{
		opts: opts, reduce: reduce, secret: secret, log: log, http: opts.HTTP,
		mapIndex: map[string]int{}, remaining: map[string]bool{}, failureCounts: map[string]int{},
		start: time.Now(),
	}
	if s.http == nil {
		s.http = fetcherClient()
	}
	for _, h := range opts.Spec.Hosts {
		s.hosts = append(s.hosts, &host{MapHost: h})
		for _, m := range h.Maps {
			s.mapIndex[m] = len(s.mapIndex)
			s.remaining[m] = true
		}
	}
	s.segments = make([][]mapred.Record, len(s.mapIndex))
	total := len(s.mapIndex)
	s.maxFailedUnique = min(total, 5)
	s.abortLimit = max(30, total/10)
	s.progress = s.start
	return s
}

// fetcherClient is an HTTP client as the Fetcher connects: 3 minute connect
// and read timeouts (mapreduce.reduce.shuffle.connect/read.timeout), no
// compression, no redirects.
func fetcherClient() *http.Client {
	return &http.Client{
		Transport: &http.Transport{
			DialContext:           (&net.Dialer{Timeout: 3 * time.Minute}).DialContext,
			ResponseHeaderTimeout: 3 * time.Minute,
			DisableCompression:    true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
}

// fetchResult is how one fetch from a host went.
type fetchResult struct {
	host *host
	// got are the segments fetched, by map attempt.
	got map[string][]mapred.Record
	// err is the failure, if any; maps not in got failed with it.
	err error
	// backoff, if set, is a 429: the host asked to be retried later,
	// which is no failure.
	backoff time.Duration
}

// run fetches every map's segment, round after round, until all are in or
// the reducer's health check gives up.
func (s *scheduler) run(ctx context.Context) ([][]mapred.Record, error) {
	for len(s.remaining) > 0 {
		now := time.Now()
		var ready []*host
		next := time.Time{}
		for _, h := range s.hosts {
			if s.pending(h) == nil {
				continue
			}
			if !h.penaltyUntil.After(now) {
				ready = append(ready, h)
			} else if next.IsZero() || h.penaltyUntil.Before(next) {
				next = h.penaltyUntil
			}
		}
		if len(ready) == 0 {
			t := time.NewTimer(time.Until(next))
			select {
			case <-ctx.Done():
				t.Stop()
				return nil, ctx.Err()
			case <-t.C:
			}
			continue
		}
		for _, r := range s.fetchAll(ctx, ready) {
			if err := s.take(r); err != nil {
				return nil, err
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return s.segments, nil
}

// pending is what is left to fetch from h, in map order.
func (s *scheduler) pending(h *host) []string {
	var maps []string
	for _, m := range h.Maps {
		if s.remaining[m] {
			maps = append(maps, m)
		}
	}
	return maps
}

// fetchAll fetches from hosts, at most ParallelCopies at once, and returns
// the results in host order.
func (s *scheduler) fetchAll(ctx context.Context, hosts []*host) []fetchResult {
	results := make([]fetchResult, len(hosts))
	sem := make(chan struct{}, s.opts.ParallelCopies)
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			results[i] = s.fetch(ctx, h, s.pending(h))
		}()
	}
	wg.Wait()
	return results
}

// take records a fetch's outcome; an error means the reducer gives up.
func (s *scheduler) take(r fetchResult) error {
	for m, recs := range r.got {
		s.segments[s.mapIndex[m]] = recs
		delete(s.remaining, m)
		s.progress = time.Now()
	}
	if r.backoff > 0 {
		s.log.Info("host asked to be retried later", "host", r.host.Host, "backoff", r.backoff)
		r.host.penaltyUntil = time.Now().Add(r.backoff)
		return nil
	}
	if r.err == nil {
		return nil
	}
	failed := s.pending(r.host)
	s.log.Warn(fmt.Sprintf("Failed to connect to %s with %d map outputs", r.host.Host, len(failed)), "err", r.err)
	for _, m := range failed {
		if err := s.copyFailed(m, r.host); err != nil {
			return err
		}
	}
	return nil
}

// copyFailed is ShuffleSchedulerImpl.copyFailed: count the map's failure,
// check the reducer's health, penalize the host.
func (s *scheduler) copyFailed(m string, h *host) error {
	s.failureCounts[m]++
	failures := s.failureCounts[m]
	if failures >= s.abortLimit {
		return fmt.Errorf("%d failures downloading %s", failures, m)
	}
	if err := s.checkReducerHealth(); err != nil {
		return err
	}
	delay := time.Duration(float64(s.opts.InitialPenalty) * math.Pow(penaltyGrowthRate, float64(failures)))
	h.penaltyUntil = time.Now().Add(min(delay, s.opts.MaxDelay))
	s.totalFailures++
	return nil
}

// checkReducerHealth is ShuffleSchedulerImpl.checkReducerHealth: give up
// when enough distinct maps failed, failures outweigh fetched maps, and the
// shuffle has not progressed enough or has stalled.
func (s *scheduler) checkReducerHealth() error {
	total := len(s.mapIndex)
	done := total - len(s.remaining)
	// 0/0 is NaN, and NaN < 0.5 is false: no fetch yet is not healthy.
	healthy := float64(s.totalFailures)/float64(s.totalFailures+done) < 0.5
	progressed := float64(done)/float64(total) >= 0.5
	progressDuration := s.progress.Sub(s.start)
	stalled := progressDuration > 0 && float64(time.Since(s.progress))/float64(progressDuration) >= 0.5
	if (len(s.failureCounts) >= s.maxFailedUnique || len(s.failureCounts) == total-done) && !healthy && (!progressed || stalled) {
		s.log.Error("Shuffle failed with too many fetch failures and insufficient progress!")
		return ErrTooManyFetchFailures
	}
	return nil
}

// fetch asks h for this reducer's partition of maps, as Fetcher.copyFromHost
// does, and checks the answer's headers, every ShuffleHeader and every
// segment's checksum.
func (s *scheduler) fetch(ctx context.Context, h *host, maps []string) fetchResult {
	res := fetchResult{host: h, got: map[string][]mapred.Record{}}
	raw := mapred.MapOutputURL(h.Host, h.Port, s.opts.Spec.Job, s.reduce, maps)
	u, err := url.Parse(raw)
	if err != nil {
		res.err = err
		return res
	}
	urlHash, err := mapred.URLHash(s.secret, u)
	if err != nil {
		res.err = err
		return res
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, raw, nil)
	if err != nil {
		res.err = err
		return res
	}
	// Set as the Fetcher spells them, not canonicalized.
	req.Header[mapred.HeaderURLHash] = []string{urlHash}
	req.Header[mapred.HeaderName] = []string{mapred.ShuffleName}
	req.Header[mapred.HeaderVersion] = []string{mapred.ShuffleVersion}
	s.log.Info("fetching map outputs", "url", raw, "maps", len(maps))
	resp, err := s.http.Do(req)
	if err != nil {
		res.err = err
		return res
	}
	defer resp.Body.Close()
	defer io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10)) //nolint:errcheck // draining for reuse only

	if resp.StatusCode == http.StatusTooManyRequests {
		res.backoff = fetchRetryDelayDefault
		if ms, err := strconv.ParseInt(resp.Header.Get("Retry-After"), 10, 64); err == nil && ms >= 0 {
			res.backoff = time.Duration(ms) * time.Millisecond
		}
		return res
	}
	if resp.StatusCode != http.StatusOK {
		res.err = fmt.Errorf("Got invalid response code %d from %s: %s", resp.StatusCode, raw, http.StatusText(resp.StatusCode))
		return res
	}
	if resp.Header.Get(mapred.HeaderName) != mapred.ShuffleName || resp.Header.Get(mapred.HeaderVersion) != mapred.ShuffleVersion {
		res.err = errors.New("Incompatible shuffle response version")
		return res
	}
	reply := resp.Header.Get(mapred.HeaderReplyHash)
	if reply == "" {
		res.err = errors.New("security validation of TT Map output failed")
		return res
	}
	if !mapred.VerifyHash(s.secret, reply, urlHash) {
		res.err = errors.New("Verification of the hashReply failed")
		return res
	}
	wanted := map[string]bool{}
	for _, m := range maps {
		wanted[m] = true
	}
	outputs, err := mapred.ReadResponse(resp.Body, len(maps), maxSegment)
	for _, o := range outputs {
		hd := o.Header
		if !wanted[hd.MapID] {
			res.err = fmt.Errorf("Invalid map id: %s", hd.MapID)
			return res
		}
		if int(hd.ForReduce) != s.reduce {
			res.err = fmt.Errorf("data for the wrong reduce map: %s len: %d decomp len: %d for reduce %d", hd.MapID, hd.CompressedLength, hd.RawLength, hd.ForReduce)
			return res
		}
		recs, perr := mapred.ParseSegment(o.Segment)
		if perr != nil {
			res.err = fmt.Errorf("map %s: %w", hd.MapID, perr)
			return res
		}
		delete(wanted, hd.MapID)
		res.got[hd.MapID] = recs
	}
	if err != nil {
		res.err = err
	}
	return res
}
