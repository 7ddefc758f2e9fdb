package buffer

import (
	"errors"
	"testing"
)

func TestBufferFIFO(t *testing.T) {
	b, err := NewBuffer[int](3)
	if err != nil {
		t.Fatalf("NewBuffer(3) error = %v", err)
	}
	for i := range 3 {
		if ok, err := b.Put(i); !ok || err != nil {
			t.Fatalf("Put(%d) = %v, %v, want true, nil", i, ok, err)
		}
	}
	if ok, err := b.Put(3); ok || err != nil {
		t.Fatalf("Put on full = %v, %v, want false, nil", ok, err)
	}
	for i := range 3 {
		if v, ok, err := b.Get(); v != i || !ok || err != nil {
			t.Fatalf("Get() = %v, %v, %v, want %d, true, nil", v, ok, err, i)
		}
	}
	if _, ok, err := b.Get(); ok || err != nil {
		t.Fatalf("Get on empty = %v, %v, want false, nil", ok, err)
	}
	if !b.Close() || b.Close() {
		t.Fatalf("Close() twice did not report true then false")
	}
	if _, err := b.Put(1); !errors.Is(err, ErrClosed) {
		t.Errorf("Put after Close error = %v, want %v", err, ErrClosed)
	}
}
