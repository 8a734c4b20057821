package pipeline

import (
	"strings"
	"testing"

	"github.com/seamlm/seam/wire"
)

// A stage's shutdown names the stage once: the head's description of it
// (index, address, name, layers), then why. A shutdown relayed from another
// stage keeps that stage's name; other codes keep theirs.
func TestStageErrorMessage(t *testing.T) {
	stage := `stage 2 (10.0.0.3:7070, "second", layers [3,6))`
	for _, c := range []struct {
		code wire.ErrorCode
		msg  string
		want string
	}{
		{wire.CodeShutdown, `stage "second" is shutting down (received SIGTERM)`, stage + ` is shutting down (received SIGTERM)`},
		{wire.CodeShutdown, `stage "second" is shutting down`, stage + ` is shutting down`},
		{wire.CodeShutdown, `stage "third" is shutting down (received SIGINT)`, stage + `: stage "third" is shutting down (received SIGINT)`},
		{wire.CodeInternal, `may not dial 10.9.9.9:7070`, stage + `: may not dial 10.9.9.9:7070`},
	} {
		e := &StageError{Stage: stage, Remote: &wire.RemoteError{Code: c.code, Message: c.msg}}
		got := e.Error()
		if got != c.want {
			t.Errorf("%s %q:\n got %q\nwant %q", c.code, c.msg, got, c.want)
		}
		if c.code == wire.CodeShutdown && (!e.Shutdown() || strings.Count(got, `"second"`) != 1) {
			t.Errorf("%q: not a shutdown naming the stage once", got)
		}
	}
}
