package clock

import (
	"testing"
	"time"
)

func TestFakeFiresOnlyDueWaiters(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	a, b := f.After(time.Second), f.After(time.Minute)
	f.Advance(2 * time.Second)
	select {
	case got := <-a:
		if !got.Equal(time.Unix(2, 0)) {
			t.Fatalf("a fired at %v", got)
		}
	default:
		t.Fatal("a did not fire")
	}
	select {
	case <-b:
		t.Fatal("b fired early")
	default:
	}
	f.Advance(time.Minute)
	<-b
	if got := f.After(0); len(got) != 1 {
		t.Fatal("After(0) must fire at once")
	}
}
