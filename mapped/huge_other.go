//go:build !linux

package mapped

// adviseHuge is a no-op where transparent huge pages cannot be asked for.
func adviseHuge(b []byte) {}
