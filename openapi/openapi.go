// Package openapi holds the OpenAPI 3.1 documents: the public routes' (the TypeScript SDK
// is generated from it and replicas serve it at /openapi.yaml) and the admin API's
// (served at /openapi.yaml on the admin listener).
package openapi

import _ "embed"

// Document is openapi.yaml.
//
//go:embed openapi.yaml
var Document []byte

// AdminDocument is admin.yaml.
//
//go:embed admin.yaml
var AdminDocument []byte
