//go:build !race

package sandbox

// raceFactor widens the resident-set backstop under the race detector, whose shadow memory
// grows with the heap.
const raceFactor = 1
