// Package web holds the static web app the API replicas serve at /.
package web

import (
	"embed"
	"errors"
	"io/fs"
	"strings"

	"github.com/agentfy/agentfy/sdk"
)

//go:embed static
var files embed.FS

// sdkDir is where the app's import map finds @agentfy/sdk (static/index.html).
const sdkDir = "js/sdk"

// Files is the web app's file tree (index.html at its root), with the built SDK package
// at js/sdk/: the app imports the same dist/ that partners install, not a copy.
func Files() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return overlay{base: sub, dir: sdkDir, sub: sdk.Dist()}
}

// overlay serves sub at dir and base everywhere else.
type overlay struct {
	base fs.FS
	dir  string
	sub  fs.FS
}

func (o overlay) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	if name == o.dir {
		return o.sub.Open(".")
	}
	if rest, ok := strings.CutPrefix(name, o.dir+"/"); ok {
		f, err := o.sub.Open(rest)
		if errors.Is(err, fs.ErrInvalid) {
			return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrNotExist}
		}
		return f, err
	}
	return o.base.Open(name)
}
