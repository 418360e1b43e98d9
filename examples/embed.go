// Package examples embeds the example workspaces, so that `cordon demo`
// can run them from any directory.
package examples

import "embed"

// FixTest is the fix-test example: a project with a failing test, an
// agent manifest and a recorded model session.
//
//go:embed fix-test
var FixTest embed.FS
