package filterpolicy

import "testing"

func TestScaleNumber(t *testing.T) {
	tests := []struct {
		in      string
		scaled  int64
		valid   bool
		inRange bool
	}{
		{"0", 0, true, true},
		{"-0", 0, true, true},
		{"0.0e5", 0, true, true},
		{"301.5", 30150000, true, true},
		{"3.015e2", 30150000, true, true},
		{"3015E-1", 30150000, true, true},
		{"301.50000", 30150000, true, true},
		{"+5", 500000, true, true},
		{".5", 50000, true, true},
		{"5.", 500000, true, true},
		{"1.00001", 100001, true, true},
		{"1.000019", 100001, true, true}, // sixth decimal truncated
		{"0.000009", 0, true, true},
		{"-0.000009", -1, true, true}, // floored, as event-ruler's offset-and-truncate does
		{"-1.000011", -100002, true, true},
		{"-1.00001", -100001, true, true},
		{"1e9", 100000000000000, true, true},
		{"1000000000", 100000000000000, true, true},
		{"-1e9", -100000000000000, true, true},
		{"1000000000.00001", 0, true, false},
		{"1000000000.000001", 0, true, false}, // above 10^9 by less than the precision: still out
		{"-1000000000.000001", 0, true, false},
		{"1e10", 0, true, false},
		{"123456789012", 0, true, false},
		{"999999999.99999", 99999999999999, true, true},
		{"1e-1000000000", 0, true, true},
		{"-1e-1000000000", -1, true, true},
		{"1e1000000000", 0, true, false},
		{"0.00000000000000000000000000000000001e35", 100000, true, true},
		{"100000000000000000000000000000000000e-35", 100000, true, true},
		{"", 0, false, false},
		{"-", 0, false, false},
		{".", 0, false, false},
		{"1e", 0, false, false},
		{"1e+", 0, false, false},
		{"1.2.3", 0, false, false},
		{"0x10", 0, false, false},
		{" 1", 0, false, false},
		{"1 ", 0, false, false},
		{"NaN", 0, false, false},
		{"Infinity", 0, false, false},
		{"--1", 0, false, false},
	}
	for _, tt := range tests {
		scaled, valid, inRange := scaleNumber(tt.in)
		if valid != tt.valid || inRange != tt.inRange || (inRange && scaled != tt.scaled) {
			t.Errorf("scaleNumber(%q) = %d, %v, %v; want %d, %v, %v", tt.in, scaled, valid, inRange, tt.scaled, tt.valid, tt.inRange)
		}
	}
}
