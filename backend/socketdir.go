package backend

import (
	"os"
	"sync"
)

// socketDirs holds the plugins' socket directories (go-plugin's
// plugin-dir*, one a plugin) not yet removed: go-plugin removes one only
// once its plugin has been killed, which an exiting host may not wait for,
// so the host removes what is left as it exits (RemoveSocketDirs). (A
// directory nests no deeper than go-plugin makes it: a unix socket's path
// has a 108-byte limit.)
var socketDirs sync.Map

// RemoveSocketDirs removes every plugin socket directory this process made
// that is still there. The host calls it as it exits, whichever way;
// plugins still running then end with it (Pdeathsig, their watchdogs).
func RemoveSocketDirs() {
	socketDirs.Range(func(dir, _ any) bool {
		_ = os.RemoveAll(dir.(string))
		socketDirs.Delete(dir)
		return true
	})
}
