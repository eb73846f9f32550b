package monitoring

import (
	"context"
	"fmt"
	"html/template"
	"image/png"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-rod/rod/lib/proto"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/model/value"
	"github.com/prometheus/prometheus/promql"
	"github.com/prometheus/prometheus/util/teststorage"

	"github.com/agentfy/agentfy/api"
	"github.com/agentfy/agentfy/broker"
	"github.com/agentfy/agentfy/internal/dev/stack"
	"github.com/agentfy/agentfy/internal/test/testenv"
	"github.com/agentfy/agentfy/wire"
)

// How the dashboard is rendered.
const (
	// scrapeStep is how far apart the scrapes are placed on the evaluation's time line:
	// Prometheus's usual scrape interval, for which Grafana's $__rate_interval is the
	// 1m that grafanaVars puts in (four scrape intervals).
	scrapeStep = 15 * time.Second
	// renderWidth is the page's width in CSS pixels, and the screenshot's in pixels.
	renderWidth = 1400
	// gridRowHeight is the height in CSS pixels of one row of Grafana's grid (Grafana
	// draws 30; a little more lets the legend tables fit), and gridMargin the gap
	// between panels.
	gridRowHeight = 36
	gridMargin    = 8
	// headerHeight is the height of the caption above the grid.
	headerHeight = 150
	// screenshotTimeout bounds Chromium's start, the page's load and its capture.
	screenshotTimeout = time.Minute
)

// moment is one scrape of the stack and what the test did to the stack just before it.
type moment struct {
	did string
	s   scrape
}

// shownPanel is one panel of the dashboard as rendered: its place, title and unit, and
// the series its queries returned over the scrapes.
type shownPanel struct {
	Title, Unit string
	Row         bool
	Pos         gridPos
	Series      []shownSeries
}

// shownSeries is one series of a panel: its legend as Grafana would render the query's
// legendFormat, and its value at each scrape (NaN where the query returned none).
type shownSeries struct {
	Legend string
	Values []float64
}

// max is the largest value of the series that is a number, or NaN if there is none.
func (s shownSeries) max() float64 {
	m := math.NaN()
	for _, v := range s.Values {
		if !math.IsNaN(v) && (math.IsNaN(m) || v > m) {
			m = v
		}
	}
	return m
}

// last is the last value of the series that is a number, or NaN if there is none.
func (s shownSeries) last() float64 {
	for _, v := range slices.Backward(s.Values) {
		if !math.IsNaN(v) {
			return v
		}
	}
	return math.NaN()
}

// series is the panel's series whose legend is legend, if any.
func (p shownPanel) series(legend string) (shownSeries, bool) {
	i := slices.IndexFunc(p.Series, func(s shownSeries) bool { return s.Legend == legend })
	if i < 0 {
		return shownSeries{}, false
	}
	return p.Series[i], true
}

// legendPattern is a label reference of a legendFormat, as Grafana matches it.
var legendPattern = regexp.MustCompile(`\{\{\s*(.+?)\s*\}\}`)

// renderLegend renders a legendFormat with a series' labels as Grafana's
// renderLegendFormat does: a label the series lacks (or has empty) reads as its name.
func renderLegend(format string, l labels.Labels) string {
	return legendPattern.ReplaceAllStringFunc(format, func(m string) string {
		name := legendPattern.FindStringSubmatch(m)[1]
		if v := l.Get(name); v != "" {
			return v
		}
		return name
	})
}

// storeMoments appends the scrapes to a fresh test storage, scrapeStep apart from t0,
// with a staleness marker where a series of one scrape is missing from the next, as
// Prometheus writes when a target or a series goes away.
func storeMoments(t *testing.T, moments []moment) *teststorage.TestStorage {
	t.Helper()
	db := teststorage.New(t)
	app := db.Appender(t.Context())
	prev := map[string]labels.Labels{}
	for i, m := range moments {
		ts := t0.Add(time.Duration(i) * scrapeStep).UnixMilli()
		cur := map[string]labels.Labels{}
		for _, x := range m.s {
			cur[x.lbls.String()] = x.lbls
			if _, err := app.Append(0, x.lbls, ts, x.v); err != nil {
				t.Fatal(err)
			}
		}
		for k, l := range prev {
			if _, ok := cur[k]; !ok {
				if _, err := app.Append(0, l, ts, math.Float64frombits(value.StaleNaN)); err != nil {
					t.Fatal(err)
				}
			}
		}
		prev = cur
	}
	if err := app.Commit(); err != nil {
		t.Fatal(err)
	}
	return db
}

