//go:build !race

package stage_test

const raceDetector = false
