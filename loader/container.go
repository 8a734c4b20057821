package loader

import "fmt"

func openContainer(path string, opts Options) (*Model, error) {
	return nil, fmt.Errorf("%s: %w", path, errNoContainer)
}
