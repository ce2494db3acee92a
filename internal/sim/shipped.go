package sim

import (
	"fmt"
	"io/fs"
	"slices"
	"strings"
)

// Shipped lists the scenarios in fsys (NAME.toml each), by name.
func Shipped(fsys fs.FS) ([]*Scenario, error) {
	names, err := fs.Glob(fsys, "*.toml")
	if err != nil {
		return nil, err
	}
	for i, n := range names {
		names[i] = strings.TrimSuffix(n, ".toml")
	}
	slices.Sort(names)
	var out []*Scenario
	for _, n := range names {
		sc, err := Load(fsys, n)
		if err != nil {
			return nil, err
		}
		out = append(out, sc)
	}
	return out, nil
}

// Load parses the scenario NAME.toml of fsys.
func Load(fsys fs.FS, name string) (*Scenario, error) {
	data, err := fs.ReadFile(fsys, name+".toml")
	if err != nil {
		return nil, fmt.Errorf("sim: no shipped scenario %q (sluice sim --list)", name)
	}
	return Parse(name+".toml", data)
}
