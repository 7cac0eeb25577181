// rls-descriptor writes Envoy's RLS v3 API, as compiled into Envoy's own Go
// module (github.com/envoyproxy/go-control-plane/envoy), as a binary
// FileDescriptorSet on stdout: rls.proto and every file it imports, imports
// first. With an argument, that proto file instead (the RLQS API:
// envoy/service/rate_limit_quota/v3/rlqs.proto). geoquota's Node server loads it with @grpc/proto-loader, so its wire
// format is exactly the one Envoy's generated types speak.
package main

import (
	"fmt"
	"os"

	_ "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protodesc"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

func main() {
	path := "envoy/service/ratelimit/v3/rls.proto"
	if len(os.Args) > 1 {
		path = os.Args[1]
	}
	fd, err := protoregistry.GlobalFiles.FindFileByPath(path)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rls-descriptor:", err)
		os.Exit(1)
	}
	set := &descriptorpb.FileDescriptorSet{}
	seen := map[string]bool{}
	var visit func(f protoreflect.FileDescriptor)
	visit = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			visit(imports.Get(i).FileDescriptor)
		}
		set.File = append(set.File, protodesc.ToFileDescriptorProto(f))
	}
	visit(fd)
	out, err := proto.MarshalOptions{Deterministic: true}.Marshal(set)
	if err != nil {
		fmt.Fprintln(os.Stderr, "rls-descriptor:", err)
		os.Exit(1)
	}
	os.Stdout.Write(out)
}
