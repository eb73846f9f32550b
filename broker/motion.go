package broker

import (
	_ "embed" // motion.js
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/go-rod/rod/lib/proto"
)

// What moves while a page is captured. Two DOM snapshots that agree before and after
// the screenshot prove nothing about the moment in between: a secret moved by a CSS
// animation on frame boundaries, or by a script every animation frame, is back in its
// place for the second read, and a view transition paints images of the old page that
// no snapshot holds. So a masked capture also reads, around the screenshot:
//
//   - the page's running animations and transitions, and whether a view transition runs
//     (motionScript, evaluated in an isolated world of the broker's own: the page's
//     scripts cannot see it, and it reads only). A view transition, or an animation
//     that changes layout, masks the frame whole; one that moves or repaints an element
//     whose reach meets a secret's mask masks the frame whole too;
//   - Chromium's own counters of script and layout work (Performance.getMetrics, right
//     after the first snapshot and right after the second): a page that ran any script
//     or layout in between may have moved a secret and back, so its frame is masked
//     whole (beforeShot.placeAfter).

// tabState is what capture keeps of its session on a tab: whether it enabled the
// Performance domain's counters, and its isolated world (0: none yet).
type tabState struct {
	perf  bool
	world proto.RuntimeExecutionContextID
	// frames are the broker's sessions on the tab's frames of another process, by
	// target (frames.go).
	frames map[proto.TargetTargetID]cdpSession
	// worlds are the broker's isolated worlds in the frames of the tab's process but
	// its main frame (transitionIn).
	worlds map[proto.PageFrameID]proto.RuntimeExecutionContextID
	// pins are the broker's sessions on the tab that pin its secrets (pins.go).
	pins []proto.TargetSessionID
}

// motionScript is a function that returns what runs on the page now (motion), given
// the elements the masks are placed on. It reads only: no DOM, style or script state of
// the page changes, and in the isolated world no script of the page runs or sees it.
//
//go:embed motion.js
var motionScript string

// motion is what motionScript reports.
type motion struct {
	ViewTransition bool `json:"viewTransition"`
	Layout         bool `json:"layout"`
	Moving         int  `json:"moving"`
	Related        bool `json:"related"`
	Ink            bool `json:"ink"`
}

// worldName names the broker's isolated world in Chromium's lists of contexts; its
// objects are released by this group after each read.
const worldName = "agentfy-capture"

// readMotion calls motionScript in the broker's isolated world on the tab's main frame,
// creating the world when it has none (or the page navigated away from it), with the
// elements of the given backend node ids (resolved in that world; an element gone since
// the snapshot fails the read).
func readMotion(s cdpSession, target proto.TargetTargetID, secretNodes []int) (motion, error) {
	for attempt := 0; ; attempt++ {
		if s.tab.world == 0 {
			w, err := proto.PageCreateIsolatedWorld{FrameID: proto.PageFrameID(target), WorldName: worldName}.Call(s)
			if err != nil {
				return motion{}, maskError("create isolated world", err)
			}
			s.tab.world = w.ExecutionContextID
		}
		m, err := callMotion(s, s.tab.world, secretNodes)
		if errors.Is(err, errNoWorld) && attempt == 0 {
			s.tab.world = 0 // the page navigated: a new document, a new world
			continue
		}
		return m, err
	}
}

// errSecretGone is a secret of the snapshot no longer in the page.
var errSecretGone = errors.New("a secret left the page while it was captured")

// errNoWorld is the isolated world gone with its document.
var errNoWorld = errors.New("the isolated world is gone")

