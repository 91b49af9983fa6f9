package backend

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/evalrun/evalrun/backend/internal/backendpb"
	"github.com/evalrun/evalrun/backend/internal/wirelie"
)

// NewGRPCServer registers b as the Backend service on s. Serve does this for
// plugin mains; it is exported for tests and for embedding a backend in
// another gRPC server.
func NewGRPCServer(s *grpc.Server, b Backend) { newGRPCServer(s, b, nil) }

// newGRPCServer is NewGRPCServer with the shared rows region the host
// handed the plugin (nil: none).
func newGRPCServer(s *grpc.Server, b Backend, rows *rowRegion) {
	backendpb.RegisterBackendServer(s, &grpcServer{impl: b, rows: rows})
}

// NewGRPCClient returns a Backend that calls the Backend service on conn.
func NewGRPCClient(conn grpc.ClientConnInterface) Backend { return newGRPCClient(conn, nil) }

// newGRPCClient is NewGRPCClient with the plugin's shared rows region (nil:
// none), used once the plugin's Load shows it mapped it.
func newGRPCClient(conn grpc.ClientConnInterface, rows *rowRegion) *grpcClient {
	c := &grpcClient{pb: backendpb.NewBackendClient(conn)}
	if rows != nil {
		c.leases = &rowLeases{region: rows}
	}
	return c
}

// grpcServer adapts a Backend to the generated service interface.
type grpcServer struct {
	backendpb.UnimplementedBackendServer
	impl Backend
	rows *rowRegion // the host's shared rows region; nil: none
}

