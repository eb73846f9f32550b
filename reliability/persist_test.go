package reliability

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentfy/agentfy/bus"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/stacktest"
	"github.com/agentfy/agentfy/wire"
)

// needle is something that must be found nowhere: a piece of a frame, its URL or title,
// or a private key.
type needle struct {
	what string
	b    []byte
}

// TestNothingPersists runs views of a page with a unique URL and title, then searches
// the whole Redis keyspace, every NATS message a wildcard subscriber saw, every log line
// of every process, and the temporary and profile directories.
func TestNothingPersists(t *testing.T) {
	c := client.Context(t)
	agent := client.NewAgent(t, "agent-persist")
	ss := stacktest.StartSession(c, t, st, agent, stack.SessionOptions{Replica: 1, BrokerProcess: true})
	ref := make([]byte, 8)
	_, _ = rand.Read(ref)
	secretRef := hex.EncodeToString(ref)
	pageURL := st.Site + "/secret.html?ref=" + secretRef

	// From here on, watch NATS (the agent's tool calls included) and collect the
	// requesters' private keys.
	var mu sync.Mutex
	watcher, err := st.ConnectNATS(bus.RoleDebug, "persist-watcher")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(watcher.Close)
	// The debug user sees the whole namespace; no role may publish outside it.
	onBus := stacktest.Watch(t, watcher, st.NS.Wildcard())
	if _, err := ss.Tool(c, "browser_open", map[string]string{"url": pageURL}); err != nil {
		t.Fatal(err)
	}
	var keys [][]byte
	for _, r := range st.Replicas {
		r.SetHooks(&stack.Hooks{OnKey: func(priv []byte) { mu.Lock(); keys = append(keys, priv); mu.Unlock() }})
		t.Cleanup(func() { r.SetHooks(nil) })
	}

	var needles []needle
	title := ""
	for i := range 4 {
		a := client.Poll(t, agent)
		var res struct {
			Page *wire.Page `json:"page"`
		}
		if a.Status != 200 || json.Unmarshal([]byte(a.Body), &res) != nil || res.Page == nil {
			t.Fatalf("view %d: %s", i, a.Summary())
		}
		title = res.Page.Title
		raw, err := stacktest.DecodeBase64(res.Page.Data)
		if err != nil {
			t.Fatal(err)
		}
		mid := len(raw) / 2
		needles = append(needles,
			needle{"JPEG bytes", raw[mid : mid+48]},
			needle{"JPEG bytes", raw[len(raw)-48:]},
			needle{"base64 of the JPEG", []byte(res.Page.Data[len(res.Page.Data)/2 : len(res.Page.Data)/2+48])},
		)
	}
	var msgs [][]byte
	for _, m := range onBus.Messages(t) { // every message of those views, read in order
		msgs = append(msgs, append([]byte(m.Subject+" "), m.Data...))
	}
	if !strings.Contains(title, secretRef) {
		t.Fatalf("the page's title %q does not hold the run's reference", title)
	}
	needles = append(needles, needle{"page URL", []byte(secretRef)}, needle{"page title", []byte(title)})
	mu.Lock()
	keyNeedles := make([]needle, 0, 2*len(keys))
	for _, k := range keys {
		keyNeedles = append(keyNeedles, needle{"private key", k}, needle{"private key (hex)", []byte(hex.EncodeToString(k))})
	}
	natsCopy := append([][]byte(nil), msgs...)
	mu.Unlock()
	if len(keyNeedles) == 0 || len(natsCopy) == 0 {
		t.Fatalf("%d keys and %d NATS messages collected", len(keyNeedles), len(natsCopy))
	}

	scan := func(t *testing.T, where string, blobs func(yield func(name string, b []byte) bool), ns []needle) string {
		t.Helper()
		hits, n := 0, 0
		blobs(func(name string, b []byte) bool {
			n++
			for _, nd := range ns {
				if bytes.Contains(b, nd.b) {
					hits++
					t.Errorf("%s: %s found in %s", where, nd.what, name)
				}
			}
			return true
		})
		if n == 0 {
			t.Errorf("%s: nothing to scan", where)
		}
		return "0 hits in " + itoa(n) + " " + where
	}

	t.Run("Redis_keyspace", func(t *testing.T) {
		observed := ""
		record(t, "Nothing persists", "no frame byte, URL, title or private key in any key or value", &observed)
		observed = scan(t, "keys and values", func(yield func(string, []byte) bool) {
			iter := st.AdminClient().Scan(c, 0, "*", 1000).Iterator()
			for iter.Next(c) {
				k := iter.Val()
				var vals []string
				switch typ, _ := st.AdminClient().Type(c, k).Result(); typ {
				case "string":
					v, _ := st.AdminClient().Get(c, k).Result()
					vals = []string{v}
				case "hash":
					m, _ := st.AdminClient().HGetAll(c, k).Result()
					for f, v := range m {
						vals = append(vals, f, v)
					}
				case "list":
					vals, _ = st.AdminClient().LRange(c, k, 0, -1).Result()
				case "set":
					vals, _ = st.AdminClient().SMembers(c, k).Result()
				}
				if !yield(k, []byte(k+"\x00"+strings.Join(vals, "\x00"))) {
					return
				}
			}
		}, append(append([]needle(nil), needles...), keyNeedles...))
	})
	t.Run("NATS_messages", func(t *testing.T) {
		observed := ""
		record(t, "Nothing persists", "a subscriber on '>' sees request ids, envelopes, sealed tool calls, status events and audit events (ids) only", &observed)
		observed = scan(t, "messages", func(yield func(string, []byte) bool) {
			for _, m := range natsCopy {
				if !yield(string(m[:bytes.IndexByte(m, ' ')]), m) {
					return
				}
			}
		}, needles)
	})
	t.Run("log_lines", func(t *testing.T) {
		observed := ""
		record(t, "Nothing persists", "no frame, URL or title in the logs of the replicas, workers and brokers (debug level)", &observed)
		all := logs.String() + "\n" + ss.BrokerLog()
		observed = scan(t, "log lines", func(yield func(string, []byte) bool) {
			for i, line := range strings.Split(all, "\n") {
				if line != "" && !yield("line "+itoa(i), []byte(line)) {
					return
				}
			}
		}, needles)
	})
	t.Run("temporary_and_profile_directories", func(t *testing.T) {
		observed := ""
		record(t, "Nothing persists", "no frame, URL or title in any file of the temporary directory, Chromium's profile included", &observed)
		observed = scan(t, "files", func(yield func(string, []byte) bool) {
			_ = filepath.WalkDir(os.TempDir(), func(path string, d fs.DirEntry, err error) error {
				if err != nil || d.IsDir() || !strings.Contains(path, "agentfy-") {
					return nil
				}
				info, err := d.Info()
				if err != nil || !info.Mode().IsRegular() || info.Size() > 64<<20 || time.Since(info.ModTime()) > 10*time.Minute {
					return nil
				}
				b, err := os.ReadFile(path) //nolint:gosec // the test's own temporary files
				if err != nil {
					return nil
				}
				if !yield(path, b) {
					return filepath.SkipAll
				}
				return nil
			})
		}, needles)
	})
}