// renderPanels evaluates every query of every panel with Prometheus's engine as a range
// query over the scrapes, one point per scrape, and returns the panels in the order of
// the grid (top to bottom, left to right), rows included.
func renderPanels(t *testing.T, d dashboard, moments []moment) []shownPanel {
	t.Helper()
	db := storeMoments(t, moments)
	ng := promql.NewEngine(promql.EngineOpts{MaxSamples: 1e6, Timeout: 10 * time.Second, LookbackDelta: 5 * time.Minute})
	end := t0.Add(time.Duration(len(moments)-1) * scrapeStep)
	var out []shownPanel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			sp := shownPanel{Title: p.Title, Unit: p.FieldConfig.Defaults.Unit, Row: p.Type == "row", Pos: p.GridPos}
			for _, tg := range p.Targets {
				q, err := ng.NewRangeQuery(t.Context(), db, nil, grafanaVars.Replace(tg.Expr), t0, end, scrapeStep)
				if err != nil {
					t.Fatalf("%s: %v", p.Title, err)
				}
				res := q.Exec(t.Context())
				m, err := res.Matrix()
				if res.Err != nil || err != nil {
					t.Fatalf("%s: %s: %v %v", p.Title, tg.Expr, res.Err, err)
				}
				for _, s := range m {
					values := make([]float64, len(moments))
					for i := range values {
						values[i] = math.NaN()
					}
					for _, pt := range s.Floats {
						values[time.UnixMilli(pt.T).Sub(t0)/scrapeStep] = pt.F
					}
					sp.Series = append(sp.Series, shownSeries{Legend: renderLegend(tg.LegendFormat, s.Metric), Values: values})
				}
				q.Close()
			}
			out = append(out, sp)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	slices.SortStableFunc(out, func(a, b shownPanel) int {
		if a.Pos.Y != b.Pos.Y {
			return a.Pos.Y - b.Pos.Y
		}
		return a.Pos.X - b.Pos.X
	})
	return out
}

// formatValue formats v in a Grafana unit the dashboard uses, the way Grafana's value
// formats read: seconds scaled to ms or µs, bytes in binary multiples, rates with their
// suffix.
func formatValue(v float64, unit string) string {
	if math.IsNaN(v) {
		return "–"
	}
	switch unit {
	case "s":
		switch a := math.Abs(v); {
		case a == 0:
			return "0 s"
		case a < 1e-3:
			return number(v*1e6) + " µs"
		case a < 1:
			return number(v*1e3) + " ms"
		case a < 60:
			return number(v) + " s"
		case a < 3600:
			return number(v/60) + " min"
		default:
			return number(v/3600) + " hour"
		}
	case "bytes":
		for _, u := range []string{"B", "KiB", "MiB"} {
			if math.Abs(v) < 1024 {
				return number(v) + " " + u
			}
			v /= 1024
		}
		return number(v) + " GiB"
	case "reqps":
		return short(v) + " req/s"
	case "ops":
		return short(v) + " ops/s"
	default:
		return short(v)
	}
}

// short is Grafana's "short" format: SI-like suffixes from a thousand up.
func short(v float64) string {
	for _, u := range []string{"", " K", " Mil", " Bil"} {
		if math.Abs(v) < 1000 {
			return number(v) + u
		}
		v /= 1000
	}
	return number(v) + " Tri"
}

// number prints v with about three significant digits.
func number(v float64) string {
	switch a := math.Abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return fmt.Sprintf("%.0f", v)
	case a >= 10:
		return trimZeros(fmt.Sprintf("%.1f", v))
	case a >= 1:
		return trimZeros(fmt.Sprintf("%.2f", v))
	default:
		return fmt.Sprintf("%.3g", v)
	}
}

// trimZeros drops the trailing zeros of a decimal fraction, and its point if nothing
// is left of it, as Grafana's automatic decimals do: 1.00 reads 1, 2.50 reads 2.5.
func trimZeros(s string) string {
	return strings.TrimSuffix(strings.TrimRight(s, "0"), ".")
}

// palette is Grafana's classic series palette; foldedColor draws the series a legend
// folds into one line.
var palette = []string{"#7EB26D", "#EAB839", "#6ED0E0", "#EF843C", "#E24D42", "#1F78C1", "#BA43A9", "#705DA0", "#508642", "#CCA300", "#447EBC", "#C15C17"}

