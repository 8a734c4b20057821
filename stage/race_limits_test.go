//go:build race

package stage_test

// raceDetector is set when the tests run under -race, which makes every
// connection of the flood test several times as costly.
const raceDetector = true
