// rlqs-client acts as Envoy's rate_limit_quota filter for one bucket, with Envoy's own generated
// API types (github.com/envoyproxy/go-control-plane/envoy, service/rate_limit_quota/v3 and
// type/v3) over grpc-go: a client nobody on the geoquota side wrote the wire code of.
//
//	rlqs-client -addr 127.0.0.1:7300 -domain D -bucket 'tenant=a,resource=api' \
//	  -rate 50 -for 10s [-report 1s] [-epoch UNIX_MS] [-id name] [-silent-after 3s]
//
// It opens StreamRateLimitQuotas, subscribes the bucket with a first (empty) report, then
// reports num_requests_allowed/denied and time_elapsed every -report interval (> 100 ms, as
// Envoy requires). It decides -rate requests per second for -for alone, from the latest
// assignment: a token bucket (max_tokens, tokens_per_fill every fill_interval) that starts
// full at its receipt, or a blanket rule, until its assignment_time_to_live runs out; with no
// live assignment (none yet, expired, abandoned) it denies: the fallback the design requires
// of a proxy (no_assignment_behavior and expired_assignment_behavior deny).
//
// With -silent-after it acts as a proxy that hangs with its stream open: from then on it sends no
// report (a line {"reason": "report_withheld"} per interval) and keeps deciding.
//
// When the stream breaks (a region restart) it keeps the assignment it holds until its TTL runs
// out, as Envoy's filter does, and opens a new stream with a backoff (a line {"t_ms", "reason":
// "stream_broken: ..."}, then {"reason": "stream_reopened"}); reports that could not be sent go
// with the next one.
//
// One JSON line per local decision {"t_ms", "allowed"} and one per action received
// {"t_ms", "assignment": ...}: t_ms is milliseconds since -epoch (unix ms, shared by the
// processes of one run), read from the monotonic clock after one wall-clock anchor.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	rlqs "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"
)

type assignmentOut struct {
	Kind      string  `json:"kind"` // token_bucket, ALLOW_ALL, DENY_ALL, abandon
	TTLMs     float64 `json:"ttl_ms,omitempty"`
	MaxTokens uint32  `json:"max_tokens,omitempty"`
	PerFill   uint32  `json:"tokens_per_fill,omitempty"`
	FillMs    float64 `json:"fill_ms,omitempty"`
}

type line struct {
	Id         string         `json:"id,omitempty"`
	TMs        float64        `json:"t_ms"`
	Allowed    *bool          `json:"allowed,omitempty"`
	Reason     string         `json:"reason,omitempty"`
	Assignment *assignmentOut `json:"assignment,omitempty"`
	Err        string         `json:"err,omitempty"`
}

// bucket is the enforced state of the latest assignment, timed from its receipt.
type bucket struct {
	live     bool
	blanket  *typev3.RateLimitStrategy_BlanketRule
	expires  time.Time
	max      uint32
	perFill  uint32
	fill     time.Duration
	tokens   uint64
	lastFill time.Time
}

// decide takes one request's decision at now (the caller holds the lock).
func (b *bucket) decide(now time.Time) (bool, string) {
	if !b.live {
		return false, "no_assignment"
	}
	if !now.Before(b.expires) {
		b.live = false
		return false, "expired"
	}
	if b.blanket != nil {
		return *b.blanket == typev3.RateLimitStrategy_ALLOW_ALL, b.blanket.String()
	}
	if b.fill > 0 {
		// Whole fill intervals since the last fill, the bucket never above max_tokens.
		if n := now.Sub(b.lastFill) / b.fill; n > 0 {
			b.tokens = min(uint64(b.max), b.tokens+uint64(n)*uint64(b.perFill))
			b.lastFill = b.lastFill.Add(n * b.fill)
		}
	}
	if b.tokens == 0 {
		return false, "token_bucket"
	}
	b.tokens--
	return true, "token_bucket"
}

// apply installs an action received at now; the returned record is what is logged.
func (b *bucket) apply(a *rlqs.RateLimitQuotaResponse_BucketAction, now time.Time) (*assignmentOut, error) {
	if a.GetAbandonAction() != nil {
		*b = bucket{}
		return &assignmentOut{Kind: "abandon"}, nil
	}
	q := a.GetQuotaAssignmentAction()
	if q == nil {
		return nil, errors.New("a bucket action with neither an assignment nor abandon_action")
	}
	ttl := q.GetAssignmentTimeToLive().AsDuration()
	s := q.GetRateLimitStrategy()
	next := bucket{live: true, expires: now.Add(ttl), lastFill: now}
	out := &assignmentOut{TTLMs: float64(ttl.Microseconds()) / 1000}
	switch st := s.GetStrategy().(type) {
	case *typev3.RateLimitStrategy_BlanketRule_:
		rule := st.BlanketRule
		next.blanket = &rule
		out.Kind = rule.String()
	case *typev3.RateLimitStrategy_TokenBucket:
		tb := st.TokenBucket
		next.max = tb.GetMaxTokens()
		next.perFill = 1
		if tb.GetTokensPerFill() != nil {
			next.perFill = tb.GetTokensPerFill().GetValue()
		}
		next.fill = tb.GetFillInterval().AsDuration()
		if next.fill <= 0 {
			return nil, fmt.Errorf("token bucket fill_interval %v: not positive", next.fill)
		}
		// Each assignment starts its bucket full (DESIGN §11: a renewal is a fresh burst).
		next.tokens = uint64(next.max)
		out.Kind = "token_bucket"
		out.MaxTokens, out.PerFill = next.max, next.perFill
		out.FillMs = float64(next.fill.Microseconds()) / 1000
	default:
		// requests_per_time_unit or none: nothing this client enforces, so it denies.
		return nil, fmt.Errorf("unsupported rate_limit_strategy %T", st)
	}
	*b = next
	return out, nil
}

