package backend_test

import (
	"context"
	"io/fs"
	"path/filepath"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/evalrun/evalrun/backend"
)

// pluginSocket is the unix socket a running plugin listens on, found in the
// socket directory go-plugin made in tmp.
func pluginSocket(t *testing.T, tmp string) string {
	t.Helper()
	var sock string
	filepath.WalkDir(tmp, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type()&fs.ModeSocket != 0 {
			sock = path
		}
		return nil
	})
	if sock == "" {
		t.Fatalf("no socket under %s", tmp)
	}
	return sock
}

// TestPluginConnectionIsMutualTLS: the host speaks to its plugins over
// go-plugin's AutoMTLS, so another local process that reaches the plugin's
// socket cannot drive it in plain gRPC; EVALRUN_PLUGIN_MTLS=0 turns it off
// (and then the same plain call works, which shows the refusal is TLS's).
func TestPluginConnectionIsMutualTLS(t *testing.T) {
	for _, mtls := range []bool{true, false} {
		name := map[bool]string{true: "on", false: "off"}[mtls]
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			t.Setenv("TMPDIR", tmp)
			if !mtls {
				t.Setenv(backend.MTLSEnv, "0")
			}
			c := launch(t, nil) // the host's own connection works either way
			conn, err := grpc.NewClient("unix://"+pluginSocket(t, tmp), grpc.WithTransportCredentials(insecure.NewCredentials()))
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			info, err := backend.NewGRPCClient(conn).Describe(ctx)
			if mtls && err == nil {
				t.Errorf("a plain-text client drove the plugin (Describe = %+v): no mutual TLS", info)
			}
			if !mtls && err != nil {
				t.Errorf("with %s=0, a plain-text Describe failed: %v", backend.MTLSEnv, err)
			}
			if _, err := c.Describe(context.Background()); err != nil {
				t.Errorf("the host's own Describe: %v", err)
			}
		})
	}
}
