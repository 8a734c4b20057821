package stage

import "net"

// ServeConn serves one accepted connection in a goroutine that Close
// waits for, as Serve does for the connections it accepts. It is how a
// pool member hands connections to the stage it became.
func (s *Server) ServeConn(conn net.Conn) {
	if !s.track(conn) { // counts the handler in s.wg; closes conn if refused
		return
	}
	go func() {
		defer s.wg.Done()
		defer s.untrack(conn)
		s.handle(conn)
	}()
}