func parseBucket(s string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range strings.Split(s, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("bucket %q: expected key=value[,key=value...]", s)
		}
		m[k] = v
	}
	return m, nil
}

func main() {
	addr := flag.String("addr", "", "host:port of the region's RLS listener (RLQS on it)")
	domain := flag.String("domain", "geoquota", "the domain of the first usage report")
	bucketFlag := flag.String("bucket", "", "the bucket_id: key=value[,key=value...]")
	report := flag.Duration("report", time.Second, "reporting interval (> 100ms)")
	rate := flag.Float64("rate", 10, "requests decided per second")
	during := flag.Duration("for", 5*time.Second, "how long requests are decided")
	epochMs := flag.Int64("epoch", 0, "unix ms that t_ms counts from (0: the start)")
	id := flag.String("id", "", "a name put on every line")
	silentAfter := flag.Duration("silent-after", 0, "stop reporting this long after the start, stream open and deciding (0: never)")
	flag.Parse()
	if *addr == "" || *bucketFlag == "" {
		fmt.Fprintln(os.Stderr, "usage: rlqs-client -addr host:port -bucket key=value[,...] [-rate N] [-for T] [-report I] [-epoch MS]")
		os.Exit(2)
	}
	if *report <= 100*time.Millisecond {
		fmt.Fprintf(os.Stderr, "rlqs-client: -report %v: the reporting interval must be above 100ms\n", *report)
		os.Exit(2)
	}
	if *silentAfter < 0 {
		fmt.Fprintln(os.Stderr, "rlqs-client: -silent-after must not be negative")
		os.Exit(2)
	}
	if *rate <= 0 || *during <= 0 {
		fmt.Fprintln(os.Stderr, "rlqs-client: -rate and -for must be positive")
		os.Exit(2)
	}
	entries, err := parseBucket(*bucketFlag)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlqs-client:", err)
		os.Exit(2)
	}
	bucketId := &rlqs.BucketId{Bucket: entries}

	// One wall-clock anchor, then the monotonic clock (time.Since) for every t_ms.
	start := time.Now()
	if *epochMs == 0 {
		*epochMs = start.UnixMilli()
	}
	anchorMs := float64(start.UnixMicro())/1000 - float64(*epochMs)
	tMs := func(t time.Time) float64 { return anchorMs + float64(t.Sub(start).Microseconds())/1000 }

	var mu sync.Mutex // guards b, the counts and the output
	var b bucket
	var allowed, denied uint64
	enc := json.NewEncoder(os.Stdout)
	emit := func(l line) {
		l.Id = *id
		if err := enc.Encode(l); err != nil {
			os.Exit(1)
		}
	}

	// Reconnects as a proxy does, within a second of the server being back: grpc-go's default
	// connection backoff (1 s growing ×1.6 to 120 s) would leave a proxy whose region restarted
	// slowly without a stream for many seconds; Envoy's gRPC clients retry within about a second.
	conn, err := grpc.NewClient(*addr,
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second},
			MinConnectTimeout: time.Second,
		}))
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlqs-client:", err)
		os.Exit(1)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := rlqs.NewRateLimitQuotaServiceClient(conn)
	// The stream in use, replaced when it breaks (a region restart): smu guards it and lastReport.
	var smu sync.Mutex
	var stream rlqs.RateLimitQuotaService_StreamRateLimitQuotasClient
	lastReport := time.Now()
	report1 := func(st rlqs.RateLimitQuotaService_StreamRateLimitQuotasClient, now time.Time, a, d uint64) error {
		return st.Send(&rlqs.RateLimitQuotaUsageReports{
			Domain: *domain,
			BucketQuotaUsages: []*rlqs.RateLimitQuotaUsageReports_BucketQuotaUsage{{
				BucketId:           bucketId,
				TimeElapsed:        durationpb.New(now.Sub(lastReport)),
				NumRequestsAllowed: a,
				NumRequestsDenied:  d,
			}},
		})
	}
	// open starts a stream and subscribes the bucket with its first report (the caller holds smu).
	open := func() error {
		st, err := client.StreamRateLimitQuotas(ctx)
		if err != nil {
			return err
		}
		now := time.Now()
		if err := report1(st, now, 0, 0); err != nil {
			return err
		}
		stream, lastReport = st, now
		return nil
	}
	smu.Lock()
	err = open()
	smu.Unlock()
	if err != nil {
		fmt.Fprintln(os.Stderr, "rlqs-client: first report:", err)
		os.Exit(1)
	}
	// Reports go on the current stream; one that cannot be sent is kept for the next.
	send := func(now time.Time, a, d uint64) error {
		smu.Lock()
		defer smu.Unlock()
		err := report1(stream, now, a, d)
		if err == nil {
			lastReport = now
		}
		return err
	}

	// Receives on the current stream. When it breaks (not our own end), the client does as
	// Envoy's filter does: it keeps enforcing the assignment it holds until its TTL runs out
	// (the reservation behind it is counted in the region's Redis, which a restart of the
	// region's service does not lose), and opens a new stream, retrying with a backoff.
	recvDone := make(chan struct{})
	closing := make(chan struct{})
	go func() {
		defer close(recvDone)
		backoff := 50 * time.Millisecond
		for {
			smu.Lock()
			st := stream
			smu.Unlock()
			for {
				res, err := st.Recv()
				if err != nil {
					if errors.Is(err, io.EOF) || ctx.Err() != nil {
						return
					}
					select {
					case <-closing:
						return
					default:
					}
					mu.Lock()
					emit(line{TMs: tMs(time.Now()), Reason: "stream_broken: " + err.Error()})
					mu.Unlock()
					break
				}
				backoff = 50 * time.Millisecond
				for _, a := range res.GetBucketAction() {
					now := time.Now()
					mu.Lock()
					var out *assignmentOut
					var aerr error
					if a.GetBucketId() != nil && sameBucket(a.GetBucketId().GetBucket(), entries) {
						out, aerr = b.apply(a, now)
					} else {
						aerr = fmt.Errorf("an action for another bucket %v", a.GetBucketId().GetBucket())
					}
					if aerr != nil {
						emit(line{TMs: tMs(now), Err: aerr.Error()})
					} else {
						emit(line{TMs: tMs(now), Assignment: out})
					}
					mu.Unlock()
				}
			}
			for {
				select {
				case <-closing:
					return
				case <-time.After(backoff):
				}
				smu.Lock()
				err := open()
				smu.Unlock()
				if err == nil {
					mu.Lock()
					emit(line{TMs: tMs(time.Now()), Reason: "stream_reopened"})
					mu.Unlock()
					break
				}
				backoff = min(2*backoff, time.Second)
			}
		}
	}()

	reportErr := make(chan error, 1)
	stopReports := make(chan struct{})
	reportsDone := make(chan struct{})
	flush := func() error {
		mu.Lock()
		a, d := allowed, denied
		allowed, denied = 0, 0
		mu.Unlock()
		err := send(time.Now(), a, d)
		if err != nil {
			// Not sent (the stream broke): the counts go with the next report, on the new stream.
			mu.Lock()
			allowed += a
			denied += d
			mu.Unlock()
		}
		return err
	}
	// A proxy that hangs (-silent-after): from then on nothing is reported, not even at the end,
	// while it keeps deciding by the assignment it holds.
	silent := func(now time.Time) bool { return *silentAfter > 0 && now.Sub(start) >= *silentAfter }
	go func() {
		defer close(reportsDone)
		t := time.NewTicker(*report)
		defer t.Stop()
		for {
			select {
			case <-stopReports:
				if silent(time.Now()) {
					reportErr <- nil
				} else {
					reportErr <- flush()
				}
				return
			case now := <-t.C:
				if silent(now) {
					mu.Lock()
					emit(line{TMs: tMs(now), Reason: "report_withheld"})
					mu.Unlock()
					continue
				}
				_ = flush() // a failed report is kept for the next one
			}
		}
	}()

	// The schedule: request i at start + i/rate, decided when it is due.
	gap := time.Duration(float64(time.Second) / *rate)
	for i := 0; ; i++ {
		due := start.Add(time.Duration(i) * gap)
		if due.Sub(start) >= *during {
			break
		}
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		mu.Lock()
		now := time.Now()
		ok, why := b.decide(now)
		if ok {
			allowed++
		} else {
			denied++
		}
		emit(line{TMs: tMs(now), Allowed: &ok, Reason: why})
		mu.Unlock()
	}
	close(stopReports)
	<-reportsDone
	if err := <-reportErr; err != nil {
		fmt.Fprintln(os.Stderr, "rlqs-client: report:", err)
	}
	// Half-close after the last report; the server answers with abandon_action and ends.
	close(closing)
	smu.Lock()
	_ = stream.CloseSend()
	smu.Unlock()
	select {
	case <-recvDone:
	case <-time.After(2 * time.Second):
	}
}

func sameBucket(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}