const foldedColor = "#b8b8b8"

// Sizes inside a panel, in CSS pixels.
const (
	panelTitleHeight = 22
	legendLineHeight = 15
	chartMinHeight   = 70
	chartLeft        = 72 // room for the y axis's labels
	chartBottom      = 14 // room for the x axis's labels
)

// chart draws a panel's series over the scrapes as an inline SVG of size w×h: a line per
// series (broken where it has no value), a dot per value, the y axis from 0 to above
// the largest value, the scrapes numbered along the x axis.
func chart(p shownPanel, colors []string, w, h, scrapes int) template.HTML {
	var b strings.Builder
	fmt.Fprintf(&b, `<svg width="%d" height="%d" viewBox="0 0 %d %d">`, w, h, w, h)
	top, plotW, plotH := 6.0, float64(w-chartLeft-8), float64(h-chartBottom-6)
	ymax := 0.0
	for _, s := range p.Series {
		if m := s.max(); !math.IsNaN(m) && m > ymax {
			ymax = m
		}
	}
	if ymax == 0 {
		ymax = 1
	}
	ymax *= 1.1
	x := func(i int) float64 { return chartLeft + plotW*float64(i)/float64(max(scrapes-1, 1)) }
	y := func(v float64) float64 { return top + plotH*(1-v/ymax) }
	for _, f := range []float64{0, 0.5, 1} {
		v := ymax * f
		fmt.Fprintf(&b, `<line x1="%d" x2="%.1f" y1="%.1f" y2="%.1f" class="grid"/>`, chartLeft, chartLeft+plotW, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" class="ylabel">%s</text>`, chartLeft-4, y(v)+4, template.HTMLEscapeString(formatValue(v, p.Unit)))
	}
	for i := range scrapes {
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" class="xlabel">%d</text>`, x(i), h-2, i+1)
	}
	// The folded series first, so that the others are drawn over them.
	order := make([]int, 0, len(p.Series))
	for k := range p.Series {
		if colors[k] == foldedColor {
			order = append(order, k)
		}
	}
	for k := range p.Series {
		if colors[k] != foldedColor {
			order = append(order, k)
		}
	}
	for _, k := range order {
		s, color := p.Series[k], colors[k]
		var seg []string
		flush := func() {
			if len(seg) > 1 {
				fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.6"/>`, strings.Join(seg, " "), color)
			}
			seg = seg[:0]
		}
		for i, v := range s.Values {
			if math.IsNaN(v) {
				flush()
				continue
			}
			seg = append(seg, fmt.Sprintf("%.1f,%.1f", x(i), y(v)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2" fill="%s"/>`, x(i), y(v), color)
		}
		flush()
	}
	if len(p.Series) == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" class="nodata">No data</text>`, chartLeft+plotW/2, top+plotH/2)
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) // numbers and strings escaped above
}

// pageData is what dashboardPage shows.
type pageData struct {
	Title, Produced string
	Moments         []string
	Height          int
	Panels          []placedPanel
}

// placedPanel is a panel with its place on the page in CSS pixels.
type placedPanel struct {
	shownPanel
	Left, Top, Width, Height int
	Chart                    template.HTML
	Legend                   []legendLine
}

// legendLine is one line of a panel's legend table; a Folded line stands for the
// series at 0 throughout that the legend had no room for one by one.
type legendLine struct {
	Color, Legend, Last, Max string
	Folded                   bool
}

var dashboardPage = template.Must(template.New("dashboard").Parse(`<!DOCTYPE html>
<html><head><meta charset="utf-8"><title>{{.Title}} (rendered by deploy/monitoring)</title>
<style>
body { margin: 0; width: ` + fmt.Sprint(renderWidth) + `px; height: {{.Height}}px; position: relative; background: #f4f5f5; font: 12px/1.25 "DejaVu Sans", sans-serif; color: #24292e; }
header { position: absolute; left: 12px; right: 12px; top: 8px; height: ` + fmt.Sprint(headerHeight-16) + `px; overflow: hidden; }
h1 { font-size: 18px; margin: 0 0 4px; }
.note { margin: 0 0 4px; }
.note b { color: #b3261e; }
ol { margin: 0; padding-left: 20px; columns: 2; font-size: 11.5px; }
.row { position: absolute; font-size: 14px; font-weight: bold; }
.panel { position: absolute; background: #fff; border: 1px solid #d8d9da; border-radius: 3px; overflow: hidden; }
.ptitle { height: ` + fmt.Sprint(panelTitleHeight) + `px; line-height: ` + fmt.Sprint(panelTitleHeight) + `px; padding: 0 8px; font-weight: bold; white-space: nowrap; }
.ptitle span { font-weight: normal; color: #6e7079; }
svg { display: block; margin-left: 2px; }
svg .grid { stroke: #e4e5e6; stroke-width: 1; }
svg .ylabel { text-anchor: end; font-size: 10px; fill: #6e7079; }
svg .xlabel { text-anchor: middle; font-size: 10px; fill: #6e7079; }
svg .nodata { text-anchor: middle; font-size: 13px; fill: #6e7079; }
table { border-collapse: collapse; margin: 0 8px; width: calc(100% - 16px); font-size: 11px; }
th { text-align: right; font-weight: normal; color: #6e7079; }
th:first-child, td:first-child { text-align: left; }
td { text-align: right; white-space: nowrap; line-height: ` + fmt.Sprint(legendLineHeight-2) + `px; }
td:first-child { max-width: 420px; overflow: hidden; text-overflow: ellipsis; }
tr.folded td:first-child { white-space: normal; max-width: none; color: #6e7079; }
.sw { display: inline-block; width: 10px; height: 3px; margin: 0 5px 3px 0; }
</style></head><body>
<header>
<h1>{{.Title}}</h1>
<p class="note"><b>Not Grafana:</b> a rendering of the panels of <code>deploy/grafana/agentfy.json</code> by the monitoring test (<code>TestDashboardOnAStack</code> in <code>deploy/monitoring</code>), {{.Produced}}.
Each panel's queries were evaluated by Prometheus's own engine over {{len .Moments}} scrapes of a running stack (two API replicas, NATS, Redis, a worker, a broker with Chromium),
taken after each step below and placed 15 s apart ($__rate_interval = 1m); the x axes number the scrapes. Legends follow each query's legendFormat; values are in the panel's unit.</p>
<ol>{{range .Moments}}<li>{{.}}</li>{{end}}</ol>
</header>
{{range .Panels}}{{if .Row}}<div class="row" style="left:{{.Left}}px;top:{{.Top}}px;width:{{.Width}}px">{{.Title}}</div>
{{else}}<div class="panel" style="left:{{.Left}}px;top:{{.Top}}px;width:{{.Width}}px;height:{{.Height}}px">
<div class="ptitle">{{.Title}} <span>({{.Unit}})</span></div>
{{.Chart}}
{{if .Legend}}<table><tr><th>series</th><th>last</th><th>max</th></tr>
{{range .Legend}}<tr{{if .Folded}} class="folded"{{end}}><td><span class="sw" style="background:{{.Color}}"></span>{{.Legend}}</td><td>{{.Last}}</td><td>{{.Max}}</td></tr>
{{end}}</table>{{end}}
</div>
{{end}}{{end}}</body></html>
`))

// foldedLines is how many legend lines the line of folded series takes: it wraps.
const foldedLines = 3

// legendOf gives each series of p its colour and makes the lines of its legend. When
// there are more series than room lines, the series at 0 throughout are folded into
// one line naming them (Grafana would scroll the legend instead); lines is the height
// of the legend in lines.
func legendOf(p shownPanel, room int) (colors []string, legend []legendLine, lines int) {
	fold := len(p.Series) > room
	var folded []string
	for k, s := range p.Series {
		if fold && s.max() == 0 {
			colors = append(colors, foldedColor)
			folded = append(folded, s.Legend)
			continue
		}
		colors = append(colors, palette[k%len(palette)])
		legend = append(legend, legendLine{Color: colors[k], Legend: s.Legend, Last: formatValue(s.last(), p.Unit), Max: formatValue(s.max(), p.Unit)})
	}
	lines = len(legend)
	if len(folded) > 0 {
		legend = append(legend, legendLine{Color: foldedColor, Legend: fmt.Sprintf("%d more series, at 0 throughout: %s", len(folded), strings.Join(folded, ", ")),
			Last: formatValue(0, p.Unit), Max: formatValue(0, p.Unit), Folded: true})
		lines += foldedLines
	}
	return colors, legend, lines
}

// renderPage lays the panels out on Grafana's grid and writes the page; it returns
// the page's height in CSS pixels.
func renderPage(t *testing.T, title string, panels []shownPanel, moments []moment, path string) int {
	t.Helper()
	const pad = 12
	col := float64(renderWidth-2*pad) / 24
	data := pageData{Title: title, Produced: "run " + time.Now().UTC().Format("2006-01-02 15:04 UTC")}
	for _, m := range moments {
		data.Moments = append(data.Moments, m.did)
	}
	for _, p := range panels {
		pp := placedPanel{
			shownPanel: p,
			Left:       pad + int(col*float64(p.Pos.X)),
			Top:        headerHeight + p.Pos.Y*gridRowHeight,
			Width:      int(col*float64(p.Pos.W)) - gridMargin,
			Height:     p.Pos.H*gridRowHeight - gridMargin,
		}
		data.Height = max(data.Height, pp.Top+pp.Height+pad)
		if !p.Row {
			colors, legend, lines := legendOf(p, (pp.Height-2-panelTitleHeight-chartMinHeight-6)/legendLineHeight-1)
			ch := pp.Height - 2 - panelTitleHeight - 6
			if lines > 0 {
				ch -= (lines + 1) * legendLineHeight
			}
			if ch < chartMinHeight {
				t.Errorf("panel %q: its legend of %d lines leaves its chart %d px, under %d: make gridRowHeight larger", p.Title, lines, ch, chartMinHeight)
				ch = chartMinHeight
			}
			pp.Chart = chart(p, colors, pp.Width-6, ch, len(moments))
			pp.Legend = legend
		}
		data.Panels = append(data.Panels, pp)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := dashboardPage.Execute(f, data); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return data.Height
}

// screenshot loads the page at htmlPath in headless Chromium with a viewport of
// renderWidth×height and writes what it paints to pngPath.
func screenshot(t *testing.T, htmlPath, pngPath string, height int) {
	t.Helper()
	testenv.SkipUnderShort(t, "screenshot", testenv.NeedsChromium)
	ctx := testenv.Context(t, screenshotTimeout)
	c, err := broker.LaunchChromium(ctx, broker.LaunchConfig{Leakless: true, Env: []string{"PATH=" + os.Getenv("PATH")}}, testenv.Logger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		closeCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 15*time.Second)
		defer cancel()
		if err := c.Close(closeCtx); err != nil {
			t.Error(err)
		}
	})
	b := c.Browser.Context(ctx)
	// A tab in a window of its own paints (docs: a background tab does not).
	created, err := proto.TargetCreateTarget{URL: "about:blank", NewWindow: true}.Call(b)
	if err != nil {
		t.Fatal(err)
	}
	page, err := b.PageFromTarget(created.TargetID)
	if err != nil {
		t.Fatal(err)
	}
	if err := (proto.EmulationSetDeviceMetricsOverride{Width: renderWidth, Height: height, DeviceScaleFactor: 1}).Call(page); err != nil {
		t.Fatal(err)
	}
	html, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := page.SetDocumentContent(string(html)); err != nil {
		t.Fatal(err)
	}
	if err := page.WaitLoad(); err != nil {
		t.Fatal(err)
	}
	shot, err := proto.PageCaptureScreenshot{Format: proto.PageCaptureScreenshotFormatPng}.Call(page)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(pngPath, shot.Data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestDashboardOnAStack serves views of several outcomes from a running stack — frames,
// a 429, a 404, a 401, live:false, and 503 broker_down once the broker is killed —
// scrapes it after each batch, evaluates every query of every panel of the dashboard
// with Prometheus's engine over those scrapes, and renders the dashboard: an HTML page
// of its panels on their grid, each with its title, unit, a chart and a legend of its
// series, and a screenshot of that page by headless Chromium (.artifacts/dashboard.html
// and .artifacts/dashboard.png; docs/images/dashboard.png is a copy). Every panel must
// show data, and the view panels the outcomes and the reason the test caused.
func TestDashboardOnAStack(t *testing.T) {
	r := startRig(t) // one frame served already
	idle := r.c.NewAgent(t, "agent-idle")
	alice := r.c.Token(t, "u-alice")
	var moments []moment
	took := func(did string, withBroker bool) {
		moments = append(moments, moment{did: did, s: r.scrape(withBroker)})
	}
	// expect makes a view of agent with bearer (its gate opened first if open) and
	// checks its status.
	expect := func(agent, bearer string, open bool, status int) {
		t.Helper()
		if open {
			r.c.OpenGate(t, agent)
		}
		if got := r.c.Do(t, http.MethodGet, r.c.ViewURL(0, agent), bearer, nil); got.Status != status {
			t.Fatalf("a view of %s: %s, want %d", agent, got.Summary(), status)
		}
	}
	frames := func(n int) {
		t.Helper()
		for range n {
			expect(r.agent, alice, true, http.StatusOK)
		}
	}

	// An outcome's series is born with its first view, and rate() sees no increase in
	// a series' first sample: each outcome is served in two batches, as it would be
	// over time, so that the second shows.
	others := func() {
		t.Helper()
		expect(r.agent, alice, false, http.StatusTooManyRequests)           // the same member again at once
		expect(r.agent, r.c.Token(t, "u-carol"), true, http.StatusNotFound) // not of the agent's team
		expect(r.agent, "not-a-token", true, http.StatusUnauthorized)
		expect(idle, alice, true, http.StatusOK) // live:false
	}
	took("the stack up, one frame served", true)
	frames(4)
	took("4 frames", true)
	frames(3)
	others()
	took("3 frames; a 429 rate_limited, a 404, a 401, a live:false", true)
	frames(3)
	others()
	took("3 frames; a 429, a 404, a 401, a live:false again", true)
	frames(4)
	took("4 frames", true)
	r.ss.KillBroker()
	for range 3 {
		expect(r.agent, alice, true, http.StatusServiceUnavailable)
	}
	took("the broker killed (SIGKILL); 3 views answer 503 broker_down", false)
	for range 3 {
		expect(r.agent, alice, true, http.StatusServiceUnavailable)
	}
	took("3 more views, 503 broker_down", false)

	d := loadDashboard(t)
	panels := renderPanels(t, d, moments)
	root, err := stack.FindRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(root, ".artifacts")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	htmlPath, pngPath := filepath.Join(dir, "dashboard.html"), filepath.Join(dir, "dashboard.png")
	height := renderPage(t, d.Title, panels, moments, htmlPath)
	screenshot(t, htmlPath, pngPath, height)

	// Every panel of the file is on the page, each with a series that has values.
	var want []string
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			want = append(want, p.Title)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	page, err := os.ReadFile(htmlPath)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, p := range panels {
		got = append(got, p.Title)
		if !strings.Contains(string(page), template.HTMLEscapeString(p.Title)+"</div>") && !strings.Contains(string(page), template.HTMLEscapeString(p.Title)+" <span>") {
			t.Errorf("panel %q is not on the page", p.Title)
		}
		if p.Row {
			continue
		}
		points := 0
		for _, s := range p.Series {
			if !math.IsNaN(s.max()) {
				points++
			}
		}
		t.Logf("%-36s %d series, %d with values", p.Title, len(p.Series), points)
		if points == 0 {
			t.Errorf("panel %q shows no data", p.Title)
		}
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("panels rendered %q, want the file's %q", got, want)
	}

	// The views panel shows the outcomes served, the failures panel the reason caused.
	byTitle := func(title string) shownPanel {
		i := slices.IndexFunc(panels, func(p shownPanel) bool { return p.Title == title })
		if i < 0 {
			t.Fatalf("no panel %q", title)
		}
		return panels[i]
	}
	route := api.AgentViewRoute
	checks := []struct {
		panel, legend string
	}{
		{"View rate by route and outcome", route + " frame"},
		{"View rate by route and outcome", route + " rate_limited"},
		{"View rate by route and outcome", route + " not_found"},
		{"View rate by route and outcome", route + " not_live"},
		{"View rate by route and outcome", route + " unauthenticated"},
		{"View rate by route and outcome", route + " unavailable"},
		{"Views failing, by reason", wire.ReasonBrokerDown},
		{"Refusals", "429 rate_limited"},
	}
	for _, c := range checks {
		s, ok := byTitle(c.panel).series(c.legend)
		if !ok || !(s.max() > 0) {
			t.Errorf("panel %q: series %q at most %g (found: %t), want above 0", c.panel, c.legend, s.max(), ok)
		}
	}
	// The screenshot is a PNG of the page's size.
	f, err := os.Open(pngPath)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	cfg, err := png.DecodeConfig(f)
	if err != nil {
		t.Fatalf("%s: %v", pngPath, err)
	}
	if cfg.Width != renderWidth || cfg.Height != height {
		t.Errorf("%s is %d×%d, want %d×%d", pngPath, cfg.Width, cfg.Height, renderWidth, height)
	}
	t.Logf("rendered %s and %s (%d×%d)", htmlPath, pngPath, cfg.Width, cfg.Height)
}
