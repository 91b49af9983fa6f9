// Command slowwriter is a plugin binary for evalrun's tests: its generate
// command writes its pid to $TEST_EVALRUN_PIDFILE, starts writing
// $TEST_EVALRUN_OUT atomically and never finishes, ignoring a stop request.
// Only a quit at once ends it before its grace: it must then remove its
// temporary file.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/evalrun/evalrun/internal/atomicfile"
	"github.com/evalrun/evalrun/internal/toolcmd"
)

func main() {
	cmd := &cobra.Command{Use: "generate", RunE: func(*cobra.Command, []string) error {
		f, err := atomicfile.Create(os.Getenv("TEST_EVALRUN_OUT"))
		if err != nil {
			return err
		}
		f.WriteString("part of a model")
		os.WriteFile(os.Getenv("TEST_EVALRUN_PIDFILE"), fmt.Appendf(nil, "%d %d\n", os.Getpid(), os.Getpid()), 0o644)
		time.Sleep(time.Hour)
		return f.Commit()
	}}
	code, _ := toolcmd.Run(os.Args[1:], cmd)
	os.Exit(code)
}
