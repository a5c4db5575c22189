package ackcore_test

import (
	"reflect"
	"testing"

	"github.com/xorack/xorack/ackcore"
)

// TestStatsAdd: Add sums every counter, each field set apart from the
// others so that a field left out or added into another shows.
func TestStatsAdd(t *testing.T) {
	var one, sum ackcore.Stats
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		if f.CanUint() {
			f.SetUint(uint64(i + 1))
		} else {
			f.SetInt(int64(i + 1))
		}
	}
	sum.Add(one)
	sum.Add(one)
	w := reflect.ValueOf(sum)
	for i := range w.NumField() {
		got := w.Field(i)
		if !got.Equal(reflect.ValueOf(2 * (i + 1)).Convert(got.Type())) {
			t.Errorf("%s = %v after adding %d twice, want %d", w.Type().Field(i).Name, got, i+1, 2*(i+1))
		}
	}
}
