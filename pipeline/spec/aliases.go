package spec

import "go.yaml.in/yaml/v3"

// aliasBeyond returns the line of the alias at which the document, with
// its aliases expanded, grows beyond limit bytes of text, or 0. yaml.v3
// lets about a hundred aliases through, so a spec within MaxSize could
// otherwise decode into a hundred times that (a plugin option sent to the
// plugin and copied into summary.json and report.md).
func aliasBeyond(root *yaml.Node, limit int) int {
	size, line := 0, 0
	var walk func(n *yaml.Node, hops int)
	walk = func(n *yaml.Node, hops int) {
		if n == nil || size > limit || hops > 64 { // a cycle is yaml.v3's error
			return
		}
		if n.Kind == yaml.AliasNode {
			if walk(n.Alias, hops+1); size > limit && line == 0 {
				line = n.Line
			}
			return
		}
		size += len(n.Value) + 1
		for _, c := range n.Content {
			walk(c, hops)
		}
	}
	walk(root, 0)
	return line
}
