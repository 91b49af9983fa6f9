package backend

// FreeLeases is how many shared memory leases c's plugin has left to lend
// (-1: it has no shared rows).
func FreeLeases(c *Client) int {
	g, ok := c.backend.(*grpcClient)
	if !ok || g.leases == nil {
		return -1
	}
	g.leases.mu.Lock()
	defer g.leases.mu.Unlock()
	if g.leases.slots == 0 {
		return -1
	}
	return len(g.leases.free)
}
