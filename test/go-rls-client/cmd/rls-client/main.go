// rls-client calls RateLimitService/ShouldRateLimit with Envoy's own generated
// API types (github.com/envoyproxy/go-control-plane/envoy, service/ratelimit/v3)
// over grpc-go: a client nobody on the geoquota side wrote the wire code of.
//
//	rls-client -addr 127.0.0.1:7300[,127.0.0.1:7301...] -domain D -n 10 \
//	  -d 'key1=value1,key2=value2' [-d 'k=v;hits=0' -d 'tenant=a;limit=5/MINUTE'] [-hits N] [-for 3s] [-interval 200ms]
//
// Sends n requests (or, with -for, as many as fit in that time) one after another,
// round-robin over the addresses (an address listed twice gets twice the share), and prints
// one JSON line per request: the wall-clock instants it was sent and answered
// (µs since the epoch, for the global-bound oracle), the address, the overall code
// and each status, or the gRPC error (its code name).
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	rlcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	typev3 "github.com/envoyproxy/go-control-plane/envoy/type/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/wrapperspb"
)

type descFlags []string

func (d *descFlags) String() string     { return strings.Join(*d, " ") }
func (d *descFlags) Set(v string) error { *d = append(*d, v); return nil }

type statusOut struct {
	Code      string `json:"code"`
	Remaining uint32 `json:"remaining"`
	Limit     uint32 `json:"limit,omitempty"`
	Unit      string `json:"unit,omitempty"`
	ResetS    int64  `json:"resetS,omitempty"`
}

type line struct {
	I        int         `json:"i"`
	Addr     string      `json:"addr"`
	SentUs   int64       `json:"sentUs"`
	AnswerUs int64       `json:"answeredUs"`
	Overall  string      `json:"overall,omitempty"`
	Statuses []statusOut `json:"statuses,omitempty"`
	Headers  int         `json:"headers,omitempty"`
	Err      string      `json:"err,omitempty"`
	ErrMsg   string      `json:"errMsg,omitempty"`
}

func parseDescriptor(s string) (*rlcommon.RateLimitDescriptor, error) {
	parts := strings.Split(s, ";")
	d := &rlcommon.RateLimitDescriptor{}
	for _, kv := range strings.Split(parts[0], ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("descriptor %q: expected key=value[,key=value...]", s)
		}
		d.Entries = append(d.Entries, &rlcommon.RateLimitDescriptor_Entry{Key: k, Value: v})
	}
	for _, opt := range parts[1:] {
		name, val, _ := strings.Cut(opt, "=")
		switch name {
		case "hits":
			n, err := strconv.ParseUint(val, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("descriptor %q: hits: %v", s, err)
			}
			d.HitsAddend = wrapperspb.UInt64(n)
		case "limit":
			rpu, unit, ok := strings.Cut(val, "/")
			n, err := strconv.ParseUint(rpu, 10, 32)
			u, known := typev3.RateLimitUnit_value[strings.ToUpper(unit)]
			if !ok || err != nil || !known {
				return nil, fmt.Errorf("descriptor %q: limit: expected N/UNIT", s)
			}
			d.Limit = &rlcommon.RateLimitDescriptor_RateLimitOverride{RequestsPerUnit: uint32(n), Unit: typev3.RateLimitUnit(u)}
		default:
			return nil, fmt.Errorf("descriptor %q: unknown option %q (hits, limit)", s, name)
		}
	}
	return d, nil
}

func main() {
	addrs := flag.String("addr", "", "host:port of the RLS, comma-separated for round-robin")
	domain := flag.String("domain", "", "rate limit domain")
	n := flag.Int("n", 1, "requests to send")
	hits := flag.Uint("hits", 0, "the request's hits_addend (0: unset)")
	timeout := flag.Duration("timeout", 2*time.Second, "per-request deadline")
	during := flag.Duration("for", 0, "send until this much time has passed instead of -n requests")
	interval := flag.Duration("interval", 0, "pause between requests (a quiet region's trickle); 0: flat out")
	var ds descFlags
	flag.Var(&ds, "d", "descriptor: key=value[,key=value][;hits=N][;limit=N/UNIT] (repeatable)")
	flag.Parse()
	if *addrs == "" || len(ds) == 0 {
		fmt.Fprintln(os.Stderr, "usage: rls-client -addr host:port[,...] -domain D -d key=value [-d ...] [-n N] [-hits N]")
		os.Exit(2)
	}
	req := &rls.RateLimitRequest{Domain: *domain, HitsAddend: uint32(*hits)}
	for _, s := range ds {
		d, err := parseDescriptor(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "rls-client:", err)
			os.Exit(2)
		}
		req.Descriptors = append(req.Descriptors, d)
	}
	var clients []rls.RateLimitServiceClient
	list := strings.Split(*addrs, ",")
	for _, a := range list {
		conn, err := grpc.NewClient(a, grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			fmt.Fprintln(os.Stderr, "rls-client:", err)
			os.Exit(1)
		}
		defer conn.Close()
		clients = append(clients, rls.NewRateLimitServiceClient(conn))
	}
	enc := json.NewEncoder(os.Stdout)
	end := time.Now().Add(*during)
	for i := 0; (*during > 0 && time.Now().Before(end)) || (*during <= 0 && i < *n); i++ {
		k := i % len(clients)
		ctx, cancel := context.WithTimeout(context.Background(), *timeout)
		sent := time.Now().UnixMicro()
		res, err := clients[k].ShouldRateLimit(ctx, req)
		answered := time.Now().UnixMicro()
		cancel()
		out := line{I: i, Addr: list[k], SentUs: sent, AnswerUs: answered}
		if err != nil {
			st, _ := status.FromError(err)
			out.Err = st.Code().String()
			out.ErrMsg = st.Message()
		} else {
			out.Overall = res.GetOverallCode().String()
			out.Headers = len(res.GetResponseHeadersToAdd())
			for _, s := range res.GetStatuses() {
				so := statusOut{Code: s.GetCode().String(), Remaining: s.GetLimitRemaining()}
				if l := s.GetCurrentLimit(); l != nil {
					so.Limit = l.GetRequestsPerUnit()
					so.Unit = l.GetUnit().String()
				}
				if r := s.GetDurationUntilReset(); r != nil {
					so.ResetS = r.GetSeconds()
				}
				out.Statuses = append(out.Statuses, so)
			}
		}
		if err := enc.Encode(out); err != nil {
			os.Exit(1)
		}
		if *interval > 0 {
			time.Sleep(*interval)
		}
	}
}
