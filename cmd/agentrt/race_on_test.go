//go:build race

package main

// raceDetector: the race detector keeps shadow memory for what host code
// wrote into plugin memory, so resident memory is not measured under it
// ("make test" runs the hostile suite once more without it).
const raceDetector = true
