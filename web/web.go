// Package web holds the static web app the API replicas serve at /.
package web

import (
	"embed"
	"io/fs"
)

//go:embed static
var files embed.FS

// Files is the web app's file tree (index.html at its root).
func Files() fs.FS {
	sub, err := fs.Sub(files, "static")
	if err != nil {
		panic(err) // the embedded tree always has static/
	}
	return sub
}
