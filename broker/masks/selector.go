package masks

import (
	"strconv"
	"strings"
)

// selectors returns, for each of top (the nodes of the top document's secret roots), a
// CSS selector that matches it alone among the elements of the document's own tree,
// where one is at hand, or "": "#" and its id when no other element of that tree has
// the same id and it is not inside a shadow root. Chromium's overlay pins every match of
// one selector at once (pins.go), which costs far less than a DevTools session for each.
func selectors(doc snapshotDocument, str func(int) (string, bool), top []int) []string {
	nodes := doc.Nodes
	n := len(nodes.ParentIndex)
	shadowed := make([]bool, n) // inside a shadow root
	ids := make([]string, n)
	count := map[string]int{}
	for i := range n {
		if p := nodes.ParentIndex[i]; p >= 0 && p < i {
			name, _ := str(nodes.NodeName[p])
			shadowed[i] = shadowed[p] || name == "#document-fragment"
		}
		if i >= len(nodes.Attributes) {
			continue
		}
		attrs := nodes.Attributes[i]
		for k := 0; k+1 < len(attrs); k += 2 {
			a, _ := str(attrs[k])
			if strings.EqualFold(a, "id") {
				ids[i], _ = str(attrs[k+1])
				break
			}
		}
		if ids[i] != "" && !shadowed[i] {
			count[ids[i]]++
		}
	}
	out := make([]string, len(top))
	for k, i := range top {
		if i >= 0 && i < n && !shadowed[i] && ids[i] != "" && count[ids[i]] == 1 {
			out[k] = "#" + cssIdent(ids[i])
		}
	}
	return out
}

// cssIdent serializes s as a CSS identifier (CSSOM's "serialize an identifier", what
// CSS.escape does).
func cssIdent(s string) string {
	var b strings.Builder
	rs := []rune(s)
	for i, r := range rs {
		switch {
		case r == 0:
			b.WriteRune('\uFFFD')
		case (r >= 1 && r <= 0x1f) || r == 0x7f,
			i == 0 && r >= '0' && r <= '9',
			i == 1 && r >= '0' && r <= '9' && rs[0] == '-':
			b.WriteString(`\` + strconv.FormatInt(int64(r), 16) + " ")
		case i == 0 && r == '-' && len(rs) == 1:
			b.WriteString(`\-`)
		case r >= 0x80 || r == '-' || r == '_' || (r >= '0' && r <= '9') || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z'):
			b.WriteRune(r)
		default:
			b.WriteString(`\` + string(r))
		}
	}
	return b.String()
}
