// Package sdk embeds the built TypeScript SDK (dist/, ES modules) so that the API
// replicas can serve it to the web app at /js/sdk/ without npm. The package itself is
// the npm package @agentfy/sdk in this directory (README.md).
package sdk

import (
	"embed"
	"io/fs"
)

//go:embed dist
var files embed.FS

// Dist is the built package: index.js and the modules it imports.
func Dist() fs.FS {
	sub, err := fs.Sub(files, "dist")
	if err != nil {
		panic(err) // the embedded tree always has dist/
	}
	return sub
}
