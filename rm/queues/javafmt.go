package queues

import (
	"math"
	"strconv"
	"strings"
)

// javaFloat formats f as Java's Float.toString, so that messages quoting a
// capacity read as the CapacityScheduler's ("120.0", "0.90000004", "1.0E-4").
func javaFloat(f float32) string {
	switch {
	case math.IsNaN(float64(f)):
		return "NaN"
	case math.IsInf(float64(f), 1):
		return "Infinity"
	case math.IsInf(float64(f), -1):
		return "-Infinity"
	case f == 0:
		if math.Signbit(float64(f)) {
			return "-0.0"
		}
		return "0.0"
	}
	if a := math.Abs(float64(f)); a >= 1e-3 && a < 1e7 {
		s := strconv.FormatFloat(float64(f), 'f', -1, 32)
		if !strings.Contains(s, ".") {
			s += ".0"
		}
		return s
	}
	s := strconv.FormatFloat(float64(f), 'e', -1, 32)
	mant, exp, _ := strings.Cut(s, "e")
	if !strings.Contains(mant, ".") {
		mant += ".0"
	}
	n, _ := strconv.Atoi(exp)
	return mant + "E" + strconv.Itoa(n)
}

// javaInt converts as Java's (int) cast of a float: truncated toward zero,
// saturated at the int range, NaN to zero.
func javaInt(f float32) int {
	switch {
	case math.IsNaN(float64(f)):
		return 0
	case f >= math.MaxInt32:
		return math.MaxInt32
	case f <= math.MinInt32:
		return math.MinInt32
	}
	return int(f)
}
