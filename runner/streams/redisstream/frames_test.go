package redisstream

import (
	"strconv"
	"testing"
)

// Frames encode and decode back; those up to after are skipped; a cut batch yields the frames
// before the cut.
func TestFramesRoundTrip(t *testing.T) {
	var b []byte
	for i := int64(1); i <= 300; i++ {
		b = appendFrame(b, i*100, []byte(`{"n":`+strconv.FormatInt(i, 10)+`}`))
	}
	es := decodeFrames(nil, string(b), 150*100)
	if len(es) != 150 || es[0].ID != 15100 || string(es[0].Data) != `{"n":151}` || string(es[149].Data) != `{"n":300}` {
		t.Fatalf("%d frames, first %+v", len(es), es[0])
	}
	if es := decodeFrames(nil, string(b[:len(b)-2]), 0); len(es) != 299 {
		t.Fatalf("cut batch: %d frames", len(es))
	}
}