func (s *grpcServer) Describe(ctx context.Context, _ *backendpb.DescribeRequest) (*backendpb.DescribeResponse, error) {
	info, err := s.impl.Describe(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.DescribeResponse{
		Name:         info.Name,
		Version:      info.Version,
		Device:       info.Device,
		Capabilities: info.Capabilities,
	}, nil
}

// loadRequest decodes a LoadRequest (Load's and Validate's).
func loadRequest(in *backendpb.LoadRequest) (LoadRequest, error) {
	req := LoadRequest{ModelPath: in.ModelPath, Threads: int(in.Threads), NCtx: int(in.NCtx), VocabDigest: in.VocabDigest, BaseDir: in.BaseDir}
	if in.OptionsJson != "" {
		if err := json.Unmarshal([]byte(in.OptionsJson), &req.Options); err != nil {
			return req, Errorf(ErrInvalidArgument, "options_json: not a JSON object: %v", err)
		}
	}
	return req, nil
}

func (s *grpcServer) Validate(ctx context.Context, in *backendpb.LoadRequest) (*backendpb.ValidateResponse, error) {
	v, ok := s.impl.(Validator)
	if !ok {
		return nil, toStatus(Errorf(ErrUnsupported, "Validate: not implemented by this plugin"))
	}
	req, err := loadRequest(in)
	if err != nil {
		return nil, toStatus(err)
	}
	warnings, err := v.Validate(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.ValidateResponse{Warnings: warnings}, nil
}

func (s *grpcServer) Load(ctx context.Context, in *backendpb.LoadRequest) (*backendpb.LoadResponse, error) {
	req, err := loadRequest(in)
	if err != nil {
		return nil, toStatus(err)
	}
	res, err := s.impl.Load(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &backendpb.LoadResponse{
		Model: &backendpb.ModelInfo{
			Arch:      res.Model.Arch,
			NVocab:    int64(res.Model.NVocab),
			NParams:   res.Model.NParams,
			NCtxTrain: int64(res.Model.NCtxTrain),
			NLayer:    int64(res.Model.NLayer),
			NEmbd:     int64(res.Model.NEmbd),
			FileType:  res.Model.FileType,
			SizeBytes: res.Model.SizeBytes,
		},
		PlanSummary: res.PlanSummary,
		LoadNs:      res.LoadNS,
		WarmupNs:    res.WarmupNS,
		MemoryBytes: res.MemoryBytes,
		Kernels:     res.Kernels,
		// The host lends slots of the region in Eval calls from now on.
		SharedRowsToken: s.rows.pluginToken(),
	}
	for _, p := range res.Plan {
		out.Plan = append(out.Plan, &backendpb.PlanEntry{Op: p.Op, Device: p.Device, Shape: p.Shape, Reason: p.Reason})
	}
	return out, nil
}

func (s *grpcServer) Eval(in *backendpb.EvalRequest, stream grpc.ServerStreamingServer[backendpb.EvalChunk]) error {
	req := EvalRequest{
		Session:    in.Session,
		Pos:        int(in.Pos),
		Tokens:     in.Tokens,
		LogitsFrom: int(in.LogitsFrom),
	}
	for _, r := range in.HiddenRows {
		req.HiddenRows = append(req.HiddenRows, int(r))
	}
	var buf, hidden []byte // reused: Send serializes the message before it returns (so rows may be aliased too)
	start := time.Now()
	var sending time.Duration // encoding and sending rows: IPC, not compute
	ctx := stream.Context()
	w := newRowWriter(s.rows, in.SharedRows)
	var returned atomic.Bool // a row emitted after Eval returned is refused, and never written
	err := s.impl.Eval(ctx, req, func(l Logits) error {
		if returned.Load() {
			return errors.New("eval: row emitted after Eval returned")
		}
		t := time.Now()
		compute := t.Sub(start) - sending
		chunk := &backendpb.EvalChunk{Index: int64(l.Index), Pos: int64(l.Pos), ComputeNs: compute.Nanoseconds()}
		off, n, shared, err := w.put(ctx, l.Values)
		if err != nil {
			return err
		}
		if shared {
			chunk.SharedOffset, chunk.SharedBytes = off, n
		} else {
			chunk.Logits = wireFloats(&buf, l.Values)
		}
		if l.Hidden != nil {
			chunk.Hidden = wireFloats(&hidden, l.Hidden)
		}
		if wirelie.Chunk != nil {
			wirelie.Chunk(chunk, s.rows.bytes())
		}
		err = stream.Send(chunk)
		sending += time.Since(t)
		return err
	})
	returned.Store(true)
	return toStatus(err)
}

func (s *grpcServer) Bench(ctx context.Context, in *backendpb.BenchRequest) (*backendpb.BenchResponse, error) {
	res, err := s.impl.Bench(ctx, BenchRequest{
		NPrompt: int(in.NPrompt),
		NGen:    int(in.NGen),
		Reps:    int(in.Reps),
		Warmup:  in.Warmup,
		Seed:    in.Seed,
		NBatch:  int(in.NBatch),
		NDepth:  int(in.NDepth),
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.BenchResponse{
		NPrompt:   int64(res.NPrompt),
		NGen:      int64(res.NGen),
		NDepth:    int64(res.NDepth),
		SamplesNs: res.SamplesNS,
		WarmupNs:  res.WarmupNS,
	}, nil
}

func (s *grpcServer) Close(ctx context.Context, _ *backendpb.CloseRequest) (*backendpb.CloseResponse, error) {
	if err := s.impl.Close(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &backendpb.CloseResponse{}, nil
}

func (s *grpcServer) Diagnostics(ctx context.Context, _ *backendpb.DiagnosticsRequest) (*backendpb.DiagnosticsResponse, error) {
	d, ok := s.impl.(Diagnoser)
	if !ok {
		return nil, toStatus(Errorf(ErrUnsupported, "diagnostics: not supported by this plugin"))
	}
	res, err := d.Diagnostics(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &backendpb.DiagnosticsResponse{}
	if res == nil {
		return out, nil
	}
	out.Shadow, out.KernelList = res.Shadow, res.KernelList
	for _, o := range res.Ops {
		out.Ops = append(out.Ops, &backendpb.OpError{Op: o.Op, Calls: o.Calls, Elements: o.Elements, Nmse: o.NMSE, Cosine: o.Cosine, MaxAbs: o.MaxAbs, NonFinite: o.NonFinite})
	}
	for _, k := range res.Kernels {
		out.Kernels = append(out.Kernels, &backendpb.KernelUse{Name: k.Name, Shape: k.Shape, Listed: k.Listed, Calls: k.Calls})
	}
	return out, nil
}

// grpcClient implements Backend over the generated client.
type grpcClient struct {
	pb     backendpb.BackendClient
	leases *rowLeases // the plugin's shared rows; nil: none
}

func (c *grpcClient) Describe(ctx context.Context) (Info, error) {
	r, err := c.pb.Describe(ctx, &backendpb.DescribeRequest{})
	if err != nil {
		return Info{}, fromStatus(err)
	}
	return Info{Name: r.Name, Version: r.Version, Device: r.Device, Capabilities: r.Capabilities}, nil
}

// pbLoadRequest encodes a LoadRequest (Load's and Validate's).
func pbLoadRequest(req LoadRequest) (*backendpb.LoadRequest, error) {
	in := &backendpb.LoadRequest{ModelPath: req.ModelPath, Threads: int64(req.Threads), NCtx: int64(req.NCtx), VocabDigest: req.VocabDigest, BaseDir: req.BaseDir}
	if req.Options != nil {
		js, err := json.Marshal(req.Options)
		if err != nil {
			return nil, Errorf(ErrInvalidArgument, "options: cannot encode as JSON: %v", err)
		}
		in.OptionsJson = string(js)
	}
	return in, nil
}

func (c *grpcClient) Validate(ctx context.Context, req LoadRequest) ([]string, error) {
	in, err := pbLoadRequest(req)
	if err != nil {
		return nil, err
	}
	r, err := c.pb.Validate(ctx, in)
	if err != nil {
		return nil, fromStatus(err)
	}
	return r.Warnings, nil
}

func (c *grpcClient) Load(ctx context.Context, req LoadRequest) (LoadResult, error) {
	in, err := pbLoadRequest(req)
	if err != nil {
		return LoadResult{}, err
	}
	r, err := c.pb.Load(ctx, in)
	if err != nil {
		return LoadResult{}, fromStatus(err)
	}
	res := LoadResult{
		PlanSummary: r.PlanSummary,
		LoadNS:      r.LoadNs,
		WarmupNS:    r.WarmupNs,
		MemoryBytes: r.MemoryBytes,
		Kernels:     r.Kernels,
	}
	if m := r.Model; m != nil {
		res.Model = ModelInfo{
			Arch:      m.Arch,
			NVocab:    int(m.NVocab),
			NParams:   m.NParams,
			NCtxTrain: int(m.NCtxTrain),
			NLayer:    int(m.NLayer),
			NEmbd:     int(m.NEmbd),
			FileType:  m.FileType,
			SizeBytes: m.SizeBytes,
		}
	}
	for _, p := range r.Plan {
		res.Plan = append(res.Plan, PlanEntry{Op: p.Op, Device: p.Device, Shape: p.Shape, Reason: p.Reason})
	}
	// Rows move through shared memory only when the plugin mapped the
	// region the host made for it (it read back the host's token).
	c.leases.enable(r.SharedRowsToken, res.Model.NVocab)
	return res, nil
}

func (c *grpcClient) Eval(ctx context.Context, req EvalRequest, emit func(Logits) error) error {
	return c.EvalInto(ctx, req, nil, emit)
}

// EvalInto implements RowDecoder: the stream is read with rowCodec, which
// decodes each row's bytes straight into buf(n).
func (c *grpcClient) EvalInto(ctx context.Context, req EvalRequest, buf func(n int) []float32, emit func(Logits) error) error {
	// Cancelling tells the plugin to stop when emit gives up early.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	lease := c.leases.acquire()
	clean := false // the plugin's handler returned: the lease has no writer left
	defer func() { lease.release(clean) }()
	stream, err := c.pb.Eval(ctx, &backendpb.EvalRequest{
		Session:    req.Session,
		Pos:        int64(req.Pos),
		Tokens:     req.Tokens,
		LogitsFrom: int64(req.LogitsFrom),
		HiddenRows: int64s(req.HiddenRows),
		SharedRows: lease.request(),
	}, grpc.ForceCodecV2(rowCodec{}))
	if err != nil {
		return fromStatus(err)
	}
	if buf == nil {
		buf = func(n int) []float32 { return make([]float32, n) }
	}
	chunk := rowChunk{buf: buf, lease: lease}
	for {
		err := stream.RecvMsg(&chunk)
		if errors.Is(err, io.EOF) {
			clean = true
			return nil
		}
		if err != nil {
			if chunk.err != nil {
				return chunk.err
			}
			return fromStatus(err)
		}
		if err := emit(Logits{Index: int(chunk.index), Pos: int(chunk.pos), Values: chunk.values, ComputeNS: chunk.computeNS, Hidden: chunk.hidden}); err != nil {
			return err
		}
	}
}

func (c *grpcClient) Bench(ctx context.Context, req BenchRequest) (BenchResult, error) {
	r, err := c.pb.Bench(ctx, &backendpb.BenchRequest{
		NPrompt: int64(req.NPrompt),
		NGen:    int64(req.NGen),
		Reps:    int64(req.Reps),
		Warmup:  req.Warmup,
		Seed:    req.Seed,
		NBatch:  int64(req.NBatch),
		NDepth:  int64(req.NDepth),
	})
	if err != nil {
		return BenchResult{}, fromStatus(err)
	}
	return BenchResult{
		NPrompt:   int(r.NPrompt),
		NGen:      int(r.NGen),
		NDepth:    int(r.NDepth),
		SamplesNS: r.SamplesNs,
		WarmupNS:  r.WarmupNs,
	}, nil
}

func (c *grpcClient) Close(ctx context.Context) error {
	_, err := c.pb.Close(ctx, &backendpb.CloseRequest{})
	return fromStatus(err)
}

func int64s(v []int) []int64 {
	if v == nil {
		return nil
	}
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// Diagnostics implements Diagnoser; a plugin without the call gives nil.
func (c *grpcClient) Diagnostics(ctx context.Context) (*Diagnostics, error) {
	r, err := c.pb.Diagnostics(ctx, &backendpb.DiagnosticsRequest{})
	if err != nil {
		if err = fromStatus(err); errors.Is(err, ErrUnsupported) {
			return nil, nil
		}
		return nil, err
	}
	d := &Diagnostics{Shadow: r.Shadow, KernelList: r.KernelList}
	for _, o := range r.Ops {
		d.Ops = append(d.Ops, OpError{Op: o.Op, Calls: o.Calls, Elements: o.Elements, NMSE: o.Nmse, Cosine: o.Cosine, MaxAbs: o.MaxAbs, NonFinite: o.NonFinite})
	}
	for _, k := range r.Kernels {
		d.Kernels = append(d.Kernels, KernelUse{Name: k.Name, Shape: k.Shape, Listed: k.Listed, Calls: k.Calls})
	}
	return d, nil
}
