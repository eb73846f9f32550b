package broker

import (
	"fmt"
	"html"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// site serves the pages the browser tests open.
type site struct {
	*httptest.Server
	// requested receives the name of every /signal/{name} page that
	// committed.
	requested chan string
}

func newSite(tb testing.TB) *site {
	tb.Helper()
	s := &site{requested: make(chan string, 16)}
	mux := http.NewServeMux()
	// /color/{name}?c=CSS colour: a page of one colour, titled name.
	mux.HandleFunc("/color/{name}", func(w http.ResponseWriter, r *http.Request) {
		c := r.URL.Query().Get("c")
		if c == "" {
			c = "white"
		}
		writeHTML(w, r.PathValue("name"), fmt.Sprintf(`<style>html,body{margin:0;height:100%%;background:%s}</style>`, html.EscapeString(c)))
	})
	// /hiding: a page that makes its URL 20 KiB long (history.replaceState) and
	// its title 5 KiB of multi-byte characters, to hide from viewers if it could.
	mux.HandleFunc("/hiding", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "hiding", `<script>history.replaceState(null, "", "/hiding?" + "q".repeat(20480)); document.title = "ж".repeat(2600) + "end";</script><p>hiding</p>`)
	})
	// /bands: 600 CSS px red, then 3000 CSS px green, to test scrolling.
	mux.HandleFunc("/bands", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "bands", `<style>body{margin:0}</style><div style="height:600px;background:rgb(255,0,0)"></div><div style="height:3000px;background:rgb(0,255,0)"></div>`)
	})
	// /stripes: three bands of 1000 CSS px: red, blue, green, with no
	// scrollbar (a scrollbar takes 15 px from the visual viewport).
	mux.HandleFunc("/stripes", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "stripes", `<style>html{overflow:hidden}body{margin:0}div{height:1000px}</style><div style="background:rgb(255,0,0)"></div><div style="background:rgb(0,0,255)"></div><div style="background:rgb(0,255,0)"></div>`)
	})
	// /hung: a page whose script never yields, before its load ends: it answers no
	// evaluation until its script is terminated.
	mux.HandleFunc("/hung", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "hung", `<p>hung</p><script>for (;;) {}</script>`)
	})
	// /text: a page of text, like most pages an agent reads.
	mux.HandleFunc("/text", func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for i := range 60 {
			fmt.Fprintf(&b, "<p>Paragraph %d. The quick brown fox jumps over the lazy dog; pack my box with five dozen liquor jugs.</p>", i)
		}
		writeHTML(w, "text", b.String())
	})
	// /form: typing and Enter set the title to the text; the button sets
	// it to "clicked"; the link opens a tab of the site's own.
	mux.HandleFunc("/form", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, "form", `<form onsubmit="document.title='typed:'+document.getElementById('q').value;return false">
<input id="q" autofocus><button type="submit" style="display:none">go</button></form>
<button id="b" style="width:200px;height:100px" onclick="document.title='clicked'">click me</button>
<a id="popup" href="/color/popup?c=rgb(0,0,255)" target="_blank" style="display:block;width:200px;height:100px">popup</a>`)
	})
	// /signal/{name}: a blank page whose image reports, on requested, that
	// the page has committed and is loading.
	mux.HandleFunc("/signal/{name}", func(w http.ResponseWriter, r *http.Request) {
		writeHTML(w, r.PathValue("name"), `<img src="/ping/`+html.EscapeString(r.PathValue("name"))+`">`)
	})
	mux.HandleFunc("/ping/{name}", func(w http.ResponseWriter, r *http.Request) {
		select {
		case s.requested <- r.PathValue("name"):
		default:
		}
		w.WriteHeader(http.StatusNoContent)
	})
	s.Server = httptest.NewServer(mux)
	tb.Cleanup(s.Close)
	return s
}

func writeHTML(w http.ResponseWriter, title, body string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	fmt.Fprintf(w, "<!doctype html><html><head><meta charset=utf-8><title>%s</title></head><body>%s</body></html>", html.EscapeString(title), body)
}
