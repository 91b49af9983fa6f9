// Command testplugin serves backendtest.Fake as a real plugin process and
// misbehaves on request, for the host-side tests of package backend:
//   - Load with option print=true writes to stdout and stderr mid-call;
//   - Eval on session "crash" exits with status 3 after the first row;
//   - Eval on session "panic" panics after the first row;
//   - Eval on session "hang" never returns.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/evalrun/evalrun/backend"
	"github.com/evalrun/evalrun/backend/backendtest"
)

func main() {
	log := backend.NewPluginLogger("testplugin")
	fake := &backendtest.Fake{
		OnLoad: func(req backend.LoadRequest) {
			if p, _ := req.Options["print"].(bool); p {
				fmt.Println("stray line on stdout during Load")
				fmt.Fprintln(os.Stderr, "stray line on stderr during Load")
				log.Info("loading", "model", req.ModelPath)
			}
		},
		OnEval: func(session string, index int) {
			if index == 0 {
				return
			}
			switch session {
			case "crash":
				log.Error("about to exit mid-eval", "index", index)
				os.Exit(3)
			case "panic":
				panic(fmt.Sprintf("test panic at row %d", index))
			case "hang":
				for {
					time.Sleep(time.Hour)
				}
			}
		},
	}
	backend.Serve(fake, backend.WithLogger(log))
}
