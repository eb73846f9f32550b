package broker

import (
	_ "embed" // watch.js
	"errors"
	"strings"

	"github.com/go-rod/rod/lib/proto"
	"github.com/ysmood/gson"

	"github.com/agentfy/agentfy/broker/masks"
)

// What enters or leaves the page while it is captured. A secret that is in the page for
// the screenshot's frame alone — inserted and removed again within a few animation
// frames — is in neither snapshot, so nothing would mask it: no pin, no mask of the
// broker's. So from its first read of what moves to its last snapshot, a masked capture
// watches the tab's document (watchScript, a MutationObserver of the broker's isolated
// world, which the page cannot see) for an element that may be a secret entering or
// leaving it, or becoming or ceasing to be one; when one did, its frame is masked whole
// (wire.HiddenChanged).
//
// It watches the top document's light tree: a shadow root's or a frame's children are
// not (docs/privacy-masks.md says so).

// watchScript is an object with start(attributes, classes) and take() (watch.js).
//
//go:embed watch.js
var watchScript string

var (
	watchStart = "function (attributes, classes, ...roots) { return (" + watchScript + ").start(attributes, classes, ...roots); }"
	watchTake  = "function () { return (" + watchScript + ").take(); }"
)

// maxWatchedRoots bounds the secrets a watch resolves to see them leave; a page with
// more is not pinned (pins.go).
const maxWatchedRoots = 64

// startWatch starts watching the tab's document in the broker's isolated world on it
// (readMotion made it) for elements that may be secrets under rules, and for any of
// roots (backend node ids, at most maxWatchedRoots) leaving it. A root already gone is
// errSecretGone.
func startWatch(s cdpSession, rules masks.Rules, roots []int) error {
	if s.tab.world == 0 {
		return maskError("watch", errNoWorld)
	}
	defer func() { _ = proto.RuntimeReleaseObjectGroup{ObjectGroup: worldName}.Call(s) }()
	attributes, classes := rules.Marks()
	args := []*proto.RuntimeCallArgument{
		{Value: gson.New(attributes)}, {Value: gson.New(classes)},
	}
	if len(roots) > maxWatchedRoots {
		roots = nil
	}
	for _, id := range roots {
		res, err := proto.DOMResolveNode{BackendNodeID: proto.DOMBackendNodeID(id), ExecutionContextID: s.tab.world, ObjectGroup: worldName}.Call(s)
		if err != nil || res.Object == nil {
			return errSecretGone
		}
		args = append(args, &proto.RuntimeCallArgument{ObjectID: res.Object.ObjectID})
	}
	_, err := callWorld(s, watchStart, args)
	return err
}

// takeWatch stops the watch and reports whether an element that may be a secret entered
// or left the document, or became or ceased to be one, since startWatch. A document gone
// (the page navigated) is a change.
func takeWatch(s cdpSession) (changed bool, err error) {
	res, err := callWorld(s, watchTake, nil)
	if errors.Is(err, errNoWorld) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	return res.Value.Bool(), nil
}

// callWorld calls fn in the broker's isolated world on the tab's main frame, by value.
func callWorld(s cdpSession, fn string, args []*proto.RuntimeCallArgument) (*proto.RuntimeRemoteObject, error) {
	res, err := proto.RuntimeCallFunctionOn{
		FunctionDeclaration: fn, ExecutionContextID: s.tab.world, Arguments: args,
		ReturnByValue: true, Silent: true,
	}.Call(s)
	if err != nil {
		if strings.Contains(err.Error(), "context") {
			return nil, maskError("watch", errNoWorld)
		}
		return nil, maskError("watch", err)
	}
	if res.ExceptionDetails != nil || res.Result == nil {
		return nil, maskError("watch", errors.New("the script failed"))
	}
	return res.Result, nil
}
