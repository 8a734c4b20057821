package container

import (
	"encoding/json"
	"io"
	"runtime"
	"strconv"
	"unsafe"
)

var errEOF = io.EOF

type runtimeMem struct{ total uint64 }

func (m *runtimeMem) read() {
	var s runtime.MemStats
	runtime.ReadMemStats(&s)
	m.total = s.TotalAlloc
}

func jsonNum(n int64) json.Number { return json.Number(strconv.FormatInt(n, 10)) }

func uintptrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}
