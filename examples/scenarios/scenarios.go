// Package scenarios holds the scenarios shipped with the simulator
// (`sluice sim NAME`, `sluice sim --list`), one TOML file each; the format
// is in docs/simulator.md.
package scenarios

import (
	"embed"
	"io/fs"
)

//go:embed *.toml
var files embed.FS

// FS is the shipped scenarios: NAME.toml for each.
func FS() fs.FS { return files }
