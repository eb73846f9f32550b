// Package openapi holds the OpenAPI 3.1 document of the public routes. The TypeScript SDK
// is generated from it and replicas serve it at /openapi.yaml.
package openapi

import _ "embed"

// Document is openapi.yaml.
//
//go:embed openapi.yaml
var Document []byte
