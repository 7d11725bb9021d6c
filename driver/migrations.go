package driver

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// MigrationsFromFS reads migrations named NNN_name.up.sql and NNN_name.down.sql
// from the root of fsys. Backends embed their migrations folder and pass it here.
func MigrationsFromFS(fsys fs.FS) ([]Migration, error) {
	entries, err := fs.ReadDir(fsys, ".")
	if err != nil {
		return nil, fmt.Errorf("read migrations: %w", err)
	}
	byVersion := map[int]*Migration{}
	for _, e := range entries {
		name := e.Name()
		var up bool
		switch {
		case strings.HasSuffix(name, ".up.sql"):
			up = true
		case strings.HasSuffix(name, ".down.sql"):
		default:
			continue
		}
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".up.sql"), ".down.sql")
		num, label, ok := strings.Cut(base, "_")
		version, err := strconv.Atoi(num)
		if !ok || err != nil || version < 1 {
			return nil, fmt.Errorf("migration file %q: want NNN_name.up.sql or NNN_name.down.sql", name)
		}
		body, err := fs.ReadFile(fsys, path.Clean(name))
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", name, err)
		}
		m := byVersion[version]
		if m == nil {
			m = &Migration{Version: version, Name: label}
			byVersion[version] = m
		}
		if up {
			m.Up = string(body)
		} else {
			m.Down = string(body)
		}
	}
	out := make([]Migration, 0, len(byVersion))
	for _, m := range byVersion {
		if m.Up == "" || m.Down == "" {
			return nil, fmt.Errorf("migration %d_%s: needs both an up and a down file", m.Version, m.Name)
		}
		out = append(out, *m)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}
