// Command gendoc writes the failure table's two tables into docs/operating.md: the
// reasons a view fails for ("Why a view was 503") and every listener's error answers
// ("Errors, by listener"), each between its markers, from package wire's rows and the
// doc comments of its Reason constants. `go generate ./wire` runs it; its test fails
// when the document says anything else.
package main

import (
	"bytes"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentfy/agentfy/wire"
)

// The blocks of the document that are generated, each between its markers.
const (
	blockReasons   = "reasons"
	blockListeners = "listeners"
)

func begin(block string) string {
	return "<!-- BEGIN " + block + ": generated from the failure table (wire/failure.go) by `go generate ./wire`; do not edit -->\n"
}

func end(block string) string { return "<!-- END " + block + " -->\n" }

func main() {
	doc := flag.String("doc", "../docs/operating.md", "the document to rewrite")
	reasonSource := flag.String("reasons", "reason.go", "the Go file of the Reason constants")
	flag.Parse()
	if err := run(*doc, *reasonSource); err != nil {
		fmt.Fprintln(os.Stderr, "gendoc:", err)
		os.Exit(1)
	}
}

func run(doc, reasonSource string) error {
	b, err := os.ReadFile(doc) //nolint:gosec // the document go generate names
	if err != nil {
		return err
	}
	out, err := generate(b, reasonSource)
	if err != nil {
		return fmt.Errorf("%s: %w", doc, err)
	}
	if bytes.Equal(out, b) {
		return nil
	}
	return os.WriteFile(doc, out, 0o644) //nolint:gosec // a document of the repository, read by everyone
}

// generate returns doc with its generated blocks written anew.
func generate(doc []byte, reasonSource string) ([]byte, error) {
	meanings, err := reasonMeanings(reasonSource)
	if err != nil {
		return nil, err
	}
	reasons, err := reasonsTable(meanings)
	if err != nil {
		return nil, err
	}
	out, err := replaceBlock(doc, blockReasons, reasons)
	if err != nil {
		return nil, err
	}
	return replaceBlock(out, blockListeners, listenersTable())
}

// replaceBlock replaces what is between block's markers in doc with body.
func replaceBlock(doc []byte, block, body string) ([]byte, error) {
	b, e := []byte(begin(block)), []byte(end(block))
	i := bytes.Index(doc, b)
	j := bytes.Index(doc, e)
	if i < 0 || j < i || bytes.Count(doc, b) != 1 || bytes.Count(doc, e) != 1 {
		return nil, fmt.Errorf("no one block %q between its markers", block)
	}
	var out bytes.Buffer
	out.Write(doc[:i+len(b)])
	out.WriteString(body)
	out.Write(doc[j:])
	return out.Bytes(), nil
}

// reasonMeanings reads the doc comment of each Reason constant of the Go file at path,
// by its value: "ReasonCapture: the broker could not …" gives capture its meaning.
func reasonMeanings(path string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, s := range g.Specs {
			v := s.(*ast.ValueSpec)
			if len(v.Names) != 1 || len(v.Values) != 1 || !strings.HasPrefix(v.Names[0].Name, "Reason") || v.Doc == nil {
				continue
			}
			lit, ok := v.Values[0].(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				continue
			}
			value, err := strconv.Unquote(lit.Value)
			if err != nil {
				return nil, err
			}
			text := strings.Join(strings.Fields(v.Doc.Text()), " ")
			out[value] = strings.TrimPrefix(text, v.Names[0].Name+": ")
		}
	}
	return out, nil
}

// reasonsTable is the table of every reason (wire.Labels), from the reasons' rows.
func reasonsTable(meanings map[string]string) (string, error) {
	var b strings.Builder
	b.WriteString("| reason | crosses processes | JSON-RPC code | broker's status | API's status | what it means |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, reason := range wire.Labels() {
		meaning, ok := meanings[reason]
		if !ok {
			return "", fmt.Errorf("reason %s has no documented constant", reason)
		}
		crosses, rpc, broker := "no: raised by the replica that answers", "—", "—"
		if wire.IsReason(reason) {
			crosses = "yes"
			rpc = strconv.Itoa(wire.RPCCodeOf(reason))
			if wire.ReasonOfRPCCode(wire.RPCCodeOf(reason)) == reason {
				rpc += " (stands for it alone)"
			}
		}
		for _, f := range wire.Failures() {
			if r := f.Row(); r.Listeners&wire.ListenerBroker != 0 && r.Reason == reason {
				broker = strconv.Itoa(r.Status)
				break
			}
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %d | %s |\n", reason, crosses, rpc, broker, wire.APIStatus(reason), cell(meaning))
	}
	return b.String(), nil
}

// answer is what a listener's client reads of a row, and the rows that answer it.
type answer struct {
	row     wire.FailureRow
	reasons []string
}

// listenersTable is the table of every answer of the failure table, the rows that
// differ only in their reason on one line.
func listenersTable() string {
	var answers []*answer
	for _, f := range wire.Failures() {
		r := f.Row()
		i := slices.IndexFunc(answers, func(a *answer) bool {
			x := a.row
			return x.Listeners == r.Listeners && x.Status == r.Status && x.Code == r.Code && x.Message == r.Message && x.RetryAfter == r.RetryAfter
		})
		if i < 0 {
			answers = append(answers, &answer{row: r})
			i = len(answers) - 1
		}
		if r.Reason != "" {
			answers[i].reasons = append(answers[i].reasons, "`"+r.Reason+"`")
		}
	}
	var b strings.Builder
	b.WriteString("| listeners | status | code | reason | Retry-After | message |\n")
	b.WriteString("|---|---|---|---|---|---|\n")
	for _, a := range answers {
		reasons, retry := "—", "—"
		if len(a.reasons) > 0 {
			reasons = strings.Join(a.reasons, ", ")
		}
		if a.row.RetryAfter > 0 {
			retry = strconv.Itoa(int(a.row.RetryAfter / time.Second))
		}
		fmt.Fprintf(&b, "| %s | %d | `%s` | %s | %s | %s |\n", strings.Join(a.row.Listeners.Names(), ", "), a.row.Status, a.row.Code, reasons, retry, cell(a.row.Message))
	}
	return b.String()
}

// cell is s as the text of a Markdown table's cell.
func cell(s string) string { return strings.ReplaceAll(s, "|", `\|`) }