// transitionIn reports whether a view transition runs in frame, a frame of the page's
// process other than its main frame (a document of the snapshot, a same-origin or
// same-site iframe): motionScript in the broker's isolated world there (kept in
// tabState.worlds), which reads only.
func transitionIn(s cdpSession, frame proto.PageFrameID) (bool, error) {
	for attempt := 0; ; attempt++ {
		world, ok := s.tab.worlds[frame]
		if !ok {
			if len(s.tab.worlds) >= maxWorlds {
				clear(s.tab.worlds) // frames gone since
			}
			w, err := proto.PageCreateIsolatedWorld{FrameID: frame, WorldName: worldName}.Call(s)
			if err != nil {
				return false, maskError("create isolated world", err)
			}
			if s.tab.worlds == nil {
				s.tab.worlds = map[proto.PageFrameID]proto.RuntimeExecutionContextID{}
			}
			world = w.ExecutionContextID
			s.tab.worlds[frame] = world
		}
		m, err := callMotion(s, world, nil)
		if errors.Is(err, errNoWorld) && attempt == 0 {
			delete(s.tab.worlds, frame) // the frame navigated
			continue
		}
		return m.ViewTransition, err
	}
}

// maxWorlds bounds the isolated worlds a tab's session keeps for its frames.
const maxWorlds = 64

func callMotion(s cdpSession, world proto.RuntimeExecutionContextID, secretNodes []int) (motion, error) {
	defer func() { _ = proto.RuntimeReleaseObjectGroup{ObjectGroup: worldName}.Call(s) }()
	args := make([]*proto.RuntimeCallArgument, 0, len(secretNodes))
	for _, id := range secretNodes {
		res, err := proto.DOMResolveNode{BackendNodeID: proto.DOMBackendNodeID(id), ExecutionContextID: world, ObjectGroup: worldName}.Call(s)
		switch {
		case err != nil && strings.Contains(err.Error(), "context"):
			return motion{}, maskError("resolve a secret", fmt.Errorf("%w (%w)", errNoWorld, err))
		case err != nil || res.Object == nil:
			return motion{}, errSecretGone // removed since the snapshot: the page moved
		}
		args = append(args, &proto.RuntimeCallArgument{ObjectID: res.Object.ObjectID})
	}
	res, err := proto.RuntimeCallFunctionOn{
		FunctionDeclaration: motionScript, ExecutionContextID: world, Arguments: args,
		ReturnByValue: true, Silent: true, ObjectGroup: worldName,
	}.Call(s)
	if err != nil {
		if strings.Contains(err.Error(), "context") {
			return motion{}, maskError("read motion", fmt.Errorf("%w (%w)", errNoWorld, err))
		}
		return motion{}, maskError("read motion", err)
	}
	if res.ExceptionDetails != nil || res.Result == nil {
		return motion{}, maskError("read motion", errors.New("the script failed"))
	}
	var m motion
	if err := json.Unmarshal([]byte(res.Result.Value.JSON("", "")), &m); err != nil {
		return motion{}, maskError("read motion", err)
	}
	return m, nil
}

// work is Chromium's count of the script and layout work a page did
// (Performance.getMetrics).
type work struct{ script, layout, style float64 }

// readWork reads the tab's work counters, enabling the Performance domain's counters on
// the capture's session the first time.
func readWork(s cdpSession) (work, error) {
	if !s.tab.perf {
		if err := (proto.PerformanceEnable{}).Call(s); err != nil {
			return work{}, maskError("enable counters", err)
		}
		s.tab.perf = true
	}
	res, err := proto.PerformanceGetMetrics{}.Call(s)
	if err != nil {
		return work{}, maskError("read counters", err)
	}
	var w work
	found := 0
	for _, m := range res.Metrics {
		switch m.Name {
		case "ScriptDuration":
			w.script, found = m.Value, found+1
		case "LayoutCount":
			w.layout, found = m.Value, found+1
		case "RecalcStyleCount":
			w.style, found = m.Value, found+1
		}
	}
	if found != 3 {
		return work{}, maskError("read counters", fmt.Errorf("%d of 3 counters", found))
	}
	return w, nil
}

// quiet reports whether the page ran no script and no layout between two readings:
// whatever the screenshot between them shows, the layout it was painted from is the
// one the snapshot after it read.
func (a work) quiet(b work) bool { return b.script == a.script && b.layout == a.layout }

// whole reports whether motion m forbids placing masks from a snapshot: a view
// transition, an animation that changes layout, or one that moves a secret.
func (m motion) whole() bool { return m.ViewTransition || m.Layout || m.Related }
